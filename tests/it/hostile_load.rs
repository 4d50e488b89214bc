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

use std::time::Duration;

use vmad::engine::EngineConfig;
use vmad::port::audit::PortAudit;
use vmad::port::PortConfig;
use vmad::transport::sim::RawFrame;
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
        let _ =
            vmad::transport::Transport::recv_burst(&mut net.hostile, usize::MAX, &mut |_, _| {});
    }
    let stats = net.victim.stats();
    // The caps were reached: sessions refused, unread requests dropped.
    assert!(stats.dropped_rmpp_limit > 0, "{stats:?}");
    assert!(stats.queue_drops > 0, "{stats:?}");
    let f = net.victim.footprint();
    eprintln!("after {WAVES} waves: {stats:?}\n{f:?}");
    assert_eq!(f.txns, 0, "{f:?}");
}
