//! Requests out and responses in: TID stamping, padding, size and duplicate
//! checks, matching by TID + class + peer, early and late responses.

use core::time::Duration;

use super::harness::*;
use crate::engine::{AgentId, Event};
use crate::types::{GrhAddr, MadAddr, Qp};
use crate::wire::MAD_SIZE;
use crate::Error;

fn ms(x: u64) -> Duration {
    Duration::from_millis(x)
}

/// Node 0 a Perf client, node 1 a Perf server of Get; returns (client, server).
fn pair(seed: u64) -> (Fabric, AgentId, AgentId) {
    let mut f = Fabric::new(2, LinkModel::perfect(), seed);
    let client = f.register(0, gsi_agent(0x04, 0, &[]));
    let server = f.register(1, gsi_agent(0x04, 0, &[0x01]));
    (f, client, server)
}

/// Answer every request node `node` received, echoing it back with the R bit.
pub(super) fn answer_all(f: &mut Fabric, node: usize, agent: AgentId) -> usize {
    let events = f.take_events(node);
    let mut n = 0;
    for ev in events {
        if let Event::Recv { addr, mad, .. } = ev {
            if mad[3] & 0x80 == 0 {
                let mut resp = mad.clone();
                resp[3] |= 0x80;
                let dest = MadAddr {
                    qkey: crate::types::GSI_QKEY,
                    ..addr
                };
                f.send_to(node, agent, dest, &resp, 0, 0).unwrap();
                n += 1;
            }
        }
    }
    n
}

#[test]
fn requests_out_tid_high_word_is_agent() {
    let (mut f, client, _) = pair(11);
    let hi = u64::from(f.nodes[0].engine.hi_tid(client).unwrap());
    f.send(
        0,
        client,
        1,
        &mad(0x04, 0x01, 0xdead_beef_0000_1234),
        100,
        0,
    )
    .unwrap();
    f.flush();
    assert_eq!(tid_of(&f.trace[0].mad[..]), hi << 32 | 0x1234);
}

#[test]
fn requests_out_responses_keep_caller_tid() {
    let (mut f, client, server) = pair(12);
    f.send(0, client, 1, &mad(0x04, 0x01, 5), 100, 0).unwrap();
    f.advance(ms(1));
    let req = recvs(&f.take_events(1)).pop().unwrap().1;
    let mut resp = req.clone();
    resp[3] = 0x81;
    f.send(1, server, 0, &resp, 0, 0).unwrap();
    f.flush();
    assert_eq!(tid_of(&f.trace.last().unwrap().mad[..]), tid_of(&req));
}

#[test]
fn requests_out_short_mad_zero_padded() {
    let (mut f, client, _) = pair(13);
    let m = mad(0x04, 0x01, 1);
    f.send(0, client, 1, &m[..100], 0, 0).unwrap();
    f.flush();
    let sent = &f.trace[0].mad;
    assert_eq!(f.trace[0].tx.len, MAD_SIZE);
    assert_eq!(sent[16..100], m[16..100]);
    assert!(sent[100..].iter().all(|&b| b == 0));
}

#[test]
fn requests_out_size_and_agent_checks() {
    let (mut f, client, _) = pair(14);
    let big = vec![0u8; 300];
    let err = f.send(0, client, 1, &big, 0, 0).unwrap_err();
    assert!(
        matches!(
            err,
            Error::MessageTooLarge {
                len: 300,
                limit: 256
            }
        ),
        "{err}"
    );
    // An RMPP-class agent without RMPP cannot send more than 256 bytes either.
    let sa = f.register(0, gsi_agent(0x03, 0, &[]));
    let mut long = vec![0u8; 1000];
    long[..MAD_SIZE].copy_from_slice(&mad(0x03, 0x12, 1));
    long[26] = 1; // RMPPFlags.Active
    assert!(matches!(
        f.send(0, sa, 1, &long, 100, 0),
        Err(Error::MessageTooLarge { .. })
    ));
    assert!(matches!(
        f.send(0, client, 1, &[1u8; 20], 0, 0),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        f.send(0, AgentId(9), 1, &mad(0x04, 1, 1), 0, 0),
        Err(Error::UnknownAgent(9))
    ));
}

