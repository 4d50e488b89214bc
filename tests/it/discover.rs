//! `vmad::discover` against the embedded subnet: the sweep finds the fabric's
//! nodes and links exactly, prints them in a form the subnet reads back, and
//! names what a dead switch keeps it from reading.

use std::collections::BTreeSet;
use std::time::Duration;

use vmad::clock::VirtualClock;
use vmad::discover::{discover, Config, End, Query, Reason, Topology};
use vmad::port::{Port, PortConfig};
use vmad::subnet::{Fabric, FabricBuilder, FaultConfig};

/// A fabric description: the nodes (name, switch?, ports) and links by name.
#[derive(Default)]
struct Plan {
    nodes: Vec<(String, bool, u8)>,
    links: Vec<((String, u8), (String, u8))>,
}

impl Plan {
    /// A two-level fat tree: `leaves` leaf switches of `hosts` CAs each, every leaf
    /// linked once to each of `spines` spine switches. Names start with `prefix`.
    fn fat_tree(prefix: &str, leaves: usize, hosts: usize, spines: usize) -> Plan {
        let mut p = Plan::default();
        let ports = u8::try_from(hosts + spines).unwrap();
        for s in 0..spines {
            p.nodes.push((format!("{prefix}S{s}"), true, leaves as u8));
        }
        for l in 0..leaves {
            let leaf = format!("{prefix}L{l}");
            p.nodes.push((leaf.clone(), true, ports));
            for h in 0..hosts {
                let host = format!("{prefix}H{l}_{h}");
                p.nodes.push((host.clone(), false, 1));
                p.links.push(((host, 1), (leaf.clone(), h as u8 + 1)));
            }
            for s in 0..spines {
                p.links.push((
                    (leaf.clone(), (hosts + s + 1) as u8),
                    (format!("{prefix}S{s}"), l as u8 + 1),
                ));
            }
        }
        p
    }

    /// The nodes and links of an ibsim topology file (the test's own reading of it).
    fn from_net(text: &str) -> Plan {
        let mut p = Plan::default();
        fn quoted(s: &str) -> (String, &str) {
            let a = s.find('"').unwrap() + 1;
            let b = a + s[a..].find('"').unwrap();
            (s[a..b].to_owned(), &s[b + 1..])
        }
        let mut current = String::new();
        for line in text.lines().map(str::trim) {
            if let Some(rest) = line.strip_prefix('[') {
                let (port, rest) = rest.split_once(']').unwrap();
                let (peer, rest) = quoted(rest);
                let pp = rest[1..rest.find(']').unwrap()].parse().unwrap();
                let (a, b) = ((current.clone(), port.parse().unwrap()), (peer, pp));
                // The files list a link from both ends.
                if !p.links.contains(&(b.clone(), a.clone())) {
                    p.links.push((a, b));
                }
            } else if let Some((kind, rest)) = line.split_once(char::is_whitespace) {
                if matches!(kind, "Hca" | "Ca" | "Switch") {
                    let ports = rest.split_whitespace().next().unwrap().parse().unwrap();
                    current = quoted(rest).0;
                    p.nodes.push((current.clone(), kind == "Switch", ports));
                }
            }
        }
        p
    }

    fn builder(&self) -> FabricBuilder {
        let mut b = Fabric::builder();
        for (name, switch, ports) in &self.nodes {
            b = if *switch {
                b.switch(name, *ports)
            } else {
                b.ca_ports(name, *ports)
            };
        }
        for ((a, pa), (b2, pb)) in &self.links {
            b = b.link(a, *pa, b2, *pb);
        }
        b
    }

    /// The node GUIDs and links the fabric was built with.
    fn expected(&self, f: &Fabric) -> (BTreeSet<u64>, BTreeSet<(End, End)>) {
        let guid = |n: &str| f.node_guid(n).unwrap();
        let nodes = self.nodes.iter().map(|(n, ..)| guid(n)).collect();
        let links = self
            .links
            .iter()
            .map(|((a, pa), (b, pb))| ordered((guid(a), *pa), (guid(b), *pb)))
            .collect();
        (nodes, links)
    }
}

fn ordered(a: End, b: End) -> (End, End) {
    if a <= b {
        (a, b)
    } else {
        (b, a)
    }
}

fn found(t: &Topology) -> (BTreeSet<u64>, BTreeSet<(End, End)>) {
    (
        t.nodes.iter().map(|n| n.guid).collect(),
        t.links().into_iter().collect(),
    )
}

