//! RMPP 1 MiB through two engines against the memory-copy floor, and an
//! SA GetTable of 100,000 PathRecords end to end, measured **in the same
//! run**, interleaved round after round (this machine's speed drifts more
//! between minutes than the differences in question; see `churn_ratio.rs`).
//!
//! The floor is what any design must do with 1 MiB of SA data: copy it in
//! 200-byte pieces into a 256-byte transmit slot and out of the slot into the
//! receiver's message. "reused" copies into the same message buffer every
//! round; "fresh" into a new one, as a delivered message is (its pages are
//! new to the process each time: the page faults are part of any design that
//! hands the caller a buffer of its own).
//!
//! Rows, each the median (and best) of the rounds, in ms per transfer, in
//! two groups, each interleaved within itself, its first row its floor:
//! - `floor_fresh_1MiB`, `floor_reused_1MiB`: the floor;
//! - `state_machines_1MiB`: the RMPP sender and receiver back to back;
//! - `engines_1MiB`: two engines back to back through their public API;
//! - `floor_fresh_6.4MB`: the floor for 6.4 MB;
//! - `sa_gettable_100k`: GetTable(PathRecord) request → 100,000 records of
//!   64 bytes (6.4 MB, 32,000 segments) → reassembled response, through two
//!   engines (the records are built once; no path computation).
//!
//! A free argument runs only the rows whose names contain it (for profiling).
//!
//! Run: `cargo bench --bench rmpp_ratio` (about 10 s).

use core::time::Duration;
use std::hint::black_box;
use std::time::Instant as Wall;

use vmad::engine::{AgentId, Engine, EngineConfig, Event, SendRequest};
use vmad::time::Instant;
use vmad::wire::MAD_SIZE;

#[path = "common/rmpp.rs"]
mod common;
use common::{addr, floor, pump, sa_agent, sa_message, DATA, SA_HDR};

const PATHS: usize = 100_000;
const PATH_RECORD: usize = 64;

struct Pair {
    a: Engine,
    b: Engine,
    client: AgentId,
    server: AgentId,
    now: Instant,
    buf: [u8; MAD_SIZE],
}

impl Pair {
    fn new(methods: [u64; 2]) -> Pair {
        let config = |seed| EngineConfig {
            rng_seed: Some(seed),
            ..EngineConfig::default()
        };
        let (mut a, mut b) = (Engine::new(config(1)), Engine::new(config(2)));
        let client = a.register(sa_agent([0; 2])).expect("client agent");
        let server = b.register(sa_agent(methods)).expect("server agent");
        Pair {
            a,
            b,
            client,
            server,
            now: Instant::ZERO,
            buf: [0; MAD_SIZE],
        }
    }

    /// Move every MAD `a` and `b` have to send to the other; false if none moved.
    fn pump(&mut self) -> bool {
        let ab = pump(&mut self.a, &mut self.b, 1, self.now, &mut self.buf);
        pump(&mut self.b, &mut self.a, 2, self.now, &mut self.buf) | ab
    }

    /// Let both engines forget the finished transfer (the receive session's
    /// 10 s linger), so that tables stay small.
    fn settle(&mut self) {
        self.now += Duration::from_secs(11);
        self.a.handle_timeout(self.now);
        self.b.handle_timeout(self.now);
    }

    /// `msg` (GetMulti, no response expected) from `a` to `b`; the length `b` delivers.
    fn one_way(&mut self, msg: &[u8]) -> usize {
        let req = SendRequest {
            addr: addr(2),
            mad: msg,
            timeout_ms: 0,
            retries: 2,
        };
        self.a.send(self.now, self.client, req).expect("send");
        let mut got = 0;
        while self.pump() {
            while let Some(ev) = self.b.poll_event() {
                if let Event::Recv { mad, .. } = ev {
                    got = mad.len();
                }
            }
        }
        self.settle();
        got
    }

    /// GetTable from `a`; `b` answers with `resp` (its TID replaced); the length `a` gets.
    fn get_table(&mut self, tid: u64, resp: &mut [u8]) -> usize {
        let mut req = [0u8; MAD_SIZE];
        req[..4].copy_from_slice(&[1, 0x03, 2, 0x12]);
        req[8..16].copy_from_slice(&tid.to_be_bytes());
        req[16..18].copy_from_slice(&0x35u16.to_be_bytes()); // PathRecord
        req[24] = 1; // RMPP version, not Active: a one-MAD request
        let req = SendRequest {
            addr: addr(2),
            mad: &req,
            timeout_ms: 10_000,
            retries: 0,
        };
        self.a.send(self.now, self.client, req).expect("GetTable");
        let mut got = 0;
        while self.pump() {
            while let Some(ev) = self.b.poll_event() {
                if let Event::Recv { mad, addr, .. } = ev {
                    resp[8..16].copy_from_slice(&mad[8..16]);
                    let answer = SendRequest {
                        addr,
                        mad: resp,
                        timeout_ms: 0,
                        retries: 2,
                    };
                    self.b
                        .send(self.now, self.server, answer)
                        .expect("GetTableResp");
                }
            }
            while let Some(ev) = self.a.poll_event() {
                if let Event::Recv { mad, .. } = ev {
                    got = mad.len();
                }
            }
        }
        self.settle();
        got
    }
}

