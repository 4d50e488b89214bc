//! CRC-32 (IEEE), the ICRC's core: vmad's table-driven loop against the
//! `crc32fast` crate, on the sizes the RoCE transport and the capture writer
//! feed it (a whole RoCE v2 MAD frame, and a larger buffer).
//!
//! Run briefly: `cargo bench --bench icrc -- --warm-up-time 1 --measurement-time 2`

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};

/// The table-driven CRC-32 vmad used before switching to crc32fast (the
/// reference: same polynomial, same bit order).
fn table_crc32(bytes: &[u8]) -> u32 {
    const fn table() -> [u32; 256] {
        let mut t = [0u32; 256];
        let mut i = 0;
        while i < 256 {
            let mut c = i as u32;
            let mut k = 0;
            while k < 8 {
                c = if c & 1 != 0 {
                    (c >> 1) ^ 0xedb8_8320
                } else {
                    c >> 1
                };
                k += 1;
            }
            t[i] = c;
            i += 1;
        }
        t
    }
    static T: [u32; 256] = table();
    let mut c = !0u32;
    for &b in bytes {
        c = T[usize::from((c as u8) ^ b)] ^ (c >> 8);
    }
    !c
}

fn crc(c: &mut Criterion) {
    let mut g = c.benchmark_group("crc32");
    // 8 masked LRH bytes + IPv6 40 + UDP 8 + BTH 12 + DETH 8 + MAD 256: one ICRC.
    for len in [332usize, 4096] {
        let data: Vec<u8> = (0..len).map(|i| (i * 31 + 7) as u8).collect();
        assert_eq!(table_crc32(&data), crc32fast::hash(&data));
        assert_eq!(vmad::wire::roce::crc32(&data), crc32fast::hash(&data));
        g.throughput(Throughput::Bytes(len as u64));
        g.bench_with_input(BenchmarkId::new("table", len), &data, |b, d| {
            b.iter(|| table_crc32(std::hint::black_box(d)))
        });
        g.bench_with_input(BenchmarkId::new("crc32fast", len), &data, |b, d| {
            b.iter(|| crc32fast::hash(std::hint::black_box(d)))
        });
        g.bench_with_input(
            BenchmarkId::new("vmad::wire::roce::crc32", len),
            &data,
            |b, d| b.iter(|| vmad::wire::roce::crc32(std::hint::black_box(d))),
        );
    }
    g.finish();
}

criterion_group!(benches, crc);
criterion_main!(benches);