fn open(f: &Fabric, ca: &str) -> Port {
    Port::open(Box::new(f.open(ca, 1).unwrap()), PortConfig::default()).unwrap()
}

fn sweep_matches(plan: &Plan, from: &str, config: &Config) -> Topology {
    let f = plan.builder().build_private().unwrap();
    let port = open(&f, from);
    let topo = discover(&port, config).unwrap();
    assert!(topo.is_complete(), "failures: {:?}", topo.failures);
    assert_eq!(found(&topo), plan.expected(&f));
    // Every node's description was read (the sim's is its name).
    for (name, ..) in &plan.nodes {
        let n = topo.node(f.node_guid(name).unwrap()).unwrap();
        assert_eq!(&n.desc, name);
    }
    topo
}

#[test]
fn discover_ft234_equals_the_fabric() {
    let text = std::fs::read_to_string("tests/topo/ft234.net").unwrap();
    let plan = Plan::from_net(&text);
    assert_eq!((plan.nodes.len(), plan.links.len()), (234, 288));
    let topo = sweep_matches(&plan, "H0", &Config::default());
    assert_eq!(topo.nodes[0].desc, "H0", "the local node first");
    // Every switch and CA port the sweep crossed has the LID the built-in SM gave.
    assert!(topo.nodes.iter().all(|n| n.lid() != 0));
}

/// Once the SM has assigned LIDs, a switch's other ports and its description go
/// LID-routed; the fabric read is the same as by directed route alone.
#[test]
fn discover_switches_to_lid_routing_once_lids_are_known() {
    let text = std::fs::read_to_string("tests/topo/ft234.net").unwrap();
    let plan = Plan::from_net(&text);
    let f = plan.builder().build_private().unwrap();
    let port = open(&f, "H0");
    let by_lid = discover(&port, &Config::default()).unwrap();
    let dr_only = Config {
        lid_routing: false,
        ..Config::default()
    };
    let by_dr = discover(&port, &dr_only).unwrap();
    assert!(by_lid.is_complete() && by_dr.is_complete());
    assert_eq!(found(&by_lid), plan.expected(&f));
    assert_eq!(found(&by_lid), found(&by_dr));
    assert_eq!((by_lid.smps, by_dr.lid_routed), (by_dr.smps, 0));
    // What may go by LID: each switch's description and ports 1..N (port 0 is what
    // tells its LID). Most of it does; the rest left before port 0 answered.
    let eligible: u64 = by_lid
        .nodes
        .iter()
        .filter(|n| n.is_switch())
        .map(|n| u64::from(n.num_ports) + 1)
        .sum();
    assert!(
        by_lid.lid_routed > eligible / 2 && by_lid.lid_routed <= eligible,
        "{} of {eligible} LID-routed",
        by_lid.lid_routed
    );
    for n in &by_dr.nodes {
        let m = by_lid.node(n.guid).unwrap();
        assert_eq!((&m.desc, &m.ports), (&n.desc, &n.ports), "{}", n.desc);
    }
}

/// Where LID routing fails (here a leaf's forwarding table, set to drop every
/// LID, stands between the sweep and every other switch), the SMPs that got no
/// answer by LID are asked again by directed route: the fabric is read whole.
#[test]
fn discover_asks_by_directed_route_where_lid_routing_fails() {
    let plan = Plan::fat_tree("lrf_", 4, 3, 2);
    let clock = VirtualClock::new();
    let f = plan.builder().clock(clock.clone()).build_private().unwrap();
    // SubnSet(LinearForwardingTable block 0) on the leaf behind H0_0: port 255 (drop)
    // for LIDs 0-63, every LID of this fabric.
    let mut t = f.open("lrf_H0_0", 1).unwrap();
    let mut set = crate::util::dr_get(1, 0x0019, 0, &[1]);
    set[3] = 0x02;
    set[64..128].fill(0xff);
    crate::util::send(&mut t, vmad::types::Qp::Smi, crate::util::smi(0xffff), &set);
    let answers = crate::util::drain(&mut t);
    assert!(
        matches!(&answers[..], [(_, m)] if m[3] == 0x81 && m[4..6] == [0x80, 0]),
        "LFT Set answered: {answers:?}"
    );
    drop(t);
    let run = |config: Config| {
        let port = open(&f, "lrf_H0_0");
        let sweep = std::thread::spawn(move || discover(&port, &config));
        // Steps far below the timeout: only what gets no answer expires.
        while !sweep.is_finished() {
            clock.advance(Duration::from_micros(500));
            std::thread::yield_now();
        }
        sweep.join().unwrap().unwrap()
    };
    let quick = Config {
        timeout_ms: 100,
        retries: 0,
        ..Config::default()
    };
    let topo = run(quick.clone());
    let by_dr = run(Config {
        lid_routing: false,
        ..quick
    });
    assert!(topo.is_complete(), "failures: {:?}", topo.failures);
    assert_eq!(found(&topo), plan.expected(&f));
    assert_eq!(found(&topo), found(&by_dr));
    // The leaf's own LID still works; the SMPs to the other switches were sent twice.
    assert!(topo.lid_routed > 0);
    assert!(topo.smps > by_dr.smps, "{} vs {}", topo.smps, by_dr.smps);
}

