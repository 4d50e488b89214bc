//! Directed-route SMP walks over several switches, answered by the fabric's own SMAs.

use vmad::subnet::Fabric;
use vmad::transport::Transport;
use vmad::types::Qp;

use crate::util::*;

const NODE_INFO: u16 = vmad::wire::smp::AttrId::NodeInfo.raw();
const NODE_DESC: u16 = vmad::wire::smp::AttrId::NodeDescription.raw();
const PORT_INFO: u16 = vmad::wire::smp::AttrId::PortInfo.raw();

/// dr0 — swA — swB — swC — dr1, with distinct port numbers at each hop.
fn line(prefix: &str) -> Fabric {
    let n = |s: &str| format!("{prefix}{s}");
    Fabric::builder()
        .ca(&n("0"))
        .switch(&n("A"), 4)
        .switch(&n("B"), 4)
        .switch(&n("C"), 4)
        .ca(&n("1"))
        .link(&n("0"), 1, &n("A"), 1)
        .link(&n("A"), 2, &n("B"), 1)
        .link(&n("B"), 3, &n("C"), 2)
        .link(&n("C"), 4, &n("1"), 1)
        .build_private()
        .unwrap()
}

fn walk(t: &mut dyn Transport, tid: u64, attr: u16, path: &[u8]) -> Vec<u8> {
    send(t, Qp::Smi, smi(0xffff), &dr_get(tid, attr, 0, path));
    let (meta, mad) = recv(t);
    assert_eq!(meta.qp, Qp::Smi);
    assert_eq!(be64(&mad, 8), tid);
    mad
}

#[test]
fn dr_walk_four_hops_reaches_far_ca() {
    let f = line("drw4_");
    let mut t = f.open("drw4_0", 1).unwrap();
    let mad = walk(&mut t, 0x77, NODE_INFO, &[1, 2, 3, 4]);
    assert_eq!(mad[3], 0x81, "GetResp");
    assert_eq!(be16(&mad, 4), 0x8000, "D bit set, status 0");
    assert_eq!(mad[6], 0, "hop pointer back at 0");
    assert_eq!(mad[7], 4, "hop count kept");
    assert_eq!(&mad[128 + 1..128 + 5], &[1, 2, 3, 4], "initial path kept");
    assert_eq!(
        &mad[192 + 1..192 + 5],
        &[1, 1, 2, 1],
        "return path = ingress ports"
    );
    let info = &mad[64..];
    assert_eq!(info[2], 1, "node type CA");
    assert_eq!(be64(info, 12), f.node_guid("drw4_1").unwrap());
    assert_eq!(info[36], 1, "local port");
}

#[test]
fn dr_walk_each_hop_reports_its_node() {
    let f = line("drwh_");
    let mut t = f.open("drwh_0", 1).unwrap();
    let names = ["drwh_A", "drwh_B", "drwh_C", "drwh_1"];
    let ingress = [1, 1, 2, 1];
    let path = [1u8, 2, 3, 4];
    for hops in 1..=4 {
        let mad = walk(&mut t, hops as u64, NODE_INFO, &path[..hops]);
        assert_eq!(be16(&mad, 4), 0x8000);
        let info = &mad[64..];
        assert_eq!(be64(info, 12), f.node_guid(names[hops - 1]).unwrap());
        assert_eq!(info[2], if hops == 4 { 1 } else { 2 });
        assert_eq!(info[36], ingress[hops - 1], "port the SMP came in on");
        let desc = walk(&mut t, 100 + hops as u64, NODE_DESC, &path[..hops]);
        let text = &desc[64..128];
        let end = text.iter().position(|&b| b == 0).unwrap();
        assert_eq!(std::str::from_utf8(&text[..end]).unwrap(), names[hops - 1]);
    }
}

#[test]
fn dr_hop_count_zero_is_the_local_port() {
    let f = line("drw0_");
    let mut t = f.open("drw0_0", 1).unwrap();
    let mad = walk(&mut t, 5, PORT_INFO, &[]);
    assert_eq!(be16(&mad, 4), 0x8000);
    let pi = &mad[64..];
    assert_eq!(be16(pi, 16), f.lid("drw0_0", 1).unwrap(), "own LID");
    assert_eq!(pi[32] & 0x0f, 4, "Active");
}

