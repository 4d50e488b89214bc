//! A virtual-time fabric joining two or more engines through a seeded link
//! model (loss, duplication, reordering, delay), for engine and RMPP tests.
//!
//! Node `i` has LID `i + 1` and GID `fe80::<i+1>`. A MAD is routed by its
//! destination GID when it carries a GRH, else by LID; the permissive LID
//! (directed-route SMPs) goes to the next node, `(i + 1) % n`. Destination
//! QPN 0 arrives on the receiver's SMI side, anything else on its GSI side.
//!
//! [`Fabric::step`] moves time to the earlier of the next delivery and the
//! next engine deadline, delivers and fires what is due, then drains every
//! engine's transmit queue onto the links and its events into
//! [`Node::events`] (and the RMPP aborts each input ended in into
//! [`Node::aborts`]). [`Fabric::drive_bounded`] steps until nothing is left
//! to do and panics if that takes more than `n` steps (a livelock). No test
//! sleeps: time is an [`Instant`] the fabric owns.
//!
//! ```ignore
//! let mut f = Fabric::new(2, LinkModel::perfect(), 1);
//! let a = f.register(0, gsi_agent(0x03, 2, &[]));
//! f.send(0, a, 1, &mad(0x03, 0x01, 7), 100, 2).unwrap();
//! f.drive_bounded(100);
//! ```
#![allow(dead_code)]

use core::time::Duration;
use std::collections::BTreeMap;

use crate::engine::config::SplitMix;
use crate::engine::{
    AgentId, AgentSpec, Engine, EngineConfig, Event, RecvMeta, RmppAbort, SendRequest, Transmit,
};
use crate::time::Instant;
use crate::types::{GrhAddr, MadAddr, Qp, GSI_QKEY};
use crate::wire::mad::MgmtClass;
use crate::wire::MAD_SIZE;

/// How each link treats a MAD. Rates are in parts per million.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LinkModel {
    /// Chance a MAD is lost.
    pub(crate) loss_ppm: u32,
    /// Chance a MAD is delivered twice.
    pub(crate) dup_ppm: u32,
    /// Chance a MAD is held back behind later ones (an extra 3× delay).
    pub(crate) reorder_ppm: u32,
    /// Fixed one-way delay.
    pub(crate) delay: Duration,
    /// Extra random delay, uniform in `0..=jitter`.
    pub(crate) jitter: Duration,
}

impl LinkModel {
    /// No faults, 10 µs one-way.
    pub(crate) fn perfect() -> LinkModel {
        LinkModel {
            loss_ppm: 0,
            dup_ppm: 0,
            reorder_ppm: 0,
            delay: Duration::from_micros(10),
            jitter: Duration::ZERO,
        }
    }

    /// `percent` % loss, otherwise perfect.
    pub(crate) fn lossy(percent: u32) -> LinkModel {
        LinkModel {
            loss_ppm: percent * 10_000,
            ..LinkModel::perfect()
        }
    }
}

/// One MAD put on a link, as the fabric saw it.
#[derive(Debug, Clone)]
pub(crate) struct Wire {
    /// When it was sent.
    pub(crate) at: Instant,
    /// Sending node.
    pub(crate) from: usize,
    /// Receiving node (`None`: no node has that address).
    pub(crate) to: Option<usize>,
    /// The engine's transmit record.
    pub(crate) tx: Transmit,
    /// The bytes.
    pub(crate) mad: Box<[u8; MAD_SIZE]>,
    /// Whether the link (or the filter) dropped it.
    pub(crate) dropped: bool,
}

/// Decides per MAD whether the fabric delivers it (true) or drops it.
pub(crate) type Filter = Box<dyn FnMut(&Wire) -> bool>;

/// One engine on the fabric.
#[derive(Debug)]
pub(crate) struct Node {
    /// The engine.
    pub(crate) engine: Engine,
    /// Its LID.
    pub(crate) lid: u16,
    /// Its GID.
    pub(crate) gid: [u8; 16],
    /// Events drained from the engine, oldest first.
    pub(crate) events: Vec<Event>,
    /// RMPP transfers the engine ended in ABORT or STOP, oldest first.
    pub(crate) aborts: Vec<RmppAbort>,
    /// The engine's abort count already in `aborts`.
    aborts_seen: u64,
}