/// A fabric no SM brought up has no LIDs: every SMP goes by directed route.
#[test]
fn discover_without_lids_goes_by_directed_route() {
    let text = std::fs::read_to_string("tests/topo/ft234.net").unwrap();
    let plan = Plan::from_net(&text);
    let f = plan.builder().unmanaged().build_private().unwrap();
    let port = open(&f, "H0");
    let topo = discover(&port, &Config::default()).unwrap();
    assert!(topo.is_complete(), "failures: {:?}", topo.failures);
    assert_eq!(found(&topo), plan.expected(&f));
    assert_eq!(topo.lid_routed, 0);
    assert!(topo.nodes.iter().all(|n| n.lid() == 0));
}

/// The SA-only mode reads the same fabric from the built-in SA's tables.
#[test]
fn discover_sa_equals_the_smp_sweep() {
    let text = std::fs::read_to_string("tests/topo/ft234.net").unwrap();
    let plan = Plan::from_net(&text);
    let f = plan.builder().build_private().unwrap();
    let port = open(&f, "H0");
    let sa_lid = port.attrs().sm_lid;
    let by_sa = vmad::discover::discover_sa(&port, sa_lid, &Config::default()).unwrap();
    let by_smp = discover(&port, &Config::default()).unwrap();
    assert_eq!(found(&by_sa), plan.expected(&f));
    assert_eq!(by_sa.smps, 0);
    for n in &by_smp.nodes {
        let m = by_sa.node(n.guid).unwrap();
        assert_eq!(
            (&m.desc, m.node_type, m.lid()),
            (&n.desc, n.node_type, n.lid())
        );
        // The same ports with the same state, LID and peer (routes aside).
        for (num, p) in &n.ports {
            let q = m.ports.get(num).copied().unwrap_or_default();
            assert_eq!(
                (q.state, q.lid, q.remote),
                (p.state, p.lid, p.remote),
                "{} port {num}",
                n.desc
            );
        }
    }
}

/// The SA-only topology starts from the port's own node, as the sweep's does,
/// whatever the SA's order.
#[test]
fn discover_sa_puts_the_own_node_first() {
    let text = std::fs::read_to_string("tests/topo/ft234.net").unwrap();
    let f = Plan::from_net(&text).builder().build_private().unwrap();
    for ca in ["H0", "H7", "H100"] {
        let port = open(&f, ca);
        let sa_lid = port.attrs().sm_lid;
        let by_sa = vmad::discover::discover_sa(&port, sa_lid, &Config::default()).unwrap();
        assert_eq!(by_sa.nodes[0].guid, port.attrs().node_guid, "from {ca}");
        assert_eq!(by_sa.nodes[0].desc, ca);
        let i = by_sa.nodes.len() - 1;
        assert_eq!(
            by_sa.node(by_sa.nodes[i].guid).unwrap().guid,
            by_sa.nodes[i].guid
        );
    }
}

#[test]
fn discover_a_generated_fat_tree_at_each_window() {
    // 40 leaves of 20 CAs, 10 spines: 850 nodes, 1,200 links.
    let plan = Plan::fat_tree("dgf_", 40, 20, 10);
    assert_eq!((plan.nodes.len(), plan.links.len()), (850, 1200));
    let f = plan.builder().build_private().unwrap();
    let port = open(&f, "dgf_H0_0");
    let (nodes, links) = plan.expected(&f);
    for (window, per_node) in [(1, 1), (8, 2), (64, 4), (256, 64)] {
        let config = Config {
            window,
            per_node,
            ..Config::default()
        };
        // After each answer the rest of the window is still out: the sweep keeps
        // the window full (the fabric has work enough) and never overfills it.
        let mut most = 0;
        let topo = vmad::discover::discover_with(&port, &config, &mut |p| {
            most = most.max(p.in_flight);
        })
        .unwrap();
        if window <= 64 {
            assert_eq!(most, window - 1, "window {window}");
        } else {
            assert!(most < window, "window {window}: {most} in flight");
        }
        assert!(topo.is_complete(), "window {window}: {:?}", topo.failures);
        assert_eq!(
            found(&topo),
            (nodes.clone(), links.clone()),
            "window {window}"
        );
    }
}

