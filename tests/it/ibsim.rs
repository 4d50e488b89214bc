//! The ibsim transport against a real ibsim (and OpenSM, infiniband-diags as peers).
//!
//! Every test here starts and stops its own ibsim through `scripts/ibsim-start`
//! and `scripts/ibsim-stop` under a unique socket name, so they run in
//! parallel. They need the Debian packages ibsim-utils, libumad2sim0, opensm
//! and infiniband-diags: `./scripts/test` installs them and runs these with
//! `cargo test --test it -- --ignored ibsim`.

mod diags;
mod discover;
pub(crate) mod fabric;
mod lid_routed;
mod peers;
mod sa_unsegmented;
// The example's walk is what these tests check against ibnetdiscover.
#[allow(dead_code)]
#[path = "../../examples/smp_walk.rs"]
mod smp_walk;

use std::time::{Duration, Instant};

use vmad::engine::{RecvMeta, Transmit};
use vmad::transport::ibsim::{DropPolicy, IbsimConfig, IbsimTransport};
use vmad::transport::Transport;
use vmad::types::{MadAddr, Qp};

use crate::util::{join_within, PATIENCE};
use discover::parse_ibnetdiscover;
use fabric::Fabric;
use smp_walk::{walk, Topology};
use vmad::port::audit::PortAudit;
use vmad::port::{Port, PortConfig};

const ATTR_NODE_INFO: u16 = vmad::wire::smp::AttrId::NodeInfo.raw();
const ATTR_PORT_INFO: u16 = vmad::wire::smp::AttrId::PortInfo.raw();

/// A directed-route SMP Get, as libibmad builds it (hop pointer 0, both DR LIDs permissive).
fn dr_get(tid: u64, attr: u16, attr_mod: u32, path: &[u8]) -> [u8; 256] {
    let mut m = [0u8; 256];
    m[0] = 1; // BaseVersion
    m[1] = 0x81; // directed-route SMP
    m[2] = 1;
    m[3] = 0x01; // Get
    m[7] = path.len() as u8; // hop count
    m[8..16].copy_from_slice(&tid.to_be_bytes());
    m[16..18].copy_from_slice(&attr.to_be_bytes());
    m[20..24].copy_from_slice(&attr_mod.to_be_bytes());
    m[32..36].copy_from_slice(&[0xff; 4]);
    m[129..129 + path.len()].copy_from_slice(path);
    m
}

fn dr_dest() -> MadAddr {
    MadAddr {
        lid: 0xffff,
        ..MadAddr::default()
    }
}

fn tid_of(mad: &[u8]) -> u64 {
    u64::from_be_bytes(mad[8..16].try_into().unwrap())
}

/// Send one MAD straight through the transport (no engine) and wait for the
/// packet that answers it, or for ibsim's drop echo (`None`).
fn call(
    t: &mut IbsimTransport,
    qp: Qp,
    dest: MadAddr,
    mad: &[u8; 256],
) -> Option<(RecvMeta, Vec<u8>)> {
    let drops = t.drop_monitor();
    let before = drops.count();
    let sent = t
        .transmit(&mut |slot| {
            slot.copy_from_slice(mad);
            Some(Transmit {
                qp,
                dest,
                len: 256,
                timeout_ms: 0,
            })
        })
        .unwrap();
    assert!(sent);
    // ibsim answers or echoes at once; the bound only keeps a broken run from hanging.
    let give_up = Instant::now() + Duration::from_secs(10);
    loop {
        let mut got = None;
        t.recv_burst(16, &mut |meta, bytes| {
            if tid_of(bytes) & 0xffff_ffff == tid_of(mad) & 0xffff_ffff {
                got = Some((meta, bytes.to_vec()));
            }
        })
        .unwrap();
        if got.is_some() {
            return got;
        }
        if drops.count() > before {
            return None;
        }
        assert!(
            Instant::now() < give_up,
            "ibsim neither answered nor echoed"
        );
        t.wait(Some(Duration::from_millis(50))).unwrap();
    }
}

