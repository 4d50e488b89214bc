//! Hostile load, measured on real time: on the embedded fabric, a victim port whose
//! application sends PerfMgt Gets to a legitimate peer and reads the answers, while
//! (in every other phase) a hostile node floods it: 200 spoofed LIDs each opening RMPP
//! receive sessions and abandoning them, and unsolicited Gets to an agent of the
//! victim's that never reads. Quiet and flooded phases alternate, so that each
//! flooded phase has a quiet neighbour on the same machine state.
//!
//! Prints, per phase, the legitimate round trips per second; then the largest
//! footprint seen (sampled after each round trip), the caps, and the process's peak
//! RSS (VmHWM). `tests/it/hostile_load.rs` asserts the caps (in virtual time, by
//! count); this only measures.
//!
//! Run: `cargo run --release --example hostile_load -- [PHASE_SECS] [ROUNDS]`
//! (defaults 2 and 5); `scripts/hostile-load` does that and prints the ratio.

use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use vmad::engine::{AgentId, AgentSpec, EngineConfig, Event, Footprint, SendRequest};
use vmad::port::audit::PortAudit;
use vmad::port::{Port, PortConfig};
use vmad::subnet::Fabric;
use vmad::transport::sim::{RawFrame, SimTransport};
use vmad::transport::Transport;
use vmad::types::{MadAddr, Qp, GSI_QKEY};
use vmad::wire::rmpp;

type Res<T> = Result<T, Box<dyn std::error::Error>>;

const SA: u8 = 0x03;
const PERF: u8 = 0x04;
const GET: u8 = 0x01;
const SET: u8 = 0x02;
const GET_RESP: u8 = 0x81;
const PEERS: u16 = 200;
const PER_PEER: u64 = 5;
const FLOOD: u64 = 2_000;

/// The victim's caps, as in tests/it/hostile_load.rs.
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

fn mad(class: u8, version: u8, method: u8, tid: u64, attr: u16) -> [u8; 256] {
    let mut m = [0u8; 256];
    m[..4].copy_from_slice(&[1, class, version, method]);
    m[8..16].copy_from_slice(&tid.to_be_bytes());
    m[16..18].copy_from_slice(&attr.to_be_bytes());
    m
}

/// The first segment of an SA RMPP transfer of 10 segments, never continued.
fn first_segment(tid: u64) -> [u8; 256] {
    let mut m = mad(SA, 2, SET, tid, 0x11);
    let mut p = rmpp::Packet::new_unchecked(&mut m[..]);
    p.set_rmpp_version(rmpp::VERSION);
    p.set_rmpp_type(rmpp::RmppType::Data);
    p.set_resp_time_flags(rmpp::RESP_TIME_NONE, rmpp::FLAG_ACTIVE | rmpp::FLAG_FIRST);
    p.set_seg_num(1);
    p.set_paylen_newwin(10 * rmpp::SEGMENT_PAYLOAD as u32);
    m
}

fn agent(port: &Port, class: u8, version: u8, rmpp: u8, methods: &[u8]) -> Res<AgentId> {
    let mut mask = [0u64; 2];
    for &m in methods {
        mask[usize::from(m / 64)] |= 1 << (m % 64);
    }
    Ok(port.register(AgentSpec {
        qp: Qp::for_class(class),
        mgmt_class: class.into(),
        class_version: version,
        rmpp_version: rmpp,
        method_mask: mask,
        oui: 0,
        user_rmpp: false,
    })?)
}

/// The hostile node's waves until `stop`: sessions opened and abandoned, then the
/// unread flood; how many frames it sent.
fn flood(mut x: SimTransport, victim: u16, stop: &AtomicBool, tid: &mut u64) -> u64 {
    let mut sent = 0;
    while !stop.load(Relaxed) {
        for peer in 0..PEERS {
            for _ in 0..PER_PEER {
                *tid += 1;
                let mut f = RawFrame::gsi(first_segment(*tid), victim);
                f.src_lid = Some(0x100 + peer);
                x.inject(&f);
            }
        }
        for _ in 0..FLOOD {
            *tid += 1;
            x.inject(&RawFrame::gsi(mad(PERF, 1, GET, *tid, 0x10), victim));
        }
        sent += u64::from(PEERS) * PER_PEER + FLOOD;
        // What came back (ACKs, the STOPs of refused sessions): read, dropped.
        while x.recv_burst(256, &mut |_, _| {}).unwrap_or(0) > 0 {}
    }
    sent
}

fn max_footprint(a: &mut Footprint, b: Footprint) {
    a.txns = a.txns.max(b.txns);
    a.recv_sessions = a.recv_sessions.max(b.recv_sessions);
    a.reassembly_bytes = a.reassembly_bytes.max(b.reassembly_bytes);
    a.dedup = a.dedup.max(b.dedup);
    a.events = a.events.max(b.events);
    a.event_bytes = a.event_bytes.max(b.event_bytes);
    a.tx_queue = a.tx_queue.max(b.tx_queue);
    a.timers = a.timers.max(b.timers);
}

fn vm_hwm_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