#[test]
fn requests_out_duplicate_outstanding_refused() {
    let (mut f, client, _) = pair(15);
    f.send(0, client, 1, &mad(0x04, 0x01, 7), 100, 0).unwrap();
    let err = f
        .send(0, client, 1, &mad(0x04, 0x01, 7), 100, 0)
        .unwrap_err();
    assert!(matches!(err, Error::DuplicateRequest(_)), "{err}");
    // Another class with the same TID is a different request.
    let dm = f.register(0, gsi_agent(0x06, 0, &[]));
    let _ = dm;
    f.send(0, client, 1, &mad(0x04, 0x01, 8), 100, 0).unwrap();
    // Once it completes, the TID is free again.
    f.drive_bounded(100);
    f.send(0, client, 1, &mad(0x04, 0x01, 7), 100, 0).unwrap();
}

#[test]
fn requests_out_retries_resend_same_tid() {
    let (mut f, client, server) = pair(16);
    let mut seen = 0;
    f.filter = Some(Box::new(move |w| {
        if w.from == 0 {
            seen += 1;
            return seen > 2; // lose the first two attempts
        }
        true
    }));
    f.send(0, client, 1, &mad(0x04, 0x01, 9), 50, 3).unwrap();
    for _ in 0..200 {
        if !f.step() {
            break;
        }
        answer_all(&mut f, 1, server);
    }
    let from_client: Vec<u64> = f
        .trace
        .iter()
        .filter(|w| w.from == 0)
        .map(|w| tid_of(&w.mad[..]))
        .collect();
    assert_eq!(from_client.len(), 3);
    assert!(from_client.iter().all(|&t| t == from_client[0]));
    assert_eq!(f.nodes[0].engine.stats().retries, 2);
    assert_eq!(recvs(&f.take_events(0)).len(), 1);
}

#[test]
fn responses_in_round_trip_completes_request() {
    let (mut f, client, server) = pair(17);
    f.send(0, client, 1, &mad(0x04, 0x01, 3), 100, 1).unwrap();
    f.advance(ms(1));
    assert_eq!(answer_all(&mut f, 1, server), 1);
    f.drive_bounded(10);
    let got = recvs(&f.take_events(0));
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].0, client);
    assert_eq!(got[0].1[3], 0x81);
    let s = f.nodes[0].engine.stats();
    assert_eq!((s.outstanding, s.timeouts, s.delivered), (0, 0, 1));
    assert_eq!(
        f.nodes[0].engine.poll_timeout(),
        None,
        "no timer left behind"
    );
}

#[test]
fn responses_in_no_response_expected_dropped() {
    let (mut f, client, server) = pair(18);
    f.send(0, client, 1, &mad(0x04, 0x01, 3), 0, 0).unwrap();
    f.drive_bounded(10);
    answer_all(&mut f, 1, server);
    f.drive_bounded(10);
    assert!(recvs(&f.take_events(0)).is_empty());
    assert_eq!(f.nodes[0].engine.stats().unmatched_responses, 1);
}

#[test]
fn responses_in_unmatched_and_late_dropped() {
    let (mut f, client, _) = pair(19);
    let hi = u64::from(f.nodes[0].engine.hi_tid(client).unwrap());
    // Unknown TID (right agent).
    f.inject(1, 0, Qp::Gsi, &mad(0x04, 0x81, hi << 32 | 77));
    // Unknown agent.
    f.inject(1, 0, Qp::Gsi, &mad(0x04, 0x81, (hi ^ 1) << 32 | 77));
    // Late: the request timed out first.
    f.send(0, client, 1, &mad(0x04, 0x01, 78), 10, 0).unwrap();
    f.drive_bounded(20);
    assert!(matches!(f.take_events(0)[..], [Event::SendTimedOut { .. }]));
    f.inject(1, 0, Qp::Gsi, &mad(0x04, 0x81, hi << 32 | 78));
    assert!(f.take_events(0).is_empty());
    assert_eq!(f.nodes[0].engine.stats().unmatched_responses, 3);
}

