//! `ping` (ibping) and `bench`.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use clap::{Args, ValueEnum};
use serde_json::{json, Value};

use std::sync::atomic::{AtomicBool, Ordering};

use vmad::client::{Client, Request, Response};
use vmad::types::{GrhAddr, MadAddr, GSI_QKEY};
use vmad::wire::mad::{self, MadStatus, Method, MgmtClass};
use vmad::wire::{vendor, MAD_SIZE};

use crate::client::desc_text;
use crate::demo::{CLASS_BULK, CLASS_PING, OPENIB_OUI};
use crate::progress::Progress;
use crate::{demo, CmdResult, Failure, Output, Session};

#[derive(Debug, Args)]
pub(crate) struct PingArgs {
    /// Destination LID, hex or decimal (with -G a port GUID; default: the demo fabric's responder, 3).
    lid: Option<String>,
    /// Destination GID instead of a LID (an IPv6 or IPv4 address on RoCE).
    #[arg(long)]
    gid: Option<std::net::IpAddr>,
    /// Number of pings.
    #[arg(short = 'c', long = "count", default_value_t = 10)]
    count: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum Mode {
    /// Latency, throughput and RMPP.
    All,
    /// One ping at a time.
    Latency,
    /// `--window` pings in flight.
    Throughput,
    /// Large RMPP transfers (class 0x33).
    Rmpp,
}

#[derive(Debug, Args)]
pub(crate) struct BenchArgs {
    /// Destination LID, hex or decimal (with -G a port GUID; default: the demo fabric's responder, 3).
    lid: Option<String>,
    /// Destination GID instead of a LID (an IPv6 or IPv4 address on RoCE).
    #[arg(long)]
    gid: Option<std::net::IpAddr>,
    /// Which runs.
    #[arg(long, value_enum, default_value = "all")]
    mode: Mode,
    /// Pings per latency/throughput run.
    #[arg(short = 'n', long, default_value_t = 1000)]
    count: u32,
    /// Requests in flight in the throughput run.
    #[arg(long, default_value_t = 16)]
    window: u32,
    /// Bytes per RMPP transfer.
    #[arg(long, default_value_t = 65536)]
    size: u32,
    /// RMPP transfers.
    #[arg(long, default_value_t = 10)]
    transfers: u32,
    /// Show a progress line on stderr (on by default when stderr is a terminal).
    #[arg(long)]
    progress: bool,
}

#[derive(Debug, Args)]
pub(crate) struct ServeArgs {
    /// Stop after this many seconds (default: run until killed).
    #[arg(long = "for")]
    seconds: Option<u64>,
}

/// QP1 (GSI) at `lid`.
fn gsi(lid: u16) -> MadAddr {
    MadAddr {
        qpn: 1,
        qkey: GSI_QKEY,
        lid,
        ..MadAddr::default()
    }
}

/// A vendor-class Get (OUI OpenIB) to `to`: ibping's (class 0x32), or the bulk RMPP
/// one (class 0x33) asking for `attr_mod` bytes.
fn vendor_get(class: u8, attr_mod: u32, to: MadAddr) -> Request {
    let mut m = vec![0u8; MAD_SIZE];
    mad::Repr {
        base_version: mad::BASE_VERSION,
        mgmt_class: MgmtClass::from(class),
        class_version: 1,
        method: Method::Get,
        status: MadStatus::OK,
        class_specific: 0,
        tid: 0,
        attr_id: 0,
        attr_mod,
    }
    .emit(&mut mad::Packet::new_unchecked(&mut m[..]));
    vendor::Packet::new_unchecked(&mut m[..]).set_oui(OPENIB_OUI);
    Request {
        class,
        version: 1,
        rmpp: class == CLASS_BULK,
        oui: OPENIB_OUI,
        addr: to,
        mad: m,
        timeout_ms: None,
        retries: None,
    }
}

/// One vendor Get, waited for: the answer, or the failure in the CLI's words.
fn exchange(s: &Session, client: &Client, req: Request) -> Result<Response, Failure> {
    client
        .submit(req)?
        .wait()
        .map_err(|e| s.failure("vendor Get", e))
}

/// QP1 of the destination: by GID (with a GRH) when given, else by LID.
fn dest(
    s: &Session,
    lid: Option<&str>,
    gid: Option<std::net::IpAddr>,
) -> Result<(MadAddr, String), Failure> {
    match gid {
        Some(ip) => {
            let g = match ip {
                std::net::IpAddr::V6(a) => a.octets(),
                std::net::IpAddr::V4(a) => a.to_ipv6_mapped().octets(),
            };
            let addr = MadAddr {
                grh: Some(GrhAddr {
                    gid: g,
                    hop_limit: 64,
                    ..GrhAddr::default()
                }),
                ..gsi(0)
            };
            Ok((addr, format!("Gid {ip}")))
        }
        None => {
            let l = match lid {
                Some(a) => crate::addr::resolve_lid(s, a)?,
                None => demo::SERVER_LID,
            };
            Ok((gsi(l), format!("Lid {l}")))
        }
    }
}

pub(crate) fn serve(s: &Session, a: &ServeArgs) -> CmdResult {
    let agents = demo::responders(&s.port)?;
    let stop = AtomicBool::new(false);
    let attrs = s.port.attrs();
    eprintln!(
        "serving ping (class 0x32) and bulk RMPP (class 0x33) on {} port {}",
        attrs.ca_name, attrs.port_num
    );
    std::thread::scope(|scope| {
        if let Some(secs) = a.seconds {
            let stop = &stop;
            scope.spawn(move || {
                std::thread::sleep(Duration::from_secs(secs));
                stop.store(true, Ordering::Relaxed);
            });
        }
        demo::respond_loop(&s.port, &stop, &agents);
    });
    let st = s.port.stats();
    Ok(Output {
        text: format!("served: {} received, {} sent\n", st.received, st.sent),
        json: json!({ "received": st.received, "sent": st.sent }),
        exit: None,
    })
}

/// Histogram bucket bounds, microseconds (the last bucket is open).
const BUCKETS: [u64; 12] = [8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384];

fn histogram(samples: &[u64]) -> Vec<(Option<u64>, usize)> {
    let mut h: Vec<(Option<u64>, usize)> = BUCKETS.iter().map(|&b| (Some(b), 0)).collect();
    h.push((None, 0));
    for &s in samples {
        let i = BUCKETS.iter().position(|&b| s < b).unwrap_or(BUCKETS.len());
        h[i].1 += 1;
    }
    h
}

fn percentile(sorted: &[u64], p: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

pub(crate) fn ping(s: &Session, a: &PingArgs) -> CmdResult {
    let (to, name) = dest(s, a.lid.as_deref(), a.gid)?;
    let client = s.client()?;
    let mut text = String::new();
    let mut samples = Vec::new();
    let mut responder = String::new();
    let start = Instant::now();
    for i in 0..a.count {
        let t0 = Instant::now();
        match exchange(s, &client, vendor_get(CLASS_PING, 0, to)) {
            Ok(resp) => {
                let us = t0.elapsed().as_micros() as u64;
                responder = desc_text(vendor::Packet::new_checked(&resp.mad[..])?.data());
                let _ = writeln!(
                    text,
                    "Pong from {responder} ({name}): time {}.{:03} ms",
                    us / 1000,
                    us % 1000
                );
                samples.push(us);
            }
            Err(Failure { msg: e, .. }) => {
                let _ = writeln!(text, "ping {i} to {name}: {e}");
            }
        }
    }
    let total_ms = start.elapsed().as_millis();
    let received = samples.len();
    let loss = 100.0 * (1.0 - received as f64 / f64::from(a.count.max(1)));
    let mut sorted = samples.clone();
    sorted.sort_unstable();
    let (min, max) = (
        sorted.first().copied().unwrap_or(0),
        sorted.last().copied().unwrap_or(0),
    );
    let avg = if received > 0 {
        samples.iter().sum::<u64>() / received as u64
    } else {
        0
    };
    let _ = writeln!(text, "\n--- {responder} ({name}) ibping statistics ---");
    let _ = writeln!(
        text,
        "{} packets transmitted, {received} received, {loss:.0}% packet loss, time {total_ms} ms",
        a.count
    );
    let ms = |us: u64| format!("{}.{:03}", us / 1000, us % 1000);
    let _ = writeln!(
        text,
        "rtt min/avg/max = {}/{}/{} ms",
        ms(min),
        ms(avg),
        ms(max)
    );
    let _ = writeln!(text, "latency histogram:");
    let hist = histogram(&samples);
    let top = hist.iter().map(|h| h.1).max().unwrap_or(0).max(1);
    for (bound, n) in &hist {
        if *n == 0 {
            continue;
        }
        let label = match bound {
            Some(b) => format!("< {b:>5} us"),
            None => format!(">= {:>4} us", BUCKETS[BUCKETS.len() - 1]),
        };
        let bar = "#".repeat((n * 40).div_ceil(top));
        let _ = writeln!(text, "  {label} {n:>6} {bar}");
    }
    let json = json!({
        "dest_lid": to.lid,
        "dest": name,
        "responder": responder,
        "transmitted": a.count,
        "received": received,
        "loss_pct": loss,
        "time_ms": total_ms,
        "rtt_us": { "min": min, "avg": avg, "max": max },
        "histogram": hist.iter().map(|(b, n)| json!({ "lt_us": b, "count": n })).collect::<Vec<Value>>(),
        "samples_us": samples,
    });
    // As ping(8): the statistics either way, and a failure status when nothing came back.
    Ok(Output {
        text,
        json,
        exit: (received == 0 && a.count > 0).then_some(crate::exit::Exit::Timeout),
    })
}

/// One row of the bench table.
struct Row {
    name: &'static str,
    ops: u64,
    failed: u64,
    elapsed: Duration,
    /// Rate in its unit.
    rate: f64,
    unit: &'static str,
    p50_us: u64,
    p99_us: u64,
}

fn latency_run(s: &Session, client: &Client, to: MadAddr, n: u32, p: &mut Progress) -> Row {
    let mut samples = Vec::with_capacity(n as usize);
    let mut failed = 0;
    let start = Instant::now();
    for i in 0..n {
        let t0 = Instant::now();
        match exchange(s, client, vendor_get(CLASS_PING, 0, to)) {
            Ok(_) => samples.push(t0.elapsed().as_micros() as u64),
            Err(_) => failed += 1,
        }
        p.show(format_args!("bench: latency {}/{n}", i + 1));
    }
    p.done();
    let elapsed = start.elapsed();
    samples.sort_unstable();
    Row {
        name: "latency",
        ops: samples.len() as u64,
        failed,
        elapsed,
        rate: samples.len() as f64 / elapsed.as_secs_f64().max(1e-9),
        unit: "ops/s",
        p50_us: percentile(&samples, 0.5),
        p99_us: percentile(&samples, 0.99),
    }
}

/// `n` pings with up to `window` of them in flight: the client's windows keep the rest
/// queued until answers make room.
fn throughput_run(
    s: &Session,
    to: MadAddr,
    n: u32,
    window: u32,
    p: &mut Progress,
) -> Result<Row, Failure> {
    let window = window.max(1) as usize;
    let client = s.client_with(|c| {
        c.gmp_window = window;
        c.per_destination = window;
    })?;
    let start = Instant::now();
    let asked = (0..n)
        .map(|_| client.submit(vendor_get(CLASS_PING, 0, to)))
        .collect::<Result<Vec<_>, _>>()?;
    let (mut done, mut failed) = (0u64, 0u64);
    for pending in asked {
        match pending.wait() {
            Ok(_) => done += 1,
            Err(_) => failed += 1,
        }
        p.show(format_args!("bench: throughput {}/{n}", done + failed));
    }
    p.done();
    let elapsed = start.elapsed();
    Ok(Row {
        name: "throughput",
        ops: done,
        failed,
        elapsed,
        rate: done as f64 / elapsed.as_secs_f64().max(1e-9),
        unit: "ops/s",
        p50_us: 0,
        p99_us: 0,
    })
}

fn rmpp_run(
    s: &Session,
    to: MadAddr,
    size: u32,
    transfers: u32,
    p: &mut Progress,
) -> Result<Row, Failure> {
    let client = s.client()?;
    let mut samples = Vec::new();
    let mut failed = 0;
    let start = Instant::now();
    for i in 0..transfers {
        let t0 = Instant::now();
        match exchange(s, &client, vendor_get(CLASS_BULK, size, to)) {
            Ok(resp) => {
                let data = resp.mad.get(vendor::DATA_OFFSET..).unwrap_or_default();
                let intact = data.len() == size as usize
                    && data
                        .iter()
                        .enumerate()
                        .all(|(i, &b)| b == demo::bulk_byte(i));
                if !intact {
                    return Err(Failure::protocol(format!(
                        "RMPP transfer {i}: {} bytes back, {size} expected or pattern broken",
                        data.len()
                    )));
                }
                samples.push(t0.elapsed().as_micros() as u64);
            }
            Err(_) => failed += 1,
        }
        p.show(format_args!("bench: rmpp {}/{transfers} x {size} B", i + 1));
    }
    p.done();
    let elapsed = start.elapsed();
    samples.sort_unstable();
    let bytes = samples.len() as f64 * f64::from(size);
    Ok(Row {
        name: "rmpp",
        ops: samples.len() as u64,
        failed,
        elapsed,
        rate: bytes / elapsed.as_secs_f64().max(1e-9) / 1e6,
        unit: "MB/s",
        p50_us: percentile(&samples, 0.5),
        p99_us: percentile(&samples, 0.99),
    })
}

pub(crate) fn bench(s: &Session, a: &BenchArgs) -> CmdResult {
    let (to, name) = dest(s, a.lid.as_deref(), a.gid)?;
    let client = s.client()?;
    let mut rows = Vec::new();
    let mut p = Progress::new(a.progress);
    if matches!(a.mode, Mode::All | Mode::Latency) {
        rows.push(latency_run(s, &client, to, a.count, &mut p));
    }
    if matches!(a.mode, Mode::All | Mode::Throughput) {
        rows.push(throughput_run(s, to, a.count, a.window, &mut p)?);
    }
    if matches!(a.mode, Mode::All | Mode::Rmpp) {
        rows.push(rmpp_run(s, to, a.size, a.transfers, &mut p)?);
    }
    let st = s.port.stats();
    let aborts = s.port.rmpp_aborts();
    let mut text = String::new();
    let _ = writeln!(
        text,
        "{:<11} {:>8} {:>7} {:>10} {:>14} {:>8} {:>8}",
        "run", "ok", "failed", "time_ms", "rate", "p50_us", "p99_us"
    );
    for r in &rows {
        let _ = writeln!(
            text,
            "{:<11} {:>8} {:>7} {:>10.1} {:>8.1} {:<5} {:>8} {:>8}",
            r.name,
            r.ops,
            r.failed,
            r.elapsed.as_secs_f64() * 1e3,
            r.rate,
            r.unit,
            r.p50_us,
            r.p99_us
        );
    }
    let _ = writeln!(text, "\nport counters");
    let counters: [(&str, u64); 19] = [
        ("sent", st.sent),
        ("received", st.received),
        ("delivered", st.delivered),
        ("retries", st.retries),
        ("timeouts", st.timeouts),
        ("rmpp_aborts", aborts),
        ("rmpp_reassembled", st.rmpp_reassembled),
        ("auto_replies", st.auto_replies),
        ("drop_unmatched_response", st.unmatched_responses),
        ("drop_invalid", st.dropped_invalid),
        ("drop_unclaimed", st.dropped_unclaimed),
        ("drop_duplicate", st.dropped_duplicates),
        ("drop_rmpp_unknown", st.dropped_rmpp_unknown),
        ("drop_rmpp_limit", st.dropped_rmpp_limit),
        ("drop_queue_full", st.queue_drops),
        ("backlogged", st.backlogged),
        ("queue_depth_outstanding", st.outstanding),
        ("queue_depth_backlog", st.backlog_depth),
        ("rmpp_engine_aborts", st.rmpp_aborts),
    ];
    for (k, v) in &counters {
        let _ = writeln!(text, "  {k:<26} {v}");
    }
    let json = json!({
        "dest_lid": to.lid,
        "dest": name,
        "runs": rows.iter().map(|r| json!({
            "run": r.name, "ok": r.ops, "failed": r.failed,
            "time_ms": r.elapsed.as_secs_f64() * 1e3, "rate": r.rate, "unit": r.unit,
            "p50_us": r.p50_us, "p99_us": r.p99_us,
        })).collect::<Vec<Value>>(),
        "counters": counters.iter().map(|(k, v)| ((*k).to_owned(), json!(v))).collect::<serde_json::Map<String, Value>>(),
    });
    Ok(Output {
        text,
        json,
        exit: None,
    })
}
