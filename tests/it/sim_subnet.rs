//! The embedded fabric as a managed subnet: topology files, the built-in SM's
//! sweep (LIDs, LFTs, port states through SubnSet), SMInfo, the SM role, PMAs.

use std::collections::HashMap;
use std::time::Duration;

use vmad::subnet::{Fabric, FabricBuilder, FaultConfig, MkeyConfig};
use vmad::transport::Transport;
use vmad::types::Qp;
use vmad::wire::perf::{port_counters, port_counters_ext};
use vmad::wire::smp::port_info;
use vmad::wire::smp::sm_info::{self, SmState};

use crate::util::*;

fn topo(name: &str) -> String {
    let path = format!("{}/tests/topo/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(path).unwrap()
}

#[test]
fn ft234_loads_every_node_with_ibsims_guids() {
    let text = topo("ft234.net");
    let fabric = FabricBuilder::from_topology(&text)
        .unwrap()
        .build_private()
        .unwrap();
    let cas = fabric.ca_names();
    assert_eq!(cas.len(), 12 * 18);
    assert_eq!(fabric.node_guid("H0"), Some(0x100000));
    assert_eq!(fabric.node_guid("H1"), Some(0x100002));
    assert_eq!(fabric.node_guid("L0"), Some(0x200000));
    assert_eq!(fabric.node_guid("S5"), Some(0x200000 + 12 + 5));
}

#[test]
fn register_only_keeps_the_other_cas_out_of_the_registry() {
    let text = topo("small.net")
        .replace("\"H", "\"rgoH")
        .replace("\"S", "\"rgoS");
    let fabric = FabricBuilder::from_topology(&text)
        .unwrap()
        .register_only(&["rgoH2"])
        .build()
        .unwrap();
    assert!(vmad::transport::registry::contains("rgoH2"));
    assert!(!vmad::transport::registry::contains("rgoH1"));
    fabric.unregister();
    assert!(FabricBuilder::from_topology(&text)
        .unwrap()
        .register_only(&["rgoS1"])
        .build()
        .is_err());
}

/// Links of an ibsim topology file, read here independently of the loader:
/// (node, port) → (peer, peer port), from every `[p] "peer"[q]` line.
fn links_of(text: &str) -> HashMap<(String, u8), (String, u8)> {
    let mut node = String::new();
    let mut out = HashMap::new();
    for line in text.lines().map(str::trim) {
        if line.starts_with("Hca") || line.starts_with("Switch") {
            node = line.split('"').nth(1).unwrap().to_owned();
        } else if let Some(rest) = line.strip_prefix('[') {
            let (port, rest) = rest.split_once(']').unwrap();
            let mut parts = rest.split('"');
            let peer = parts.nth(1).unwrap().to_owned();
            let pport = parts.next().unwrap();
            let pport = pport[pport.find('[').unwrap() + 1..pport.find(']').unwrap()]
                .parse()
                .unwrap();
            out.insert((node.clone(), port.parse().unwrap()), (peer, pport));
        }
    }
    out
}

/// Follow the LFTs from `start` (a CA) to `lid`; the node reached, or why not.
fn walk(
    f: &Fabric,
    links: &HashMap<(String, u8), (String, u8)>,
    start: &str,
    lid: u16,
) -> Result<String, String> {
    let (mut at, _) = links
        .get(&(start.to_owned(), 1))
        .cloned()
        .ok_or("unlinked CA")?;
    for _ in 0..64 {
        if f.lid(&at, 0) == Some(lid) {
            return Ok(at);
        }
        let out = f
            .lft_port(&at, lid)
            .ok_or(format!("{at} has no LFT entry for {lid}"))?;
        let (next, _) = links
            .get(&(at.clone(), out))
            .cloned()
            .ok_or(format!("{at} port {out} unlinked"))?;
        if f.lid(&next, 1) == Some(lid) {
            return Ok(next);
        }
        at = next;
    }
    Err(format!("loop towards {lid}"))
}

#[test]
fn the_default_pair_is_managed_with_its_old_lids() {
    let f = Fabric::builder()
        .ca("mgd0")
        .ca("mgd1")
        .link("mgd0", 1, "mgd1", 1)
        .build_private()
        .unwrap();
    assert_eq!((f.lid("mgd0", 1), f.lid("mgd1", 1)), (Some(1), Some(2)));
    assert_eq!(
        (f.port_state("mgd0", 1), f.port_state("mgd1", 1)),
        (Some(4), Some(4))
    );
    assert_eq!(f.swept_nodes(), 2);
    let mut b = f.open("mgd1", 1).unwrap();
    assert_eq!(
        (b.attrs().lid, b.attrs().sm_lid, b.attrs().state),
        (2, 1, 4)
    );
    // SMInfo at the SM's LID: the built-in SM answers as MASTER.
    send(&mut b, Qp::Smi, smi(0xffff), &dr_get(7, 0x0020, 0, &[1]));
    let (_, mad) = recv(&mut b);
    let info = sm_info::Packet::new_checked(&mad[64..]).unwrap();
    assert_eq!(be16(&mad, 4) & 0x7fff, 0);
    assert_eq!(info.sm_state(), SmState::Master);
    assert_eq!(info.guid(), f.node_guid("mgd0").unwrap() + 1);
    // The SM's port says IsSM.
    send(&mut b, Qp::Smi, smi(1), &lid_get(8, 0x0015, 0));
    let (_, mad) = recv(&mut b);
    let pi = port_info::Packet::new_checked(&mad[64..128]).unwrap();
    assert_ne!(pi.capability_mask() & port_info::CAP_IS_SM, 0);
    assert_eq!((pi.lid(), pi.master_sm_lid()), (1, 1));
}

#[test]
fn an_unmanaged_fabric_passes_only_smps_until_swept() {
    let f = Fabric::builder()
        .ca("umg0")
        .switch("umgs", 4)
        .ca("umg1")
        .link("umg0", 1, "umgs", 1)
        .link("umgs", 2, "umg1", 1)
        .unmanaged()
        .build_private()
        .unwrap();
    assert_eq!(
        (f.lid("umg1", 1), f.port_state("umg1", 1)),
        (Some(0), Some(2))
    );
    let mut a = f.open("umg0", 1).unwrap();
    let mut b = f.open("umg1", 1).unwrap();
    // A DR SMP crosses Init links; nothing LID-routed has anywhere to go yet.
    send(&mut a, Qp::Smi, smi(0xffff), &dr_get(1, 0x0011, 0, &[1, 2]));
    let (_, mad) = recv(&mut a);
    assert_eq!(be64(&mad, 64 + 12), f.node_guid("umg1").unwrap());
    let stats = f.sweep().unwrap();
    assert_eq!(
        (stats.nodes, stats.switches, stats.lids, stats.failed),
        (3, 1, 3, 0)
    );
    assert_eq!(
        (f.lid("umg1", 1), f.port_state("umg1", 1)),
        (Some(3), Some(4))
    );
    assert_eq!(f.port_state("umgs", 2), Some(4));
    assert_eq!(f.lft_port("umgs", 3), Some(2));
    // A re-sweep finds everything configured already and changes nothing.
    let again = f.sweep().unwrap();
    assert_eq!((again.nodes, again.lids, again.failed), (3, 3, 0));
    assert!(
        again.smps < stats.smps,
        "no port to bring up again: {again:?}"
    );
    assert_eq!(
        (f.lid("umg1", 1), f.port_state("umg1", 1)),
        (Some(3), Some(4))
    );
    send(&mut a, Qp::Gsi, gsi(3), &gmp_mad(0x05, 1, 1, 9, 0x10));
    let (meta, _) = recv(&mut b);
    assert_eq!(meta.src.lid, 1);
}

#[test]
fn ft234_every_lid_is_reachable_through_the_lfts() {
    let text = topo("ft234.net");
    let f = FabricBuilder::from_topology(&text)
        .unwrap()
        .build_private()
        .unwrap();
    assert_eq!(f.swept_nodes(), 234);
    let links = links_of(&text);
    let cas = f.ca_names();
    let targets: Vec<(String, u16)> = cas
        .iter()
        .map(|c| (c.clone(), f.lid(c, 1).unwrap()))
        .chain(
            (0..12)
                .map(|l| format!("L{l}"))
                .chain((0..6).map(|s| format!("S{s}")))
                .map(|s| {
                    let lid = f.lid(&s, 0).unwrap();
                    (s, lid)
                }),
        )
        .collect();
    let mut lids: Vec<u16> = targets.iter().map(|t| t.1).collect();
    lids.sort_unstable();
    lids.dedup();
    assert_eq!(lids.len(), 234, "every node has its own LID");
    for from in cas.iter().step_by(17) {
        assert_eq!(f.port_state(from, 1), Some(4));
        for (node, lid) in &targets {
            assert_eq!(
                walk(&f, &links, from, *lid).as_deref(),
                Ok(node.as_str()),
                "{from} → {lid}"
            );
        }
    }
}

#[test]
fn subnset_obeys_the_mkey() {
    let mkey = MkeyConfig {
        key: 0xfeed,
        protect_bits: 1,
    };
    let f = Fabric::builder()
        .ca("mks0")
        .ca("mks1")
        .link("mks0", 1, "mks1", 1)
        .mkey("mks1", 1, mkey)
        .build_private()
        .unwrap();
    // The SM knew the key (as from OpenSM's guid2mkey): the port came up.
    assert_eq!(
        (f.lid("mks1", 1), f.port_state("mks1", 1)),
        (Some(2), Some(4))
    );
    let mut a = f.open("mks0", 1).unwrap();
    let mut set = dr_get(1, 0x0015, 1, &[1]);
    set[3] = 0x02;
    let mut pi = port_info::Packet::new_unchecked(&mut set[64..128]);
    pi.set_lid(77);
    pi.set_master_sm_lid(1);
    pi.set_m_key(0xfeed);
    pi.set_m_key_protect_bits(1);
    send(&mut a, Qp::Smi, smi(0xffff), &set);
    assert!(drain(&mut a).is_empty(), "wrong key: discarded");
    assert_eq!(f.port_counters("mks1", 1).unwrap().mkey_violations, 1);
    assert_eq!(f.lid("mks1", 1), Some(2));
    set[24..32].copy_from_slice(&0xfeedu64.to_be_bytes());
    send(&mut a, Qp::Smi, smi(0xffff), &set);
    let (_, resp) = recv(&mut a);
    assert_eq!(be16(&resp, 4) & 0x7fff, 0);
    assert_eq!(
        port_info::Packet::new_checked(&resp[64..128])
            .unwrap()
            .lid(),
        77
    );
    assert_eq!(f.lid("mks1", 1), Some(77));
    // Armed → Init is not a transition: refused, nothing changes.
    let mut bad = set;
    port_info::Packet::new_unchecked(&mut bad[64..128]).set_port_state(port_info::PortState::Init);
    bad[8..16].copy_from_slice(&2u64.to_be_bytes());
    send(&mut a, Qp::Smi, smi(0xffff), &bad);
    let (_, resp) = recv(&mut a);
    assert_eq!(be16(&resp, 4) & 0x7fff, 0x001c);
    assert_eq!(f.port_state("mks1", 1), Some(4));
}

#[test]
fn an_application_takes_the_sm_role_and_gives_it_back() {
    let f = Fabric::builder()
        .ca("ism0")
        .ca("ism1")
        .link("ism0", 1, "ism1", 1)
        .build_private()
        .unwrap();
    // The built-in SM sits on ism0; the application takes the role on ism1.
    let mut other = f.open("ism0", 1).unwrap();
    let mut sm = f.open("ism1", 1).unwrap();
    assert_eq!(sm.attrs().capmask & port_info::CAP_IS_SM, 0);
    sm.set_sm(true).unwrap();
    assert_ne!(sm.attrs().capmask & port_info::CAP_IS_SM, 0);
    assert_eq!(f.swept_nodes(), 0);
    assert!(f.sweep().is_err(), "the built-in SM has stepped aside");
    // SMInfo at the built-in SM's own port is no longer answered by the fabric (the
    // port's owner gets it); at the application's port, the application gets it.
    send(&mut other, Qp::Smi, smi(0xffff), &dr_get(2, 0x0020, 0, &[]));
    let (meta, mad) = recv(&mut other);
    assert_eq!((meta.qp, mad[3], be16(&mad, 16)), (Qp::Smi, 0x01, 0x0020));
    send(
        &mut other,
        Qp::Smi,
        smi(0xffff),
        &dr_get(3, 0x0020, 0, &[1]),
    );
    let (meta, mad) = recv(&mut sm);
    assert_eq!((meta.qp, mad[3], be16(&mad, 16)), (Qp::Smi, 0x01, 0x0020));
    sm.set_sm(false).unwrap();
    assert_eq!(sm.attrs().capmask & port_info::CAP_IS_SM, 0);
    assert_eq!(f.swept_nodes(), 2);
    send(&mut other, Qp::Smi, smi(0xffff), &dr_get(4, 0x0020, 0, &[]));
    let (_, mad) = recv(&mut other);
    assert_eq!(
        sm_info::Packet::new_checked(&mad[64..]).unwrap().sm_state(),
        SmState::Master
    );
}

/// PerfMgt Get/Set of `attr` for PortSelect `port`.
fn pma(tid: u64, method: u8, attr: u16, port: u8, select: u16) -> [u8; 256] {
    let mut m = gmp_mad(0x04, 1, method, tid, attr);
    m[64 + 1] = port;
    m[64 + 2..64 + 4].copy_from_slice(&select.to_be_bytes());
    m
}

#[test]
fn pma_counts_real_traffic_and_drops_and_resets_on_set() {
    let f = Fabric::builder()
        .ca("pmc0")
        .switch("pmcs", 4)
        .ca("pmc1")
        .link("pmc0", 1, "pmcs", 1)
        .link("pmcs", 2, "pmc1", 1)
        .build_private()
        .unwrap();
    let mut a = f.open("pmc0", 1).unwrap();
    let mut b = f.open("pmc1", 1).unwrap();
    let ask = |a: &mut vmad::transport::sim::SimTransport, lid: u16, mad: &[u8; 256]| {
        send(a, Qp::Gsi, gsi(lid), mad);
        let (_, resp) = recv(a);
        assert_eq!(be16(&resp, 4), 0, "status");
        resp
    };
    // Start from zero (the SM's sweep crossed these ports), then send 40 GMPs.
    ask(&mut a, 3, &pma(7, 2, 0x0012, 1, 0xffff));
    ask(&mut a, 2, &pma(1, 2, 0x0012, 2, 0xffff));
    // Loss on the last link only while the 40 GMPs cross it.
    let lossy = FaultConfig {
        loss: 0.5,
        seed: 5,
        ..FaultConfig::default()
    };
    f.set_faults("pmc1", 1, lossy).unwrap();
    for i in 0..40 {
        send(&mut a, Qp::Gsi, gsi(3), &gmp_mad(0x05, 1, 1, 100 + i, 0x10));
    }
    f.set_faults("pmc1", 1, FaultConfig::default()).unwrap();
    let got = drain(&mut b).len() as u32;
    let resp = ask(&mut a, 2, &pma(2, 1, 0x0012, 2, 0));
    let c = port_counters::Packet::new_checked(&resp[64..]).unwrap();
    assert_eq!(c.xmit_pkts(), 40);
    assert_eq!(u32::from(c.xmit_discards()), 0);
    let resp = ask(&mut a, 3, &pma(3, 1, 0x0012, 1, 0));
    let c = port_counters::Packet::new_checked(&resp[64..]).unwrap();
    assert!(got > 5 && got < 35, "{got}");
    // The PMA's own Get arrived there too.
    assert_eq!(c.rcv_pkts(), got + 1);
    assert_eq!(u32::from(c.rcv_errors()), 40 - got);
    assert_eq!(c.rcv_data(), (got + 1) * (256u32 + 34).div_ceil(4));
    // Extended counters agree; a Set clears only what CounterSelect names.
    let resp = ask(&mut a, 2, &pma(4, 1, 0x001d, 2, 0));
    // (and the Get to pmc1's PMA went out there too)
    assert_eq!(
        port_counters_ext::Packet::new_checked(&resp[64..])
            .unwrap()
            .xmit_pkts(),
        41
    );
    let resp = ask(&mut a, 3, &pma(5, 2, 0x0012, 1, 0x0008));
    let c = port_counters::Packet::new_checked(&resp[64..]).unwrap();
    assert_eq!((c.rcv_errors(), c.rcv_pkts()), (0, got + 2));
    // ClassPortInfo says extended counters are there.
    let resp = ask(&mut a, 3, &gmp_mad(0x04, 1, 1, 6, 0x0001));
    assert_ne!(be16(&resp, 64 + 2) & 0x0200, 0);
}

#[test]
fn ten_thousand_nodes_load_and_sweep() {
    // 120 leaves x 82 CAs + 40 spines of 128 ports, from the generator ibsim's files come from.
    // How long it takes is scripts/bench-subnet's to measure (a release build takes
    // about 0.3 s), not this test's to assert.
    let script = format!("{}/scripts/ibsim-gen-fattree", env!("CARGO_MANIFEST_DIR"));
    let out = std::process::Command::new(script)
        .args(["120", "82", "40", "128"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let f = FabricBuilder::from_topology(&text)
        .unwrap()
        .build_private()
        .unwrap();
    assert_eq!(f.swept_nodes(), 10_000);
    let links = links_of(&text);
    let last = f.lid("H9839", 1).unwrap();
    for (from, to) in [("H0", "H9839"), ("H9839", "H0"), ("H4000", "S39")] {
        let lid = f.lid(to, if to.starts_with('S') { 0 } else { 1 }).unwrap();
        assert_eq!(
            walk(&f, &links, from, lid).as_deref(),
            Ok(to),
            "{from} → {to}"
        );
    }
    assert_eq!((f.port_state("H9839", 1), last), (Some(4), 9840));
}

#[test]
fn the_sm_sweeps_through_lossy_links_by_retrying() {
    let f = Fabric::builder()
        .ca("lsw0")
        .switch("lsws", 4)
        .ca("lsw1")
        .link("lsw0", 1, "lsws", 1)
        .link("lsws", 2, "lsw1", 1)
        .unmanaged()
        .build_private()
        .unwrap();
    let faults = FaultConfig {
        loss: 0.15,
        dup: 0.1,
        seed: 4,
        ..FaultConfig::default()
    };
    f.set_faults("lsw1", 1, faults).unwrap();
    let stats = f.sweep().unwrap();
    let lost = f.link_stats("lsw1", 1).unwrap().lost;
    assert!(lost > 0, "the link lost nothing: no retry was tested");
    assert_eq!(
        (stats.nodes, stats.lids, stats.failed),
        (3, 3, 0),
        "{stats:?}"
    );
    assert_eq!(
        (f.lid("lsw1", 1), f.port_state("lsw1", 1)),
        (Some(3), Some(4))
    );
    assert_eq!(
        (f.lft_port("lsws", 1), f.lft_port("lsws", 3)),
        (Some(1), Some(2))
    );
}

#[test]
fn a_link_going_down_and_up_is_routed_around_then_brought_back() {
    let text = topo("small.net")
        .replace("\"H", "\"lduH")
        .replace("\"S", "\"lduS");
    let f = FabricBuilder::from_topology(&text)
        .unwrap()
        .build_private()
        .unwrap();
    let h3 = f.lid("lduH3", 1).unwrap();
    assert_eq!(
        f.lft_port("lduS1", h3),
        Some(7),
        "the lower of the two parallel links"
    );
    let mut a = f.open("lduH1", 1).unwrap();
    let mut b = f.open("lduH3", 1).unwrap();
    f.set_link("lduS1", 7, false).unwrap();
    assert_eq!(
        (f.port_state("lduS1", 7), f.port_state("lduS2", 7)),
        (Some(1), Some(1))
    );
    assert_eq!(
        f.lft_port("lduS1", h3),
        Some(8),
        "the SM swept again and moved the route"
    );
    send(&mut a, Qp::Gsi, gsi(h3), &gmp_mad(0x05, 1, 1, 1, 0x10));
    assert_eq!(recv(&mut b).0.src.lid, 1);
    f.set_link("lduS1", 7, true).unwrap();
    assert_eq!(
        (f.port_state("lduS1", 7), f.port_state("lduS2", 7)),
        (Some(4), Some(4))
    );
    assert_eq!(f.lft_port("lduS1", h3), Some(7));
}

/// An application that serves SA methods itself on the SM's port gets those requests
/// (the kernel hands a request to the agent registered for its method); the built-in
/// SA keeps the methods nobody there serves.
#[test]
fn an_sa_agent_on_the_sm_port_gets_its_methods_and_the_sa_keeps_the_rest() {
    use vmad::engine::{AgentSpec, Event, SendRequest};
    const SA: u8 = 0x03;
    const GET: u8 = 0x01;
    const GET_TABLE: u8 = 0x12;
    let p = pair("sasm");
    let port = |id| vmad::umad::port(id).unwrap();
    let (sm_port, client) = (port(p.a), port(p.b));
    // The built-in SM sits on the first CA (LID 1): p.a's port.
    let spec = |methods: [u64; 2], rmpp| AgentSpec {
        qp: Qp::Gsi,
        mgmt_class: SA.into(),
        class_version: 2,
        rmpp_version: rmpp,
        method_mask: methods,
        oui: 0,
        user_rmpp: false,
    };
    let server = sm_port.register(spec([1 << GET_TABLE, 0], 1)).unwrap();
    let asker = client.register(spec([0, 0], 1)).unwrap();
    let ask = |method: u8, tid: u64| {
        let mut m = gmp_mad(SA, 2, method, tid, 0x11);
        m[24] = 1; // RMPP version
        client
            .send(
                asker,
                SendRequest {
                    addr: gsi(1),
                    mad: &m,
                    timeout_ms: 2000,
                    retries: 1,
                },
            )
            .unwrap();
    };
    // GetTable: served here, so it reaches the application.
    ask(GET_TABLE, 0x51);
    match sm_port.recv(Some(Duration::from_secs(5))).unwrap() {
        Event::Recv { agent, mad, .. } => {
            assert_eq!(agent, server);
            assert_eq!(be64(&mad, 8) & 0xffff_ffff, 0x51);
        }
        other => panic!("{other:?}"),
    }
    // Get: not served here, so the built-in SA answers it (a NodeRecord Get with an
    // empty mask matches both nodes: an error status, but an answer from the SA).
    ask(GET, 0x52);
    match client.recv(Some(Duration::from_secs(5))).unwrap() {
        Event::Recv { mad, .. } => {
            assert_eq!(mad[3], 0x81, "a GetResp from the built-in SA");
            assert_eq!(be64(&mad, 8) & 0xffff_ffff, 0x52);
        }
        other => panic!("{other:?}"),
    }
    assert!(
        sm_port.recv(Some(Duration::ZERO)).is_err(),
        "the Get never reached the application"
    );
}
