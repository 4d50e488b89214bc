//! RMPP throughput: segment and reassemble a 1 MiB SA message through the
//! sender and receiver state machines joined back to back (no I/O, no loss).
//!
//! Short runs: `cargo bench --bench rmpp -- --warm-up-time 1 --measurement-time 2`.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};

/// SA header length: MAD 24 + RMPP 12 + SA 20; 200 data bytes a segment.
const SA_HDR: usize = 56;

fn sa_message(data_len: usize) -> Vec<u8> {
    let mut m = vec![0u8; SA_HDR + data_len];
    m[..4].copy_from_slice(&[1, 0x03, 2, 0x92]);
    m[24] = 1; // RMPP version
    m[26] = 1; // RMPPFlags.Active
    for (i, b) in m[SA_HDR..].iter_mut().enumerate() {
        *b = i as u8;
    }
    m
}

fn bench(c: &mut Criterion) {
    let data_len = 1 << 20;
    let msg = sa_message(data_len);
    let mut g = c.benchmark_group("rmpp");
    g.throughput(Throughput::Bytes(data_len as u64));
    g.bench_function("state_machines_1MiB", |b| {
        b.iter(|| {
            let got = vmad::engine::rmpp::loopback(msg.clone(), SA_HDR).unwrap();
            assert_eq!(got.len(), msg.len());
            got
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