impl Node {
    /// Collect the abort the engine's last input ended in: the engine counts aborts and
    /// keeps only the last, and no input of these tests ends two transfers at once.
    fn note_abort(&mut self) {
        let count = self.engine.stats().rmpp_aborts;
        if count > self.aborts_seen {
            assert_eq!(
                count - self.aborts_seen,
                1,
                "one input ended several RMPP transfers: only the last is kept"
            );
            self.aborts.extend(self.engine.last_rmpp_abort());
            self.aborts_seen = count;
        }
    }
}

struct InFlight {
    to: usize,
    meta: RecvMeta,
    mad: Box<[u8; MAD_SIZE]>,
}

/// Engines joined by links, in virtual time.
pub(crate) struct Fabric {
    /// The current time.
    pub(crate) now: Instant,
    /// The engines.
    pub(crate) nodes: Vec<Node>,
    /// The link model every MAD goes through.
    pub(crate) link: LinkModel,
    /// Every MAD sent, in order (delivered or not).
    pub(crate) trace: Vec<Wire>,
    /// An optional per-MAD drop decision, applied before the link model.
    pub(crate) filter: Option<Filter>,
    /// Whether to keep [`Fabric::trace`] (off for big runs).
    pub(crate) tracing: bool,
    rng: SplitMix,
    in_flight: BTreeMap<(Instant, u64), InFlight>,
    seq: u64,
}

/// The GID of node `i`.
pub(crate) fn gid_of(i: usize) -> [u8; 16] {
    let mut gid = [0u8; 16];
    gid[0] = 0xfe;
    gid[1] = 0x80;
    gid[8..].copy_from_slice(&(i as u64 + 1).to_be_bytes());
    gid
}

impl Fabric {
    /// `n` engines with default configs (seed `seed + i`), joined by `link`.
    pub(crate) fn new(n: usize, link: LinkModel, seed: u64) -> Fabric {
        Fabric::with_config(n, link, seed, |_, c| c)
    }

    /// Like [`Fabric::new`], letting `tweak(i, config)` adjust each engine's config.
    pub(crate) fn with_config(
        n: usize,
        link: LinkModel,
        seed: u64,
        mut tweak: impl FnMut(usize, EngineConfig) -> EngineConfig,
    ) -> Fabric {
        let nodes = (0..n)
            .map(|i| {
                let config = EngineConfig {
                    rng_seed: Some(seed.wrapping_add(i as u64)),
                    ..EngineConfig::default()
                };
                Node {
                    engine: Engine::new(tweak(i, config)),
                    lid: i as u16 + 1,
                    gid: gid_of(i),
                    events: Vec::new(),
                    aborts: Vec::new(),
                    aborts_seen: 0,
                }
            })
            .collect();
        Fabric {
            now: Instant::ZERO,
            nodes,
            link,
            trace: Vec::new(),
            filter: None,
            tracing: true,
            rng: SplitMix::new(seed ^ 0x5eed_f00d),
            in_flight: BTreeMap::new(),
            seq: 0,
        }
    }

    /// Register an agent on node `node`.
    pub(crate) fn register(&mut self, node: usize, spec: AgentSpec) -> AgentId {
        self.nodes[node].engine.register(spec).expect("register")
    }

    /// The address node `to` is reached at on its `qp` (LID routed, no GRH).
    pub(crate) fn addr(&self, to: usize, qp: Qp) -> MadAddr {
        MadAddr {
            qpn: qp.qpn(),
            qkey: if qp == Qp::Gsi { GSI_QKEY } else { 0 },
            lid: self.nodes[to].lid,
            pkey_index: 0,
            ..MadAddr::default()
        }
    }

    /// Send `mad` from `node`'s `agent` to node `to` (QP chosen by the MAD's class).
    pub(crate) fn send(
        &mut self,
        node: usize,
        agent: AgentId,
        to: usize,
        mad: &[u8],
        timeout_ms: u32,
        retries: u32,
    ) -> crate::Result<()> {
        let addr = self.addr(to, Qp::for_class(mad[1]));
        self.send_to(node, agent, addr, mad, timeout_ms, retries)
    }

