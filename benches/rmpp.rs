//! RMPP throughput for a 1 MiB SA message (5243 segments):
//! - `state_machines_1MiB`: the sender and receiver state machines joined
//!   back to back (segmentation, ACK windows, reassembly; no engine);
//! - `engines_1MiB`: two engines joined back to back through their public
//!   API (agents, session tables, addressing, timers; no transport);
//! - `copy_floor_1MiB`: what any design must do with the data, measured in
//!   the same run: 1 MiB copied in 200-byte pieces into a 256-byte transmit
//!   slot and out of it into a message buffer.
//!
//! `benches/rmpp_ratio.rs` runs the same rows interleaved, with the floor
//! into fresh buffers and an SA GetTable of 100,000 PathRecords.
//!
//! Short runs: `cargo bench --bench rmpp -- --warm-up-time 1 --measurement-time 2`.

use core::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use vmad::engine::{Engine, EngineConfig, Event, SendRequest};
use vmad::time::Instant;
use vmad::wire::MAD_SIZE;

#[path = "common/rmpp.rs"]
mod common;
use common::{addr, floor, pump, sa_agent, sa_message, DATA, SA_HDR};

/// SA GetMulti, the method these rows send.
const GET_MULTI: u8 = 0x14;

fn state_machines(c: &mut Criterion) {
    let msg = sa_message(GET_MULTI, 1, DATA);
    let mut g = c.benchmark_group("rmpp");
    g.throughput(Throughput::Bytes(DATA as u64));
    g.bench_function("state_machines_1MiB", |b| {
        b.iter(|| {
            let got = vmad::engine::rmpp::loopback(msg.clone(), SA_HDR).unwrap();
            assert_eq!(got.len(), msg.len());
            got
        })
    });
    g.finish();
}

fn engines(c: &mut Criterion) {
    let mut a = Engine::new(EngineConfig {
        rng_seed: Some(1),
        ..EngineConfig::default()
    });
    let mut b = Engine::new(EngineConfig {
        rng_seed: Some(2),
        ..EngineConfig::default()
    });
    let client = a.register(sa_agent([0; 2])).unwrap();
    b.register(sa_agent([1 << 0x14, 0])).unwrap();
    let mut msg = sa_message(GET_MULTI, 0, DATA);
    let mut now = Instant::ZERO;
    let mut tid = 0u64;
    let mut buf = [0u8; MAD_SIZE];
    let mut g = c.benchmark_group("rmpp");
    g.throughput(Throughput::Bytes(DATA as u64));
    g.sample_size(10);
    g.bench_function("engines_1MiB", |bench| {
        bench.iter(|| {
            tid += 1;
            msg[8..16].copy_from_slice(&tid.to_be_bytes());
            let req = SendRequest {
                addr: addr(2),
                mad: &msg,
                timeout_ms: 0,
                retries: 2,
            };
            a.send(now, client, req).unwrap();
            let mut got = None;
            while pump(&mut a, &mut b, 1, now, &mut buf) | pump(&mut b, &mut a, 2, now, &mut buf) {
                while let Some(ev) = b.poll_event() {
                    if let Event::Recv { mad, .. } = ev {
                        got = Some(mad.len());
                    }
                }
            }
            assert_eq!(got, Some(SA_HDR + DATA));
            // Let the receive session's linger run out, so tables stay small.
            now += Duration::from_secs(11);
            a.handle_timeout(now);
            b.handle_timeout(now);
        })
    });
    g.finish();
}

fn copy_floor(c: &mut Criterion) {
    let msg = sa_message(GET_MULTI, 1, DATA);
    let mut message = Vec::with_capacity(msg.len());
    let mut g = c.benchmark_group("rmpp");
    g.throughput(Throughput::Bytes(DATA as u64));
    g.bench_function("copy_floor_1MiB", |b| {
        b.iter(|| {
            floor(&msg, &mut message);
            assert_eq!(message.len(), msg.len());
        })
    });
    g.finish();
}

criterion_group!(benches, state_machines, engines, copy_floor);
criterion_main!(benches);