#[test]
fn discover_output_reads_back_as_the_same_fabric() {
    let plan = Plan::fat_tree("drb_", 4, 3, 2);
    let topo = sweep_matches(&plan, "drb_H0_0", &Config::default());
    let text = topo.to_ibnetdiscover();
    // The embedded subnet loads it (GUIDs from the switchguid=/caguid= lines) ...
    let again = FabricBuilder::from_topology(&text)
        .unwrap()
        .build_private()
        .unwrap();
    let first_ca = topo.nodes[0].name();
    let port = open(&again, &first_ca);
    let second = discover(&port, &Config::default()).unwrap();
    // ... as the same nodes and links.
    assert_eq!(found(&second), found(&topo));
    for (kind, want) in [("Switch\t", 6), ("Ca\t", 12)] {
        assert_eq!(text.lines().filter(|l| l.starts_with(kind)).count(), want);
    }
    let dot = topo.to_dot();
    assert_eq!(dot.matches(" -- ").count(), topo.links().len());
    let json = topo.to_json();
    assert_eq!(json.matches("\"type\":\"switch\"").count(), 6);
}

#[test]
fn discover_bad_config_is_refused() {
    let plan = Plan::fat_tree("dbc_", 1, 1, 0);
    let f = plan.builder().build_private().unwrap();
    let port = open(&f, "dbc_H0_0");
    for (window, per_node) in [(0, 4), (4, 0)] {
        let c = Config {
            window,
            per_node,
            ..Config::default()
        };
        assert!(matches!(
            discover(&port, &c),
            Err(vmad::Error::InvalidArgument(_))
        ));
    }
}

/// A spine that answers nothing (every frame on its links is lost once the
/// subnet is up): the sweep goes on past it, finds everything else, and names
/// the port behind which each leaf saw it go silent.
#[test]
fn discover_past_a_dead_switch_names_it() {
    let plan = Plan::fat_tree("dds_", 4, 3, 2);
    let clock = VirtualClock::new();
    let mut b = plan.builder().clock(clock.clone());
    let dead = FaultConfig {
        loss: 1.0,
        ..FaultConfig::default()
    };
    for port in 1..=4 {
        b = b.faults("dds_S1", port, dead);
    }
    let f = b.build_private().unwrap();
    let port = open(&f, "dds_H0_0");
    let config = Config {
        timeout_ms: 100,
        retries: 1,
        ..Config::default()
    };
    let sweep = std::thread::spawn(move || discover(&port, &config));
    // Virtual time moves on in steps far below the 100 ms timeout, so that every
    // answer the fabric gives is handled long before its request could expire.
    while !sweep.is_finished() {
        clock.advance(Duration::from_micros(500));
        std::thread::yield_now();
    }
    let topo = sweep.join().unwrap().unwrap();
    let spine = f.node_guid("dds_S1").unwrap();
    let (mut nodes, links) = plan.expected(&f);
    nodes.remove(&spine);
    let links: BTreeSet<_> = links
        .into_iter()
        .filter(|(a, b)| a.0 != spine && b.0 != spine)
        .collect();
    assert_eq!(found(&topo), (nodes, links));
    // One silent NodeInfo per leaf, behind the leaf's uplink to the dead spine (port 5).
    let mut via: Vec<End> = topo
        .failures
        .iter()
        .map(|fl| {
            assert_eq!((fl.query, fl.reason), (Query::NodeInfo, Reason::Timeout));
            fl.via.unwrap()
        })
        .collect();
    via.sort_unstable();
    let mut want: Vec<End> = (0..4)
        .map(|l| (f.node_guid(&format!("dds_L{l}")).unwrap(), 5))
        .collect();
    want.sort_unstable();
    assert_eq!(via, want);
    let text = topo.to_ibnetdiscover();
    let leaf0 = topo.node(want[0].0).unwrap().name();
    assert!(
        text.contains("# failed: NodeInfo along route") && text.contains(&leaf0),
        "{text}"
    );
}

