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
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering::Relaxed};
use std::sync::{mpsc, Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use vmad::engine::{AgentId, AgentSpec, EngineConfig, Event, SendRequest};
use vmad::port::audit::PortAudit;
use vmad::port::{Port, PortConfig};
use vmad::subnet::{Fabric, FaultConfig};
use vmad::types::{MadAddr, Qp, GSI_QKEY};

type Res<T> = Result<T, Box<dyn std::error::Error>>;

const SMP: u8 = 0x01;
const SA: u8 = 0x03;
const PERF: u8 = 0x04;
const GET: u8 = 0x01;
const GET_RESP: u8 = 0x81;
const GET_TABLE: u8 = 0x12;
const GET_TABLE_RESP: u8 = 0x92;
const NODE_INFO: u16 = 0x0011;
const SA_HDR: usize = 56;
/// Longest any request may take to end (every attempt and RMPP window timed out):
/// beyond this a waiting thread is stuck.
const STUCK: Duration = Duration::from_secs(60);

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    Smp,
    Gmp,
    Rmpp,
}

/// How one request ended.
#[derive(Debug)]
enum Outcome {
    Answer(Vec<u8>),
    TimedOut,
}

#[derive(Default)]
struct Counts {
    sent: BTreeMap<Kind, u64>,
    answered: BTreeMap<Kind, u64>,
    timed_out: BTreeMap<Kind, u64>,
    rmpp_bytes: u64,
    errors: Vec<String>,
}

/// One port with its agents, its dispatcher and its pending requests.
struct Side {
    name: &'static str,
    port: Arc<Port>,
    peer_lid: u16,
    smp: AgentId,
    perf: AgentId,
    sa: AgentId,
    next_tid: AtomicU32,
    /// (agent, low TID) -> where its outcome goes.
    pending: Mutex<BTreeMap<(AgentId, u32), mpsc::Sender<Outcome>>>,
    /// Outcomes for requests nobody waits for any more (a second outcome).
    strays: AtomicU64,
    server_busy: AtomicU64,
}

fn agent(port: &Port, class: u8, version: u8, rmpp: u8, methods: &[u8]) -> Res<AgentId> {
    let mut mask = [0u64; 2];
    for &m in methods {
        mask[usize::from(m / 64)] |= 1 << (m % 64);
    }
    Ok(port.register(AgentSpec {
        qp: Qp::for_class(class),
        mgmt_class: class.into(),
        class_version: version,
        rmpp_version: rmpp,
        method_mask: mask,
        oui: 0,
        user_rmpp: false,
    })?)
}

fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
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

fn gmp(class: u8, version: u8, method: u8, tid: u32, attr: u16, attr_mod: u32) -> [u8; 256] {
    let mut m = [0u8; 256];
    m[..4].copy_from_slice(&[1, class, version, method]);
    m[12..16].copy_from_slice(&tid.to_be_bytes());
    m[16..18].copy_from_slice(&attr.to_be_bytes());
    m[20..24].copy_from_slice(&attr_mod.to_be_bytes());
    m
}

impl Side {
    fn open(name: &'static str, port: Port, peer_lid: u16) -> Res<Arc<Side>> {
        let smp = agent(&port, SMP, 1, 0, &[])?;
        let perf_server = agent(&port, PERF, 1, 0, &[GET])?;
        let _ = perf_server;
        let sa_server = agent(&port, SA, 2, 1, &[GET_TABLE])?;
        let _ = sa_server;
        let perf = agent(&port, PERF, 1, 0, &[])?;
        let sa = agent(&port, SA, 2, 1, &[])?;
        Ok(Arc::new(Side {
            name,
            port: Arc::new(port),
            peer_lid,
            smp,
            perf,
            sa,
            next_tid: AtomicU32::new(1),
            pending: Mutex::new(BTreeMap::new()),
            strays: AtomicU64::new(0),
            server_busy: AtomicU64::new(0),
        }))
    }

    fn resolve(&self, agent: AgentId, tid: u32, outcome: Outcome) {
        let waiter = self.pending.lock().unwrap().remove(&(agent, tid));
        match waiter {
            Some(tx) => {
                let _ = tx.send(outcome);
            }
            None => {
                self.strays.fetch_add(1, Relaxed);
            }
        }
    }

    /// The one receiver of this port: answers requests (servers), routes
    /// answers and timeouts to the waiting client threads.
    fn dispatch(self: &Arc<Self>) {
        while let Ok(event) = self.port.recv(None) {
            match event {
                Event::Recv { agent, addr, mad } => {
                    let tid = be32(&mad, 12);
                    if mad[3] & 0x80 != 0 {
                        self.resolve(agent, tid, Outcome::Answer(mad));
                    } else {
                        self.serve(agent, addr, mad);
                    }
                }
                Event::SendTimedOut { agent, header, .. } => {
                    self.resolve(agent, be32(&header, 12), Outcome::TimedOut)
                }
            }
        }
    }

