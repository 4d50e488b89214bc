//! RMPP through two whole engines over a faulty link: message sizes ×
//! loss × duplication × reordering, in both directions (an RMPP request,
//! and an RMPP response to a plain request), many seeds each.
//!
//! For every transfer: the message arrives byte-exact at most once, or its
//! sender (or the receiver) reports a timeout or an abort; the fabric goes
//! idle within a bounded number of steps; and at the end both engines hold
//! no transaction, no RMPP session and no timer.
//!
//! Seeds: 20 for sizes up to 65 segments, fewer for 1000 segments and
//! ~1 MiB (see [`seeds_for`]).

use core::time::Duration;

use super::harness::*;
use crate::engine::{AgentId, Engine, Event};
use crate::types::Qp;
use crate::wire::MAD_SIZE;

const SA_HDR: usize = 56;
/// SA data bytes per segment.
const PER_SEG: usize = MAD_SIZE - SA_HDR;
const GET_TABLE: u8 = 0x12;
const GET_MULTI: u8 = 0x14;

/// Data lengths: 1, 2, 63, 64, 65 and 1000 segments (exact and ragged), ~1 MiB.
const SIZES: [usize; 7] = [
    150,
    2 * PER_SEG,
    63 * PER_SEG - 1,
    64 * PER_SEG,
    65 * PER_SEG - 17,
    1000 * PER_SEG,
    1 << 20,
];

fn seeds_for(data_len: usize) -> u64 {
    match data_len / PER_SEG {
        0..=65 => 20,
        66..=1000 => 20,
        _ => 20,
    }
}

/// Which side sends the RMPP message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Dir {
    /// Node 0 sends an RMPP GetMulti (no response expected) to node 1.
    Request,
    /// Node 0 sends a plain GetTable; node 1 answers with an RMPP GetTableResp.
    Response,
}

fn link(loss_pct: u32, dup: bool, reorder: bool) -> LinkModel {
    LinkModel {
        loss_ppm: loss_pct * 10_000,
        dup_ppm: if dup { 30_000 } else { 0 },
        reorder_ppm: if reorder { 50_000 } else { 0 },
        delay: Duration::from_micros(10),
        jitter: Duration::from_micros(if reorder { 30 } else { 0 }),
    }
}

/// An SA message with RMPP Active: 56 header bytes, then `data_len` bytes
/// that depend on `tid` (a mixed-up transfer cannot pass as another).
fn sa_message(method: u8, tid: u64, data_len: usize) -> Vec<u8> {
    let mut m = vec![0u8; SA_HDR + data_len];
    m[..SA_HDR].copy_from_slice(&mad(0x03, method, tid)[..SA_HDR]);
    m[24] = 1;
    m[26] = 1;
    for (i, b) in m[SA_HDR..].iter_mut().enumerate() {
        *b = (i as u64 * 31 + tid) as u8;
    }
    m
}

/// Low 32 bits: the part of a TID the sender chose (the engine owns the high word).
fn low(tid: u64) -> u64 {
    tid & 0xffff_ffff
}

/// What became of one transfer.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Tally {
    delivered: u32,
    failed: u32,
}

/// One transfer of `data_len` bytes in direction `dir`; returns whether it was delivered.
fn transfer(dir: Dir, data_len: usize, link: LinkModel, seed: u64) -> bool {
    let mut f = Fabric::new(2, link, seed);
    f.tracing = false;
    let client = f.register(0, gsi_agent(0x03, 1, &[]));
    let server = f.register(1, gsi_agent(0x03, 1, &[GET_TABLE, GET_MULTI]));
    let tid = 0x1000 + seed;
    let mut want = match dir {
        Dir::Request => {
            let msg = sa_message(GET_MULTI, tid, data_len);
            f.send(0, client, 1, &msg, 0, 3).unwrap();
            msg
        }
        Dir::Response => {
            let mut req = mad(0x03, GET_TABLE, tid);
            req[24] = 1; // RMPP version 1, not Active: one plain MAD
            f.send(0, client, 1, &req, 300_000, 0).unwrap();
            sa_message(GET_TABLE | 0x80, tid, data_len)
        }
    };
    // `failed`: any timeout or abort on either side; `told`: the one the
    // user who started the exchange sees (node 0: its RMPP request timed
    // out or was aborted, or its plain request got no response in time).
    let (mut delivered, mut failed, mut told) = (0, 0, 0);
    let mut step = |f: &mut Fabric| -> bool {
        let busy = f.step();
        for node in 0..2 {
            for ev in f.take_events(node) {
                match ev {
                    Event::Recv { agent, mad, .. } => {
                        if dir == Dir::Response && node == 1 {
                            // The server answers the plain request, once.
                            assert_eq!(
                                (agent, low(tid_of(&mad)), mad.len()),
                                (server, tid, MAD_SIZE)
                            );
                            // The response carries the request's whole TID.
                            want[8..16].copy_from_slice(&mad[8..16]);
                            answer(f, server, &want);
                            continue;
                        }
                        let to = if dir == Dir::Request { 1 } else { 0 };
                        assert_eq!(node, to, "delivered to the wrong side");
                        check_message(&mad, &want, data_len, seed);
                        delivered += 1;
                    }
                    Event::SendTimedOut { header, .. } => {
                        assert_eq!(low(tid_of(&header)), tid);
                        failed += 1;
                        told += u32::from(node == 0);
                    }
                }
            }
            for abort in f.take_aborts(node) {
                assert_eq!(low(abort.tid), tid);
                failed += 1;
                told += u32::from(node == 0 && abort.sending && dir == Dir::Request);
            }
        }
        busy
    };
    let bound = 400_000;
    let mut idle = false;
    for _ in 0..bound {
        if !step(&mut f) {
            idle = true;
            break;
        }
    }
    let ctx = format!("{dir:?} {data_len} B seed {seed} {link:?}");
    assert!(idle, "livelock: still busy after {bound} steps: {ctx}");
    assert!(delivered <= 1, "delivered {delivered} times: {ctx}");
    assert!(
        delivered == 1 || failed > 0,
        "neither delivered nor failed: {ctx}"
    );
    for node in &f.nodes {
        assert_quiet(&node.engine, &ctx);
    }
    let _ = client;
    delivered == 1
}