#[test]
fn responses_in_must_come_from_the_peer() {
    let mut f = Fabric::new(3, LinkModel::perfect(), 20);
    let client = f.register(0, gsi_agent(0x04, 0, &[]));
    let hi = u64::from(f.nodes[0].engine.hi_tid(client).unwrap());
    f.send(0, client, 1, &mad(0x04, 0x01, 5), 100, 0).unwrap();
    f.flush();
    // Node 2 answers a request sent to node 1: not a match.
    f.inject(2, 0, Qp::Gsi, &mad(0x04, 0x81, hi << 32 | 5));
    assert!(recvs(&f.take_events(0)).is_empty());
    f.inject(1, 0, Qp::Gsi, &mad(0x04, 0x81, hi << 32 | 5));
    assert_eq!(recvs(&f.take_events(0)).len(), 1);
}

#[test]
fn responses_in_grh_matched_by_gid() {
    let mut f = Fabric::new(2, LinkModel::perfect(), 21);
    let client = f.register(0, gsi_agent(0x04, 0, &[]));
    let server = f.register(1, gsi_agent(0x04, 0, &[0x01]));
    let mut addr = f.addr(1, Qp::Gsi);
    addr.lid = 0x99; // routed by GID
    addr.grh = Some(GrhAddr {
        gid: gid_of(1),
        hop_limit: 64,
        ..GrhAddr::default()
    });
    f.send_to(0, client, addr, &mad(0x04, 0x01, 5), 100, 0)
        .unwrap();
    f.advance(ms(1));
    answer_all(&mut f, 1, server);
    f.drive_bounded(10);
    let ev = f.take_events(0);
    assert_eq!(recvs(&ev).len(), 1, "{ev:?}");
}

#[test]
fn responses_in_dr_smp_ignores_peer_address() {
    let mut f = Fabric::new(3, LinkModel::perfect(), 22);
    let sm = f.register(
        0,
        crate::engine::AgentSpec {
            qp: Qp::Smi,
            ..gsi_agent(0x81, 0, &[])
        },
    );
    let hi = u64::from(f.nodes[0].engine.hi_tid(sm).unwrap());
    let mut req = mad(0x81, 0x01, 5);
    req[32..36].fill(0xff); // permissive DrSLID / DrDLID, hop count 0
    let dest = MadAddr {
        lid: 0xffff,
        ..f.addr(1, Qp::Smi)
    };
    f.send_to(0, sm, dest, &req, 100, 0).unwrap();
    f.flush();
    assert_eq!(f.trace[0].mad[6], 1, "hop pointer advanced on send");
    let mut resp = mad(0x81, 0x81, hi << 32 | 5);
    resp[4] = 0x80; // direction: returning
    resp[32..36].fill(0xff);
    f.inject(2, 0, Qp::Smi, &resp); // from some other LID: DR matches anyway
    assert_eq!(recvs(&f.take_events(0)).len(), 1);
}

#[test]
fn responses_in_early_response_matches() {
    let (mut f, client, _) = pair(23);
    let hi = u64::from(f.nodes[0].engine.hi_tid(client).unwrap());
    let now = f.now;
    let req = crate::engine::SendRequest {
        addr: f.addr(1, Qp::Gsi),
        mad: &mad(0x04, 0x01, 6),
        timeout_ms: 100,
        retries: 0,
    };
    f.nodes[0].engine.send(now, client, req).unwrap();
    // The response overtakes the send completion (before poll_transmit).
    let meta = crate::engine::RecvMeta {
        qp: Qp::Gsi,
        src: MadAddr {
            qpn: 1,
            lid: 2,
            ..MadAddr::default()
        },
        local_qpn: None,
    };
    f.nodes[0]
        .engine
        .handle_datagram(now, meta, &mad(0x04, 0x81, hi << 32 | 6));
    let ev = f.nodes[0].engine.poll_event();
    assert!(matches!(ev, Some(Event::Recv { .. })), "{ev:?}");
    let mut buf = [0u8; MAD_SIZE];
    assert!(
        f.nodes[0].engine.poll_transmit(now, &mut buf).is_none(),
        "completed request not sent"
    );
    assert_eq!(f.nodes[0].engine.poll_timeout(), None);
    assert_eq!(f.nodes[0].engine.stats().outstanding, 0);
}
