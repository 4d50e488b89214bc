//! RMPP through whole engines: sessions, addressing, delivery, aborts,
//! timeouts, dual-sided RMPP, and agents that do not run RMPP in the engine.

use core::time::Duration;

use super::harness::*;
use crate::engine::{AgentId, AgentSpec, EngineConfig, Event, RmppAbort};
use crate::types::Qp;
use crate::wire::rmpp::RmppStatus;
use crate::wire::MAD_SIZE;
use crate::Error;

const SA_HDR: usize = 56;

/// An SA message: 56 header bytes (RMPP Active) then `data_len` patterned bytes.
fn sa_message(method: u8, tid: u64, data_len: usize) -> Vec<u8> {
    let mut m = vec![0u8; SA_HDR + data_len];
    let n = MAD_SIZE.min(m.len());
    m[..n].copy_from_slice(&mad(0x03, method, tid)[..n]);
    m[24] = 1;
    m[26] = 1;
    m[25] = 1;
    for (i, b) in m[SA_HDR..].iter_mut().enumerate() {
        *b = (i * 7 % 251) as u8;
    }
    m
}

/// Node 0: SA client (RMPP 1, client-only). Node 1: SA server of GetTable and GetMulti.
fn sa_pair(link: LinkModel, seed: u64, rmpp_client: u8) -> (Fabric, AgentId, AgentId) {
    let mut f = Fabric::new(2, link, seed);
    let client = f.register(0, gsi_agent(0x03, rmpp_client, &[]));
    let server = f.register(1, gsi_agent(0x03, 1, &[0x12, 0x14]));
    (f, client, server)
}

/// Run until idle, letting node 1 answer each request with a `resp_len`-byte RMPP response.
fn serve(f: &mut Fabric, server: AgentId, resp_len: usize, steps: usize) -> Vec<Vec<u8>> {
    let mut requests = Vec::new();
    for _ in 0..steps {
        let busy = f.step();
        for (_, m) in recvs(&f.take_events(1)) {
            let mut resp = sa_message(m[3] | 0x80, tid_of(&m), resp_len);
            resp[64] = m[64]; // echo something of the request
            let src = f.addr(0, Qp::Gsi);
            f.send_to(1, server, src, &resp, 0, 3).unwrap();
            requests.push(m);
        }
        if !busy {
            return requests;
        }
    }
    panic!("livelock after {steps} steps");
}

#[test]
fn rmpp_response_reassembled_and_completes_request() {
    let (mut f, client, server) = sa_pair(LinkModel::perfect(), 50, 1);
    let mut req = mad(0x03, 0x12, 1).to_vec();
    req[24] = 1; // RMPP version, not Active: a plain single MAD
    f.send(0, client, 1, &req, 1000, 1).unwrap();
    serve(&mut f, server, 10_000, 10_000);
    let got = recvs(&f.take_events(0));
    assert_eq!(got.len(), 1);
    let msg = &got[0].1;
    assert_eq!(msg.len(), SA_HDR + 10_000);
    let want = sa_message(0x92, 1, 10_000);
    assert!(
        msg[SA_HDR + 9..] == want[SA_HDR + 9..],
        "data reassembled in order"
    );
    let s = f.nodes[0].engine.stats();
    assert_eq!((s.rmpp_reassembled, s.outstanding, s.timeouts), (1, 0, 0));
    assert!(f.nodes.iter().all(|n| n.engine.stats().rmpp_aborts == 0));
}

#[test]
fn rmpp_lossy_link_transfers_complete() {
    let link = LinkModel {
        loss_ppm: 50_000,
        dup_ppm: 50_000,
        reorder_ppm: 50_000,
        delay: Duration::from_micros(20),
        jitter: Duration::from_micros(100),
    };
    let (mut f, client, server) = sa_pair(link, 51, 1);
    for i in 0..5 {
        let mut req = mad(0x03, 0x12, i).to_vec();
        req[24] = 1;
        f.send(0, client, 1, &req, 60_000, 5).unwrap();
    }
    serve(&mut f, server, 20_000, 200_000);
    let got = recvs(&f.take_events(0));
    let mut tids: Vec<u64> = got.iter().map(|(_, m)| tid_of(m) & 0xffff_ffff).collect();
    tids.sort_unstable();
    assert_eq!(tids, vec![0, 1, 2, 3, 4]);
    assert!(got.iter().all(|(_, m)| m.len() == SA_HDR + 20_000));
}

