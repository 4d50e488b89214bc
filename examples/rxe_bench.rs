//! Round-trip latency and RMPP transfer time on soft-RoCE, inside the rxe VM.
//!
//! Run by `scripts/bench-rxe` (one VM boot). Three pairs, all rxe0 -> rxe1:
//!
//! - (a) vmad verbs  <-> vmad verbs (a responder on its own UD QP)
//! - (b) vmad verbs  <-> the kernel's QP1 and a libibumad agent (`umad_agent serve`)
//! - (c) libibumad   <-> the kernel's QP1 and the same agent (`umad_agent client`)
//!
//! Latency: sequential 256-byte Get/GetResp round trips, p50/p99.
//! RMPP: sequential Gets answered with 64 KiB / 1 MiB RMPP responses, p50.
//! Set `BENCH_CHANNEL=1` to park vmad's port threads on the completion channel.

use std::io::{BufRead, BufReader};
use std::net::Ipv6Addr;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use vmad::engine::{Event, SendRequest};
use vmad::port::{Port, PortConfig};
use vmad::transport::verbs::{VerbsConfig, VerbsTransport};
use vmad::types::MadAddr;

#[path = "common/vm_bench.rs"]
mod vm_bench;
use vm_bench::{answer, count, dest, env, get, percentile, round_trip, spec, us};

fn port(dev: &str) -> (Port, u32, [u8; 16]) {
    let t = VerbsTransport::open(VerbsConfig {
        device: Some(dev.into()),
        completion_channel: std::env::var_os("BENCH_CHANNEL").is_some(),
        ..Default::default()
    })
    .expect("verbs transport");
    let (qpn, gid) = (t.qpn(), t.source_gid().0);
    (
        Port::open(Box::new(t), PortConfig::default()).expect("port"),
        qpn,
        gid,
    )
}

/// (p50, p99) of `n` plain round trips, and p50 of RMPP transfers of each size.
fn measure(
    p: &Port,
    to: MadAddr,
    n: usize,
    reps: &[(usize, usize)],
) -> (Duration, Duration, Vec<Duration>) {
    let a = p.register(spec(0x09, 0)).unwrap();
    let r = p.register(spec(0x30, 0)).unwrap();
    let mut lat: Vec<_> = (0..n)
        .map(|k| round_trip(p, a, to, &get(0x09, 0x10_0000 + k as u64, 0)).0)
        .collect();
    let (p50, p99) = (percentile(&mut lat, 50), percentile(&mut lat, 99));
    let mut rmpp = Vec::new();
    for (i, &(size, times)) in reps.iter().enumerate() {
        let mut t: Vec<_> = (0..times)
            .map(|k| {
                let (d, len) = round_trip(
                    p,
                    r,
                    to,
                    &get(0x30, 0x20_0000 + (i * 100 + k) as u64, size as u32),
                );
                assert_eq!(len, 40 + size);
                d
            })
            .collect();
        rmpp.push(percentile(&mut t, 50));
    }
    (p50, p99, rmpp)
}

/// A vmad responder on rxe1: echo for class 0x09, RMPP of attr_mod bytes for 0x30.
fn vmad_server(stop: Arc<AtomicBool>) -> (std::thread::JoinHandle<()>, u32, [u8; 16]) {
    let (p, qpn, gid) = port(&env("RXE1_DEV"));
    let h = std::thread::spawn(move || {
        p.register(spec(0x09, 0b110)).unwrap();
        let r = p.register(spec(0x30, 0b110)).unwrap();
        while !stop.load(Ordering::Relaxed) {
            let Ok(Event::Recv { agent, addr, mad }) = p.recv(Some(Duration::from_millis(50)))
            else {
                continue;
            };
            let resp = answer(&mad, agent == r, |_| 0x5a);
            let _ = p.send(
                agent,
                SendRequest {
                    addr,
                    mad: &resp,
                    timeout_ms: 0,
                    retries: 0,
                },
            );
        }
    });
    (h, qpn, gid)
}

fn kernel_agent(agent: &str) -> Child {
    let mut c = Command::new(agent)
        .args(["serve", &env("RXE1_DEV"), &env("RXE1_PORT"), "600"])
        .stdout(Stdio::piped())
        .spawn()
        .expect("umad_agent");
    let mut line = String::new();
    BufReader::new(c.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line.trim(), "READY");
    c
}