#[test]
#[ignore = "needs ibsim/opensm: run by ./scripts/test"]
fn ibsim_transport_attaches_and_learns_its_port() {
    let f = Fabric::start("small.net", &[]);
    let t = IbsimTransport::connect(f.config(Some("H3"))).unwrap();
    assert_eq!(t.node_id(), "H3");
    let a = t.attrs().clone();
    // ibsim numbers CA GUIDs from 0x100000 in steps of 2 (H3 is the third CA); port = node + 1.
    assert_eq!(a.node_guid, 0x10_0004);
    assert_eq!(a.port_guid, 0x10_0005);
    assert_eq!((a.port_num, a.node_type), (1, 1));
    assert_eq!(a.lid, 0, "no SM has run yet");
    assert_eq!(a.pkeys.len(), 32);
    assert_eq!(a.pkeys[0], 0xffff);
    drop(t);

    // After OpenSM: the same values ibstat (under umad2sim, same node) prints.
    f.opensm(&[]);
    let mut t = IbsimTransport::connect(f.config(Some("H3"))).unwrap();
    let a = t.refresh_attrs().unwrap().clone();
    let ibstat = f.exec(Some("H3"), &["ibstat"]);
    let field = |k: &str| {
        ibstat
            .lines()
            .find_map(|l| l.trim().strip_prefix(k))
            .unwrap_or_else(|| panic!("{k} not in ibstat: {ibstat}"))
            .trim()
            .to_string()
    };
    assert_eq!(field("Base lid:"), a.lid.to_string());
    assert_eq!(field("SM lid:"), a.sm_lid.to_string());
    assert_eq!(field("LMC:"), a.lmc.to_string());
    assert_eq!(field("Rate:"), a.rate.to_string());
    assert_eq!(field("Capability mask:"), format!("{:#010x}", a.capmask));
    assert_eq!(field("Port GUID:"), format!("{:#018x}", a.port_guid));
    assert_eq!(field("Node GUID:"), format!("{:#018x}", a.node_guid));
    assert_eq!(field("State:"), "Active");
    assert_eq!(a.state, 4);
    assert_eq!(field("Physical state:"), "LinkUp");
    assert_eq!(a.phys_state, 5);
}

#[test]
#[ignore = "needs ibsim/opensm: run by ./scripts/test"]
fn ibsim_raw_dr_smp_round_trip_keeps_the_tid() {
    let f = Fabric::start("small.net", &[]);
    let mut t = IbsimTransport::connect(f.config(Some("H1"))).unwrap();
    // H1 -> S1 (out of H1's port 1) -> S2 (out of S1's port 7).
    let tid = 0xabcd_1234_0000_0042;
    let req = dr_get(tid, ATTR_NODE_INFO, 0, &[1, 7]);
    let (meta, rsp) = call(&mut t, Qp::Smi, dr_dest(), &req).expect("a response");
    assert_eq!(meta.qp, Qp::Smi);
    assert_eq!(meta.src.lid, 0xffff);
    assert_eq!(meta.src.qpn, 0);
    // ibsim wrote its slot over TID bits 63..48; the transport put them back.
    assert_eq!(tid_of(&rsp), tid);
    assert_eq!(rsp[3], 0x81, "GetResp");
    assert_eq!(rsp[4] & 0x80, 0x80, "D bit");
    assert_eq!(rsp[6], 0, "hop pointer");
    assert_eq!(
        &rsp[193..195],
        &[1, 7],
        "return path: the ports it entered by"
    );
    // NodeInfo of S2: a switch, 8 ports, GUID 0x200001, entered on port 7.
    let ni = &rsp[64..128];
    assert_eq!(ni[2], 2);
    assert_eq!(ni[3], 8);
    assert_eq!(
        u64::from_be_bytes(ni[12..20].try_into().unwrap()),
        0x20_0001
    );
    assert_eq!(ni[36], 7);
    assert_eq!(t.drop_monitor().count(), 0);
}

#[test]
#[ignore = "needs ibsim/opensm: run by ./scripts/test"]
fn ibsim_drops_are_counted_and_reported() {
    let f = Fabric::start("small.net", &[]);
    let config = IbsimConfig {
        drops: DropPolicy::Report,
        ..f.config(None)
    };
    let mut t = IbsimTransport::connect(config).unwrap();
    let monitor = t.drop_monitor();
    // S1 port 5 has no link: ibsim returns the request undelivered.
    let tid = 0x7777_0001_0000_0001;
    let req = dr_get(tid, ATTR_NODE_INFO, 0, &[1, 5]);
    assert!(call(&mut t, Qp::Smi, dr_dest(), &req).is_none());
    assert_eq!(monitor.count(), 1);
    assert!(monitor.pending());
    let reports = monitor.take();
    assert_eq!(reports.len(), 1);
    assert_eq!(reports[0].tid(), tid, "TID as sent");
    assert_eq!(reports[0].status, 110);
    assert_eq!(reports[0].qp, Qp::Smi);
    assert_eq!(reports[0].dest_lid, 0xffff);
    assert!(!monitor.pending());

    // The same port's PortInfo works: the link is simply absent.
    let req = dr_get(tid + 1, ATTR_PORT_INFO, 5, &[1]);
    let (_, rsp) = call(&mut t, Qp::Smi, dr_dest(), &req).expect("PortInfo of S1 port 5");
    assert_eq!(rsp[64 + 32] & 0x0f, 1, "port 5 is Down");
}