    fn serve(&self, agent: AgentId, addr: MadAddr, mut mad: Vec<u8>) {
        let tid = be32(&mad, 12);
        let reply_to = MadAddr {
            qkey: GSI_QKEY,
            ..addr
        };
        let sent = match mad[1] {
            PERF => {
                mad[3] = GET_RESP;
                mad[24..256].copy_from_slice(&pattern(tid, 232));
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
            SA => {
                let len = be32(&mad, 20) as usize;
                let mut resp = mad[..SA_HDR].to_vec();
                resp[3] = GET_TABLE_RESP;
                resp[24..36].fill(0);
                resp[24] = 1;
                resp[26] = 1; // RMPP active
                resp.extend_from_slice(&pattern(tid, len));
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

    /// One request of `kind`, waited for; returns the error found, if any.
    fn request(
        &self,
        kind: Kind,
        rng: &mut u64,
        smp_ref: &Mutex<Option<Vec<u8>>>,
        counts: &Mutex<Counts>,
    ) {
        let tid = self.next_tid.fetch_add(1, Relaxed);
        *rng ^= *rng << 13;
        *rng ^= *rng >> 7;
        *rng ^= *rng << 17;
        let (agent, mad, addr, timeout_ms, retries): (AgentId, Vec<u8>, MadAddr, u32, u32) =
            match kind {
                Kind::Smp => (
                    self.smp,
                    gmp(SMP, 1, GET, tid, NODE_INFO, 0).to_vec(),
                    MadAddr {
                        qpn: 0,
                        lid: self.peer_lid,
                        ..MadAddr::default()
                    },
                    50,
                    6,
                ),
                // One retry only: over this link some GMPs end in ETIMEDOUT.
                Kind::Gmp => (
                    self.perf,
                    // Not PortCounters (0x12): the fabric's PMA answers that one itself.
                    gmp(PERF, 1, GET, tid, 0x10, 0).to_vec(),
                    gsi(self.peer_lid),
                    50,
                    1,
                ),
                Kind::Rmpp => {
                    let len = 1 + (*rng % 24_000) as u32;
                    (
                        self.sa,
                        gmp(SA, 2, GET_TABLE, tid, 0x11, len).to_vec(),
                        gsi(self.peer_lid),
                        1000,
                        6,
                    )
                }
            };
        let (tx, rx) = mpsc::channel();
        self.pending.lock().unwrap().insert((agent, tid), tx);
        let req = SendRequest {
            addr,
            mad: &mad,
            timeout_ms,
            retries,
        };
        if let Err(e) = self.port.send(agent, req) {
            self.pending.lock().unwrap().remove(&(agent, tid));
            counts
                .lock()
                .unwrap()
                .errors
                .push(format!("{}: send: {e}", self.name));
            return;
        }
        *counts.lock().unwrap().sent.entry(kind).or_default() += 1;
        let outcome = match rx.recv_timeout(STUCK) {
            Ok(o) => o,
            Err(_) => {
                counts.lock().unwrap().errors.push(format!(
                    "{}: {kind:?} TID {tid}: no outcome in {STUCK:?} (stuck)",
                    self.name
                ));
                return;
            }
        };
        let mut c = counts.lock().unwrap();
        let mad = match outcome {
            Outcome::TimedOut => {
                *c.timed_out.entry(kind).or_default() += 1;
                return;
            }
            Outcome::Answer(mad) => mad,
        };
        *c.answered.entry(kind).or_default() += 1;
        let bad = match kind {
            Kind::Smp => {
                // Every NodeInfo answer of the peer is the same, but for the TID.
                let mut body = mad.clone();
                body[8..16].fill(0);
                let mut reference = smp_ref.lock().unwrap();
                let r = reference.get_or_insert_with(|| body.clone());
                (mad[3] != GET_RESP || *r != body).then_some("NodeInfo differs")
            }
            Kind::Gmp => (mad.len() != 256 || mad[24..] != pattern(tid, 232)[..])
                .then_some("GMP data differs"),
            Kind::Rmpp => {
                let len = be32(&mad, 20) as usize;
                c.rmpp_bytes += mad.len().saturating_sub(SA_HDR) as u64;
                (mad.len() != SA_HDR + len || mad[SA_HDR..] != pattern(tid, len)[..])
                    .then_some("RMPP message corrupted")
            }
        };
        if let Some(what) = bad {
            c.errors
                .push(format!("{}: {kind:?} TID {tid}: {what}", self.name));
        }
    }
}

fn gsi(lid: u16) -> MadAddr {
    MadAddr {
        qpn: 1,
        qkey: GSI_QKEY,
        lid,
        ..MadAddr::default()
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
    let strays = a.strays.load(Relaxed) + b.strays.load(Relaxed);
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
    if strays != 0 {
        failures.push(format!(
            "{strays} outcomes for requests already ended (not exactly once)"
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
