//! Requests in: routing, validation, the engine's own answers, duplicates.

use core::time::Duration;

use super::harness::*;
use super::requests::answer_all;
use crate::engine::{AgentSpec, Event};
use crate::types::Qp;
use crate::wire::mad::MadStatus;

fn status(m: &[u8]) -> u16 {
    u16::from_be_bytes([m[4], m[5]])
}

#[test]
fn requests_in_routed_by_class_version_and_method() {
    let mut f = Fabric::new(2, LinkModel::perfect(), 30);
    let get = f.register(1, gsi_agent(0x04, 0, &[0x01]));
    let set = f.register(1, gsi_agent(0x04, 0, &[0x02]));
    let mut v2 = gsi_agent(0x04, 0, &[0x01]);
    v2.class_version = 2;
    let get_v2 = f.register(1, v2);
    f.inject(0, 1, Qp::Gsi, &mad(0x04, 0x01, 1));
    f.inject(0, 1, Qp::Gsi, &mad(0x04, 0x02, 2));
    let mut m = mad(0x04, 0x01, 3);
    m[2] = 2;
    f.inject(0, 1, Qp::Gsi, &m);
    let who: Vec<_> = recvs(&f.take_events(1))
        .into_iter()
        .map(|(a, _)| a)
        .collect();
    assert_eq!(who, vec![get, set, get_v2]);
}

#[test]
fn requests_in_vendor_range2_routed_by_oui() {
    let mut f = Fabric::new(2, LinkModel::perfect(), 31);
    let a = f.register(
        1,
        AgentSpec {
            oui: 0x0002c9,
            ..gsi_agent(0x30, 0, &[0x01])
        },
    );
    let b = f.register(
        1,
        AgentSpec {
            oui: 0x00066a,
            ..gsi_agent(0x30, 0, &[0x01])
        },
    );
    let with_oui = |oui: u32, tid| {
        let mut m = mad(0x30, 0x01, tid);
        m[37..40].copy_from_slice(&oui.to_be_bytes()[1..]);
        m
    };
    f.inject(0, 1, Qp::Gsi, &with_oui(0x00066a, 1));
    f.inject(0, 1, Qp::Gsi, &with_oui(0x0002c9, 2));
    let who: Vec<_> = recvs(&f.take_events(1))
        .into_iter()
        .map(|(a, _)| a)
        .collect();
    assert_eq!(who, vec![b, a]);
}

#[test]
fn requests_in_unclaimed_get_answered_unsupported() {
    let mut f = Fabric::new(2, LinkModel::perfect(), 32);
    let client = f.register(0, gsi_agent(0x04, 0, &[]));
    f.send(0, client, 1, &mad(0x04, 0x01, 1), 100, 0).unwrap();
    f.advance(Duration::from_millis(1));
    let got = recvs(&f.take_events(0));
    assert_eq!(got.len(), 1);
    let resp = &got[0].1;
    assert_eq!(resp[3], 0x81);
    assert_eq!(status(resp), MadStatus::UNSUPPORTED_METHOD_ATTR.0);
    assert_eq!(
        resp[64..],
        mad(0x04, 0x01, 1)[64..],
        "the request turned around"
    );
    assert_eq!(f.nodes[1].engine.stats().auto_replies, 1);
    // An unsupported class version gets the same answer (the kernel has no BAD_VERSION path).
    let mut m = mad(0x04, 0x02, 2);
    m[2] = 0x90;
    f.inject(0, 1, Qp::Gsi, &m);
    assert_eq!(f.nodes[1].engine.stats().auto_replies, 2);
}

#[test]
fn requests_in_unclaimed_dr_smp_answer_returns() {
    let mut f = Fabric::new(2, LinkModel::perfect(), 33);
    let mut smp = mad(0x81, 0x01, 9);
    smp[6] = 2; // hop pointer: arrived through one switch (hop count 1)
    smp[7] = 1;
    smp[32..36].fill(0xff);
    f.inject(0, 1, Qp::Smi, &smp);
    let w = f.trace.last().expect("answer sent");
    assert_eq!(w.tx.qp, Qp::Smi);
    assert_eq!(w.mad[3], 0x81);
    assert_eq!(
        status(&w.mad[..]),
        0x800c,
        "direction bit + UNSUPPORTED_METHOD_ATTR"
    );
    assert_eq!(w.mad[6], 1, "hop pointer stepped back for the return path");
}

