//! A request whose RMPP answer its sender ABORTs (or STOPs): the attempt ends
//! at the ABORT, not at the request's timer, and the answer's receive session
//! goes with it; a STOP or ABORT that names no waiting request changes nothing.

use core::time::Duration;

use super::harness::*;
use crate::engine::{AgentId, EngineConfig, Event, RmppAbort};
use crate::types::Qp;
use crate::wire::rmpp::RmppStatus;
use crate::wire::MAD_SIZE;

const SA_HDR: usize = 56;
/// The request's wait for its answer, per attempt.
const TIMEOUT_MS: u32 = 5_000;

/// Node 0: an SA client (RMPP in the engine). Node 1: an SA server of GetTable,
/// which takes every copy of a request (no duplicate filter), so that a retry
/// reaches it. Node 2: another peer, idle.
fn pair(seed: u64) -> (Fabric, AgentId, AgentId) {
    let mut f = Fabric::with_config(3, LinkModel::perfect(), seed, |i, c| EngineConfig {
        duplicate_request_window: if i == 1 {
            Duration::ZERO
        } else {
            c.duplicate_request_window
        },
        ..c
    });
    let client = f.register(0, gsi_agent(0x03, 1, &[]));
    let server = f.register(1, gsi_agent(0x03, 1, &[0x12]));
    (f, client, server)
}

/// Send a one-MAD GetTable from node 0 and run until node 1 has it; its TID as sent.
fn ask(f: &mut Fabric, client: AgentId, low_tid: u64, retries: u32) -> u64 {
    let mut req = mad(0x03, 0x12, low_tid).to_vec();
    req[24] = 1; // RMPP version, not Active: one MAD
    f.send(0, client, 1, &req, TIMEOUT_MS, retries).unwrap();
    for _ in 0..100 {
        f.step();
        if let Some((_, m)) = recvs(&f.take_events(1)).pop() {
            return tid_of(&m);
        }
    }
    panic!("the request never reached node 1");
}

/// An RMPP MAD of the answer to `tid` (GetTableResp) as its sender writes it:
/// `rmpp_type` (1 DATA, 3 STOP, 4 ABORT), flags, status, segment, PayloadLength.
fn answer_mad(tid: u64, rmpp_type: u8, flags: u8, status: u8, seg: u32, len: u32) -> Vec<u8> {
    let mut m = mad(0x03, 0x92, tid).to_vec();
    m[24] = 1;
    m[25] = rmpp_type;
    m[26] = (0x1f << 3) | flags; // no RRespTime
    m[27] = status;
    m[28..32].copy_from_slice(&seg.to_be_bytes());
    m[32..36].copy_from_slice(&len.to_be_bytes());
    m
}

/// Segment 1 of a 3-segment answer to `tid`.
fn first_segment(tid: u64) -> Vec<u8> {
    answer_mad(tid, 1, 0b011, 0, 1, 3 * (MAD_SIZE - SA_HDR) as u32)
}

fn abort(tid: u64, status: u8) -> Vec<u8> {
    answer_mad(tid, 4, 0b001, status, 0, 0)
}

/// The TIDs of node `node`'s timeout reports.
fn timed_out(events: &[Event]) -> Vec<u64> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::SendTimedOut { header, .. } => Some(tid_of(header)),
            Event::Recv { .. } => None,
        })
        .collect()
}

#[test]
fn an_answer_aborted_mid_transfer_ends_its_request_at_the_abort() {
    let (mut f, client, _) = pair(60);
    let tid = ask(&mut f, client, 1, 0);
    f.inject(1, 0, Qp::Gsi, &first_segment(tid));
    assert_eq!(
        f.nodes[0].engine.recv.len(),
        1,
        "the answer's reassembly runs"
    );
    assert_eq!(f.take_events(0), []);
    let at = f.now;
    f.inject(1, 0, Qp::Gsi, &abort(tid, 127));
    // At once: no time passed, and the report names the request.
    assert_eq!(f.now, at);
    assert_eq!(timed_out(&f.take_events(0)), vec![tid]);
    assert_eq!(
        f.nodes[0].engine.last_rmpp_abort(),
        Some(RmppAbort {
            agent: client,
            tid,
            status: RmppStatus::Unspecified,
            sending: false
        })
    );
    let s = f.nodes[0].engine.stats();
    assert_eq!((s.outstanding, s.timeouts, s.rmpp_aborts), (0, 1, 1));
    assert_eq!(s.dropped_rmpp_unknown, 0);
    assert!(f.nodes[0].engine.recv.is_empty(), "the reassembly is freed");
    assert_eq!(
        f.nodes[0].engine.poll_timeout(),
        None,
        "nothing left running"
    );
    // The rest of the answer, should it still come, completes nothing.
    f.inject(1, 0, Qp::Gsi, &answer_mad(tid, 1, 0b001, 0, 2, 0));
    f.drive_bounded(1_000);
    assert_eq!(f.take_events(0), []);
    f.nodes[0].engine.check_invariants().unwrap();
}

