//! Memory under hostile load: hundreds of peers (spoofed LIDs) each open RMPP receive
//! sessions and abandon them, and a flood of unsolicited requests goes to an agent that
//! never reads, while the victim's own Gets to a legitimate peer keep being answered.
//! In virtual time and counted: after each wave the victim's footprint is within the
//! caps its configuration documents (`EngineConfig`: `max_events`,
//! `max_reassemblies`, `max_reassemblies_per_peer`, `rmpp.max_message`), the caps were
//! reached (so they were tested, not merely never approached), and once the abandoned
//! sessions' time is up (`rmpp.total_timeout`) nothing of them is left. How fast the
//! legitimate traffic flows meanwhile, and the process's RSS, are measured on real
//! time by `scripts/hostile-load`, not asserted here.
//!
//! Below the engine, the embedded fabric's receive queue: a port holds at most
//! `RECV_QUEUE_DEPTH` frames its owner has not received, drops the rest and counts
//! them, and the sender never waits.

use std::time::Duration;

use vmad::clock::VirtualClock;
use vmad::engine::EngineConfig;
use vmad::port::audit::PortAudit;
use vmad::port::PortConfig;
use vmad::subnet::{Fabric, PortCounters};
use vmad::transport::sim::{RawFrame, SimTransport, RECV_QUEUE_DEPTH};
use vmad::transport::Transport;
use vmad::wire::rmpp;

use crate::hostile::{
    agent, inject, legit_round_trip, net_with, segment, serve_perf, settle, Net, V,
};
use crate::util::gmp_mad;

const SA: u8 = 0x03;
const PERF: u8 = 0x04;
const GET: u8 = 0x01;
const SET: u8 = 0x02;
/// Peers opening sessions, each from a LID of its own (none of them exists).
const PEERS: u16 = 200;
/// Sessions each peer opens per wave: one more than its cap.
const PER_PEER: u64 = 5;
/// Unsolicited Gets per wave, to the agent that never reads.
const FLOOD: u64 = 2_000;
const WAVES: u32 = 8;

fn config() -> EngineConfig {
    let mut c = EngineConfig {
        max_events: 1024,
        max_reassemblies_per_peer: 4,
        max_reassemblies: 64,
        ..EngineConfig::default()
    };
    c.rmpp.max_message = 64 << 10;
    c
}

/// The victim's footprint is within its caps (and its tables agree).
fn within_caps(net: &Net, wave: u32) {
    net.victim.check_invariants().unwrap();
    let f = net.victim.footprint();
    let c = config();
    // The queues keep at most max_events; a turn running beside may hold one receive
    // burst more that it has not yet moved there.
    let burst = PortConfig::default().burst;
    assert!(f.events <= c.max_events + burst, "wave {wave}: {f:?}");
    assert!(f.dedup <= c.max_events, "wave {wave}: {f:?}");
    assert!(f.recv_sessions <= c.max_reassemblies, "wave {wave}: {f:?}");
    assert!(
        f.reassembly_bytes <= c.max_reassemblies * c.rmpp.max_message,
        "wave {wave}: {f:?}"
    );
}

#[test]
fn abandoned_rmpp_sessions_and_an_unread_flood_stay_within_the_caps() {
    let mut net = net_with("hld", config(), |b| b);
    let server = serve_perf(&net);
    let client = agent(&net.victim, PERF, 1, 0, &[]);
    // The agents nobody reads, on an open of their own: the client's open reads.
    let sink = net.victim.open_again().unwrap();
    agent(&sink, PERF, 1, 0, &[GET]);
    agent(&sink, SA, 2, 1, &[SET]);
    let c = config();
    let paylen = 10 * rmpp::SEGMENT_PAYLOAD as u32;
    let mut tid = 0u64;
    let mut trips = 0;
    for wave in 0..WAVES {
        let received = net.victim.stats().received;
        let mut injected = 0;
        for peer in 0..PEERS {
            for _ in 0..PER_PEER {
                tid += 1;
                let mut f = RawFrame::gsi(segment(tid, 1, rmpp::FLAG_FIRST, paylen), V);
                f.src_lid = Some(0x100 + peer);
                net.hostile.inject(&f);
                injected += 1;
            }
        }
        for _ in 0..FLOOD {
            tid += 1;
            inject(&mut net, gmp_mad(PERF, 1, GET, tid, 0x10));
            injected += 1;
        }
        settle(&net, received + injected);
        within_caps(&net, wave);
        // The victim's own Gets are answered, each at its first attempt.
        for _ in 0..5 {
            trips += 1;
            assert_eq!(legit_round_trip(&net, client, server, trips, None), 1);
        }
        within_caps(&net, wave);
        // Every other wave, the abandoned sessions' time runs out: nothing of them stays.
        if wave % 2 == 1 {
            let mut waited = Duration::ZERO;
            while waited <= c.rmpp.total_timeout {
                net.clock.advance(Duration::from_secs(1));
                waited += Duration::from_secs(1);
            }
            let f = net.victim.footprint();
            assert_eq!(
                (f.recv_sessions, f.reassembly_bytes),
                (0, 0),
                "wave {wave}: {f:?}"
            );
            within_caps(&net, wave);
        }
        // What the hostile node got back (ACKs, aborts to LIDs nobody has go nowhere).
        let _ = net.hostile.recv_burst(usize::MAX, &mut |_, _| {});
    }
    // A wave is smaller than the port's receive queue: the engine's caps did the
    // dropping, the fabric dropped nothing.
    let counters = net.fabric.port_counters(&net.names[0], 1).unwrap();
    assert_eq!(counters, PortCounters::default());
    let stats = net.victim.stats();
    // The caps were reached: sessions refused, unread requests dropped.
    assert!(stats.dropped_rmpp_limit > 0, "{stats:?}");
    assert!(stats.queue_drops > 0, "{stats:?}");
    let f = net.victim.footprint();
    eprintln!("after {WAVES} waves: {stats:?}\n{f:?}");
    assert_eq!(f.txns, 0, "{f:?}");
}

