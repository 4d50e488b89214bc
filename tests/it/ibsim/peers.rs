//! vmad against peers someone else wrote: ibsim's SMA/PMA, OpenSM's SM/SA,
//! and infiniband-diags reading the same fabric.

use std::time::Duration;

use vmad::engine::{AgentId, Event, SendRequest};
use vmad::port::{Port, PortConfig};
use vmad::transport::ibsim::{IbsimConfig, IbsimTransport};
use vmad::types::{MadAddr, Qp, GSI_QKEY};

use super::diags::{self, parse_fields, restrict};
use super::discover::parse_ibnetdiscover;
use super::fabric::Fabric;
use super::smp_walk::{self, client_agent, dr_get, walk};
use super::{open_port, open_port_with};

fn agent(c: &Port, qp: Qp, class: u8, version: u8, method_mask: [u64; 2]) -> AgentId {
    c.register(vmad::engine::AgentSpec {
        method_mask,
        ..client_agent(qp, class, version)
    })
    .unwrap()
}

/// A Get of `class` to `addr`; the response MAD (panics on timeout or MAD status).
fn get(c: &Port, agent: AgentId, addr: MadAddr, mad: [u8; 256]) -> Vec<u8> {
    c.send(
        agent,
        SendRequest {
            addr,
            mad: &mad,
            timeout_ms: 200,
            retries: 3,
        },
    )
    .unwrap();
    loop {
        match c.recv(Some(Duration::from_secs(30))).expect("an event") {
            Event::Recv { mad: rsp, .. } if rsp[12..16] == mad[12..16] => {
                assert_eq!(
                    u16::from_be_bytes([rsp[4], rsp[5]]) & 0x7fff,
                    0,
                    "MAD status"
                );
                return rsp;
            }
            Event::SendTimedOut { header, .. } if header[12..16] == mad[12..16] => {
                panic!("request timed out: {header:02x?}")
            }
            _ => {}
        }
    }
}

fn header(class: u8, version: u8, tid: u32, attr: u16, attr_mod: u32) -> [u8; 256] {
    let mut m = [0u8; 256];
    m[0] = 1;
    m[1] = class;
    m[2] = version;
    m[3] = 0x01; // Get
    m[12..16].copy_from_slice(&tid.to_be_bytes());
    m[16..18].copy_from_slice(&attr.to_be_bytes());
    m[20..24].copy_from_slice(&attr_mod.to_be_bytes());
    m
}

fn smp_addr(lid: u16) -> MadAddr {
    MadAddr {
        lid,
        ..MadAddr::default()
    }
}

fn gsi_addr(lid: u16) -> MadAddr {
    MadAddr {
        lid,
        qpn: 1,
        qkey: GSI_QKEY,
        ..MadAddr::default()
    }
}