#[test]
fn requests_in_unclaimed_other_methods_dropped() {
    let mut f = Fabric::new(2, LinkModel::perfect(), 34);
    for (i, method) in [0x03u8, 0x05, 0x06, 0x12].into_iter().enumerate() {
        f.inject(0, 1, Qp::Gsi, &mad(0x04, method, i as u64));
    }
    assert!(f.trace.is_empty());
    assert_eq!(f.nodes[1].engine.stats().dropped_unclaimed, 4);
}

#[test]
fn requests_in_invalid_mads_dropped() {
    let mut f = Fabric::new(2, LinkModel::perfect(), 35);
    let get = f.register(1, gsi_agent(0x04, 0, &[0x01]));
    let _ = get;
    let mut bad_version = mad(0x04, 0x01, 1);
    bad_version[0] = 2;
    f.inject(0, 1, Qp::Gsi, &bad_version);
    f.inject(0, 1, Qp::Smi, &mad(0x04, 0x01, 2)); // GMP on QP0
    f.inject(0, 1, Qp::Gsi, &mad(0x01, 0x01, 3)); // SMP on QP1
    f.inject(0, 1, Qp::Gsi, &mad(0x04, 0x01, 4)[..100]); // short
    f.inject(0, 1, Qp::Gsi, &mad(0x07, 0x01, 5)); // CM Get of a non-ClassPortInfo attribute
    assert!(f.take_events(1).is_empty());
    assert!(f.trace.is_empty(), "no answers to invalid MADs");
    assert_eq!(f.nodes[1].engine.stats().dropped_invalid, 5);
    // CM Send and CM ClassPortInfo Get pass validation (and are unclaimed here).
    f.inject(0, 1, Qp::Gsi, &mad(0x07, 0x03, 6));
    let mut cpi = mad(0x07, 0x01, 7);
    cpi[16..18].copy_from_slice(&1u16.to_be_bytes());
    f.inject(0, 1, Qp::Gsi, &cpi);
    let s = f.nodes[1].engine.stats();
    assert_eq!(
        (s.dropped_invalid, s.dropped_unclaimed, s.auto_replies),
        (5, 1, 1)
    );
}

#[test]
fn requests_in_duplicates_not_delivered_while_unanswered() {
    let mut f = Fabric::new(2, LinkModel::perfect(), 36);
    let server = f.register(1, gsi_agent(0x04, 0, &[0x01]));
    f.inject(0, 1, Qp::Gsi, &mad(0x04, 0x01, 1));
    f.inject(0, 1, Qp::Gsi, &mad(0x04, 0x01, 1));
    assert_eq!(f.nodes[1].events.len(), 1);
    assert_eq!(f.nodes[1].engine.stats().dropped_duplicates, 1);
    // Answered: a retransmission (the response was lost) is delivered again.
    assert_eq!(answer_all(&mut f, 1, server), 1);
    f.inject(0, 1, Qp::Gsi, &mad(0x04, 0x01, 1));
    assert_eq!(recvs(&f.take_events(1)).len(), 1);
    // Unanswered past the window: delivered again.
    f.advance(Duration::from_secs(11));
    f.inject(0, 1, Qp::Gsi, &mad(0x04, 0x01, 1));
    assert_eq!(recvs(&f.take_events(1)).len(), 1);
    // Sends (no response expected) are never filtered.
    let mut send = mad(0x04, 0x03, 5);
    let _ = f.register(1, gsi_agent(0x04, 0, &[0x03]));
    f.inject(0, 1, Qp::Gsi, &send);
    send[64] ^= 1;
    f.inject(0, 1, Qp::Gsi, &send);
    assert_eq!(recvs(&f.take_events(1)).len(), 2);
}