#[test]
fn rmpp_request_and_dual_sided_response() {
    let (mut f, client, server) = sa_pair(LinkModel::perfect(), 52, 1);
    let req = sa_message(0x14, 9, 3000); // GetMulti, 15 segments
    f.send(0, client, 1, &req, 5000, 2).unwrap();
    let requests = serve(&mut f, server, 5000, 10_000);
    assert_eq!(requests.len(), 1);
    assert_eq!(
        requests[0].len(),
        SA_HDR + 3000,
        "the request was reassembled"
    );
    let got = recvs(&f.take_events(0));
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].1.len(), SA_HDR + 5000);
    assert_eq!(got[0].1[3], 0x94);
    // The requester sent a dual-sided ACK (segment 0) once its request was ACKed.
    let ds_ack = f
        .trace
        .iter()
        .any(|w| w.from == 0 && w.mad[25] == 2 && w.mad[28..32] == [0; 4] && w.mad[3] == 0x14);
    assert!(ds_ack, "no DS ACK from the requester");
    assert_eq!(f.nodes[0].engine.stats().outstanding, 0);
}

#[test]
fn rmpp_ack_for_unknown_session_dropped() {
    let (mut f, _, _) = sa_pair(LinkModel::perfect(), 53, 1);
    let mut ack = sa_message(0x12, 5, 0);
    ack.resize(MAD_SIZE, 0);
    ack[25] = 2; // ACK
    f.inject(0, 1, Qp::Gsi, &ack);
    assert_eq!(f.nodes[1].engine.stats().dropped_rmpp_unknown, 1);
    assert!(f.trace.is_empty());
}

#[test]
fn rmpp_abort_from_peer_reported() {
    let (mut f, _, server) = sa_pair(LinkModel::perfect(), 54, 1);
    let resp = sa_message(0x92, 7, 5000);
    f.send(1, server, 0, &resp, 0, 3).unwrap();
    f.flush();
    // The receiver's ABORT carries the request method (R bit flipped back).
    let mut abort = sa_message(0x12, 7, 0);
    abort.resize(MAD_SIZE, 0);
    abort[25] = 4;
    abort[27] = 127;
    f.inject(0, 1, Qp::Gsi, &abort);
    assert_eq!(f.take_events(1), []);
    let aborts = f.take_aborts(1);
    assert!(
        matches!(aborts[..], [RmppAbort { agent, tid: 7, status: RmppStatus::Unspecified, sending: true }] if agent == server),
        "{aborts:?}"
    );
    assert_eq!(f.nodes[1].engine.last_rmpp_abort(), aborts.last().copied());
    assert_eq!(f.nodes[1].engine.stats().rmpp_aborts, 1);
    f.drive_bounded(1000);
    assert_eq!(
        f.nodes[1].engine.poll_timeout(),
        None,
        "nothing left running"
    );
}

#[test]
fn rmpp_sender_ack_timeouts_report_timed_out() {
    let (mut f, _, server) = sa_pair(LinkModel::perfect(), 55, 1);
    f.filter = Some(Box::new(|w| w.from == 1)); // node 0 never ACKs
    let resp = sa_message(0x92, 8, 5000);
    f.send(1, server, 0, &resp, 0, 2).unwrap();
    f.drive_bounded(10_000);
    let ev = f.take_events(1);
    match &ev[..] {
        [Event::SendTimedOut { header, .. }] => assert_eq!(tid_of(header), 8),
        other => panic!("{other:?}"),
    }
    // kernel: 2 s ACK timer, 1 + 2 windows sent.
    assert_eq!(f.now, crate::time::Instant::from_millis(6000));
}