#[test]
fn an_abort_before_any_segment_or_a_stop_ends_the_request_too() {
    let (mut f, client, _) = pair(61);
    // No segment came: the ABORT alone names the request.
    let a = ask(&mut f, client, 2, 0);
    f.inject(1, 0, Qp::Gsi, &abort(a, 118));
    assert_eq!(timed_out(&f.take_events(0)), vec![a]);
    let last = f.nodes[0].engine.last_rmpp_abort().unwrap();
    assert_eq!((last.tid, last.status), (a, RmppStatus::TotalTimeTooLong));
    // A STOP (ResourcesExhausted) mid-transfer.
    let b = ask(&mut f, client, 3, 0);
    f.inject(1, 0, Qp::Gsi, &first_segment(b));
    f.inject(1, 0, Qp::Gsi, &answer_mad(b, 3, 0b001, 1, 0, 0));
    assert_eq!(timed_out(&f.take_events(0)), vec![b]);
    let last = f.nodes[0].engine.last_rmpp_abort().unwrap();
    assert_eq!((last.tid, last.status), (b, RmppStatus::ResourcesExhausted));
    // An ABORT with a status no ABORT carries ends it with BadStatus.
    let c = ask(&mut f, client, 4, 0);
    f.inject(1, 0, Qp::Gsi, &abort(c, 5));
    assert_eq!(timed_out(&f.take_events(0)), vec![c]);
    let last = f.nodes[0].engine.last_rmpp_abort().unwrap();
    assert_eq!((last.tid, last.status), (c, RmppStatus::BadStatus));
    let s = f.nodes[0].engine.stats();
    assert_eq!((s.outstanding, s.timeouts, s.rmpp_aborts), (0, 3, 3));
    assert!(f.nodes[0].engine.recv.is_empty());
}

#[test]
fn an_aborted_answer_with_retries_left_asks_again_at_once() {
    let (mut f, client, server) = pair(62);
    let tid = ask(&mut f, client, 5, 1);
    let at = f.now;
    f.inject(1, 0, Qp::Gsi, &first_segment(tid));
    f.inject(1, 0, Qp::Gsi, &abort(tid, 127));
    assert_eq!(f.take_events(0), [], "a retry is left: no report yet");
    // The retry goes out now (same TID, as the kernel retries), long before
    // the first attempt's 5 s; this time the server answers whole.
    let again = loop {
        assert!(f.step(), "the retry never came");
        if let Some((_, m)) = recvs(&f.take_events(1)).pop() {
            break m;
        }
    };
    assert_eq!(tid_of(&again), tid);
    assert!(f.now - at < Duration::from_millis(100), "{:?}", f.now - at);
    let mut resp = vec![0u8; SA_HDR + 2_000];
    resp[..MAD_SIZE].copy_from_slice(&answer_mad(tid, 1, 0b001, 0, 0, 0));
    let to = f.addr(0, Qp::Gsi);
    f.send_to(1, server, to, &resp, 0, 3).unwrap();
    f.drive_bounded(10_000);
    let got = recvs(&f.take_events(0));
    assert_eq!(got.len(), 1);
    assert_eq!((tid_of(&got[0].1), got[0].1.len()), (tid, SA_HDR + 2_000));
    let s = f.nodes[0].engine.stats();
    assert_eq!((s.outstanding, s.timeouts, s.retries), (0, 0, 1));
}

#[test]
fn a_stray_abort_or_stop_changes_nothing() {
    let (mut f, client, _) = pair(63);
    let tid = ask(&mut f, client, 6, 0);
    f.inject(1, 0, Qp::Gsi, &first_segment(tid));
    let before = f.nodes[0].engine.stats();
    // An ABORT and a STOP of TIDs no request has; the request's TID from
    // another peer than the one asked.
    f.inject(1, 0, Qp::Gsi, &abort(tid ^ 0x55, 127));
    f.inject(1, 0, Qp::Gsi, &answer_mad(tid + 1, 3, 0b001, 1, 0, 0));
    f.inject(2, 0, Qp::Gsi, &abort(tid, 127));
    assert_eq!(f.take_events(0), []);
    let s = f.nodes[0].engine.stats();
    assert_eq!((s.outstanding, s.timeouts, s.rmpp_aborts), (1, 0, 0));
    assert_eq!(s.dropped_rmpp_unknown, before.dropped_rmpp_unknown + 3);
    assert_eq!(f.nodes[0].engine.recv.len(), 1, "the reassembly still runs");
    assert_eq!(f.nodes[0].engine.last_rmpp_abort(), None);
    // The request still ends at its own timer.
    let at = f.now;
    f.drive_bounded(10_000);
    assert_eq!(timed_out(&f.take_events(0)), vec![tid]);
    assert!(f.now - at >= Duration::from_millis(u64::from(TIMEOUT_MS) - 1));
}