fn main() -> Res<()> {
    let mut args = std::env::args().skip(1);
    let phase = Duration::from_secs_f64(args.next().map_or(Ok(2.0), |a| a.parse())?);
    let rounds: u32 = args.next().map_or(Ok(5), |a| a.parse())?;
    let fabric = Fabric::builder()
        .ca("hlv")
        .ca("hll")
        .ca("hlx")
        .switch("hls", 4)
        .ca("hlm")
        .link("hlv", 1, "hls", 1)
        .link("hll", 1, "hls", 2)
        .link("hlx", 1, "hls", 3)
        .link("hlm", 1, "hls", 4)
        .sm_lid(5)
        .build_private()?;
    let victim = Port::open(
        Box::new(fabric.open("hlv", 1)?),
        PortConfig {
            engine: config(),
            ..PortConfig::default()
        },
    )?;
    let legit = Arc::new(Port::open(
        Box::new(fabric.open("hll", 1)?),
        PortConfig::default(),
    )?);
    let client = agent(&victim, PERF, 1, 0, &[])?;
    // The agents nobody reads, on an open of their own.
    let sink = victim.open_again()?;
    agent(&sink, PERF, 1, 0, &[GET])?;
    agent(&sink, SA, 2, 1, &[SET])?;
    let server = agent(&legit, PERF, 1, 0, &[GET])?;
    let serving = {
        let legit = legit.clone();
        thread::spawn(move || {
            while let Ok(event) = legit.recv(None) {
                let Event::Recv { addr, mut mad, .. } = event else {
                    continue;
                };
                mad[3] = GET_RESP;
                let req = SendRequest {
                    addr,
                    mad: &mad,
                    timeout_ms: 0,
                    retries: 0,
                };
                let _ = legit.send(server, req);
            }
        })
    };
    let addr = MadAddr {
        lid: fabric
            .lid("hll", 1)
            .ok_or("no LID for the legitimate peer")?,
        qpn: 1,
        qkey: GSI_QKEY,
        ..MadAddr::default()
    };
    let victim_lid = fabric.lid("hlv", 1).ok_or("no LID for the victim")?;
    let mut hostile = Some(fabric.open("hlx", 1)?);
    let mut tid = 0u64;
    let mut hostile_tid = 0u64;
    let mut peak = Footprint::default();
    let (mut quiet, mut flooded) = (Vec::new(), Vec::new());
    let mut flood_frames = 0;
    let mut lost = 0u64;
    for _ in 0..rounds {
        for flooding in [false, true] {
            let stop = Arc::new(AtomicBool::new(false));
            let flooder = flooding.then(|| {
                let x = hostile.take().expect("the hostile node");
                let stop = stop.clone();
                let mut t = hostile_tid;
                thread::spawn(move || {
                    let n = flood(x, victim_lid, &stop, &mut t);
                    (n, t)
                })
            });
            let start = Instant::now();
            let mut done = 0u64;
            while start.elapsed() < phase {
                tid += 1;
                let get = mad(PERF, 1, GET, tid, 0x10);
                let req = SendRequest {
                    addr,
                    mad: &get,
                    timeout_ms: 100,
                    retries: 50,
                };
                victim.send(client, req)?;
                loop {
                    match victim.recv(None)? {
                        Event::Recv { agent, .. } if agent == client => break,
                        Event::SendTimedOut { agent, .. } if agent == client => {
                            lost += 1;
                            break;
                        }
                        _ => {}
                    }
                }
                done += 1;
                max_footprint(&mut peak, victim.footprint());
            }
            let rate = done as f64 / start.elapsed().as_secs_f64();
            if let Some(h) = flooder {
                stop.store(true, Relaxed);
                let (n, t) = h.join().map_err(|_| "the flooder panicked")?;
                flood_frames += n;
                hostile_tid = t;
                // The same node floods again next round: a new transport on its port.
                hostile = Some(fabric.open("hlx", 1)?);
                flooded.push(rate);
            } else {
                quiet.push(rate);
            }
            println!(
                "{:<7} {:>9.0} legit round trips/s",
                if flooding { "flood" } else { "quiet" },
                rate
            );
        }
    }
    let stats = victim.stats();
    let c = config();
    println!("quiet rates: {}", join(&quiet));
    println!("flooded rates: {}", join(&flooded));
    let overflows = fabric
        .port_counters("hlv", 1)
        .map_or(0, |c| c.rcv_queue_overflows);
    println!(
        "hostile frames {flood_frames}; refused sessions {}, dropped unread requests {}, legit Gets timed out {lost}, retries {}",
        stats.dropped_rmpp_limit, stats.queue_drops, stats.retries
    );
    println!(
        "victim's receive queue (depth {}): {overflows} frames dropped on overflow",
        vmad::transport::sim::RECV_QUEUE_DEPTH
    );
    println!(
        "peak footprint: recv_sessions {} (cap {}), reassembly_bytes {} (cap {}), events {} (cap {}), dedup {}, txns {}, tx_queue {}, timers {}",
        peak.recv_sessions,
        c.max_reassemblies,
        peak.reassembly_bytes,
        c.max_reassemblies * c.rmpp.max_message,
        peak.events,
        c.max_events,
        peak.dedup,
        peak.txns,
        peak.tx_queue,
        peak.timers
    );
    println!("peak RSS (VmHWM) {} KiB", vm_hwm_kib());
    victim.close();
    legit.close();
    let _ = serving.join();
    Ok(())
}

fn join(rates: &[f64]) -> String {
    rates
        .iter()
        .map(|r| format!("{r:.0}"))
        .collect::<Vec<_>>()
        .join(" ")
}