#[test]
fn rmpp_version0_agent_gets_first_segment_only() {
    let (mut f, client, server) = sa_pair(LinkModel::perfect(), 56, 0);
    f.send(0, client, 1, &mad(0x03, 0x12, 3), 1000, 0).unwrap();
    serve(&mut f, server, 3000, 10_000);
    // The engine does not ACK for it, so only segment 1 comes: once matched,
    // then its retransmissions as unmatched RMPP-active MADs (kernel
    // ib_mad_complete_recv delivers those to agents without kernel RMPP).
    let got = recvs(&f.take_events(0));
    assert_eq!(got.len(), 4, "first send + 3 retries");
    assert!(got
        .iter()
        .all(|(_, m)| m.len() == MAD_SIZE && m[28..32] == [0, 0, 0, 1]));
    assert_eq!(
        f.nodes[1].engine.stats().timeouts,
        1,
        "the response sender gave up"
    );
}

#[test]
fn rmpp_user_rmpp_agent_gets_mads_untouched() {
    let mut f = Fabric::new(2, LinkModel::perfect(), 57);
    let spec = AgentSpec {
        user_rmpp: true,
        ..gsi_agent(0x03, 1, &[0x12])
    };
    let user = f.register(1, spec);
    let mut seg = sa_message(0x12, 4, 200);
    seg.truncate(MAD_SIZE);
    seg[26] = 1 | 2; // Active | First
    seg[31] = 1;
    f.inject(0, 1, Qp::Gsi, &seg);
    seg[26] = 1 | 4;
    seg[31] = 2;
    f.inject(0, 1, Qp::Gsi, &seg);
    let got = recvs(&f.take_events(1));
    assert_eq!(got.len(), 2, "both segments, raw, no duplicate filter");
    assert!(got.iter().all(|(a, m)| *a == user && m.len() == MAD_SIZE));
    assert!(f.trace.is_empty(), "no ACK from the engine");
    // It sends its own segments: over 256 bytes is refused.
    let big = sa_message(0x92, 4, 1000);
    assert!(matches!(
        f.send(1, user, 0, &big, 0, 0),
        Err(Error::MessageTooLarge { .. })
    ));
}

#[test]
fn rmpp_reassemblies_per_peer_limited() {
    let mut f = Fabric::with_config(2, LinkModel::perfect(), 58, |_, c| EngineConfig {
        max_reassemblies_per_peer: 1,
        ..c
    });
    f.register(1, gsi_agent(0x03, 1, &[0x14]));
    for tid in [1, 2] {
        let mut seg = sa_message(0x14, tid, 200);
        seg.truncate(MAD_SIZE);
        seg[26] = 1 | 2;
        seg[31] = 1;
        seg[32..36].copy_from_slice(&(220u32 * 3).to_be_bytes());
        f.inject(0, 1, Qp::Gsi, &seg);
    }
    assert_eq!(f.nodes[1].engine.stats().dropped_rmpp_limit, 1);
}

#[test]
fn rmpp_send_size_checks() {
    let mut f = Fabric::with_config(2, LinkModel::perfect(), 59, |_, c| EngineConfig {
        rmpp: crate::engine::rmpp::RmppConfig {
            max_message: 4096,
            ..c.rmpp
        },
        ..c
    });
    let client = f.register(0, gsi_agent(0x03, 1, &[]));
    let err = f
        .send(0, client, 1, &sa_message(0x14, 1, 5000), 100, 0)
        .unwrap_err();
    assert!(
        matches!(err, Error::MessageTooLarge { limit: 4096, .. }),
        "{err}"
    );
    let short = &sa_message(0x14, 1, 0)[..40];
    assert!(matches!(
        f.send(0, client, 1, short, 100, 0),
        Err(Error::InvalidArgument(_))
    ));
    // A 56-byte message (no data) is one segment.
    f.send(0, client, 1, &sa_message(0x14, 2, 0), 100, 0)
        .unwrap();
    f.flush();
    assert_eq!(f.trace.len(), 1);
}

