//! The embedded SA answering a GetTable of every PathRecord of a 1,012-node
//! fat tree (40 leaves × 24 CAs, 12 spines: 1,012 end ports, 1,024,144
//! paths, 65.5 MB over RMPP), through the SA's engine and a client engine
//! joined back to back in virtual time: path computation (an LFT walk per
//! pair), record matching, segmentation, ACK windows and reassembly.
//!
//! `cargo bench --bench sa`

use core::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use vmad::subnet::SaBench;

fn all_paths(c: &mut Criterion) {
    let mut sa = SaBench::fat_tree(40, 24, 12, 128 << 20);
    let nodes = sa.nodes();
    let paths = sa.all_path_records().expect("the GetTable succeeds");
    assert_eq!(
        paths,
        nodes * nodes,
        "one path per ordered pair of end ports"
    );
    let mut g = c.benchmark_group("sa");
    g.sample_size(10)
        .measurement_time(Duration::from_secs(20))
        .throughput(Throughput::Elements(paths as u64));
    g.bench_function(format!("path_records_gettable_{nodes}_nodes"), |b| {
        b.iter(|| sa.all_path_records());
    });
    g.finish();
}

criterion_group!(benches, all_paths);
criterion_main!(benches);