/// p50 (and p99) in µs from `umad_agent client` output.
fn umad_client(agent: &str, n: usize, bytes: usize) -> (f64, f64) {
    let out = Command::new(agent)
        .args([
            "client",
            &env("RXE0_DEV"),
            &env("RXE0_PORT"),
            &env("RXE1_GID"),
            &env("RXE0_GID_INDEX"),
            &n.to_string(),
            &bytes.to_string(),
        ])
        .output()
        .expect("umad_agent client");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "umad client failed: {text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let field = |k: &str| -> f64 {
        text.split_whitespace()
            .find_map(|w| w.strip_prefix(k))
            .and_then(|v| v.parse().ok())
            .unwrap_or(f64::NAN)
    };
    (field("p50_us="), field("p99_us="))
}

fn main() {
    let agent = std::env::var("RXE_AGENT").unwrap_or_else(|_| "target/rxe/umad_agent".into());
    let n = count("BENCH_N", 300);
    let reps = [
        (64 << 10, count("BENCH_64K", 5)),
        (1 << 20, count("BENCH_1M", 2)),
    ];
    let kernel_gid: [u8; 16] = env("RXE1_GID").parse::<Ipv6Addr>().unwrap().octets();

    let stop = Arc::new(AtomicBool::new(false));
    let (server, sqpn, sgid) = vmad_server(stop.clone());
    let (client, _, _) = port(&env("RXE0_DEV"));
    let a = measure(&client, dest(sgid, sqpn), n, &reps);
    stop.store(true, Ordering::Relaxed);
    server.join().unwrap();

    let mut k = kernel_agent(&agent);
    let b = measure(&client, dest(kernel_gid, 1), n, &reps);
    drop(client);
    let c_lat = umad_client(&agent, n, 0);
    let c_64k = umad_client(&agent, reps[0].1, reps[0].0).0;
    let c_1m = umad_client(&agent, reps[1].1, reps[1].0).0;
    let _ = k.kill();
    let _ = k.wait();

    let accel = std::env::var("RXE_VM_ACCEL").unwrap_or_else(|_| "unknown".into());
    let mode = if std::env::var_os("BENCH_CHANNEL").is_some() {
        "completion channel"
    } else {
        "busy poll"
    };
    println!("rxe bench: accelerator {accel}, vmad wait mode {mode}, {n} round trips, RMPP 64 KiB x{} / 1 MiB x{}", reps[0].1, reps[1].1);
    println!(
        "{:<34} {:>10} {:>10} {:>12} {:>12}",
        "pair", "p50 us", "p99 us", "64KiB ms", "1MiB ms"
    );
    let rows = [
        (
            "(a) vmad verbs <-> vmad verbs",
            us(a.0),
            us(a.1),
            us(a.2[0]) / 1e3,
            us(a.2[1]) / 1e3,
        ),
        (
            "(b) vmad verbs <-> kernel umad",
            us(b.0),
            us(b.1),
            us(b.2[0]) / 1e3,
            us(b.2[1]) / 1e3,
        ),
        (
            "(c) libibumad  <-> kernel umad",
            c_lat.0,
            c_lat.1,
            c_64k / 1e3,
            c_1m / 1e3,
        ),
    ];
    for (name, p50, p99, r64, r1m) in rows {
        println!("{name:<34} {p50:>10.0} {p99:>10.0} {r64:>12.1} {r1m:>12.1}");
    }
    let ratio = |x: f64, y: f64| x / y;
    println!(
        "ratios vs (c): (a) p50 {:.2}x, 64KiB {:.2}x, 1MiB {:.2}x; (b) p50 {:.2}x, 64KiB {:.2}x, 1MiB {:.2}x",
        ratio(rows[0].1, rows[2].1),
        ratio(rows[0].3, rows[2].3),
        ratio(rows[0].4, rows[2].4),
        ratio(rows[1].1, rows[2].1),
        ratio(rows[1].3, rows[2].3),
        ratio(rows[1].4, rows[2].4),
    );
}