/// First segment of a 3-segment GetMulti request from node 0.
fn first_of_three(tid: u64) -> Vec<u8> {
    let mut seg = sa_message(0x14, tid, 200);
    seg.truncate(MAD_SIZE);
    seg[26] = 1 | 2; // Active | First
    seg[28..32].copy_from_slice(&1u32.to_be_bytes());
    seg[32..36].copy_from_slice(&(220u32 * 3).to_be_bytes());
    seg
}

#[test]
fn rmpp_receiver_total_time_abort_reported() {
    let mut f = Fabric::new(2, LinkModel::perfect(), 60);
    let server = f.register(1, gsi_agent(0x03, 1, &[0x14]));
    f.inject(0, 1, Qp::Gsi, &first_of_three(3));
    // The first segment is ACKed at once, opening the window (kernel start_rmpp).
    assert!(matches!(&f.trace[..], [w] if w.mad[25] == 2 && w.to == Some(0)));
    f.advance(Duration::from_secs(41));
    assert_eq!(f.take_events(1), []);
    let aborts = f.take_aborts(1);
    assert!(
        matches!(aborts[..], [RmppAbort { agent, tid: 3, status: RmppStatus::TotalTimeTooLong, sending: false }] if agent == server),
        "{aborts:?}"
    );
    let abort = f.trace.last().expect("ABORT sent");
    assert_eq!((abort.to, abort.mad[25], abort.mad[27]), (Some(0), 4, 118));
    assert_eq!(f.nodes[1].engine.poll_timeout(), None, "session gone");
}

#[test]
fn rmpp_completed_session_lingers_then_goes() {
    let (mut f, client, server) = sa_pair(LinkModel::perfect(), 61, 1);
    let req = sa_message(0x14, 4, 1000);
    f.send(0, client, 1, &req, 100, 0).unwrap();
    f.advance(Duration::from_millis(1));
    assert_eq!(recvs(&f.take_events(1)).len(), 1);
    // The request is whole; its session lingers to re-ACK retransmits.
    assert!(f.nodes[1].engine.poll_timeout().is_some());
    f.advance(Duration::from_secs(11));
    assert_eq!(
        f.nodes[1].engine.poll_timeout(),
        None,
        "linger over, session dropped"
    );
    assert_eq!(
        f.nodes[0].engine.stats().timeouts,
        1,
        "nobody answered the request"
    );
    let _ = server;
}

#[test]
fn rmpp_reassembly_slot_freed_on_completion() {
    let mut f = Fabric::with_config(2, LinkModel::perfect(), 62, |_, c| EngineConfig {
        max_reassemblies_per_peer: 1,
        ..c
    });
    let client = f.register(0, gsi_agent(0x03, 1, &[]));
    f.register(1, gsi_agent(0x03, 1, &[0x14]));
    for tid in 0..3 {
        f.send(0, client, 1, &sa_message(0x14, tid, 1000), 50, 0)
            .unwrap();
        f.advance(Duration::from_millis(1));
    }
    assert_eq!(recvs(&f.take_events(1)).len(), 3);
    assert_eq!(f.nodes[1].engine.stats().dropped_rmpp_limit, 0);
}

#[test]
fn rmpp_backlogged_requests_start_when_admitted() {
    let mut f = Fabric::with_config(2, LinkModel::perfect(), 63, |_, c| EngineConfig {
        max_outstanding_per_agent: 1,
        ..c
    });
    let client = f.register(0, gsi_agent(0x03, 1, &[]));
    let server = f.register(1, gsi_agent(0x03, 1, &[0x14]));
    for tid in 0..3 {
        f.send(0, client, 1, &sa_message(0x14, tid, 2000), 5000, 1)
            .unwrap();
    }
    assert_eq!(f.nodes[0].engine.stats().backlog_depth, 2);
    let requests = serve(&mut f, server, 3000, 100_000);
    assert_eq!(requests.len(), 3);
    let got: Vec<u64> = recvs(&f.take_events(0))
        .iter()
        .map(|(_, m)| tid_of(m) & 0xffff_ffff)
        .collect();
    assert_eq!(got, vec![0, 1, 2]);
    let s = f.nodes[0].engine.stats();
    assert_eq!(
        (s.outstanding, s.backlog_depth, s.retries, s.timeouts),
        (0, 0, 0, 0)
    );
}