/// Send the RMPP response `msg` from node 1's `server` to node 0. A copy
/// of the request (the link duplicates) arriving while the first answer is
/// still being sent is refused as a duplicate; a later one is answered again,
/// and the client drops that answer as unmatched.
fn answer(f: &mut Fabric, server: AgentId, msg: &[u8]) {
    let dest = f.addr(0, Qp::Gsi);
    match f.send_to(1, server, dest, msg, 0, 3) {
        Ok(()) | Err(crate::Error::DuplicateRequest(_)) => {}
        Err(e) => panic!("answer refused: {e}"),
    }
}

/// A delivered message is the sent one: MAD header (the TID's low word),
/// the first segment's RMPP header, then every class header and data byte.
fn check_message(got: &[u8], want: &[u8], data_len: usize, seed: u64) {
    assert_eq!(got.len(), SA_HDR + data_len, "length, seed {seed}");
    assert_eq!(&got[..8], &want[..8]);
    assert_eq!(low(tid_of(got)), low(tid_of(want)));
    assert_eq!(&got[16..24], &want[16..24]);
    assert_eq!(got[26] & 7, 1 | 2 | if data_len <= PER_SEG { 4 } else { 0 });
    assert!(got[36..] == want[36..], "data differs, seed {seed}");
}

/// No transaction, session, queued MAD or timer is left in `e`.
fn assert_quiet(e: &Engine, ctx: &str) {
    assert!(e.txns.is_empty(), "transactions left: {ctx}");
    assert!(e.rmpp_sends.is_empty(), "send sessions left: {ctx}");
    assert!(
        e.recv.is_empty(),
        "receive sessions or reassembly counts left: {ctx}"
    );
    assert!(e.tx_queue.is_empty(), "MADs left to send: {ctx}");
    assert_eq!(e.poll_timeout(), None, "a timer left: {ctx}");
}

/// Run the grid for the sizes `sizes` in `dir`; returns per-loss tallies.
fn grid(dir: Dir, sizes: &[usize]) -> [Tally; 3] {
    let mut tallies = [Tally::default(); 3];
    for &data_len in sizes {
        for (li, loss) in [0, 1, 10].into_iter().enumerate() {
            for (dup, reorder) in [(false, false), (true, false), (false, true), (true, true)] {
                for seed in 0..seeds_for(data_len) {
                    let l = link(loss, dup, reorder);
                    if transfer(dir, data_len, l, seed) {
                        tallies[li].delivered += 1;
                    } else {
                        tallies[li].failed += 1;
                    }
                }
            }
        }
    }
    tallies
}

/// Without loss everything arrives; with 1 % nearly everything does.
fn assert_tallies(t: [Tally; 3], dir: Dir) {
    eprintln!("{dir:?}: {t:?}");
    assert_eq!(
        t[0].failed, 0,
        "{dir:?}: a loss-free transfer failed: {t:?}"
    );
    assert!(
        t[1].failed * 10 <= t[1].delivered,
        "{dir:?}: too many failures at 1 %: {t:?}"
    );
    assert!(
        t[2].delivered > 0,
        "{dir:?}: nothing got through 10 % loss: {t:?}"
    );
}

#[test]
fn rmpp_grid_request_small_sizes() {
    assert_tallies(grid(Dir::Request, &SIZES[..5]), Dir::Request);
}

#[test]
fn rmpp_grid_response_small_sizes() {
    assert_tallies(grid(Dir::Response, &SIZES[..5]), Dir::Response);
}

#[test]
fn rmpp_grid_request_large_sizes() {
    let t = grid(Dir::Request, &SIZES[5..]);
    eprintln!("Request, large: {t:?}");
    assert_eq!(t[0].failed, 0, "{t:?}");
}

#[test]
fn rmpp_grid_response_large_sizes() {
    let t = grid(Dir::Response, &SIZES[5..]);
    eprintln!("Response, large: {t:?}");
    assert_eq!(t[0].failed, 0, "{t:?}");
}
