//! Times the embedded fabric's built-in SM on an ibsim topology file: load, the
//! first sweep (when the fabric is built) and a re-sweep, with what the SM did.
//!
//!     cargo run --release --example subnet_sweep -- tests/topo/ft1612.net [runs]
//!
//! Prints one line per run: `load_s build_and_sweep_s resweep_s nodes switches lids smps failed`.
//! `scripts/bench-subnet` runs it beside OpenSM on ibsim.

use std::time::Instant;

use vmad::subnet::FabricBuilder;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let path = args
        .next()
        .ok_or("usage: subnet_sweep <topology.net> [runs]")?;
    let runs: usize = args.next().map_or(Ok(1), |r| r.parse())?;
    let text = std::fs::read_to_string(&path)?;
    for _ in 0..runs {
        let t0 = Instant::now();
        let builder = FabricBuilder::from_topology(&text)?;
        let t1 = Instant::now();
        let fabric = builder.build_private()?;
        let t2 = Instant::now();
        let stats = fabric.sweep()?;
        let t3 = Instant::now();
        println!(
            "{:.4} {:.4} {:.4} {} {} {} {} {}",
            (t1 - t0).as_secs_f64(),
            (t2 - t1).as_secs_f64(),
            (t3 - t2).as_secs_f64(),
            stats.nodes,
            stats.switches,
            stats.lids,
            stats.smps,
            stats.failed
        );
        if stats.failed != 0 || stats.nodes != fabric.swept_nodes() {
            return Err(format!("sweep incomplete: {stats:?}").into());
        }
    }
    Ok(())
}