#[test]
fn rmpp_unregister_mid_transfer_stops_everything() {
    let (mut f, _, server) = sa_pair(LinkModel::perfect(), 64, 1);
    f.filter = Some(Box::new(|w| w.from == 1)); // no ACKs: the sender keeps waiting
    f.send(1, server, 0, &sa_message(0x92, 5, 5000), 0, 3)
        .unwrap();
    f.flush();
    f.nodes[1].engine.unregister(server).unwrap();
    assert_eq!(f.nodes[1].engine.poll_timeout(), None);
    f.drive_bounded(100);
    assert!(f.take_events(1).is_empty(), "dropped silently");
}

/// Three nodes, each an SA client and server, over a link that loses,
/// duplicates and reorders: single-MAD and RMPP requests, RMPP responses of
/// assorted sizes. Every request ends exactly once (answered, timed out, or
/// aborted), and once everything settles no engine holds any state.
#[test]
fn rmpp_mixed_faulty_workload_every_request_ends_once() {
    let link = LinkModel {
        loss_ppm: 30_000,
        dup_ppm: 30_000,
        reorder_ppm: 30_000,
        delay: Duration::from_micros(20),
        jitter: Duration::from_micros(100),
    };
    let mut f = Fabric::new(3, link, 65);
    let clients: Vec<AgentId> = (0..3)
        .map(|i| f.register(i, gsi_agent(0x03, 1, &[])))
        .collect();
    let servers: Vec<AgentId> = (0..3)
        .map(|i| f.register(i, gsi_agent(0x03, 1, &[0x12, 0x14])))
        .collect();
    let mut expected = Vec::new();
    for i in 0..30u64 {
        let from = (i % 3) as usize;
        let to = ((i + 1) % 3) as usize;
        let tid = i + 1;
        if i % 2 == 0 {
            let mut req = mad(0x03, 0x12, tid).to_vec();
            req[24] = 1;
            f.send(from, clients[from], to, &req, 3000, 2).unwrap();
        } else {
            f.send(
                from,
                clients[from],
                to,
                &sa_message(0x14, tid, 300 * i as usize),
                3000,
                2,
            )
            .unwrap();
        }
        expected.push((from, tid));
    }
    let mut ended: Vec<(usize, u64)> = Vec::new();
    for _ in 0..200_000 {
        let busy = f.step();
        for node in 0..3 {
            for ev in f.take_events(node) {
                match ev {
                    Event::Recv { agent, addr, mad } if agent == servers[node] => {
                        let len = 100 * (tid_of(&mad) as usize % 7) * 10;
                        let resp = sa_message(mad[3] | 0x80, tid_of(&mad), len);
                        let dest = crate::types::MadAddr {
                            qkey: crate::types::GSI_QKEY,
                            ..addr
                        };
                        // A retried request may find its first answer still in flight: EINVAL, as the kernel.
                        let _ = f.send_to(node, servers[node], dest, &resp, 0, 3);
                    }
                    Event::Recv { mad, .. } => ended.push((node, tid_of(&mad) & 0xffff_ffff)),
                    Event::SendTimedOut { agent, header, .. } if agent == clients[node] => {
                        ended.push((node, tid_of(&header) & 0xffff_ffff))
                    }
                    _ => {}
                }
            }
            for abort in f.take_aborts(node) {
                if abort.agent == clients[node] && abort.sending {
                    ended.push((node, abort.tid & 0xffff_ffff));
                }
            }
        }
        if !busy {
            break;
        }
    }
    ended.sort_unstable();
    expected.sort_unstable();
    assert_eq!(ended, expected, "each request ends exactly once");
    for n in &f.nodes {
        let s = n.engine.stats();
        assert_eq!((s.outstanding, s.backlog_depth), (0, 0));
        assert_eq!(n.engine.poll_timeout(), None, "no session or timer left");
    }
    assert!(
        f.nodes
            .iter()
            .map(|n| n.engine.stats().rmpp_reassembled)
            .sum::<u64>()
            > 20
    );
}