fn time_ms(f: &mut dyn FnMut()) -> f64 {
    let start = Wall::now();
    f();
    start.elapsed().as_secs_f64() * 1e3
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// A row: its name, the bytes it moves, one transfer.
type Row<'a> = (&'static str, usize, Box<dyn FnMut() + 'a>);

/// Run `rows` in turn, `rounds` times, and print each one's median (best)
/// beside its rate and its ratio per byte to the first row (the floor).
fn run(title: &str, rounds: usize, filter: Option<&String>, mut rows: Vec<Row<'_>>) {
    rows.retain(|(name, ..)| filter.is_none_or(|f| name.contains(f.as_str())));
    if rows.is_empty() {
        return;
    }
    let mut times = vec![Vec::new(); rows.len()];
    for round in 0..rounds {
        for (t, (_, _, f)) in times.iter_mut().zip(rows.iter_mut()) {
            t.push(time_ms(f));
        }
        eprint!("\r{title}: round {}/{rounds}", round + 1);
    }
    eprintln!();
    println!("{title}: ms per transfer, median (best) of {rounds} interleaved rounds");
    let mut floor = None;
    for (t, (name, bytes, _)) in times.iter_mut().zip(&rows) {
        let best = t.iter().copied().fold(f64::MAX, f64::min);
        let mid = median(t);
        let per_byte = mid / *bytes as f64;
        let floor = *floor.get_or_insert(per_byte);
        println!(
            "{name:>24} {mid:>8.3} ({best:.3})  {:>6.0} MiB/s  {:>5.2}× the floor per byte",
            *bytes as f64 / (mid / 1e3) / (1 << 20) as f64,
            per_byte / floor,
        );
    }
}

/// The floor into a fresh buffer, as a delivered message is.
fn floor_fresh(msg: &[u8]) {
    let mut fresh = Vec::with_capacity(msg.len());
    floor(msg, &mut fresh);
    assert_eq!(fresh.len(), msg.len());
    black_box(fresh);
}

fn main() {
    // `cargo bench` passes `--bench`; without it (`cargo test --benches`) a
    // short smoke run checks that the bench still works.
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--list") {
        return;
    }
    let rounds = if args.iter().any(|a| a == "--bench") {
        21
    } else {
        2
    };
    // A free argument runs only the rows whose names contain it (for profiling).
    let filter = args[1..].iter().find(|a| !a.starts_with('-'));

    let msg = sa_message(0x14, 1, DATA); // GetMulti
    let mut reused = Vec::with_capacity(msg.len());
    let mut one_way = Pair::new([1 << 0x14, 0]);
    let rows: Vec<Row<'_>> = vec![
        ("floor_fresh_1MiB", DATA, Box::new(|| floor_fresh(&msg))),
        (
            "floor_reused_1MiB",
            DATA,
            Box::new(|| {
                floor(&msg, &mut reused);
                assert_eq!(reused.len(), msg.len());
            }),
        ),
        (
            "state_machines_1MiB",
            DATA,
            Box::new(|| {
                let got = vmad::engine::rmpp::loopback(msg.clone(), SA_HDR).expect("loopback");
                assert_eq!(got.len(), msg.len());
            }),
        ),
        (
            "engines_1MiB",
            DATA,
            Box::new(|| assert_eq!(one_way.one_way(&msg), msg.len())),
        ),
    ];
    run("RMPP 1 MiB", rounds, filter, rows);

    // Apart from the 1 MiB rows: freeing their buffers moves the allocator's
    // mmap threshold, and with it whether a 6.4 MB buffer is fresh pages.
    let mut table = Pair::new([1 << 0x12, 0]);
    let mut resp = sa_message(0x92, 0, PATHS * PATH_RECORD); // GetTableResp
    resp[16..18].copy_from_slice(&0x35u16.to_be_bytes());
    resp[44..46].copy_from_slice(&((PATH_RECORD / 8) as u16).to_be_bytes()); // AttributeOffset
    let records = resp.clone();
    let mut tid = 0;
    let rows: Vec<Row<'_>> = vec![
        (
            "floor_fresh_6.4MB",
            PATHS * PATH_RECORD,
            Box::new(|| floor_fresh(&records)),
        ),
        (
            "sa_gettable_100k",
            PATHS * PATH_RECORD,
            Box::new(|| {
                tid += 1;
                let len = resp.len();
                assert_eq!(table.get_table(tid, &mut resp), len);
            }),
        ),
    ];
    run("SA GetTable, 100,000 PathRecords", rounds, filter, rows);
}