/// The node GUIDs and links of an ibnetdiscover topology file (ours or
/// ibnetdiscover's): GUIDs from the `S-`/`H-` names, links from the port lines.
fn read_ibnetdiscover(text: &str) -> (BTreeSet<u64>, BTreeSet<(End, End)>) {
    let guid_of = |s: &str| {
        let a = s.find('"').unwrap() + 1;
        let name = &s[a..a + s[a..].find('"').unwrap()];
        u64::from_str_radix(&name[2..], 16).unwrap()
    };
    let (mut nodes, mut links) = (BTreeSet::new(), BTreeSet::new());
    let mut current = 0;
    for line in text.lines() {
        if line.starts_with("Switch\t") || line.starts_with("Ca\t") || line.starts_with("Rt\t") {
            current = guid_of(line);
            nodes.insert(current);
        } else if let Some(rest) = line.strip_prefix('[') {
            let (port, rest) = rest.split_once(']').unwrap();
            let remote = guid_of(rest);
            let q = rest.find("\"[").unwrap() + 2;
            let rport = rest[q..q + rest[q..].find(']').unwrap()].parse().unwrap();
            links.insert(ordered((current, port.parse().unwrap()), (remote, rport)));
        }
    }
    (nodes, links)
}

#[cfg(feature = "cli")]
fn vmad_discover_on_ibsim(f: &crate::ibsim::fabric::Fabric, args: &[&str]) -> String {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_vmad"))
        .args(["--transport", "ibsim", "discover"])
        .args(args)
        .envs(f.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// `vmad discover` finds ibnetdiscover's nodes and links on ibsim, and ibsim loads
/// what it prints as the same fabric.
#[cfg(feature = "cli")]
fn discover_on_ibsim_matches_ibnetdiscover(topology: &str, nodes: usize, links: usize) {
    use crate::ibsim::fabric::Fabric as Ibsim;
    let f = Ibsim::start(topology, &[]);
    let diags = read_ibnetdiscover(&f.exec(None, &["ibnetdiscover"]));
    assert_eq!((diags.0.len(), diags.1.len()), (nodes, links));
    let text = vmad_discover_on_ibsim(&f, &[]);
    let ours = read_ibnetdiscover(&text);
    assert_eq!(ours.0, diags.0, "node GUIDs");
    let only_ours: Vec<_> = ours.1.difference(&diags.1).collect();
    let only_diags: Vec<_> = diags.1.difference(&ours.1).collect();
    assert!(
        only_ours.is_empty() && only_diags.is_empty(),
        "links only vmad found: {only_ours:x?}; only ibnetdiscover: {only_diags:x?}"
    );
    drop(f);
    // ibsim loads vmad's output; ibnetdiscover on it sees the same fabric.
    // A directory of this topology's own: the ft234 and ft1612 tests run at once, and a
    // shared one let one test's ibsim load the other's file.
    let stem = std::path::Path::new(topology)
        .file_stem()
        .unwrap()
        .to_string_lossy();
    let dir = crate::pcap::scratch(&format!("discover-ibsim-{stem}"));
    let file = dir.join("vmad.net");
    std::fs::write(&file, &text).unwrap();
    let again = Ibsim::start_file(&file, &[]);
    let reloaded = read_ibnetdiscover(&again.exec(None, &["ibnetdiscover"]));
    assert_eq!(
        reloaded, ours,
        "ibnetdiscover on ibsim running vmad's output"
    );
}

#[test]
#[cfg(feature = "cli")]
#[ignore = "needs ibsim and infiniband-diags: run by ./scripts/test"]
fn ibsim_vmad_discover_matches_ibnetdiscover_ft234() {
    discover_on_ibsim_matches_ibnetdiscover("ft234.net", 234, 288);
}

#[test]
#[cfg(feature = "cli")]
#[ignore = "needs ibsim and infiniband-diags: run by ./scripts/test"]
fn ibsim_vmad_discover_matches_ibnetdiscover_ft1612() {
    // 64 leaves x 24 CAs, 12 spines: 1,612 nodes, counted from the file.
    let text = std::fs::read_to_string("tests/topo/ft1612.net").unwrap();
    let plan = Plan::from_net(&text);
    discover_on_ibsim_matches_ibnetdiscover("ft1612.net", plan.nodes.len(), plan.links.len());
}