/// vmad's LID-routed NodeInfo, NodeDescription and PortInfo answers equal
/// smpquery's for every node, and a directed-route NodeInfo too.
#[test]
#[ignore = "needs ibsim/opensm: run by ./scripts/test"]
fn ibsim_smp_answers_equal_smpquery() {
    let f = Fabric::start("small.net", &[]);
    f.opensm(&[]);
    let c = open_port(&f, Some("H2"));
    let lid_smp = agent(&c, Qp::Smi, 0x01, 1, [0; 2]);
    let dr_smp = agent(&c, Qp::Smi, 0x81, 1, [0; 2]);
    let mut tid = 100;
    let mut compared = 0;
    // OpenSM gives the six nodes LIDs 1..=6.
    for lid in 1..=6u16 {
        let smp = |tid, attr, attr_mod| header(0x01, 1, tid, attr, attr_mod);
        tid += 1;
        let ni = get(
            &c,
            lid_smp,
            smp_addr(lid),
            smp(tid, smp_walk::ATTR_NODE_INFO, 0),
        );
        let mine = diags::node_info(&ni[64..128]);
        let theirs = parse_fields(&f.exec(Some("H2"), &["smpquery", "nodeinfo", &lid.to_string()]));
        assert_eq!(mine, restrict(&theirs, &mine), "NodeInfo of LID {lid}");
        tid += 1;
        let nd = get(
            &c,
            lid_smp,
            smp_addr(lid),
            smp(tid, smp_walk::ATTR_NODE_DESC, 0),
        );
        let desc = String::from_utf8_lossy(&nd[64..128])
            .trim_end_matches('\0')
            .to_string();
        let theirs = parse_fields(&f.exec(Some("H2"), &["smpquery", "nodedesc", &lid.to_string()]));
        assert_eq!(theirs["Node Description"], desc);
        let ports: Vec<u32> = if ni[64 + 2] == 2 {
            (0..=u32::from(ni[64 + 3])).collect()
        } else {
            vec![u32::from(ni[64 + 36])]
        };
        for port in ports {
            tid += 1;
            let pi = get(
                &c,
                lid_smp,
                smp_addr(lid),
                smp(tid, smp_walk::ATTR_PORT_INFO, port),
            );
            let mine = diags::port_info(&pi[64..128]);
            let args = ["smpquery", "portinfo", &lid.to_string(), &port.to_string()];
            let theirs = parse_fields(&f.exec(Some("H2"), &args));
            assert_eq!(
                mine,
                restrict(&theirs, &mine),
                "PortInfo of LID {lid} port {port}"
            );
            compared += 1;
        }
    }
    assert_eq!(compared, 2 * 9 + 4);
    // Directed route: H2 -> S1 -> (port 7) S2.
    let dr = get(
        &c,
        dr_smp,
        smp_walk::dr_addr(),
        dr_get(999, smp_walk::ATTR_NODE_INFO, 0, &[1, 7]),
    );
    let mine = diags::node_info(&dr[64..128]);
    let theirs = parse_fields(&f.exec(Some("H2"), &["smpquery", "-D", "nodeinfo", "0,1,7"]));
    assert_eq!(mine, restrict(&theirs, &mine), "DR NodeInfo 0,1,7");
}

fn sa_get(tid: u32, attr: u16, comp_mask: u64, record: &[u8]) -> [u8; 256] {
    let mut m = header(0x03, 2, tid, attr, 0);
    m[48..56].copy_from_slice(&comp_mask.to_be_bytes());
    m[56..56 + record.len()].copy_from_slice(record);
    m
}

/// With OpenSM running, SA Get NodeRecord (by LID) and PathRecord (by
/// SLID/DLID) through vmad give what smpquery and saquery give.
#[test]
#[ignore = "needs ibsim/opensm: run by ./scripts/test"]
fn ibsim_sa_node_and_path_records_from_opensm() {
    let f = Fabric::start("small.net", &[]);
    f.opensm(&[]);
    let c = open_port(&f, Some("H2"));
    let me = c.attrs().clone();
    assert_ne!(me.lid, 0);
    assert_ne!(me.sm_lid, 0);
    let sa = agent(&c, Qp::Gsi, 0x03, 2, [0; 2]);
    let mut tid = 500;
    for lid in 1..=6u16 {
        tid += 1;
        // NodeRecord, CompMask bit 0: LID.
        let rsp = get(
            &c,
            sa,
            gsi_addr(me.sm_lid),
            sa_get(tid, 0x0011, 1, &lid.to_be_bytes()),
        );
        assert_eq!(rsp[3], 0x81, "GetResp");
        let rec = &rsp[56..];
        assert_eq!(u16::from_be_bytes([rec[0], rec[1]]), lid);
        let mut mine = diags::node_info(&rec[4..44]);
        // The SM read LocalPortNum from its side of the fabric; smpquery from ours.
        mine.remove("LocalPort");
        let theirs = parse_fields(&f.exec(Some("H2"), &["smpquery", "nodeinfo", &lid.to_string()]));
        assert_eq!(mine, restrict(&theirs, &mine), "NodeRecord of LID {lid}");
        let desc = String::from_utf8_lossy(&rec[44..108])
            .trim_end_matches('\0')
            .to_string();
        let nd = parse_fields(&f.exec(Some("H2"), &["smpquery", "nodedesc", &lid.to_string()]));
        assert_eq!(nd["Node Description"], desc);

        tid += 1;
        // PathRecord, CompMask DLID (bit 4) | SLID (bit 5): record DLID at 40, SLID at 42.
        let mut pr = [0u8; 64];
        pr[40..42].copy_from_slice(&lid.to_be_bytes());
        pr[42..44].copy_from_slice(&me.lid.to_be_bytes());
        let rsp = get(&c, sa, gsi_addr(me.sm_lid), sa_get(tid, 0x0035, 0x30, &pr));
        let mine = diags::path_record(&rsp[56..120]);
        let pair = format!("{}:{lid}", me.lid);
        let theirs = parse_fields(&f.exec(Some("H2"), &["saquery", "-p", "--src-to-dst", &pair]));
        assert_eq!(mine, restrict(&theirs, &mine), "PathRecord {pair}");
    }
}

