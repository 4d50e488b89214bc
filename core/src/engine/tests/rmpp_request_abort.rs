//! A request whose own RMPP send its receiver ABORTs (or STOPs): the request
//! ends with a timeout report at once (the kernel ends the send silently and
//! its caller waits for ever), the abort recorded first; a send that expects
//! no response stays silent.

use super::harness::*;
use crate::engine::{AgentId, Event, RmppAbort};
use crate::types::Qp;
use crate::wire::rmpp::RmppStatus;
use crate::wire::MAD_SIZE;

const SA_HDR: usize = 56;

/// Node 0: an SA client (RMPP in the engine). Node 1: an SA server of GetMulti.
fn pair(seed: u64) -> (Fabric, AgentId) {
    let mut f = Fabric::new(2, LinkModel::perfect(), seed);
    let client = f.register(0, gsi_agent(0x03, 1, &[]));
    f.register(1, gsi_agent(0x03, 1, &[0x14]));
    (f, client)
}

/// A GetMulti of `data_len` bytes of data, RMPP Active.
fn get_multi(low_tid: u64, data_len: usize) -> Vec<u8> {
    let mut m = vec![0u8; SA_HDR + data_len];
    m[..MAD_SIZE].copy_from_slice(&mad(0x03, 0x14, low_tid));
    m[24] = 1; // version
    m[25] = 1; // DATA
    m[26] = 1; // Active
    m
}

/// Send a 15-segment GetMulti from node 0 and put its first window on the
/// link (not yet delivered); the TID as sent.
fn start(f: &mut Fabric, client: AgentId, low_tid: u64, timeout_ms: u32) -> u64 {
    f.send(0, client, 1, &get_multi(low_tid, 3_000), timeout_ms, 2)
        .unwrap();
    f.flush();
    let first = f.trace.iter().rev().find(|w| w.from == 0).unwrap();
    tid_of(&first.mad[..])
}

/// The receiver's STOP or ABORT of the request's send (R bit flipped, as the
/// kernel's `format_ack` writes it).
fn control(tid: u64, rmpp_type: u8, status: u8) -> Vec<u8> {
    let mut m = mad(0x03, 0x94, tid).to_vec();
    m[24] = 1;
    m[25] = rmpp_type;
    m[26] = 1;
    m[27] = status;
    m
}

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
fn an_aborted_request_send_ends_the_request_at_the_abort() {
    let (mut f, client) = pair(70);
    let tid = start(&mut f, client, 1, 5_000);
    let at = f.now;
    f.inject(1, 0, Qp::Gsi, &control(tid, 4, 127));
    // At once, although retries are left: the kernel does not resend an
    // aborted send either.
    assert_eq!(f.now, at);
    assert_eq!(timed_out(&f.take_events(0)), vec![tid]);
    assert_eq!(
        f.nodes[0].engine.last_rmpp_abort(),
        Some(RmppAbort {
            agent: client,
            tid,
            status: RmppStatus::Unspecified,
            sending: true
        })
    );
    let s = f.nodes[0].engine.stats();
    assert_eq!((s.outstanding, s.timeouts, s.rmpp_aborts), (0, 1, 1));
    // The segments still in flight end nothing more.
    f.drive_bounded(10_000);
    assert_eq!(f.take_events(0), []);
    assert_eq!(f.nodes[0].engine.poll_timeout(), None);
    f.nodes[0].engine.check_invariants().unwrap();
}

#[test]
fn a_stopped_request_send_ends_the_request_too() {
    let (mut f, client) = pair(71);
    let tid = start(&mut f, client, 2, 5_000);
    f.inject(1, 0, Qp::Gsi, &control(tid, 3, 1));
    assert_eq!(timed_out(&f.take_events(0)), vec![tid]);
    let last = f.nodes[0].engine.last_rmpp_abort().unwrap();
    assert_eq!(
        (last.tid, last.status, last.sending),
        (tid, RmppStatus::ResourcesExhausted, true)
    );
    assert_eq!(f.nodes[0].engine.stats().outstanding, 0);
}

#[test]
fn an_aborted_send_that_expects_no_response_stays_silent() {
    let (mut f, client) = pair(72);
    let tid = start(&mut f, client, 3, 0);
    f.inject(1, 0, Qp::Gsi, &control(tid, 4, 127));
    assert_eq!(f.take_events(0), []);
    let last = f.nodes[0].engine.last_rmpp_abort().unwrap();
    assert_eq!((last.tid, last.sending), (tid, true));
    let s = f.nodes[0].engine.stats();
    assert_eq!((s.outstanding, s.timeouts, s.rmpp_aborts), (0, 0, 1));
    f.drive_bounded(10_000);
    assert_eq!(f.take_events(0), []);
}