#[test]
fn requests_in_retry_after_the_application_took_the_request_is_delivered() {
    // Read and not answered (OpenSM's SA ignores the queries of its first sweep):
    // the retry is the requester's only way to an answer, so it is delivered.
    let mut f = Fabric::new(2, LinkModel::perfect(), 39);
    let server = f.register(1, gsi_agent(0x04, 0, &[0x01]));
    f.inject(0, 1, Qp::Gsi, &mad(0x04, 0x01, 1));
    let read = f.take_events(1);
    assert_eq!(recvs(&read).len(), 1);
    for e in &read {
        f.nodes[1].engine.taken(e);
    }
    assert_eq!(
        f.nodes[1].engine.footprint().dedup,
        0,
        "forgotten once taken"
    );
    f.inject(0, 1, Qp::Gsi, &mad(0x04, 0x01, 1));
    let again = f.take_events(1);
    assert_eq!(recvs(&again), vec![(server, recvs(&read)[0].1.clone())]);
    assert_eq!(f.nodes[1].engine.stats().dropped_duplicates, 0);
    // Taking a response or a timeout report forgets nothing and changes nothing.
    let before = f.nodes[1].engine.footprint();
    let addr = f.addr(0, Qp::Gsi);
    f.nodes[1].engine.taken(&Event::SendTimedOut {
        agent: server,
        addr,
        header: [0; 24],
    });
    assert_eq!(f.nodes[1].engine.footprint(), before);
}

#[test]
fn requests_in_client_only_agent_gets_responses_only() {
    let mut f = Fabric::new(2, LinkModel::perfect(), 37);
    let client = f.register(1, gsi_agent(0x04, 0, &[]));
    f.inject(0, 1, Qp::Gsi, &mad(0x04, 0x01, 1));
    assert!(f
        .take_events(1)
        .iter()
        .all(|e| !matches!(e, Event::Recv { .. })));
    let _ = client;
}

#[test]
fn requests_in_retry_of_a_request_the_full_queue_dropped_is_delivered() {
    // The queue holds one event and nobody drains it: a Send fills it, the Get
    // after it is dropped, never seen by the agent, so its retry must not count
    // as a duplicate.
    let mut e = crate::engine::Engine::new(crate::engine::EngineConfig {
        max_events: 1,
        ..Default::default()
    });
    let server = e.register(gsi_agent(0x04, 0, &[0x01, 0x03])).unwrap();
    let meta = crate::engine::RecvMeta {
        qp: Qp::Gsi,
        src: crate::types::MadAddr {
            qpn: 1,
            lid: 1,
            ..Default::default()
        },
        local_qpn: None,
    };
    let now = crate::time::Instant::ZERO;
    e.handle_datagram(now, meta, &mad(0x04, 0x03, 1));
    e.handle_datagram(now, meta, &mad(0x04, 0x01, 2));
    assert_eq!(e.stats().queue_drops, 1);
    assert!(matches!(e.poll_event(), Some(Event::Recv { .. })));
    e.handle_datagram(now, meta, &mad(0x04, 0x01, 2));
    match e.poll_event() {
        Some(Event::Recv { agent, mad, .. }) => assert_eq!((agent, tid_of(&mad)), (server, 2)),
        other => panic!("the retry was not delivered: {other:?}"),
    }
    assert_eq!(e.stats().dropped_duplicates, 0);
}

#[test]
fn requests_in_answer_from_another_agent_lets_the_retry_through() {
    // libibumad lets any agent of the port send a response; once one is sent,
    // the requester's retry (its response was lost) is delivered again.
    let mut f = Fabric::new(2, LinkModel::perfect(), 38);
    let _server = f.register(1, gsi_agent(0x04, 0, &[0x01]));
    let other = f.register(1, gsi_agent(0x04, 0, &[]));
    f.inject(0, 1, Qp::Gsi, &mad(0x04, 0x01, 1));
    assert_eq!(answer_all(&mut f, 1, other), 1);
    f.inject(0, 1, Qp::Gsi, &mad(0x04, 0x01, 1));
    assert_eq!(recvs(&f.take_events(1)).len(), 1, "the retry is delivered");
    assert_eq!(f.nodes[1].engine.stats().dropped_duplicates, 0);
}
