//! Remembered ways do what the walk does, and are not followed once the fabric
//! changed under them.

use std::time::Duration;

use super::super::tests::{recv, send};
use super::super::{Fabric, FaultConfig};
use super::Shortcuts;
use crate::transport::sim::{Pkt, SimTransport};
use crate::types::GSI_QKEY;
use crate::wire::MAD_SIZE;

/// CA `{tag}a` (LID 1, the SM's) – switch `{tag}s` (LID 2) – switch `{tag}t` (LID 3) –
/// CA `{tag}b` (LID 4).
fn chain(tag: &str) -> Fabric {
    let (a, s, t, b) = (
        format!("{tag}a"),
        format!("{tag}s"),
        format!("{tag}t"),
        format!("{tag}b"),
    );
    Fabric::builder()
        .ca(&a)
        .switch(&s, 4)
        .switch(&t, 4)
        .ca(&b)
        .link(&a, 1, &s, 1)
        .link(&s, 2, &t, 1)
        .link(&t, 2, &b, 1)
        .build_private()
        .unwrap()
}

fn mad(class: u8, version: u8, method: u8, attr: u16, tid: u8) -> [u8; MAD_SIZE] {
    let mut m = [0u8; MAD_SIZE];
    m[..4].copy_from_slice(&[1, class, version, method]);
    m[15] = tid;
    m[16..18].copy_from_slice(&attr.to_be_bytes());
    m[65] = 1; // PortSelect, for the PMA's PortCounters
    m
}

/// A GMP as an open port's transport puts it on the fabric.
fn frame(mad: [u8; MAD_SIZE], dlid: u16, pkey: u16) -> Pkt {
    Pkt {
        mad,
        len: MAD_SIZE,
        slid: 0,
        dlid,
        sqp: 1,
        dqp: 1,
        sl: 0,
        pkey_index: 0,
        pkey,
        qkey: GSI_QKEY,
        spoofed: false,
        grh: None,
        hops: 0,
        duplicate: false,
        from_sa: false,
    }
}

/// Everything a frame's way can change: every port's traffic, the links' and the
/// ports' counters, and what each open port received.
fn outcome(f: &Fabric, tag: &str, ports: &mut [SimTransport]) -> Vec<String> {
    let mut seen: Vec<String> = f
        .inner
        .nodes
        .iter()
        .flat_map(|n| n.traffic.iter().map(|t| format!("{:?}", t.totals())))
        .collect();
    for (node, port) in [("a", 1), ("s", 2), ("t", 2)] {
        seen.push(format!("{:?}", f.link_stats(&format!("{tag}{node}"), port)));
    }
    for (node, port) in [("a", 1), ("s", 0), ("t", 0), ("b", 1)] {
        seen.push(format!(
            "{:?}",
            f.port_counters(&format!("{tag}{node}"), port)
        ));
    }
    for p in ports {
        while let Some((meta, m)) = recv(p) {
            seen.push(format!("{meta:?} {m:?}"));
        }
    }
    seen
}

#[test]
fn a_remembered_way_does_what_the_walk_does() {
    let walked = chain("scw");
    let short = chain("scx");
    let mut walked_ports = [
        walked.open("scwa", 1).unwrap(),
        walked.open("scwb", 1).unwrap(),
    ];
    let mut short_ports = [
        short.open("scxa", 1).unwrap(),
        short.open("scxb", 1).unwrap(),
    ];
    let (a, b) = (0, 3); // node indices
    let full = 0xffff;
    let frames = [
        (a, frame(mad(0x09, 1, 0x01, 0x10, 1), 4, full)), // to b's owner
        (a, frame(mad(0x04, 1, 0x01, 0x12, 2), 4, full)), // b's PMA answers
        (a, frame(mad(0x09, 1, 0x01, 0x10, 3), 2, full)), // a switch: no GSI
        (a, frame(mad(0x09, 1, 0x01, 0x10, 4), 9, full)), // no such LID
        (a, frame(mad(0x09, 1, 0x01, 0x10, 5), 4, 0x8001)), // P_Key refused
        (a, frame(mad(0x09, 1, 0x01, 0x10, 6), 1, full)), // its own LID
        (b, frame(mad(0x09, 1, 0x01, 0x10, 7), 1, full)), // to the SM's port's owner
        (b, frame(mad(0x03, 2, 0x01, 0x31, 8), 1, full)), // the built-in SA answers
    ];
    // Each sending port's remembered ways, as its transport keeps them.
    let mut ways = [Shortcuts::default(), Shortcuts::default()];
    for (node, f) in &frames {
        for _ in 0..3 {
            walked
                .inner
                .walk_from(*node, 1, &mut f.clone(), Duration::ZERO);
            let kept = &mut ways[usize::from(*node == b)];
            short.inner.send_from_port(*node, 1, &mut f.clone(), kept);
        }
    }
    assert_eq!(
        outcome(&walked, "scw", &mut walked_ports),
        outcome(&short, "scx", &mut short_ports)
    );
    // Only ways that end at another CA port that admits the frame were remembered:
    // one per destination LID and P_Key.
    let lids = |ways: &Shortcuts| {
        let mut lids: Vec<u16> = ways.kept.iter().flatten().map(|w| w.dlid).collect();
        lids.sort_unstable();
        lids
    };
    assert_eq!((lids(&ways[0]), lids(&ways[1])), (vec![4], vec![1]));
}

#[test]
fn a_remembered_way_is_not_followed_once_the_fabric_changed() {
    let f = chain("scy");
    let mut a = f.open("scya", 1).unwrap();
    let mut b = f.open("scyb", 1).unwrap();
    let mut tid = 0;
    let mut arrives = |a: &mut SimTransport, b: &mut SimTransport| {
        tid += 1;
        send(a, &mad(0x09, 1, 0x01, 0x10, tid), 4);
        recv(b).is_some_and(|(_, m)| m[15] == tid)
    };
    assert!(arrives(&mut a, &mut b));
    assert!(arrives(&mut a, &mut b), "along the remembered way");

    let lossy = FaultConfig {
        loss: 1.0,
        ..FaultConfig::default()
    };
    f.set_faults("scyt", 2, lossy).unwrap();
    assert!(!arrives(&mut a, &mut b), "a link that loses every frame");
    assert_eq!(f.link_stats("scyt", 2).unwrap().lost, 1);
    f.set_faults("scyt", 2, FaultConfig::default()).unwrap();
    assert!(arrives(&mut a, &mut b));

    f.set_link("scys", 2, false).unwrap();
    assert!(!arrives(&mut a, &mut b), "a link that is down");
    f.set_link("scys", 2, true).unwrap();
    assert!(arrives(&mut a, &mut b), "the link back up and swept");

    f.inner.nodes[3].conf.write().ports[1].pkeys = vec![0x8001];
    assert!(
        !arrives(&mut a, &mut b),
        "a P_Key table that no longer admits it"
    );
    assert_eq!(f.port_counters("scyb", 1).unwrap().pkey_violations, 1);
}