/// Vendor class 0x30: no agent of the fabric's (SMA, PMA, SA) answers it.
const VENDOR: u8 = 0x30;

/// Send `n` vendor Gets from `from` to LID `to`, TIDs from `*tid + 1` on.
fn flood(from: &mut SimTransport, to: u16, n: u64, tid: &mut u64) {
    for _ in 0..n {
        *tid += 1;
        from.inject(&RawFrame::gsi(gmp_mad(VENDOR, 1, GET, *tid, 0x10), to));
    }
}

/// The TIDs of every frame `port` holds, in order; the port holds none after.
fn drain(port: &mut SimTransport, max: usize) -> Vec<u64> {
    let mut tids = Vec::new();
    port.recv_burst(max, &mut |_, mad| {
        tids.push(u64::from_be_bytes(mad[8..16].try_into().unwrap()));
    })
    .unwrap();
    tids
}

#[test]
fn an_unread_port_holds_its_receive_queue_and_counts_every_frame_it_drops() {
    let fabric = Fabric::builder()
        .clock(VirtualClock::new())
        .ca("hqv")
        .ca("hqx")
        .switch("hqs", 4)
        .ca("hqm")
        .link("hqv", 1, "hqs", 1)
        .link("hqx", 1, "hqs", 2)
        .link("hqm", 1, "hqs", 3)
        .sm_lid(4)
        .build_private()
        .unwrap();
    let victim_lid = fabric.lid("hqv", 1).unwrap();
    let mut victim = fabric.open("hqv", 1).unwrap();
    let mut flooder = fabric.open("hqx", 1).unwrap();
    let overflows = |fabric: &Fabric| {
        let c = fabric.port_counters("hqv", 1).unwrap();
        assert_eq!(
            c,
            PortCounters {
                rcv_queue_overflows: c.rcv_queue_overflows,
                ..PortCounters::default()
            }
        );
        c.rcv_queue_overflows
    };
    let depth = RECV_QUEUE_DEPTH as u64;
    let mut tid = 0;
    // Up to the bound, everything is kept.
    flood(&mut flooder, victim_lid, depth, &mut tid);
    assert_eq!((victim.queued(), overflows(&fabric)), (RECV_QUEUE_DEPTH, 0));
    // Beyond it, each frame is dropped and counted; the sender (this thread) goes on.
    flood(&mut flooder, victim_lid, 2 * depth + 7, &mut tid);
    assert_eq!(
        (victim.queued(), overflows(&fabric)),
        (RECV_QUEUE_DEPTH, 2 * depth + 7)
    );
    // The queue kept the first frames, in order, as a full receive ring does.
    let first: Vec<u64> = (1..=depth).collect();
    assert_eq!(drain(&mut victim, usize::MAX), first);
    assert_eq!(victim.queued(), 0);
    // Once the owner reads, frames flow again: each frame read makes room for one.
    flood(&mut flooder, victim_lid, depth, &mut tid);
    assert_eq!(drain(&mut victim, 100).len(), 100);
    let before = tid;
    flood(&mut flooder, victim_lid, 101, &mut tid);
    assert_eq!(
        (victim.queued(), overflows(&fabric)),
        (RECV_QUEUE_DEPTH, 2 * depth + 8)
    );
    // What it held: the rest of the earlier flood, then the first 100 of this one.
    let held = drain(&mut victim, usize::MAX);
    let expected: Vec<u64> = (before - depth + 101..=before + 100).collect();
    assert_eq!(held, expected);
    // A reader that keeps up loses nothing, however much is sent.
    for _ in 0..4 {
        flood(&mut flooder, victim_lid, depth, &mut tid);
        assert_eq!(drain(&mut victim, usize::MAX).len(), RECV_QUEUE_DEPTH);
    }
    assert_eq!((victim.queued(), overflows(&fabric)), (0, 2 * depth + 8));
}
