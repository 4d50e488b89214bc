//! Engine costs, in virtual time (no I/O):
//! - `round_trip`: request out of one engine, answered by a second, response back;
//! - `send_timeout_churn/N`: with N requests outstanding, one new request
//!   sent and one old one timing out per iteration (the per-MAD cost should
//!   stay flat as N grows).
//!
//! Short runs: `cargo bench --bench engine -- --warm-up-time 1 --measurement-time 2`.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use vmad::engine::{AgentSpec, Engine, EngineConfig, Event, RecvMeta, SendRequest};
use vmad::time::Instant;
use vmad::types::{MadAddr, Qp};
use vmad::wire::MAD_SIZE;

fn perf_agent(methods: [u64; 2]) -> AgentSpec {
    AgentSpec {
        qp: Qp::Gsi,
        mgmt_class: 0x04.into(),
        class_version: 1,
        rmpp_version: 0,
        method_mask: methods,
        oui: 0,
        user_rmpp: false,
    }
}

fn get(tid: u64) -> [u8; MAD_SIZE] {
    let mut m = [0u8; MAD_SIZE];
    m[..4].copy_from_slice(&[1, 0x04, 1, 0x01]);
    m[8..16].copy_from_slice(&tid.to_be_bytes());
    m
}

fn addr(lid: u16) -> MadAddr {
    MadAddr {
        qpn: 1,
        qkey: 0x8001_0000,
        lid,
        ..MadAddr::default()
    }
}

fn round_trip(c: &mut Criterion) {
    let mut client = Engine::new(EngineConfig::default());
    let mut server = Engine::new(EngineConfig::default());
    let ca = client.register(perf_agent([0, 0])).unwrap();
    let sa = server.register(perf_agent([1 << 1, 0])).unwrap();
    let from_client = RecvMeta {
        qp: Qp::Gsi,
        src: addr(1),
        local_qpn: None,
    };
    let from_server = RecvMeta {
        qp: Qp::Gsi,
        src: addr(2),
        local_qpn: None,
    };
    let mut buf = [0u8; MAD_SIZE];
    let mut tid = 0u64;
    let mut now = Instant::ZERO;
    c.bench_function("engine/round_trip", |b| {
        b.iter(|| {
            tid += 1;
            now = Instant::from_micros(tid);
            let m = get(tid);
            let req = SendRequest {
                addr: addr(2),
                mad: &m,
                timeout_ms: 100,
                retries: 1,
            };
            client.send(now, ca, req).unwrap();
            client.poll_transmit(now, &mut buf).unwrap();
            server.handle_datagram(now, from_client, &buf);
            let Some(Event::Recv { mut mad, .. }) = server.poll_event() else {
                panic!("request not delivered");
            };
            mad[3] = 0x81;
            let resp = SendRequest {
                addr: addr(1),
                mad: &mad,
                timeout_ms: 0,
                retries: 0,
            };
            server.send(now, sa, resp).unwrap();
            server.poll_transmit(now, &mut buf).unwrap();
            client.handle_datagram(now, from_server, &buf);
            assert!(matches!(client.poll_event(), Some(Event::Recv { .. })));
        })
    });
}

fn churn(c: &mut Criterion) {
    let mut g = c.benchmark_group("engine/send_timeout_churn");
    for n in [10u64, 1_000, 100_000] {
        let mut e = Engine::new(EngineConfig::default());
        let a = e.register(perf_agent([0, 0])).unwrap();
        let mut buf = [0u8; MAD_SIZE];
        // One request a millisecond, each waiting n ms: n outstanding, one expiring per step.
        let timeout = u32::try_from(n).unwrap();
        let mut step = |e: &mut Engine, t: u64| {
            let now = Instant::from_millis(t);
            let m = get(t);
            let req = SendRequest {
                addr: addr(2),
                mad: &m,
                timeout_ms: timeout,
                retries: 0,
            };
            e.send(now, a, req).unwrap();
            e.poll_transmit(now, &mut buf).unwrap();
            e.handle_timeout(now);
            while e.poll_event().is_some() {}
        };
        for t in 0..n {
            step(&mut e, t);
        }
        let mut t = n;
        g.bench_with_input(BenchmarkId::from_parameter(n), &n, |b, _| {
            b.iter(|| {
                step(&mut e, t);
                t += 1;
            })
        });
        assert_eq!(e.stats().outstanding, n);
    }
    g.finish();
}

criterion_group!(benches, round_trip, churn);
criterion_main!(benches);
