//! Ports on the embedded fabric: request/response round trip, one-way
//! throughput, and a 1 MiB RMPP transfer; beside them the floors on the same
//! machine: the same MADs through a crossbeam channel with no engine, no port and
//! no fabric, one way on one thread and back and forth between two threads that
//! spin as a waiting caller does.
//!
//! Run briefly: `cargo bench --bench port -- --warm-up-time 1 --measurement-time 2`

use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use vmad::engine::{Event, SendRequest};

#[path = "../examples/common/port_rows.rs"]
mod port_rows;
use port_rows::{
    floor_echo, floor_round_trip, gettable_resp, mad, ports, responder, spec, to, PERF, SA,
};

fn round_trip(c: &mut Criterion) {
    let (a, b) = ports("bprt");
    let client = a.register(spec(PERF, 1, 0, &[])).unwrap();
    let server = b.register(spec(PERF, 1, 0, &[0x01])).unwrap();
    let echo = responder(b.clone(), server, |m| {
        let mut r = m.to_vec();
        r[3] = 0x81;
        r
    });
    let mut tid = 0u64;
    c.bench_function("port/round_trip_get", |bench| {
        bench.iter(|| {
            tid += 1;
            let m = mad(PERF, 1, 0x01, tid);
            let req = SendRequest {
                addr: to(2),
                mad: &m,
                timeout_ms: 1000,
                retries: 2,
            };
            a.send(client, req).unwrap();
            a.recv(None).unwrap()
        })
    });
    b.close();
    echo.join().unwrap();
}

fn one_way(c: &mut Criterion) {
    const BATCH: u64 = 1000;
    let (a, b) = ports("bpow");
    let client = a.register(spec(PERF, 1, 0, &[])).unwrap();
    b.register(spec(PERF, 1, 0, &[0x03])).unwrap();
    let mut g = c.benchmark_group("port");
    g.throughput(Throughput::Elements(BATCH));
    let mut tid = 0u64;
    g.bench_function("one_way_send_1000", |bench| {
        bench.iter_custom(|iters| {
            let start = Instant::now();
            for _ in 0..iters {
                for _ in 0..BATCH {
                    tid += 1;
                    let m = mad(PERF, 1, 0x03, tid);
                    let req = SendRequest {
                        addr: to(2),
                        mad: &m,
                        timeout_ms: 0,
                        retries: 0,
                    };
                    a.send(client, req).unwrap();
                }
                for _ in 0..BATCH {
                    b.recv(None).unwrap();
                }
            }
            start.elapsed()
        })
    });
    g.finish();
}

fn rmpp_1mib(c: &mut Criterion) {
    const DATA: usize = 1 << 20;
    let (a, b) = ports("bprm");
    let client = a.register(spec(SA, 2, 1, &[])).unwrap();
    let server = b.register(spec(SA, 2, 1, &[0x12])).unwrap();
    let payload = vec![0x5au8; DATA];
    let serve = responder(b.clone(), server, move |m| gettable_resp(m, &payload));
    let mut g = c.benchmark_group("port");
    g.throughput(Throughput::Bytes(DATA as u64));
    g.sample_size(10);
    let mut tid = 0u64;
    g.bench_function("rmpp_gettable_1mib", |bench| {
        bench.iter(|| {
            tid += 1;
            let mut m = mad(SA, 2, 0x12, tid);
            m[24] = 1;
            let req = SendRequest {
                addr: to(2),
                mad: &m,
                timeout_ms: 5000,
                retries: 2,
            };
            a.send(client, req).unwrap();
            match a.recv(None).unwrap() {
                Event::Recv { mad, .. } => assert_eq!(mad.len(), 56 + DATA),
                other => panic!("{other:?}"),
            }
        })
    });
    g.finish();
    b.close();
    serve.join().unwrap();
}

/// The handoff the round trip cannot beat: a 256-byte MAD through a crossbeam channel
/// and back between two spinning threads. Run right after the round trip, so that the
/// two see the host in the same state (on the project's VM a process can run at half
/// speed for a while; `scripts/port-floor` pairs them in alternating processes).
fn round_trip_floor(c: &mut Criterion) {
    let (link, echo) = floor_echo();
    let mut tid = 0u64;
    c.bench_function("port/floor_round_trip_channels", |bench| {
        bench.iter(|| {
            tid += 1;
            floor_round_trip(&link, mad(PERF, 1, 0x01, tid))
        })
    });
    drop(link);
    echo.join().unwrap();
}

/// The handoff one-way sends cannot beat: 1,000 MADs into a crossbeam channel and out
/// on one thread.
fn one_way_floor(c: &mut Criterion) {
    const BATCH: u64 = 1000;
    let (tx, rx) = crossbeam_channel::unbounded::<[u8; 256]>();
    let mut g = c.benchmark_group("port");
    g.throughput(Throughput::Elements(BATCH));
    let mut tid = 0u64;
    g.bench_function("floor_one_way_channel_1000", |bench| {
        bench.iter(|| {
            for _ in 0..BATCH {
                tid += 1;
                tx.send(mad(PERF, 1, 0x03, tid)).unwrap();
            }
            let mut sum = 0u64;
            for _ in 0..BATCH {
                sum += u64::from(rx.recv().unwrap()[15]);
            }
            sum
        })
    });
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(2));
    targets = round_trip, round_trip_floor, one_way, one_way_floor, rmpp_1mib
}
criterion_main!(benches);