#[test]
#[ignore = "needs ibsim/opensm: run by ./scripts/test"]
fn ibsim_slots_are_released_on_drop_and_on_failed_attach() {
    let f = Fabric::start("small.net", &[]);
    // More attachments than ibsim has slots, one after the other: each drop frees its slot.
    for _ in 0..15 {
        let t = IbsimTransport::connect(f.config(Some("H2"))).unwrap();
        assert!(t.slot() < 10);
    }
    // A refused attachment (unknown node) takes nothing either.
    for _ in 0..12 {
        let err = IbsimTransport::connect(f.config(Some("nosuchnode"))).unwrap_err();
        assert_eq!(err.errno(), libc_enodev());
    }
    // All ten at once, then the eleventh is refused; freeing one lets it in.
    let mut all: Vec<_> = (0..10)
        .map(|_| IbsimTransport::connect(f.config(None)).unwrap())
        .collect();
    let err = IbsimTransport::connect(f.config(None)).unwrap_err();
    assert_eq!(err.errno(), libc_enodev());
    all.pop();
    let t = IbsimTransport::connect(f.config(None)).unwrap();
    drop(all);
    drop(t);
    // ibsim lists attached clients on its console: none may be left.
    let attached = f.command("Attached");
    assert!(!attached.contains("Client "), "{attached}");
}

fn libc_enodev() -> i32 {
    vmad::error::errno::ENODEV
}

#[test]
#[ignore = "needs ibsim/opensm: run by ./scripts/test"]
fn ibsim_remote_udp_mode_works() {
    // ibsim takes UDP port P and the ten after it; try a few in case one is taken.
    let mut fabric = None;
    for i in 0..5 {
        let port = 20_000 + ((std::process::id() + i * 997) % 4000) * 11;
        let p = port.to_string();
        let started = std::panic::catch_unwind(|| Fabric::start("small.net", &["-r", "-l", &p]));
        if let Ok(f) = started {
            fabric = Some(f);
            break;
        }
    }
    let f = fabric.expect("ibsim in remote mode");
    let mut t = IbsimTransport::connect(f.config(Some("H4"))).unwrap();
    assert_eq!(t.attrs().node_guid, 0x10_0006);
    let req = dr_get(0x1234_0000_0000_0009, ATTR_NODE_INFO, 0, &[1]);
    let (_, rsp) = call(&mut t, Qp::Smi, dr_dest(), &req).expect("response over UDP");
    assert_eq!(
        u64::from_be_bytes(rsp[64 + 12..64 + 20].try_into().unwrap()),
        0x20_0001
    );
}

/// A port over a fresh transport attached at `node` (attributes read after any SM ran).
pub(crate) fn open_port(f: &Fabric, node: Option<&str>) -> Port {
    open_port_with(f.config(node))
}

pub(crate) fn open_port_with(config: IbsimConfig) -> Port {
    let mut t = IbsimTransport::connect(config).unwrap();
    t.refresh_attrs().unwrap();
    Port::open(Box::new(t), PortConfig::default()).unwrap()
}

/// Switch port GUIDs are the node GUID whichever port NodeInfo came in by;
/// ibnetdiscover lists them once, as port 0.
fn normalise(mut t: Topology) -> Topology {
    for n in t.nodes.values_mut() {
        if n.node_type == 2 {
            assert!(n.port_guids.values().all(|&g| g == n.guid), "{n:?}");
            n.port_guids = [(0, n.guid)].into();
        }
    }
    t
}

fn assert_same_fabric(vmad: Topology, diags: Topology) {
    let (vmad, diags) = (normalise(vmad), normalise(diags));
    let only_vmad: Vec<_> = vmad
        .nodes
        .keys()
        .filter(|g| !diags.nodes.contains_key(g))
        .collect();
    let only_diags: Vec<_> = diags
        .nodes
        .keys()
        .filter(|g| !vmad.nodes.contains_key(g))
        .collect();
    assert!(
        only_vmad.is_empty() && only_diags.is_empty(),
        "nodes only vmad found: {only_vmad:x?}; only ibnetdiscover: {only_diags:x?}"
    );
    for (g, n) in &vmad.nodes {
        assert_eq!(n, &diags.nodes[g]);
    }
    let a: Vec<_> = vmad.links.difference(&diags.links).collect();
    let b: Vec<_> = diags.links.difference(&vmad.links).collect();
    assert!(
        a.is_empty() && b.is_empty(),
        "links only vmad: {a:x?}; only ibnetdiscover: {b:x?}"
    );
}