/// PMA PortCounters through vmad equal perfquery's, on a port no query crosses.
#[test]
#[ignore = "needs ibsim/opensm: run by ./scripts/test"]
fn ibsim_pma_port_counters_equal_perfquery() {
    let f = Fabric::start("small.net", &[]);
    f.opensm(&[]);
    let c = open_port(&f, Some("H1"));
    let smp = agent(&c, Qp::Smi, 0x01, 1, [0; 2]);
    let pma = agent(&c, Qp::Gsi, 0x04, 1, [0; 2]);
    // Find S1 by its description; its port 2 leads to H2, away from every query path from H1.
    let s1 = (1..=6u16)
        .find(|&lid| {
            let nd = get(
                &c,
                smp,
                smp_addr(lid),
                header(0x01, 1, 700 + u32::from(lid), 0x0010, 0),
            );
            nd[64..67] == *b"S1\0"
        })
        .expect("S1");
    for (i, port) in [2u8, 1].into_iter().enumerate() {
        let mut req = header(0x04, 1, 800 + i as u32, 0x0012, 0);
        req[64 + 1] = port; // PortSelect
        let rsp = get(&c, pma, gsi_addr(s1), req);
        let mine = diags::port_counters(&rsp[64..128]);
        let theirs = parse_fields(&f.exec(
            Some("H1"),
            &["perfquery", &s1.to_string(), &port.to_string()],
        ));
        if port == 2 {
            assert_eq!(
                mine,
                restrict(&theirs, &mine),
                "PortCounters of LID {s1} port {port}"
            );
        } else {
            // Port 1 carries every query from H1: traffic counters may only have grown
            // between vmad's read and perfquery's, error counters stay equal.
            for (k, v) in &mine {
                let (a, b): (u64, u64) = (v.parse().unwrap_or(0), theirs[k].parse().unwrap_or(0));
                if k.starts_with("PortXmit")
                    || k.starts_with("PortRcv") && k.ends_with("Pkts")
                    || k == "PortRcvData"
                {
                    assert!(a <= b, "{k}: vmad {a} then perfquery {b}");
                } else {
                    assert_eq!(v, &theirs[k], "{k}");
                }
            }
        }
    }
}

/// Loss injected on ibsim's console is survived by vmad's own timeouts and retries.
#[test]
#[ignore = "needs ibsim/opensm: run by ./scripts/test"]
fn ibsim_injected_loss_is_survived_by_retries() {
    let f = Fabric::start("ft234.net", &[]);
    let diags = parse_ibnetdiscover(&f.exec(None, &["ibnetdiscover"]));
    // Every SMP from H0 enters leaf L0; drop 30% of what enters any of its ports.
    let out = f.command("Error \"L0\" 30");
    assert!(!out.contains("bad") && !out.contains("fail"), "{out}");
    let t = IbsimTransport::connect(f.config(None)).unwrap();
    let drops = t.drop_monitor();
    let c = Port::open(Box::new(t), PortConfig::default()).unwrap();
    let (vmad, sweep) = walk(&c, 64, 20, 30).unwrap();
    assert!(
        drops.count() > 50,
        "ibsim dropped only {} SMPs",
        drops.count()
    );
    assert_eq!(sweep.timeouts, 0);
    // Drops are silent to the engine (DropPolicy::Ignore): its timers found them.
    assert!(c.stats().retries >= drops.count());
    assert_eq!(vmad.nodes.len(), 234);
    assert_eq!(vmad.links, diags.links);
}