#[test]
fn dr_switch_port_info_by_modifier() {
    let f = line("drwp_");
    let mut t = f.open("drwp_0", 1).unwrap();
    // PortInfo of swB's port 4 (unlinked) and port 3 (linked).
    send(
        &mut t,
        Qp::Smi,
        smi(0xffff),
        &dr_get(9, PORT_INFO, 4, &[1, 2]),
    );
    let (_, mad) = recv(&mut t);
    assert_eq!(mad[64 + 32] & 0x0f, 1, "unlinked port is Down");
    send(
        &mut t,
        Qp::Smi,
        smi(0xffff),
        &dr_get(10, PORT_INFO, 3, &[1, 2]),
    );
    let (_, mad) = recv(&mut t);
    assert_eq!(mad[64 + 32] & 0x0f, 4);
    assert_eq!(be16(&mad[64..], 16), f.lid("drwp_B", 0).unwrap());
    // An out-of-range port is an invalid attribute modifier.
    send(
        &mut t,
        Qp::Smi,
        smi(0xffff),
        &dr_get(11, PORT_INFO, 9, &[1, 2]),
    );
    let (_, mad) = recv(&mut t);
    assert_eq!(be16(&mad, 4), 0x8000 | 0x001c);
}

#[test]
fn dr_bad_path_is_discarded() {
    let f = line("drwx_");
    let mut t = f.open("drwx_0", 1).unwrap();
    // swA has nothing on port 3.
    send(
        &mut t,
        Qp::Smi,
        smi(0xffff),
        &dr_get(1, NODE_INFO, 0, &[1, 3, 1]),
    );
    // A CA does not forward: a path through drwx_1 and on is dropped there.
    send(
        &mut t,
        Qp::Smi,
        smi(0xffff),
        &dr_get(2, NODE_INFO, 0, &[1, 2, 3, 4, 1]),
    );
    // The first hop must leave by the sending port.
    send(&mut t, Qp::Smi, smi(0xffff), &dr_get(3, NODE_INFO, 0, &[2]));
    // A good walk after them comes back: the bad ones produced nothing.
    let mad = walk(&mut t, 4, NODE_INFO, &[1]);
    assert_eq!(be64(&mad, 8), 4);
    assert!(drain(&mut t).is_empty());
}

#[test]
fn dr_unsupported_attribute_on_switch_gets_0x000c() {
    let f = line("drwu_");
    let mut t = f.open("drwu_0", 1).unwrap();
    let mad = walk(&mut t, 6, 0x0020 /* SMInfo */, &[1]);
    assert_eq!(be16(&mad, 4), 0x8000 | 0x000c);
}

#[test]
fn dr_lid_routed_tail_uses_dr_dlid() {
    let f = line("drwt_");
    let mut t = f.open("drwt_0", 1).unwrap();
    // DR part dr0 -> swA -> swB, then LID-routed to drwt_1 (DrDLID).
    let mut req = dr_get(21, NODE_INFO, 0, &[1, 2]);
    let far = f.lid("drwt_1", 1).unwrap();
    req[34..36].copy_from_slice(&far.to_be_bytes());
    send(&mut t, Qp::Smi, smi(0xffff), &req);
    let (_, mad) = recv(&mut t);
    assert_eq!(be16(&mad, 4), 0x8000);
    assert_eq!(be64(&mad[64..], 12), f.node_guid("drwt_1").unwrap());
    assert_eq!(mad[6], 0);
}

#[test]
fn dr_lid_routed_head_uses_dr_slid() {
    let f = line("drwd_");
    let mut t = f.open("drwd_0", 1).unwrap();
    // LID-routed to swB, then DR swB -> swC -> drwd_1; back DR to swB, LID-routed home.
    let mut req = dr_get(22, NODE_INFO, 0, &[3, 4]);
    let own = f.lid("drwd_0", 1).unwrap();
    req[32..34].copy_from_slice(&own.to_be_bytes());
    send(&mut t, Qp::Smi, smi(f.lid("drwd_B", 0).unwrap()), &req);
    let (_, mad) = recv(&mut t);
    assert_eq!(be16(&mad, 4), 0x8000);
    assert_eq!(be64(&mad[64..], 12), f.node_guid("drwd_1").unwrap());
}

#[test]
fn lid_routed_smp_crosses_switches() {
    let f = line("lrs_");
    let mut t = f.open("lrs_0", 1).unwrap();
    let lid_c = f.lid("lrs_C", 0).unwrap();
    send(&mut t, Qp::Smi, smi(lid_c), &lid_get(31, NODE_INFO, 0));
    let (meta, mad) = recv(&mut t);
    assert_eq!(meta.src.lid, lid_c);
    assert_eq!(be16(&mad, 4), 0);
    assert_eq!(mad[64 + 2], 2, "a switch");
    assert_eq!(be64(&mad[64..], 12), f.node_guid("lrs_C").unwrap());
}

