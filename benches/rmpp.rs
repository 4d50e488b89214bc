//! RMPP throughput for a 1 MiB SA message (5243 segments):
//! - `state_machines_1MiB`: the sender and receiver state machines joined
//!   back to back (segmentation, ACK windows, reassembly; no engine);
//! - `engines_1MiB`: two engines joined back to back through their public
//!   API (agents, session tables, addressing, timers; no transport).
//!
//! Short runs: `cargo bench --bench rmpp -- --warm-up-time 1 --measurement-time 2`.

use core::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use vmad::engine::{AgentSpec, Engine, EngineConfig, Event, RecvMeta, SendRequest};
use vmad::time::Instant;
use vmad::types::{MadAddr, Qp, GSI_QKEY};
use vmad::wire::MAD_SIZE;

/// SA header length: MAD 24 + RMPP 12 + SA 20; 200 data bytes a segment.
const SA_HDR: usize = 56;
const DATA: usize = 1 << 20;

fn sa_message(tid: u64, data_len: usize) -> Vec<u8> {
    let mut m = vec![0u8; SA_HDR + data_len];
    m[..4].copy_from_slice(&[1, 0x03, 2, 0x14]); // SA GetMulti
    m[8..16].copy_from_slice(&tid.to_be_bytes());
    m[24] = 1; // RMPP version
    m[26] = 1; // RMPPFlags.Active
    for (i, b) in m[SA_HDR..].iter_mut().enumerate() {
        *b = i as u8;
    }
    m
}

fn state_machines(c: &mut Criterion) {
    let msg = sa_message(1, DATA);
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

fn sa_agent(methods: [u64; 2]) -> AgentSpec {
    AgentSpec {
        qp: Qp::Gsi,
        mgmt_class: 0x03,
        class_version: 2,
        rmpp_version: 1,
        method_mask: methods,
        oui: 0,
        user_rmpp: false,
    }
}

fn addr(lid: u16) -> MadAddr {
    MadAddr {
        qpn: 1,
        qkey: GSI_QKEY,
        lid,
        ..MadAddr::default()
    }
}

/// Move every MAD `from` has to send into `to`, as if from LID `src_lid`.
fn pump(
    from: &mut Engine,
    to: &mut Engine,
    src_lid: u16,
    now: Instant,
    buf: &mut [u8; MAD_SIZE],
) -> bool {
    let mut moved = false;
    while let Some(tx) = from.poll_transmit(now, buf) {
        let meta = RecvMeta {
            qp: Qp::Gsi,
            src: addr(src_lid),
        };
        to.handle_datagram(now, meta, &buf[..tx.len]);
        moved = true;
    }
    moved
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
    let mut msg = sa_message(0, DATA);
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

criterion_group!(benches, state_machines, engines);
criterion_main!(benches);
