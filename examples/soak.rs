//! Soak: two ports of the embedded fabric over a link that loses 10%,
//! duplicates 5% and reorders 10% of its frames, for a while, with SMPs, GMPs
//! and RMPP transfers in both directions from several threads. Checks:
//!
//! - every request ends exactly once: answered byte-exact, or ETIMEDOUT;
//! - no RMPP message is corrupted (content derived from its TID, checked whole);
//! - memory (VmRSS) is flat after warm-up, and the engines hold nothing at the end;
//! - no thread is stuck (each waits at most a bounded time for its outcome).
//!
//! Prints a table: messages, retries, timeouts, aborts, peak memory.
//!
//! Run: `cargo run --release --example soak -- [SECONDS] [THREADS_PER_PORT]`
//! (defaults 120 and 3); `scripts/soak` does that.

use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use vmad::client::{Client, ClientConfig, NodeInfo, Request, Target};
use vmad::engine::{AgentId, AgentSpec, EngineConfig, Event, SendRequest};
use vmad::port::audit::PortAudit;
use vmad::port::{Port, PortConfig};
use vmad::subnet::{Fabric, FaultConfig};
use vmad::types::{MadAddr, Qp, GSI_QKEY};
use vmad::wire::mad::{self, MadStatus, Method, MgmtClass};
use vmad::wire::{perf, rmpp, sa};

type Res<T> = Result<T, Box<dyn std::error::Error>>;

/// The attribute of the GMPs: not PortCounters, which the fabric's PMA answers itself.
const PERF_ATTR: u16 = perf::AttrId::PortSamplesControl.raw();
/// Longest any request may take to end (every attempt and RMPP window timed out):
/// beyond this a waiting thread is stuck.
const STUCK: Duration = Duration::from_secs(60);

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    Smp,
    Gmp,
    Rmpp,
}

#[derive(Default)]
struct Counts {
    sent: BTreeMap<Kind, u64>,
    answered: BTreeMap<Kind, u64>,
    timed_out: BTreeMap<Kind, u64>,
    rmpp_bytes: u64,
    errors: Vec<String>,
}

/// One port: its servers on the port's first open, its client threads sharing one
/// `vmad::client::Client` (an open of its own, where each answer goes to the thread
/// that asked).
struct Side {
    name: &'static str,
    port: Arc<Port>,
    client: Client,
    peer_lid: u16,
    server_busy: AtomicU64,
}

fn agent(port: &Port, class: MgmtClass, version: u8, rmpp: u8, method: Method) -> Res<AgentId> {
    let mut mask = [0u64; 2];
    let m = method.raw();
    mask[usize::from(m / 64)] |= 1 << (m % 64);
    Ok(port.register(AgentSpec {
        qp: Qp::for_class(class.raw()),
        mgmt_class: class,
        class_version: version,
        rmpp_version: rmpp,
        method_mask: mask,
        oui: 0,
        user_rmpp: false,
    })?)
}