#[test]
fn dr_walk_through_the_umad_api() {
    use vmad::umad;
    let f = Fabric::builder()
        .ca("drum0")
        .switch("drumA", 4)
        .switch("drumB", 4)
        .ca("drum1")
        .link("drum0", 1, "drumA", 3)
        .link("drumA", 1, "drumB", 2)
        .link("drumB", 4, "drum1", 1)
        .build()
        .unwrap();
    let port = umad::open_port("drum0", 1).unwrap();
    let agent = umad::register(port, 0x81, 1, 0, None).unwrap();
    let expect = [("drumA", 2u8), ("drumB", 2), ("drum1", 1)];
    let path = [1u8, 1, 4];
    for hops in 1..=3 {
        // As an SM builds it: hop pointer 0; the engine's SMI steps it.
        let mut mad = dr_get(hops as u64, NODE_INFO, 0, &path[..hops]);
        mad[6] = 0;
        let mut buf = umad_with(&mad, 0xffff, 0);
        umad::send(port, agent, &mut buf, 256, 1000, 2).unwrap();
        let (got, len, resp) = umad_recv(port, 256, -1).unwrap();
        assert_eq!((got, len), (agent, 256));
        assert_eq!(umad::status(&resp).unwrap(), 0);
        let smp = umad::get_mad(&resp).unwrap();
        assert_eq!(be16(smp, 4), 0x8000, "D bit, status 0");
        let (name, node_type) = expect[hops - 1];
        assert_eq!(be64(&smp[64..], 12), f.node_guid(name).unwrap());
        assert_eq!(smp[64 + 2], node_type);
    }
    umad::close_port(port).unwrap();
    f.unregister();
}

#[test]
fn dr_walk_survives_a_lossy_middle_link() {
    use std::time::Duration;
    use vmad::error::errno::EWOULDBLOCK;
    use vmad::subnet::FaultConfig;
    use vmad::umad;
    // In virtual time: each lost attempt's 20 ms pass when the test advances the clock.
    let clock = vmad::clock::VirtualClock::new();
    let f = Fabric::builder()
        .clock(clock.clone())
        .ca("drl0")
        .switch("drlA", 4)
        .switch("drlB", 4)
        .link("drl0", 1, "drlA", 1)
        .link("drlA", 2, "drlB", 3)
        .faults(
            "drlB",
            3,
            FaultConfig {
                loss: 0.2,
                dup: 0.1,
                seed: 12,
                ..FaultConfig::default()
            },
        )
        .build()
        .unwrap();
    let port = umad::open_port("drl0", 1).unwrap();
    let agent = umad::register(port, 0x81, 1, 0, None).unwrap();
    for tid in 1..=30u64 {
        let mut mad = dr_get(tid, NODE_INFO, 0, &[1, 2]);
        mad[6] = 0;
        let mut buf = umad_with(&mad, 0xffff, 0);
        // 20 ms per attempt, 30 retries: every SMP gets through in the end.
        umad::send(port, agent, &mut buf, 256, 20, 30).unwrap();
        let mut attempts = 0;
        let resp = loop {
            match umad_recv(port, 256, 0) {
                Ok((_, _, resp)) => break resp,
                Err(e) => assert_eq!(e.errno(), EWOULDBLOCK),
            }
            attempts += 1;
            assert!(attempts <= 31, "SMP {tid}: no answer after 31 attempts");
            clock.advance(Duration::from_millis(20));
        };
        assert_eq!(umad::status(&resp).unwrap(), 0, "SMP {tid}");
        let smp = umad::get_mad(&resp).unwrap();
        assert_eq!(be64(smp, 8) & 0xffff_ffff, tid);
        assert_eq!(be64(&smp[64..], 12), f.node_guid("drlB").unwrap());
    }
    // Duplicated responses are matched once; nothing else is queued.
    assert_eq!(umad_recv(port, 256, 0).unwrap_err().errno(), EWOULDBLOCK);
    let stats = f.link_stats("drlA", 2).unwrap();
    assert!(stats.lost > 0 && stats.duplicated > 0, "{stats:?}");
    umad::close_port(port).unwrap();
    f.unregister();
}

#[test]
fn closed_port_answers_unclaimed_get_with_0x000c() {
    let f = line("drwc_");
    let mut t = f.open("drwc_0", 1).unwrap();
    // SMInfo is no SMA attribute: with nobody on drwc_1's port, its MAD layer refuses it.
    let mad = walk(&mut t, 41, 0x0020, &[1, 2, 3, 4]);
    assert_eq!(be16(&mad, 4), 0x8000 | 0x000c);
    assert_eq!(mad[6], 0, "came all the way back");
    // A GMP Get too (LID-routed through the switches, to QP1).
    let far = f.lid("drwc_1", 1).unwrap();
    let mut get = lid_get(42, 0x0010, 0);
    get[1] = 0x04; // PerfMgt
    send(&mut t, Qp::Gsi, gsi(far), &get);
    let (meta, resp) = recv(&mut t);
    assert_eq!((meta.qp, meta.src.qpn, meta.src.lid), (Qp::Gsi, 1, far));
    assert_eq!((resp[3], be16(&resp, 4)), (0x81, 0x000c));
    // Other methods (here Send) are dropped silently.
    get[3] = 0x03;
    send(&mut t, Qp::Gsi, gsi(far), &get);
    assert!(drain(&mut t).is_empty());
}