fn discovery_matches_ibnetdiscover(topology: &str, nodes: usize, links: usize) {
    let f = Fabric::start(topology, &[]);
    let diags = parse_ibnetdiscover(&f.exec(None, &["ibnetdiscover"]));
    assert_eq!(diags.nodes.len(), nodes, "ibnetdiscover's count");
    let port = open_port(&f, None);
    let (vmad, sweep) = walk(&port, 64, 100, 3).unwrap();
    assert_eq!(sweep.timeouts, 0);
    assert_eq!(vmad.nodes.len(), nodes);
    assert_eq!(vmad.links.len(), links);
    assert!(vmad.nodes.values().all(|n| !n.desc.is_empty()));
    // The example prints what it found in ibnetdiscover's format, readable back.
    assert_eq!(
        normalise(parse_ibnetdiscover(&smp_walk::render(&vmad))),
        normalise(vmad.clone())
    );
    assert_same_fabric(vmad, diags);
}

#[test]
#[ignore = "needs ibsim/opensm: run by ./scripts/test"]
fn ibsim_dr_discovery_matches_ibnetdiscover_small() {
    // 4 CA links, 2 switch-to-switch links.
    discovery_matches_ibnetdiscover("small.net", 6, 6);
}

#[test]
#[ignore = "needs ibsim/opensm: run by ./scripts/test"]
fn ibsim_dr_discovery_matches_ibnetdiscover_ft234() {
    // 12 leaves x 18 CAs, 6 spines: 216 CA links + 72 uplinks.
    discovery_matches_ibnetdiscover("ft234.net", 234, 288);
}

/// An ibsim node registered as a named CA opens through the umad API.
#[test]
#[ignore = "needs ibsim/opensm: run by ./scripts/test"]
fn ibsim_registered_ca_opens_through_umad() {
    let f = Fabric::start("small.net", &[]);
    f.opensm(&[]);
    let name = format!("ibsim{}", std::process::id() % 100_000);
    vmad::transport::ibsim::register_ca(&name, f.config(Some("H4"))).unwrap();
    let ca = vmad::umad::get_ca(&name).unwrap();
    assert_eq!(
        (ca.node_guid, ca.node_type, ca.ca_type.as_str()),
        (0x10_0006, 1, "simulator")
    );
    assert_eq!(ca.ports.len(), 1);
    let p = &ca.ports[0];
    assert_eq!((p.port_num, p.port_guid, p.state), (1, 0x10_0007, 4));
    assert_ne!(p.lid, 0);
    assert_eq!(vmad::umad::get_port(&name, 1).unwrap().lid, p.lid);
    assert!(
        vmad::umad::open(&name, 2).is_err(),
        "ibsim attaches to port 1 only"
    );
    let (_, port) = vmad::umad::open(&name, 1).unwrap();
    assert_eq!(port.attrs().ca_name, name);
    let (topo, sweep) = walk(&port, 8, 100, 3).unwrap();
    assert_eq!(
        (topo.nodes.len(), topo.links.len(), sweep.timeouts),
        (6, 6, 0)
    );
    port.close();
    vmad::transport::registry::unregister_ca(&name);
}

/// ibnetdiscover's output is an ibsim topology too, with nodes named by GUID:
/// such a node can be attached to by its GUID.
#[test]
#[ignore = "needs ibsim/opensm: run by ./scripts/test"]
fn ibsim_attach_by_guid_on_an_ibnetdiscover_topology() {
    let first = Fabric::start("small.net", &[]);
    let file = first.run.join("discovered.net");
    std::fs::write(&file, first.exec(None, &["ibnetdiscover"])).unwrap();
    let f = Fabric::start_file(&file, &[]);
    let t = IbsimTransport::connect(f.config(Some("0x100004"))).unwrap();
    assert_eq!(t.node_id(), "H-0000000000100004");
    assert_eq!(t.attrs().node_guid, 0x10_0004);
    assert_eq!(t.attrs().port_guid, 0x10_0005);
    let err = IbsimTransport::connect(f.config(Some("0x999"))).unwrap_err();
    assert_eq!(err.errno(), vmad::error::errno::ENODEV);
    assert!(err.to_string().contains("ibsim refused to attach"), "{err}");
}

