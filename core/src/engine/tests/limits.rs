//! Limits (event queue, backlog), counters, and whole-fabric runs under faults.

use super::harness::*;
use super::requests::answer_all;
use crate::engine::{AgentId, Engine, EngineConfig, Event, RecvMeta, SendRequest};
use crate::time::Instant;
use crate::types::{MadAddr, Qp};
use crate::wire::MAD_SIZE;

#[test]
fn limits_event_queue_drops_received_but_keeps_timeouts() {
    let mut e = Engine::new(EngineConfig {
        max_events: 3,
        ..EngineConfig::default()
    });
    let server = e.register(gsi_agent(0x04, 0, &[0x03])).unwrap();
    let _ = server;
    let client = e.register(gsi_agent(0x06, 0, &[])).unwrap();
    let meta = RecvMeta {
        qp: Qp::Gsi,
        src: MadAddr {
            qpn: 1,
            lid: 9,
            ..MadAddr::default()
        },
        local_qpn: None,
    };
    let now = Instant::ZERO;
    let dest = MadAddr {
        qpn: 1,
        lid: 9,
        ..MadAddr::default()
    };
    for i in 0..2 {
        let m = mad(0x06, 0x01, i);
        e.send(
            now,
            client,
            SendRequest {
                addr: dest,
                mad: &m,
                timeout_ms: 10,
                retries: 0,
            },
        )
        .unwrap();
    }
    let mut buf = [0u8; MAD_SIZE];
    while e.poll_transmit(now, &mut buf).is_some() {}
    for i in 0..5 {
        e.handle_datagram(now, meta, &mad(0x04, 0x03, i));
    }
    assert_eq!(e.pending_events(), 3);
    assert_eq!(e.stats().queue_drops, 2);
    e.handle_timeout(Instant::from_millis(10));
    assert_eq!(e.pending_events(), 5, "timeouts are queued beyond the cap");
    assert_eq!(e.stats().timeouts, 2);
    // peek leaves the event in place.
    let first = e.peek_event().cloned();
    assert_eq!(e.poll_event(), first);
}

#[test]
fn limits_backlog_holds_excess_requests_in_order() {
    let mut f = Fabric::with_config(2, LinkModel::perfect(), 40, |_, c| EngineConfig {
        max_outstanding_per_agent: 2,
        ..c
    });
    let client = f.register(0, gsi_agent(0x04, 0, &[]));
    let server = f.register(1, gsi_agent(0x04, 0, &[0x01]));
    for i in 0..6 {
        f.send(0, client, 1, &mad(0x04, 0x01, i), 1000, 0).unwrap();
    }
    f.flush();
    assert_eq!(f.trace.len(), 2, "only the limit goes out");
    let s = f.nodes[0].engine.stats();
    assert_eq!((s.backlogged, s.backlog_depth, s.outstanding), (4, 4, 6));
    for _ in 0..100 {
        if !f.step() {
            break;
        }
        answer_all(&mut f, 1, server);
    }
    let got: Vec<u64> = recvs(&f.take_events(0))
        .iter()
        .map(|(_, m)| tid_of(m) & 0xffff_ffff)
        .collect();
    assert_eq!(
        got,
        (0..6).collect::<Vec<_>>(),
        "all answered, in order, none dropped"
    );
    let s = f.nodes[0].engine.stats();
    assert_eq!((s.backlog_depth, s.outstanding), (0, 0));
}

#[test]
fn limits_unregister_drops_outstanding_silently() {
    let mut f = Fabric::with_config(2, LinkModel::perfect(), 41, |_, c| EngineConfig {
        max_outstanding_per_agent: 1,
        ..c
    });
    let client = f.register(0, gsi_agent(0x04, 0, &[]));
    for i in 0..3 {
        f.send(0, client, 1, &mad(0x04, 0x01, i), 100, 0).unwrap();
    }
    f.send(0, client, 1, &mad(0x04, 0x03, 9), 0, 0).unwrap();
    f.nodes[0].engine.unregister(client).unwrap();
    f.drive_bounded(10);
    assert!(f.trace.is_empty());
    assert!(f.take_events(0).is_empty());
    let s = f.nodes[0].engine.stats();
    assert_eq!((s.outstanding, s.backlog_depth), (0, 0));
    assert_eq!(f.nodes[0].engine.poll_timeout(), None);
}

/// 200 requests over a link with loss, duplication and reordering: each ends
/// exactly once (answered or timed out), and a run is a function of its seed.
fn faulty_run(seed: u64) -> (Vec<(usize, u64)>, u64) {
    let link = LinkModel {
        loss_ppm: 100_000,
        dup_ppm: 100_000,
        reorder_ppm: 100_000,
        delay: core::time::Duration::from_micros(50),
        jitter: core::time::Duration::from_micros(200),
    };
    let mut f = Fabric::new(2, link, seed);
    let client = f.register(0, gsi_agent(0x04, 0, &[]));
    let server: AgentId = f.register(1, gsi_agent(0x04, 0, &[0x01]));
    for i in 0..200 {
        f.send(0, client, 1, &mad(0x04, 0x01, i), 20, 3).unwrap();
    }
    let mut outcomes = Vec::new();
    for _ in 0..100_000 {
        let busy = f.step();
        answer_all(&mut f, 1, server);
        for ev in f.take_events(0) {
            match ev {
                Event::Recv { mad, .. } => outcomes.push((0, tid_of(&mad) & 0xffff_ffff)),
                Event::SendTimedOut { header, .. } => {
                    outcomes.push((1, tid_of(&header) & 0xffff_ffff))
                }
            }
        }
        if !busy {
            break;
        }
    }
    let mut tids: Vec<u64> = outcomes.iter().map(|o| o.1).collect();
    tids.sort_unstable();
    assert_eq!(
        tids,
        (0..200).collect::<Vec<_>>(),
        "each request ends exactly once"
    );
    (outcomes, f.nodes[0].engine.stats().retries)
}

#[test]
fn limits_faulty_link_every_request_ends_once_deterministically() {
    let (a, retries) = faulty_run(7);
    assert!(retries > 0);
    assert_eq!(faulty_run(7).0, a, "same seed, same run");
}
