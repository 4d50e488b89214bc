//! Round-trip latency and RMPP transfer time of the roce transport, inside
//! the rxe VM in RoCE mode (vmad is QP1 of 2001:db8::2 in netns ns1; the
//! kernel's rxe0 is 2001:db8::1). Run by `scripts/bench-roce` (one boot).
//!
//! - (d) vmad roce  -> the kernel's QP1 and a libibumad agent (`umad_agent serve` on rxe0)
//! - (e) libibumad on rxe0 (`roce_client`) -> vmad roce as QP1, answering itself
//! - (f) libibumad on rxe0 -> the kernel's own QP1 (rxe loopback; the baseline)
//!
//! The rows of `scripts/bench-rxe` for the verbs transport ((a)–(c)) come
//! from the two-port VM; compare ratios, not absolute numbers, under TCG.

use std::io::{BufRead, BufReader};
use std::net::{IpAddr, Ipv6Addr};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use vmad::engine::{Event, SendRequest};
use vmad::port::{Port, PortConfig};
use vmad::transport::roce::{RoceConfig, RoceTransport};

#[path = "common/vm_bench.rs"]
mod vm_bench;
use vm_bench::{answer, count, dest, env, get, percentile, round_trip, spec, us};

/// Output of a fixture, with `key=` fields.
fn run(cmd: &str, args: &[String]) -> Option<String> {
    let out = Command::new(cmd).args(args).output().ok()?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    if !out.status.success() {
        eprintln!(
            "{cmd} {args:?} failed: {text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        return None;
    }
    Some(text)
}

fn field(text: &Option<String>, k: &str) -> f64 {
    text.as_deref()
        .and_then(|t| t.split_whitespace().find_map(|w| w.strip_prefix(k)))
        .and_then(|v| v.parse().ok())
        .unwrap_or(f64::NAN)
}

fn kernel_agent() -> Child {
    let mut c = Command::new("target/rxe/umad_agent")
        .args(["serve", &env("RXE0_DEV"), &env("RXE0_PORT"), "600"])
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

fn main() {
    let n = count("BENCH_N", 300);
    let reps = [
        (64usize << 10, count("BENCH_64K", 5)),
        (1 << 20, count("BENCH_1M", 2)),
    ];
    let addr: IpAddr = env("ROCE_ADDR").parse().unwrap();
    let kernel_gid: [u8; 16] = env("RXE0_GID").parse::<Ipv6Addr>().unwrap().octets();
    let kernel = dest(kernel_gid, 1);
    let port = Port::open(
        Box::new(RoceTransport::open(RoceConfig::new(addr)).expect("bind UDP 4791")),
        PortConfig::default(),
    )
    .expect("port");

    // (d) vmad roce -> kernel.
    let mut k = kernel_agent();
    let a = port.register(spec(0x09, 0)).unwrap();
    let r = port.register(spec(0x30, 0)).unwrap();
    let mut lat: Vec<_> = (0..n)
        .map(|i| round_trip(&port, a, kernel, &get(0x09, 0x10_0000 + i as u64, 0)).0)
        .collect();
    let d = [us(percentile(&mut lat, 50)), us(percentile(&mut lat, 99))];
    let d_rmpp: Vec<f64> = reps
        .iter()
        .enumerate()
        .map(|(i, &(size, times))| {
            let mut t: Vec<_> = (0..times)
                .map(|j| {
                    let m = get(0x30, 0x20_0000 + (i * 100 + j) as u64, size as u32);
                    let (dt, len) = round_trip(&port, r, kernel, &m);
                    assert_eq!(len, 40 + size);
                    dt
                })
                .collect();
            us(percentile(&mut t, 50)) / 1e3
        })
        .collect();
    port.unregister(a).unwrap();
    port.unregister(r).unwrap();

    // (f) libibumad -> kernel's own QP1 (rxe loopback), while the agent runs.
    let cl = |dgid: &str, test: &str, arg: String| {
        run(
            "target/rxe/roce_client",
            &[
                env("RXE0_DEV"),
                env("RXE0_PORT"),
                dgid.into(),
                env("RXE0_GID_INDEX"),
                test.into(),
                arg,
            ],
        )
    };
    let own = env("RXE0_GID");
    let f = cl(&own, "bench", n.to_string());
    let f_rmpp: Vec<f64> = reps
        .iter()
        .map(|&(size, _)| field(&cl(&own, "rmpp", size.to_string()), "us=") / 1e3)
        .collect();
    let _ = k.kill();
    let _ = k.wait();

    // (e) libibumad -> vmad roce agent (served on a thread).
    let stop = AtomicBool::new(false);
    let (e, e_rmpp) = std::thread::scope(|s| {
        s.spawn(|| {
            let _echo = port.register(spec(0x09, 0b10)).unwrap();
            let rm = port.register(spec(0x30, 0b10)).unwrap();
            while !stop.load(Ordering::Relaxed) {
                let Ok(Event::Recv { agent, addr, mad }) =
                    port.recv(Some(Duration::from_millis(50)))
                else {
                    continue;
                };
                let mut resp = answer(&mad, agent == rm, |i| {
                    (i as u32)
                        .wrapping_mul(7)
                        .wrapping_add((i as u32 >> 8).wrapping_mul(13))
                        .wrapping_add(3) as u8
                });
                if agent != rm {
                    // The echo's first data bytes say it is an answer.
                    let data = vmad::wire::mad::HEADER_LEN;
                    resp[data..data + 8].copy_from_slice(b"RESPONSE");
                }
                let _ = port.send(
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
        let gid = env("ROCE_GID");
        let e = cl(&gid, "bench", n.to_string());
        let e_rmpp: Vec<f64> = reps
            .iter()
            .map(|&(size, _)| field(&cl(&gid, "rmpp", size.to_string()), "us=") / 1e3)
            .collect();
        stop.store(true, Ordering::Relaxed);
        (e, e_rmpp)
    });

    let accel = std::env::var("RXE_VM_ACCEL").unwrap_or_else(|_| "unknown".into());
    println!("roce bench: accelerator {accel}, {n} round trips, RMPP 64 KiB / 1 MiB (vmad side p50 of x{} / x{}; libibumad side one each)", reps[0].1, reps[1].1);
    println!(
        "{:<44} {:>10} {:>10} {:>12} {:>12}",
        "pair", "p50 us", "p99 us", "64KiB ms", "1MiB ms"
    );
    let rows = [
        (
            "(d) vmad roce (QP1)  -> kernel umad",
            d[0],
            d[1],
            d_rmpp[0],
            d_rmpp[1],
        ),
        (
            "(e) libibumad rxe0   -> vmad roce (QP1)",
            field(&e, "p50_us="),
            field(&e, "p99_us="),
            e_rmpp[0],
            e_rmpp[1],
        ),
        (
            "(f) libibumad rxe0   -> kernel umad rxe0",
            field(&f, "p50_us="),
            field(&f, "p99_us="),
            f_rmpp[0],
            f_rmpp[1],
        ),
    ];
    for (name, p50, p99, r64, r1m) in rows {
        println!("{name:<44} {p50:>10.0} {p99:>10.0} {r64:>12.1} {r1m:>12.1}");
    }
    println!(
        "ratios vs (f): (d) p50 {:.2}x, 64KiB {:.2}x, 1MiB {:.2}x; (e) p50 {:.2}x, 64KiB {:.2}x, 1MiB {:.2}x",
        rows[0].1 / rows[2].1,
        rows[0].3 / rows[2].3,
        rows[0].4 / rows[2].4,
        rows[1].1 / rows[2].1,
        rows[1].3 / rows[2].3,
        rows[1].4 / rows[2].4,
    );
}