/// ibsim busy-waits on a client whose receive queue is full; a send that finds
/// ibsim's queue full reads what ibsim holds for us, so a burst sent without
/// receiving completes.
#[test]
#[ignore = "needs ibsim/opensm: run by ./scripts/test"]
fn ibsim_burst_without_receiving_does_not_stall() {
    const N: u64 = 2000;
    let f = Fabric::start("small.net", &[]);
    let mut t = IbsimTransport::connect(f.config(None)).unwrap();
    for i in 0..N {
        let req = dr_get(0x4242_0000_0000_0000 | i, ATTR_NODE_INFO, 0, &[1]);
        t.transmit(&mut |slot| {
            slot.copy_from_slice(&req);
            Some(Transmit {
                qp: Qp::Smi,
                dest: dr_dest(),
                len: 256,
                timeout_ms: 0,
            })
        })
        .unwrap();
    }
    let mut seen = std::collections::BTreeSet::new();
    let give_up = Instant::now() + Duration::from_secs(30);
    while (seen.len() as u64) < N {
        assert!(Instant::now() < give_up, "{} of {N} answers", seen.len());
        t.wait(Some(Duration::from_millis(50))).unwrap();
        t.recv_burst(256, &mut |_, mad| {
            assert_eq!(tid_of(mad) >> 32, 0x4242_0000, "TID high word restored");
            seen.insert(tid_of(mad));
        })
        .unwrap();
    }
    assert_eq!(t.drop_monitor().count(), 0);
}

/// ibsim killed under a thread blocked in `recv(None)` and one in `poll(None)`: both
/// end with EIO (`umad_recv(3)`: "receive operation failed") within seconds, later calls
/// too, and closing still works.
#[test]
#[ignore = "needs ibsim: run by ./scripts/test"]
fn ibsim_killed_under_blocked_receivers_gives_eio() {
    use std::sync::Arc;
    use vmad::error::errno::EIO;
    let f = Fabric::start("small.net", &[]);
    let port = Arc::new(open_port_with(f.config(Some("H2"))));
    let second = Arc::new(port.open_again().unwrap());
    let (p1, p2) = (port.clone(), second.clone());
    let receiver = std::thread::spawn(move || p1.recv(None).map(|_| ()));
    let poller = std::thread::spawn(move || p2.poll(None));
    // Both blocked on the port's descriptors before ibsim goes.
    let give_up = Instant::now() + PATIENCE;
    while port.callers_waiting() < 2 {
        assert!(Instant::now() < give_up, "the two callers never blocked");
        std::thread::yield_now();
    }
    let stop = std::process::Command::new(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/ibsim-stop"),
    )
    .arg(&f.run)
    .status()
    .unwrap();
    assert!(stop.success());
    // Seen by the liveness probe (500 ms) plus the control timeout at worst: a minute
    // only guards against a hang.
    let limit = 6 * PATIENCE;
    let recv = join_within(receiver, limit, "recv(None) under a dead ibsim");
    assert_eq!(recv.unwrap_err().errno(), EIO);
    let poll = join_within(poller, limit, "poll(None) under a dead ibsim");
    assert_eq!(poll.unwrap_err().errno(), EIO);
    assert_eq!(port.recv(Some(Duration::ZERO)).unwrap_err().errno(), EIO);
    assert!(port.failure().is_some());
    port.close();
    second.close();
}

/// The SM role on ibsim: taking it sets IsSM; a second port on the same node is refused
/// while the first holds it (as the kernel's issm device refuses a second SM), and
/// gets it once the first gives it up.
#[test]
#[ignore = "needs ibsim: run by ./scripts/test"]
fn ibsim_sm_role_is_one_per_node() {
    use vmad::error::errno::EADDRINUSE;
    let f = Fabric::start("small.net", &[]);
    let a = open_port_with(f.config(Some("H2")));
    let b = open_port_with(f.config(Some("H2")));
    let is_sm = || {
        let mut t = IbsimTransport::connect(f.config(Some("H2"))).unwrap();
        t.refresh_attrs().unwrap().capmask & 2 != 0
    };
    assert!(!is_sm(), "nobody holds the role yet");
    a.set_sm(true).unwrap();
    assert!(is_sm(), "IsSM set by the first port's SM role");
    assert_eq!(b.set_sm(true).unwrap_err().errno(), EADDRINUSE);
    a.set_sm(false).unwrap();
    assert!(!is_sm(), "IsSM cleared when the role is given up");
    b.set_sm(true).unwrap();
    assert!(is_sm());
}