/// Under `DropPolicy::Timeout`, ibsim's undelivered-packet echoes end each attempt at
/// once: a request to a LID nobody has fails with ETIMEDOUT after all its attempts,
/// although each attempt would otherwise wait ten minutes.
#[test]
#[ignore = "needs ibsim/opensm: run by ./scripts/test"]
fn ibsim_drops_as_timeouts_end_attempts_at_once() {
    let f = Fabric::start("small.net", &[]);
    let config = IbsimConfig {
        drops: vmad::transport::ibsim::DropPolicy::Timeout,
        ..f.config(None)
    };
    let t = IbsimTransport::connect(config).unwrap();
    let drops = t.drop_monitor();
    let c = Port::open(Box::new(t), PortConfig::default()).unwrap();
    let perf = agent(&c, Qp::Gsi, 0x04, 1, [0, 0]);
    let mad = header(0x04, 1, 0x5151, 0x0012, 0);
    c.send(
        perf,
        SendRequest {
            addr: gsi_addr(0x0999),
            mad: &mad,
            timeout_ms: 600_000,
            retries: 2,
        },
    )
    .unwrap();
    match c.recv(Some(Duration::from_secs(60))).expect("a completion") {
        Event::SendTimedOut { header, .. } => assert_eq!(header[12..16], mad[12..16]),
        other => panic!("{other:?}"),
    }
    let s = c.stats();
    assert_eq!((s.undelivered, s.retries, s.timeouts), (3, 2, 1));
    assert_eq!(drops.count(), 3, "ibsim echoed every attempt");
}

/// A link flap on ibsim's console sends Trap 128 to the SM: here vmad, attached
/// as the SM's port (issm) after `opensm -o` made that port the master SM.
#[test]
#[ignore = "needs ibsim/opensm: run by ./scripts/test"]
fn ibsim_link_flap_sends_trap_128_to_vmad_as_sm() {
    let f = Fabric::start("small.net", &[]);
    f.opensm(&["--once"]);
    let config = IbsimConfig {
        issm: true,
        ..f.config(Some("H1"))
    };
    let c = open_port_with(config);
    let me = c.attrs().clone();
    assert_eq!(me.sm_lid, me.lid, "opensm -o ran on H1");
    assert_ne!(me.capmask & 2, 0, "IsSM set");
    // The SM side: serve Trap (method 0x05) on the LID-routed SMP class.

    let sm = agent(&c, Qp::Smi, 0x01, 1, [1 << 5, 0]);

    // Wait for Trap 128, answering every trap with a TrapRepress as an SM does
    // (until then, a repeat of the same trap is a duplicate and is dropped).
    let trap_128 = |c: &Port| -> u16 {
        loop {
            let Event::Recv { mad, addr, .. } =
                c.recv(Some(Duration::from_secs(10))).expect("Trap 128")
            else {
                continue;
            };
            if mad[3] != 0x05 || u16::from_be_bytes([mad[16], mad[17]]) != 2 {
                continue;
            }
            let mut repress = [0u8; 256];
            repress.copy_from_slice(&mad);
            repress[3] = 0x07;
            c.send(
                sm,
                SendRequest {
                    addr,
                    mad: &repress,
                    timeout_ms: 0,
                    retries: 0,
                },
            )
            .unwrap();
            let notice = &mad[64..128];
            if u16::from_be_bytes([notice[4], notice[5]]) == 128 {
                assert_eq!(notice[0] & 0x80, 0x80, "generic notice");
                assert_eq!(addr.qpn, 0);
                // IssuerLID: the switch whose port changed.
                return u16::from_be_bytes([notice[6], notice[7]]);
            }
        }
    };
    // S2 port 2 leads to H4. (A trap must be routable: ibsim sends it from the
    // switch to the SM LID by the forwarding tables OpenSM programmed.)
    f.command("Unlink \"S2\"[2]");
    let issuer = trap_128(&c);
    assert!(issuer != 0 && issuer != me.lid);
    // Discovery now misses H4 and its link, as ibnetdiscover does.
    let (topo, _) = walk(&c, 16, 100, 3).unwrap();
    assert_eq!((topo.nodes.len(), topo.links.len()), (5, 5));
    assert_eq!(
        topo.links,
        parse_ibnetdiscover(&f.exec(Some("H2"), &["ibnetdiscover"])).links
    );
    f.command("ReLink \"S2\"[2]");
    assert_eq!(trap_128(&c), issuer);
    let (topo, _) = walk(&c, 16, 100, 3).unwrap();
    assert_eq!((topo.nodes.len(), topo.links.len()), (6, 6));
}