    /// Send `mad` from `node`'s `agent` to an explicit address.
    pub(crate) fn send_to(
        &mut self,
        node: usize,
        agent: AgentId,
        addr: MadAddr,
        mad: &[u8],
        timeout_ms: u32,
        retries: u32,
    ) -> crate::Result<()> {
        let now = self.now;
        let req = SendRequest {
            addr,
            mad,
            timeout_ms,
            retries,
        };
        self.nodes[node].engine.send(now, agent, req)
    }

    /// Take node `node`'s collected events.
    pub(crate) fn take_events(&mut self, node: usize) -> Vec<Event> {
        core::mem::take(&mut self.nodes[node].events)
    }

    /// Take node `node`'s collected RMPP aborts.
    pub(crate) fn take_aborts(&mut self, node: usize) -> Vec<RmppAbort> {
        core::mem::take(&mut self.nodes[node].aborts)
    }

    /// The earliest instant something happens (a delivery or an engine deadline).
    pub(crate) fn next_wakeup(&self) -> Option<Instant> {
        let delivery = self.in_flight.keys().next().map(|&(t, _)| t);
        let timers = self
            .nodes
            .iter()
            .filter_map(|n| n.engine.poll_timeout())
            .min();
        match (delivery, timers) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Drain every engine's transmit and event queues at the current time.
    pub(crate) fn flush(&mut self) {
        let mut buf = [0u8; MAD_SIZE];
        for i in 0..self.nodes.len() {
            while let Some(tx) = self.nodes[i].engine.poll_transmit(self.now, &mut buf) {
                self.put_on_link(i, tx, &buf);
            }
            while let Some(ev) = self.nodes[i].engine.poll_event() {
                self.nodes[i].events.push(ev);
            }
        }
    }

    /// One step: flush, advance to the next wakeup, deliver and fire what is due, flush.
    /// False when nothing is left to happen.
    pub(crate) fn step(&mut self) -> bool {
        self.flush();
        let Some(next) = self.next_wakeup() else {
            return false;
        };
        self.now = self.now.max(next);
        self.process_due();
        self.flush();
        true
    }

    fn process_due(&mut self) {
        let now = self.now;
        while let Some(entry) = self.in_flight.first_entry() {
            if entry.key().0 > now {
                break;
            }
            let f = entry.remove();
            let node = &mut self.nodes[f.to];
            node.engine.handle_datagram(now, f.meta, &f.mad[..]);
            node.note_abort();
        }
        for node in &mut self.nodes {
            if node.engine.poll_timeout().is_some_and(|t| t <= now) {
                node.engine.handle_timeout(now);
                node.note_abort();
            }
        }
    }

    /// Step until idle; panics after `n` steps (livelock).
    pub(crate) fn drive_bounded(&mut self, n: usize) {
        for _ in 0..n {
            if !self.step() {
                return;
            }
        }
        panic!(
            "livelock: fabric still busy after {n} steps (now {:?})",
            self.now
        );
    }

    /// Step while the next wakeup is at or before `t`, then set the clock to `t`.
    pub(crate) fn run_until(&mut self, t: Instant) {
        loop {
            self.flush();
            match self.next_wakeup() {
                Some(next) if next <= t => {
                    self.now = self.now.max(next);
                    self.process_due();
                }
                _ => break,
            }
        }
        self.now = self.now.max(t);
        self.flush();
    }

    /// Advance the clock by `d` (running everything due meanwhile).
    pub(crate) fn advance(&mut self, d: Duration) {
        let t = self.now + d;
        self.run_until(t);
    }

    /// Hand a raw MAD to node `to` as if it came from node `from` (no link model).
    pub(crate) fn inject(&mut self, from: usize, to: usize, qp: Qp, mad: &[u8]) {
        let meta = RecvMeta {
            qp,
            src: MadAddr {
                qpn: qp.qpn(),
                lid: self.nodes[from].lid,
                ..MadAddr::default()
            },
            local_qpn: None,
        };
        let now = self.now;
        self.nodes[to].engine.handle_datagram(now, meta, mad);
        self.nodes[to].note_abort();
        self.flush();
    }

    fn route(&self, from: usize, dest: &MadAddr) -> Option<usize> {
        if let Some(grh) = &dest.grh {
            return self.nodes.iter().position(|n| n.gid == grh.gid);
        }
        if dest.lid == 0xffff {
            return Some((from + 1) % self.nodes.len());
        }
        self.nodes.iter().position(|n| n.lid == dest.lid)
    }

    fn put_on_link(&mut self, from: usize, tx: Transmit, buf: &[u8; MAD_SIZE]) {
        let to = self.route(from, &tx.dest);
        let mut wire = Wire {
            at: self.now,
            from,
            to,
            tx,
            mad: Box::new(*buf),
            dropped: false,
        };
        let keep = match self.filter.as_mut() {
            Some(f) => f(&wire),
            None => true,
        };
        let link = self.link;
        let lost = !keep || to.is_none() || self.chance(link.loss_ppm);
        wire.dropped = lost;
        if !lost {
            let to = to.unwrap_or_default();
            let src = &self.nodes[from];
            let meta = RecvMeta {
                qp: if tx.dest.qpn == 0 { Qp::Smi } else { Qp::Gsi },
                src: MadAddr {
                    qpn: tx.qp.qpn(),
                    qkey: 0,
                    lid: src.lid,
                    sl: tx.dest.sl,
                    path_bits: 0,
                    grh: tx.dest.grh.map(|g| GrhAddr {
                        gid: src.gid,
                        gid_index: 0,
                        ..g
                    }),
                    pkey_index: tx.dest.pkey_index,
                },
                local_qpn: None,
            };
            let mut delay = link.delay + self.jitter(link.jitter);
            if self.chance(link.reorder_ppm) {
                delay += link.delay * 3 + link.jitter;
            }
            self.schedule(delay, to, meta, buf);
            if self.chance(link.dup_ppm) {
                let extra = self.jitter(link.delay + link.jitter);
                self.schedule(delay + extra, to, meta, buf);
            }
        }
        if self.tracing {
            self.trace.push(wire);
        }
    }

    fn schedule(&mut self, delay: Duration, to: usize, meta: RecvMeta, buf: &[u8; MAD_SIZE]) {
        self.seq += 1;
        let item = InFlight {
            to,
            meta,
            mad: Box::new(*buf),
        };
        self.in_flight.insert((self.now + delay, self.seq), item);
    }

    fn chance(&mut self, ppm: u32) -> bool {
        ppm != 0 && self.rng.below(1_000_000) < u64::from(ppm)
    }

    fn jitter(&mut self, max: Duration) -> Duration {
        let us = max.as_micros() as u64;
        if us == 0 {
            return Duration::ZERO;
        }
        Duration::from_micros(self.rng.below(us + 1))
    }
}

/// A GSI agent spec: `class`, version 1 (2 for SA), serving `methods`.
pub(crate) fn gsi_agent(class: u8, rmpp_version: u8, methods: &[u8]) -> AgentSpec {
    AgentSpec {
        qp: Qp::for_class(class),
        mgmt_class: MgmtClass::from(class),
        class_version: if class == 0x03 { 2 } else { 1 },
        rmpp_version,
        method_mask: mask(methods),
        oui: 0,
        user_rmpp: false,
    }
}

/// A 128-bit method mask with these methods set.
pub(crate) fn mask(methods: &[u8]) -> [u64; 2] {
    let mut m = [0u64; 2];
    for &x in methods {
        let x = usize::from(x & 0x7f);
        m[x / 64] |= 1 << (x % 64);
    }
    m
}

/// A 256-byte MAD: base version 1, `class`, the class version [`gsi_agent`]
/// uses, `method`, `tid`, attribute 0x0010, a recognisable payload.
pub(crate) fn mad(class: u8, method: u8, tid: u64) -> [u8; MAD_SIZE] {
    let mut m = [0u8; MAD_SIZE];
    m[0] = 1;
    m[1] = class;
    m[2] = if class == 0x03 { 2 } else { 1 };
    m[3] = method;
    m[8..16].copy_from_slice(&tid.to_be_bytes());
    m[16..18].copy_from_slice(&0x0010u16.to_be_bytes());
    for (i, b) in m[64..].iter_mut().enumerate() {
        *b = i as u8;
    }
    m
}

/// The TID of a MAD.
pub(crate) fn tid_of(mad: &[u8]) -> u64 {
    u64::from_be_bytes(mad[8..16].try_into().expect("8 bytes"))
}

/// The `Recv` events among `events`, as (agent, bytes).
pub(crate) fn recvs(events: &[Event]) -> Vec<(AgentId, Vec<u8>)> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::Recv { agent, mad, .. } => Some((*agent, mad.clone())),
            _ => None,
        })
        .collect()
}