/// The data a server returns for a request with low TID `tid` (and, for
/// GetTable, `len` bytes asked in the attribute modifier).
fn pattern(tid: u32, len: usize) -> Vec<u8> {
    let mut x = u64::from(tid).wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// A 256-byte GMP request (the client fills in the TID).
fn gmp(class: MgmtClass, version: u8, method: Method, attr: u16, attr_mod: u32) -> Vec<u8> {
    let mut m = vec![0u8; vmad::wire::MAD_SIZE];
    mad::Repr {
        base_version: mad::BASE_VERSION,
        mgmt_class: class,
        class_version: version,
        method,
        status: MadStatus::OK,
        class_specific: 0,
        tid: 0,
        attr_id: attr,
        attr_mod,
    }
    .emit(&mut mad::Packet::new_unchecked(&mut m[..]));
    m
}

/// The low word of a MAD's TID (the high word is the agent's).
fn low_tid(m: &[u8]) -> u32 {
    mad::Packet::new_checked(m).map_or(0, |p| p.tid() as u32)
}

impl Side {
    fn open(name: &'static str, port: Port, peer_lid: u16) -> Res<Arc<Side>> {
        agent(&port, MgmtClass::Perf, perf::CLASS_VERSION, 0, Method::Get)?;
        agent(
            &port,
            MgmtClass::SubnAdm,
            sa::CLASS_VERSION,
            rmpp::VERSION,
            Method::GetTable,
        )?;
        // SMPs: 50 ms per attempt, 6 resends; the GMPs say their own.
        let config = ClientConfig {
            timeout_ms: 50,
            retries: 6,
            ..ClientConfig::default()
        };
        let client = Client::new(&port, config)?;
        Ok(Arc::new(Side {
            name,
            port: Arc::new(port),
            client,
            peer_lid,
            server_busy: AtomicU64::new(0),
        }))
    }

    /// The one receiver of the servers' open: answers requests until the port closes.
    fn dispatch(self: &Arc<Self>) {
        while let Ok(event) = self.port.recv(None) {
            if let Event::Recv { agent, addr, mad } = event {
                self.serve(agent, addr, mad);
            }
        }
    }

    fn serve(&self, agent: AgentId, addr: MadAddr, mut mad: Vec<u8>) {
        let Ok(header) = mad::Packet::new_checked(&mad[..]) else {
            return;
        };
        let (class, tid, attr_mod) = (header.mgmt_class(), low_tid(&mad), header.attr_mod());
        let reply_to = MadAddr {
            qkey: GSI_QKEY,
            ..addr
        };
        let sent = match class {
            MgmtClass::Perf => {
                mad::Packet::new_unchecked(&mut mad[..]).set_method(Method::GetResp);
                mad[mad::HEADER_LEN..].copy_from_slice(&pattern(tid, 256 - mad::HEADER_LEN));
                self.port.send(
                    agent,
                    SendRequest {
                        addr: reply_to,
                        mad: &mad,
                        timeout_ms: 0,
                        retries: 0,
                    },
                )
            }
            MgmtClass::SubnAdm => {
                let mut resp = mad[..sa::DATA_OFFSET].to_vec();
                mad::Packet::new_unchecked(&mut resp[..]).set_method(Method::GetTableResp);
                rmpp::Repr {
                    version: rmpp::VERSION,
                    rmpp_type: rmpp::RmppType::Data,
                    resp_time: 0,
                    flags: rmpp::FLAG_ACTIVE,
                    status: rmpp::RmppStatus::Success,
                    seg_num: 0,
                    paylen_newwin: 0,
                }
                .emit(&mut rmpp::Packet::new_unchecked(&mut resp[..]));
                resp.extend_from_slice(&pattern(tid, attr_mod as usize));
                self.port.send(
                    agent,
                    SendRequest {
                        addr: reply_to,
                        mad: &resp,
                        timeout_ms: 0,
                        retries: 20,
                    },
                )
            }
            _ => return,
        };
        if sent.is_err() {
            // A retried request whose RMPP answer is still being sent: that
            // transfer answers it.
            self.server_busy.fetch_add(1, Relaxed);
        }
    }

    /// One request of `kind`, waited for; what went wrong goes into `counts`.
    fn request(
        &self,
        kind: Kind,
        rng: &mut u64,
        smp_ref: &Mutex<Option<NodeInfo>>,
        counts: &Mutex<Counts>,
    ) {
        *rng ^= *rng << 13;
        *rng ^= *rng >> 7;
        *rng ^= *rng << 17;
        let gsi = MadAddr {
            qpn: 1,
            qkey: GSI_QKEY,
            lid: self.peer_lid,
            ..MadAddr::default()
        };
        let asked = match kind {
            Kind::Smp => self
                .client
                .get_async::<NodeInfo>(&Target::lid(self.peer_lid), 0)
                .map(Err),
            // One retry only: over this link some GMPs end in ETIMEDOUT.
            Kind::Gmp => self
                .client
                .submit(Request {
                    class: MgmtClass::Perf.raw(),
                    version: perf::CLASS_VERSION,
                    rmpp: false,
                    oui: 0,
                    addr: gsi,
                    mad: gmp(
                        MgmtClass::Perf,
                        perf::CLASS_VERSION,
                        Method::Get,
                        PERF_ATTR,
                        0,
                    ),
                    timeout_ms: Some(50),
                    retries: Some(1),
                })
                .map(Ok),
            Kind::Rmpp => {
                let len = 1 + (*rng % 24_000) as u32;
                let node_record = sa::AttrId::NodeRecord.raw();
                self.client
                    .submit(Request {
                        class: MgmtClass::SubnAdm.raw(),
                        version: sa::CLASS_VERSION,
                        rmpp: true,
                        oui: 0,
                        addr: gsi,
                        mad: gmp(
                            MgmtClass::SubnAdm,
                            sa::CLASS_VERSION,
                            Method::GetTable,
                            node_record,
                            len,
                        ),
                        timeout_ms: Some(1000),
                        retries: Some(6),
                    })
                    .map(Ok)
            }
        };
        let asked = match asked {
            Ok(a) => a,
            Err(e) => {
                let mut c = counts.lock().unwrap();
                c.errors.push(format!("{}: send: {e}", self.name));
                return;
            }
        };
        *counts.lock().unwrap().sent.entry(kind).or_default() += 1;
        // Ok: a raw answer (GMP, RMPP); Err: a typed NodeInfo.
        let outcome = match asked {
            Ok(raw) => raw.wait().map(Ok),
            Err(typed) => typed.wait().map(Err),
        };
        let mut c = counts.lock().unwrap();
        let answer = match outcome {
            Err(vmad::Error::TimedOut) => {
                *c.timed_out.entry(kind).or_default() += 1;
                return;
            }
            Err(e) => {
                c.errors.push(format!("{}: {kind:?}: {e}", self.name));
                return;
            }
            Ok(a) => a,
        };
        *c.answered.entry(kind).or_default() += 1;
        let bad = match answer {
            // Every NodeInfo answer of the peer is the same.
            Err(info) => {
                let mut reference = smp_ref.lock().unwrap();
                (*reference.get_or_insert(info) != info).then_some("NodeInfo differs")
            }
            Ok(resp) => {
                let m = &resp.mad;
                let tid = low_tid(m);
                let attr_mod = mad::Packet::new_checked(&m[..]).map_or(0, |p| p.attr_mod());
                let ok_method = |want: Method| {
                    mad::Packet::new_checked(&m[..]).is_ok_and(|p| p.method() == want)
                };
                if kind == Kind::Gmp {
                    let data = pattern(tid, 256 - mad::HEADER_LEN);
                    (!ok_method(Method::GetResp)
                        || m.len() != 256
                        || m[mad::HEADER_LEN..] != data[..])
                        .then_some("GMP data differs")
                } else {
                    let len = attr_mod as usize;
                    c.rmpp_bytes += m.len().saturating_sub(sa::DATA_OFFSET) as u64;
                    (m.len() != sa::DATA_OFFSET + len
                        || m[sa::DATA_OFFSET..] != pattern(tid, len)[..])
                        .then_some("RMPP message corrupted")
                }
            }
        };
        if let Some(what) = bad {
            c.errors.push(format!("{}: {kind:?}: {what}", self.name));
        }
    }
}

/// VmRSS of this process, in KiB.
fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

fn main() -> Res<()> {
    let mut args = std::env::args().skip(1);
    let secs: u64 = args.next().map_or(Ok(120), |s| s.parse())?;
    let threads: usize = args.next().map_or(Ok(3), |s| s.parse())?;
    let faults = FaultConfig {
        loss: 0.10,
        dup: 0.05,
        reorder: 0.10,
        hold: Duration::from_millis(1),
        seed: 0x50a6,
        ..FaultConfig::default()
    };
    let fabric = Fabric::builder()
        .ca("soak0")
        .ca("soak1")
        .link("soak0", 1, "soak1", 1)
        .faults("soak0", 1, faults)
        .build_private()?;
    let mut engine = EngineConfig {
        max_events: 4096,
        ..EngineConfig::default()
    };
    engine.rmpp.ack_timeout = Duration::from_millis(40);
    engine.rmpp.total_timeout = Duration::from_secs(20);
    engine.rmpp.linger = Duration::from_secs(2);
    let config = PortConfig {
        engine,
        ..PortConfig::default()
    };
    let a = Side::open(
        "soak0",
        Port::open(Box::new(fabric.open("soak0", 1)?), config.clone())?,
        2,
    )?;
    let b = Side::open(
        "soak1",
        Port::open(Box::new(fabric.open("soak1", 1)?), config)?,
        1,
    )?;

    let counts = Arc::new(Mutex::new(Counts::default()));
    let smp_refs = [Arc::new(Mutex::new(None)), Arc::new(Mutex::new(None))];
    let stop = Arc::new(AtomicBool::new(false));
    let dispatchers: Vec<_> = [&a, &b]
        .into_iter()
        .map(|s| {
            let s = s.clone();
            thread::Builder::new()
                .name(format!("soak-dispatch {}", s.name))
                .spawn(move || s.dispatch())
        })
        .collect::<Result<_, _>>()?;
    let mut clients = Vec::new();
    for (i, side) in [&a, &b].into_iter().enumerate() {
        for t in 0..threads {
            let (side, counts, stop) = (side.clone(), counts.clone(), stop.clone());
            let smp_ref = smp_refs[i].clone();
            clients.push(
                thread::Builder::new()
                    .name(format!("soak-client {i}.{t}"))
                    .spawn(move || {
                        let mut rng = 0x1234_5678_9abc_def1u64 ^ ((i * 16 + t) as u64) << 32;
                        let mut n = 0u64;
                        while !stop.load(Relaxed) {
                            let kind = match (n + t as u64) % 3 {
                                0 => Kind::Smp,
                                1 => Kind::Gmp,
                                _ => Kind::Rmpp,
                            };
                            side.request(kind, &mut rng, &smp_ref, &counts);
                            n += 1;
                        }
                    })?,
            );
        }
    }

    // Sample memory once a second; the first quarter (at least 5 s) is warm-up.
    let started = Instant::now();
    let warmup = Duration::from_secs((secs / 4).max(5).min(secs));
    let (mut warm_peak, mut late_peak, mut peak) = (0u64, 0u64, 0u64);
    // A long run says how far it is: on a terminal, or with SOAK_PROGRESS=1 (CI logs).
    let progress = std::io::stderr().is_terminal()
        || std::env::var_os("SOAK_PROGRESS").is_some_and(|v| v == "1");
    while started.elapsed() < Duration::from_secs(secs) {
        thread::sleep(Duration::from_secs(1));
        if progress {
            let c = counts.lock().unwrap();
            let sum = |m: &BTreeMap<Kind, u64>| m.values().sum::<u64>();
            let line = format!(
                "soak: {:>4}/{secs} s, {} sent, {} answered, {} timed out, {} errors",
                started.elapsed().as_secs(),
                sum(&c.sent),
                sum(&c.answered),
                sum(&c.timed_out),
                c.errors.len()
            );
            drop(c);
            if std::io::stderr().is_terminal() {
                eprint!("\r{line}   ");
            } else if started.elapsed().as_secs() % 10 == 0 {
                eprintln!("{line}");
            }
        }
        let rss = rss_kib();
        peak = peak.max(rss);
        if started.elapsed() <= warmup {
            warm_peak = warm_peak.max(rss);
        } else {
            late_peak = late_peak.max(rss);
        }
    }
    if progress && std::io::stderr().is_terminal() {
        eprintln!();
    }
    stop.store(true, Relaxed);
    let deadline = Instant::now() + STUCK + Duration::from_secs(5);
    for c in clients {
        while !c.is_finished() && Instant::now() < deadline {
            thread::sleep(Duration::from_millis(20));
        }
        if c.is_finished() {
            c.join().map_err(|_| "a client thread panicked")?;
        } else {
            counts
                .lock()
                .unwrap()
                .errors
                .push("a client thread is stuck".into());
        }
    }
    // Let in-flight RMPP answers and lingering sessions end, then look inside.
    thread::sleep(Duration::from_secs(3));
    let mut leftovers = Vec::new();
    for s in [&a, &b] {
        s.port
            .check_invariants()
            .map_err(|e| format!("{}: {e}", s.name))?;
        let f = s.port.footprint();
        if f.txns != 0 || f.events != 0 {
            leftovers.push(format!("{}: {f:?}", s.name));
        }
    }
    let (sa, sb) = (a.port.stats(), b.port.stats());
    let aborts = a.port.rmpp_aborts() + b.port.rmpp_aborts();
    let (ca, cb) = (a.client.stats(), b.client.stats());
    for s in [&a, &b] {
        s.port.close();
    }
    for d in dispatchers {
        d.join().map_err(|_| "a dispatcher panicked")?;
    }
    let link = fabric.link_stats("soak0", 1).unwrap_or_default();

    let c = counts.lock().unwrap();
    println!("soak: {secs} s, {threads} client threads per port, link loss 10% dup 5% reorder 10%");
    println!(
        "{:<6} {:>9} {:>9} {:>9}",
        "kind", "sent", "answered", "ETIMEDOUT"
    );
    for kind in [Kind::Smp, Kind::Gmp, Kind::Rmpp] {
        let g = |m: &BTreeMap<Kind, u64>| m.get(&kind).copied().unwrap_or(0);
        println!(
            "{:<6} {:>9} {:>9} {:>9}",
            format!("{kind:?}"),
            g(&c.sent),
            g(&c.answered),
            g(&c.timed_out)
        );
    }
    let total = |m: &BTreeMap<Kind, u64>| m.values().sum::<u64>();
    println!(
        "messages sent by the engines {}, retries {}, timeouts {}, RMPP aborts {}, RMPP data {:.1} MiB",
        sa.sent + sb.sent,
        sa.retries + sb.retries,
        sa.timeouts + sb.timeouts,
        aborts,
        c.rmpp_bytes as f64 / (1 << 20) as f64
    );
    println!(
        "link: {} frames, {} lost, {} duplicated, {} reordered",
        link.frames, link.lost, link.duplicated, link.reordered
    );
    println!(
        "memory (VmRSS): warm-up peak {} KiB, after warm-up peak {} KiB, overall peak {} KiB",
        warm_peak, late_peak, peak
    );
    let mut failures = c.errors.clone();
    if total(&c.sent) != total(&c.answered) + total(&c.timed_out) {
        failures.push("a request ended neither answered nor timed out".into());
    }
    // Each handle is waited for once; the clients count how their requests ended.
    if ca.sent + cb.sent < total(&c.sent)
        || ca.answered + ca.failed + cb.answered + cb.failed != total(&c.sent)
    {
        failures.push(format!(
            "the clients ended {} requests, {} were asked (not exactly once)",
            ca.answered + ca.failed + cb.answered + cb.failed,
            total(&c.sent)
        ));
    }
    if total(&c.answered) == 0 {
        failures.push("nothing was answered".into());
    }
    // Flat: after warm-up, at most 10% (and 8 MiB) above the warm-up peak.
    if late_peak > warm_peak + (warm_peak / 10).max(8 << 10) {
        failures.push(format!("memory grew: {warm_peak} KiB -> {late_peak} KiB"));
    }
    failures.extend(leftovers);
    if failures.is_empty() {
        println!("soak: PASS");
        Ok(())
    } else {
        for f in failures.iter().take(20) {
            eprintln!("FAIL {f}");
        }
        Err(format!("soak: {} failure(s)", failures.len()).into())
    }
}
