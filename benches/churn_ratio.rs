//! Send + timeout churn at 10, 1,000 and 100,000 outstanding requests,
//! measured **in the same run**, interleaved, beside the memory floor.
//!
//! `benches/engine.rs` (criterion) measures each outstanding count on its
//! own, minutes apart, and this machine's speed drifts more than the
//! differences in question. Here the three engines take turns, round after
//! round, and each keeps its best round: the ratio of 100,000 to 10 is what
//! the outstanding count costs.
//!
//! The floor is what any design pays for holding that many requests: each
//! keeps its MAD (256 bytes, for retries) and a 128-byte record, written
//! when sent and read when it expires, n sends later. At 100,000 that is
//! 38 MB, out of every core-private cache, so even the floor grows with n.
//! The engine is flat when it grows by no more than the floor does.
//!
//! Run: `cargo bench --bench churn_ratio` (about 20 s).

use std::hint::black_box;
use std::time::Instant as Wall;

use vmad::engine::{AgentId, AgentSpec, Engine, EngineConfig, SendRequest};
use vmad::time::Instant;
use vmad::types::{MadAddr, Qp};
use vmad::wire::MAD_SIZE;

const SIZES: [u64; 3] = [10, 1_000, 100_000];

/// One engine with `n` requests outstanding; each step sends one (waiting
/// `n` ms) and, one millisecond later than the last, times one out.
struct Churn {
    engine: Engine,
    agent: AgentId,
    n: u64,
    t: u64,
    out: [u8; MAD_SIZE],
}

impl Churn {
    fn new(n: u64) -> Churn {
        let mut engine = Engine::new(EngineConfig::default());
        let agent = engine
            .register(AgentSpec {
                qp: Qp::Gsi,
                mgmt_class: 0x04.into(),
                class_version: 1,
                rmpp_version: 0,
                method_mask: [0, 0],
                oui: 0,
                user_rmpp: false,
            })
            .expect("register");
        let mut c = Churn {
            engine,
            agent,
            n,
            t: 0,
            out: [0; MAD_SIZE],
        };
        for _ in 0..n {
            c.step();
        }
        assert_eq!(c.engine.stats().outstanding, n);
        c
    }

    fn step(&mut self) {
        let now = Instant::from_millis(self.t);
        let mut mad = [0u8; MAD_SIZE];
        mad[..4].copy_from_slice(&[1, 0x04, 1, 0x01]);
        mad[8..16].copy_from_slice(&self.t.to_be_bytes());
        let req = SendRequest {
            addr: MadAddr {
                qpn: 1,
                qkey: 0x8001_0000,
                lid: 2,
                ..MadAddr::default()
            },
            mad: &mad,
            timeout_ms: u32::try_from(self.n).expect("timeout fits"),
            retries: 0,
        };
        self.engine.send(now, self.agent, req).expect("send");
        self.engine
            .poll_transmit(now, &mut self.out)
            .expect("transmit");
        self.engine.handle_timeout(now);
        while self.engine.poll_event().is_some() {}
        self.t += 1;
    }
}

/// The floor: a ring of `n + 1` requests' memory, one written and the one
/// sent `n` steps earlier read, per step.
struct Floor {
    records: Vec<[u64; 16]>,
    mads: Vec<[u8; MAD_SIZE]>,
    t: usize,
    sum: u64,
}

impl Floor {
    fn new(n: u64) -> Floor {
        let len = usize::try_from(n).expect("fits") + 1;
        Floor {
            records: vec![[1; 16]; len],
            mads: vec![[1; MAD_SIZE]; len],
            t: 0,
            sum: 0,
        }
    }

    fn step(&mut self) {
        let len = self.records.len();
        let old = (self.t + 1) % len;
        self.sum = self
            .sum
            .wrapping_add(self.records[old][3] ^ u64::from(self.mads[old][8]));
        let new = self.t % len;
        self.records[new] = black_box([self.t as u64; 16]);
        self.mads[new] = black_box([self.t as u8; MAD_SIZE]);
        self.t += 1;
    }
}

fn time_round(steps: u64, mut step: impl FnMut()) -> f64 {
    let start = Wall::now();
    for _ in 0..steps {
        step();
    }
    start.elapsed().as_nanos() as f64 / steps as f64
}

fn main() {
    // `cargo bench` passes `--bench`; without it (`cargo test --benches`) a
    // short smoke run checks that the bench still works.
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--list") {
        return;
    }
    let (rounds, steps) = if args.iter().any(|a| a == "--bench") {
        (15, 200_000)
    } else {
        (2, 2_000)
    };
    let mut engines: Vec<Churn> = SIZES.iter().map(|&n| Churn::new(n)).collect();
    let mut floors: Vec<Floor> = SIZES.iter().map(|&n| Floor::new(n)).collect();
    let mut engine_best = [f64::MAX; 3];
    let mut floor_best = [f64::MAX; 3];
    for round in 0..rounds {
        for i in 0..SIZES.len() {
            engine_best[i] = engine_best[i].min(time_round(steps, || engines[i].step()));
            floor_best[i] = floor_best[i].min(time_round(steps, || floors[i].step()));
        }
        eprint!("\rround {}/{rounds}", round + 1);
    }
    eprintln!();
    black_box(floors.iter().map(|f| f.sum).sum::<u64>());
    for e in &engines {
        assert_eq!(e.engine.stats().outstanding, e.n, "still n outstanding");
    }
    println!("send + timeout churn, ns per MAD (best of {rounds} interleaved rounds of {steps})");
    println!(
        "{:>12} {:>10} {:>8} {:>10} {:>8}",
        "outstanding", "engine", "× at 10", "floor", "× at 10"
    );
    for i in 0..SIZES.len() {
        println!(
            "{:>12} {:>10.1} {:>8.2} {:>10.1} {:>8.2}",
            SIZES[i],
            engine_best[i],
            engine_best[i] / engine_best[0],
            floor_best[i],
            floor_best[i] / floor_best[0],
        );
    }
    let grew = engine_best[2] - engine_best[0];
    let floor_grew = floor_best[2] - floor_best[0];
    println!(
        "100,000 vs 10: the engine grew {grew:.1} ns per MAD, the memory floor {floor_grew:.1} ns"
    );
}
