//! Measures `vmad::client`'s GMP window: a batch of PortCounters reads (one per LID,
//! round robin) or SA Gets (NodeRecord by LID, all to the SA) submitted at once under
//! each window, in an order that rotates per round, against the embedded subnet built
//! from a topology file, or against ibsim with OpenSM (`scripts/opensm-start`).
//!
//! ```sh
//! cargo run --release --example gmp_window -- --sim tests/topo/ft1612.net
//! eval "$(scripts/ibsim-start tests/topo/ft234.net)"; scripts/opensm-start "$VMAD_IBSIM_RUN"
//! cargo run --release --example gmp_window -- --lids 234
//! scripts/ibsim-stop "$VMAD_IBSIM_RUN"
//! ```
//!
//! Options: `--kind pc|sa|both` (default both), `--windows 1,4,8,16,32,64,128`,
//! `--requests N` per run (default 10000), `--rounds N` (default 5), `--lids N` (ask
//! LIDs 1..=N instead of reading them from the SA: OpenSM's SA under umad2sim sends
//! a table's first MAD only). Prints one line per run, then per kind and window the
//! median, min and max rate over the rounds, and how many requests failed in all.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use vmad::client::{Client, ClientConfig, Pending, SaRecord};
use vmad::port::{Port, PortConfig};
use vmad::subnet::FabricBuilder;
use vmad::transport::ibsim::IbsimTransport;
use vmad::wire::sa::node_record;

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
enum Kind {
    PortCounters,
    SaGet,
}

/// Submit `n` requests of `kind` to `lids` under `window` at once; wait for all.
/// Returns (seconds, failed).
fn run(port: &Port, kind: Kind, window: usize, n: usize, lids: &[u16]) -> (f64, usize) {
    let config = ClientConfig {
        gmp_window: window,
        // SA Gets all go to one destination: its cap must not hide the window.
        per_destination: if kind == Kind::SaGet { window } else { 8 },
        timeout_ms: 1_000,
        retries: 2,
        ..ClientConfig::default()
    };
    let c = Client::new(port, config).expect("client");
    let start = Instant::now();
    let failed = match kind {
        Kind::PortCounters => {
            let pending: Vec<Pending<_>> = (0..n)
                .map(|i| {
                    c.port_counters_async(lids[i % lids.len()], 1)
                        .expect("submit")
                })
                .collect();
            pending
                .into_iter()
                .map(|p| p.wait().is_err())
                .filter(|&f| f)
                .count()
        }
        Kind::SaGet => {
            let pending: Vec<_> = (0..n)
                .map(|i| {
                    let mut t = node_record::Repr::template();
                    t.lid = lids[i % lids.len()];
                    c.sa_get_async(&t, node_record::COMP_LID).expect("submit")
                })
                .collect();
            pending
                .into_iter()
                .map(|p| p.wait().is_err())
                .filter(|&f| f)
                .count()
        }
    };
    let secs = start.elapsed().as_secs_f64();
    let stats = c.stats();
    assert!(stats.max_on_wire[1] <= window, "window exceeded: {stats:?}");
    (secs, failed)
}

fn main() {
    let mut kinds = vec![Kind::PortCounters, Kind::SaGet];
    let mut windows = vec![1usize, 4, 8, 16, 32, 64, 128];
    let (mut n, mut rounds, mut lid_count, mut sim) = (10_000usize, 5usize, None, None);
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut val = || args.next().unwrap_or_else(|| panic!("{a} needs a value"));
        match a.as_str() {
            "--kind" => {
                kinds = match val().as_str() {
                    "pc" => vec![Kind::PortCounters],
                    "sa" => vec![Kind::SaGet],
                    _ => vec![Kind::PortCounters, Kind::SaGet],
                }
            }
            "--windows" => {
                windows = val()
                    .split(',')
                    .map(|w| w.parse().expect("a window"))
                    .collect()
            }
            "--requests" => n = val().parse().expect("a count"),
            "--rounds" => rounds = val().parse().expect("a count"),
            "--lids" => lid_count = Some(val().parse::<u16>().expect("a count")),
            "--sim" => sim = Some(val()),
            _ => {
                eprintln!(
                    "usage: gmp_window [--sim TOPOLOGY] [--kind pc|sa|both] [--windows W,..] \
                     [--requests N] [--rounds N] [--lids N]"
                );
                std::process::exit(2);
            }
        }
    }
    let mut _fabric = None;
    let port: Arc<Port> = match sim {
        Some(file) => {
            let text = std::fs::read_to_string(&file).expect("read the topology");
            let builder = FabricBuilder::from_topology(&text).expect("parse the topology");
            let ca = builder.ca_names().into_iter().next().expect("a CA");
            _fabric = Some(builder.register_only(&[&ca]).build().expect("build"));
            vmad::umad::open(&ca, 1).expect("open port").1
        }
        None => {
            let transport = IbsimTransport::from_env().unwrap_or_else(|e| {
                eprintln!("gmp_window: cannot attach to ibsim ({e}); see the file's docs");
                std::process::exit(1);
            });
            Arc::new(Port::open(Box::new(transport), PortConfig::default()).expect("open port"))
        }
    };
    let lids: Vec<u16> = match lid_count {
        Some(k) => (1..=k).collect(),
        None => {
            let c = Client::new(&port, ClientConfig::default()).expect("client");
            let table = c
                .sa_get_table(&node_record::Repr::template(), 0)
                .expect("NodeRecords");
            assert!(!table.unsegmented(), "the SA's table was cut: give --lids");
            let mut l: Vec<u16> = table.iter().map(|r| r.lid).collect();
            l.sort_unstable();
            l.dedup();
            l
        }
    };
    eprintln!(
        "gmp_window: {} LIDs, {n} requests per run, {rounds} rounds",
        lids.len()
    );
    let settings: Vec<(Kind, usize)> = kinds
        .iter()
        .flat_map(|k| windows.iter().map(move |w| (*k, *w)))
        .collect();
    let mut rates: BTreeMap<(Kind, usize), Vec<f64>> = BTreeMap::new();
    let mut failures: BTreeMap<(Kind, usize), usize> = BTreeMap::new();
    for r in 0..rounds {
        for i in 0..settings.len() {
            let (kind, w) = settings[(i + r * 3) % settings.len()];
            let (secs, failed) = run(&port, kind, w, n, &lids);
            let rate = n as f64 / secs;
            println!("round {r} {kind:?} window {w}: {secs:.3} s, {rate:.0}/s, {failed} failed");
            rates.entry((kind, w)).or_default().push(rate);
            *failures.entry((kind, w)).or_default() += failed;
        }
    }
    println!("kind          window  median/s      min/s      max/s  failed");
    for ((kind, w), mut v) in rates {
        v.sort_by(f64::total_cmp);
        let median = v[v.len() / 2];
        println!(
            "{:12} {w:7} {median:9.0} {:10.0} {:10.0} {:7}",
            format!("{kind:?}"),
            v[0],
            v[v.len() - 1],
            failures[&(kind, w)]
        );
    }
}
