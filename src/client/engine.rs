//! The client's engine: TIDs, windows, the per-TID demux and BUSY backoff. Both faces
//! (blocking waits and [`super::Pending`] futures) run on it.
//!
//! Every request gets a slot under its TID's low word (the engine stamps the agent's
//! high word). A request waits in its destination's queue until the destination is
//! under its cap and its class (SMP or GMP) under its window; then it is sent. The
//! open's receive is taken by one waiter at a time (the *receiver*): it reads
//! whatever the port queued, files each answer in the slot of its TID, wakes that
//! slot's thread or task, and sends what the freed windows now allow. Waiters that
//! are not the receiver sleep on a condition variable the receiver signals.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError, Weak};
use std::task::Waker;
use std::time::{Duration, Instant};

use super::{ClientConfig, ClientStats, Request, Response};
use crate::engine::{AgentId, AgentSpec, Event, SendRequest};
use crate::port::Port;
use crate::types::{MadAddr, Qp};
use crate::wire::{mad, smp};
use crate::{Error, Result};

/// How long a receiver blocks in the port before it looks at its timers again (the
/// BUSY backoffs, and whether the client is still wanted). Not a timeout of any request:
/// the port's engine reports each request's own timeout.
const SLICE: Duration = Duration::from_millis(50);
/// Most messages one receiver turn files before it lets others look.
const BURST: usize = 64;

/// Where a request stands.
enum Phase {
    /// In its destination's queue.
    Queued,
    /// Answered BUSY: back in the queue at the instant held in `State::delayed`.
    Delayed,
    /// Sent; its answer or timeout is awaited.
    OnWire,
    /// Finished.
    Done(Result<Response>),
}

struct Slot {
    req: Request,
    agent: AgentId,
    dest: u64,
    smi: bool,
    phase: Phase,
    busy: u32,
    /// Redirects followed (at most one: a second would be a loop).
    redirected: bool,
    waker: Option<Waker>,
    /// The handle was dropped: forget the slot once it finishes.
    abandoned: bool,
}

#[derive(Default)]
struct Dest {
    out: usize,
    waiting: VecDeque<u32>,
    /// In `State::ready`.
    listed: bool,
}

/// Where SubnAdmReports go once the client has subscribed ([`super::Client::subscribe`]).
struct Reports {
    /// The agent serving Report (SA class).
    agent: AgentId,
    notices: VecDeque<crate::wire::sa::notice::Repr>,
}

#[derive(Default)]
struct State {
    next_tid: u32,
    slots: HashMap<u32, Slot>,
    dests: HashMap<u64, Dest>,
    /// Destinations with queued requests and room under their cap: [SMP, GMP].
    ready: [VecDeque<u64>; 2],
    out: [usize; 2],
    /// BUSY answers waiting out their backoff.
    delayed: Vec<(Instant, u32)>,
    receiving: bool,
    /// Wakers of finished requests, woken once the lock is let go (a waker may run
    /// anything, even a poll of this client).
    to_wake: Vec<Waker>,
    reports: Option<Reports>,
    /// Wire TIDs of BUSY retries (each a fresh TID: a peer may drop a repeated one as a
    /// duplicate) to the slot's.
    alias: HashMap<u32, u32>,
    stats: ClientStats,
    /// Why the port can no longer be used (errno kind and text).
    failed: Option<(i32, String)>,
}

impl State {
    /// A TID low word no slot and no retry uses.
    fn fresh_tid(&mut self) -> u32 {
        let mut tid = self.next_tid;
        while self.slots.contains_key(&tid) || self.alias.contains_key(&tid) {
            tid = tid.wrapping_add(1);
        }
        self.next_tid = tid.wrapping_add(1);
        tid
    }
}

/// Class, class version, RMPP, OUI: what one agent of the client serves.
type AgentKey = (u8, u8, bool, u32);

pub(crate) struct Inner {
    pub(crate) port: Arc<Port>,
    /// The `umad` id the port was opened under ([`super::Client::open`]), closed with
    /// the client, so that `umad` finds the port open meanwhile and opens it again.
    umad_id: Option<crate::umad::PortId>,
    pub(crate) config: ClientConfig,
    /// M_Keys and SM_Keys per destination.
    pub(crate) keys: Mutex<super::keys::Keys>,
    agents: Mutex<Vec<(AgentKey, AgentId)>>,
    state: Mutex<State>,
    cond: Condvar,
    driver: AtomicBool,
}

impl Drop for Inner {
    fn drop(&mut self) {
        match self.umad_id {
            // Already closed by the application through `umad` itself: nothing to do.
            Some(id) => drop(crate::umad::close_port(id)),
            None => self.port.close(),
        }
    }
}

/// What a receive turn took from the port, owned.
enum Taken {
    Answer(AgentId, MadAddr, Vec<u8>),
    TimedOut(AgentId, u32),
}

fn low_tid(m: &[u8]) -> u32 {
    mad::Packet::new_checked(m).map_or(0, |p| p.tid() as u32)
}

/// The destination key: a LID, or for a directed route also its path.
fn dest_key(req: &Request) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    (req.class == mad::MgmtClass::SubnDirectedRoute.raw()).hash(&mut h);
    req.addr.lid.hash(&mut h);
    if req.class == mad::MgmtClass::SubnDirectedRoute.raw() {
        if let Ok(p) = smp::Packet::new_checked(&req.mad[..]) {
            let n = usize::from(p.hop_count()).min(smp::PATH_LEN - 1);
            p.initial_path()[..=n].hash(&mut h);
        }
    }
    h.finish()
}

/// Where a GMP answered "redirect required" goes now: the ClassPortInfo in its data
/// (IBA 13.4.6.4). A GID-routed redirect keeps the GID; LID 0 means the same LID.
fn redirect_target(resp: &Response) -> Option<MadAddr> {
    use crate::wire::class_port_info as cpi;
    let class = mad::Packet::new_checked(&resp.mad[..]).ok()?.mgmt_class();
    if class.is_smp() {
        return None;
    }
    let data = resp.mad.get(class.attr_offset()..)?;
    let info = cpi::Repr::parse(&cpi::Packet::new_checked(data).ok()?).ok()?;
    let to = info.redirect;
    let mut addr = resp.addr;
    if to.lid != 0 {
        addr.lid = to.lid;
    }
    addr.qpn = to.qp;
    addr.qkey = to.qkey;
    addr.sl = to.sl;
    Some(addr)
}

fn failure(kind: &(i32, String)) -> Error {
    if kind.0 == crate::error::errno::EINVAL {
        Error::InvalidPort
    } else {
        Error::Io(std::io::Error::other(kind.1.clone()))
    }
}

impl Inner {
    pub(crate) fn new(
        port: Arc<Port>,
        umad_id: Option<crate::umad::PortId>,
        config: ClientConfig,
    ) -> Arc<Inner> {
        Arc::new(Inner {
            port,
            umad_id,
            config,
            keys: Mutex::default(),
            agents: Mutex::new(Vec::new()),
            state: Mutex::new(State::default()),
            cond: Condvar::new(),
            driver: AtomicBool::new(false),
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// This client's agent for the class, registered when first needed.
    fn agent(&self, class: u8, version: u8, rmpp: bool, oui: u32) -> Result<AgentId> {
        let key = (class, version, rmpp, oui);
        let mut agents = self.agents.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((_, id)) = agents.iter().find(|(k, _)| *k == key) {
            return Ok(*id);
        }
        let id = self.port.register(AgentSpec {
            qp: Qp::for_class(class),
            mgmt_class: class.into(),
            class_version: version,
            rmpp_version: u8::from(rmpp),
            method_mask: [0; 2],
            oui,
            user_rmpp: false,
        })?;
        agents.push((key, id));
        Ok(id)
    }

    /// Queue a request; it goes on the wire as soon as the windows allow. Returns its TID.
    pub(crate) fn submit(&self, mut req: Request) -> Result<u32> {
        let agent = self.agent(req.class, req.version, req.rmpp, req.oui)?;
        if req.mad.len() < mad::HEADER_LEN {
            return Err(Error::Malformed(crate::wire::Error::Truncated));
        }
        let smi = Qp::for_class(req.class) == Qp::Smi;
        let dest = dest_key(&req);
        let mut st = self.lock();
        if let Some(f) = &st.failed {
            return Err(failure(f));
        }
        let tid = st.fresh_tid();
        mad::Packet::new_unchecked(&mut req.mad[..]).set_tid(u64::from(tid));
        st.slots.insert(
            tid,
            Slot {
                req,
                agent,
                dest,
                smi,
                phase: Phase::Queued,
                busy: 0,
                redirected: false,
                waker: None,
                abandoned: false,
            },
        );
        self.enqueue(&mut st, tid);
        self.pump(&mut st);
        // Requests that failed to send (their handles are not out yet, but others'
        // may be): woken with the lock let go.
        let wake = std::mem::take(&mut st.to_wake);
        drop(st);
        wake.into_iter().for_each(Waker::wake);
        Ok(tid)
    }

    /// Hand a request that expects no answer to the port: no slot, no window (nothing
    /// would free its place), a TID of its own.
    pub(crate) fn send_unanswered(&self, mut req: Request) -> Result<()> {
        let agent = self.agent(req.class, req.version, req.rmpp, req.oui)?;
        if req.mad.len() < mad::HEADER_LEN {
            return Err(Error::Malformed(crate::wire::Error::Truncated));
        }
        let tid = {
            let mut st = self.lock();
            if let Some(f) = &st.failed {
                return Err(failure(f));
            }
            st.stats.sent += 1;
            st.fresh_tid()
        };
        mad::Packet::new_unchecked(&mut req.mad[..]).set_tid(u64::from(tid));
        self.port.send(
            agent,
            SendRequest {
                addr: req.addr,
                mad: &req.mad,
                timeout_ms: 0,
                retries: 0,
            },
        )
    }

    fn enqueue(&self, st: &mut State, tid: u32) {
        let Some(slot) = st.slots.get_mut(&tid) else {
            return;
        };
        slot.phase = Phase::Queued;
        let (dest, class) = (slot.dest, usize::from(!slot.smi));
        let cap = self.config.per_destination.max(1);
        let d = st.dests.entry(dest).or_default();
        d.waiting.push_back(tid);
        if !d.listed && d.out < cap {
            d.listed = true;
            st.ready[class].push_back(dest);
        }
    }

    /// Send what the windows allow.
    fn pump(&self, st: &mut State) {
        let cap = self.config.per_destination.max(1);
        for class in 0..2 {
            let window = if class == 0 {
                self.config.smp_window
            } else {
                self.config.gmp_window
            }
            .max(1);
            while st.out[class] < window {
                let Some(key) = st.ready[class].pop_front() else {
                    break;
                };
                let Some(d) = st.dests.get_mut(&key) else {
                    continue;
                };
                let Some(tid) = d.waiting.pop_front() else {
                    d.listed = false;
                    continue;
                };
                d.out += 1;
                st.stats.max_to_one_destination = st.stats.max_to_one_destination.max(d.out);
                if d.out < cap && !d.waiting.is_empty() {
                    st.ready[class].push_back(key);
                } else {
                    d.listed = false;
                }
                st.out[class] += 1;
                st.stats.max_on_wire[class] = st.stats.max_on_wire[class].max(st.out[class]);
                st.stats.sent += 1;
                self.send(st, tid);
            }
        }
    }

    /// Put one request on the wire (the windows already count it).
    fn send(&self, st: &mut State, tid: u32) {
        let Some(slot) = st.slots.get_mut(&tid) else {
            return;
        };
        slot.phase = Phase::OnWire;
        let sent = self.port.send(
            slot.agent,
            SendRequest {
                addr: slot.req.addr,
                mad: &slot.req.mad,
                timeout_ms: slot.req.timeout_ms.unwrap_or(self.config.timeout_ms),
                retries: slot.req.retries.unwrap_or(self.config.retries),
            },
        );
        if let Err(e) = sent {
            self.finish(st, tid, Err(e));
        }
    }

    /// A request left the wire: free its place in the windows.
    fn release(&self, st: &mut State, tid: u32) {
        let Some(slot) = st.slots.get(&tid) else {
            return;
        };
        if !matches!(slot.phase, Phase::OnWire) {
            return;
        }
        let (dest, class) = (slot.dest, usize::from(!slot.smi));
        st.out[class] -= 1;
        let cap = self.config.per_destination.max(1);
        let mut gone = false;
        if let Some(d) = st.dests.get_mut(&dest) {
            d.out -= 1;
            if !d.waiting.is_empty() && !d.listed && d.out < cap {
                d.listed = true;
                st.ready[class].push_back(dest);
            }
            gone = d.out == 0 && d.waiting.is_empty() && !d.listed;
        }
        if gone {
            st.dests.remove(&dest);
        }
    }

    fn finish(&self, st: &mut State, tid: u32, result: Result<Response>) {
        self.release(st, tid);
        if result.is_ok() {
            st.stats.answered += 1;
        } else {
            st.stats.failed += 1;
        }
        let Some(slot) = st.slots.get_mut(&tid) else {
            return;
        };
        if slot.abandoned {
            st.slots.remove(&tid);
            return;
        }
        slot.phase = Phase::Done(result);
        if let Some(w) = slot.waker.take() {
            st.to_wake.push(w);
        }
    }

    /// File one thing the port delivered.
    fn file(&self, st: &mut State, taken: Taken) {
        match taken {
            Taken::Answer(agent, addr, mad) => {
                if st.reports.as_ref().is_some_and(|r| r.agent == agent) {
                    self.report(st, agent, addr, mad);
                    return;
                }
                let wire = low_tid(&mad);
                let tid = st.alias.remove(&wire).unwrap_or(wire);
                let Some(slot) = st.slots.get_mut(&tid) else {
                    return;
                };
                if slot.agent != agent || !matches!(slot.phase, Phase::OnWire) {
                    return; // a late answer of an earlier attempt
                }
                let resp = Response { addr, mad };
                if resp.status().busy() && slot.busy < self.config.busy_retries {
                    let backoff = self.config.busy_backoff * 2u32.pow(slot.busy.min(16));
                    slot.busy += 1;
                    st.stats.busy_retries += 1;
                    self.resend(st, tid, backoff);
                    return;
                }
                if resp.status().redirect() && !slot.redirected {
                    if let Some(to) = redirect_target(&resp) {
                        slot.redirected = true;
                        slot.req.addr = to;
                        self.resend(st, tid, Duration::ZERO);
                        return;
                    }
                }
                self.finish(st, tid, Ok(resp));
            }
            Taken::TimedOut(agent, wire) => {
                let tid = st.alias.remove(&wire).unwrap_or(wire);
                if st.slots.get(&tid).is_some_and(|s| s.agent == agent) {
                    let aborted = self
                        .port
                        .last_rmpp_abort()
                        .filter(|a| a.agent == agent && a.tid as u32 == wire);
                    let err = match aborted {
                        Some(a) => Error::RmppAborted {
                            status: u8::from(a.status),
                        },
                        None => Error::TimedOut,
                    };
                    self.finish(st, tid, Err(err));
                }
            }
        }
    }

    /// Send request `tid` again after `after`, under a fresh TID (a peer may drop a
    /// repeated one as a duplicate).
    fn resend(&self, st: &mut State, tid: u32, after: Duration) {
        self.release(st, tid);
        let retry = st.fresh_tid();
        st.alias.insert(retry, tid);
        if let Some(slot) = st.slots.get_mut(&tid) {
            slot.phase = Phase::Delayed;
            // A redirect changed the address: count it against its new destination.
            slot.dest = dest_key(&slot.req);
            mad::Packet::new_unchecked(&mut slot.req.mad[..]).set_tid(u64::from(retry));
        }
        if after.is_zero() {
            self.enqueue(st, tid);
        } else {
            st.delayed.push((Instant::now() + after, tid));
        }
    }

    /// A SubnAdmReport: answer it (ReportResp, as IBA 13.4.8.3 asks, or the SA sends it
    /// again) and queue its Notice.
    fn report(&self, st: &mut State, agent: AgentId, addr: MadAddr, mut m: Vec<u8>) {
        use crate::wire::sa::{self, notice};
        let Ok(h) = mad::Packet::new_checked(&m[..]) else {
            return;
        };
        if h.method() != mad::Method::Report {
            return;
        }
        let notice = notice::Packet::new_checked(m.get(sa::DATA_OFFSET..).unwrap_or_default())
            .and_then(|p| notice::Repr::parse(&p));
        m.truncate(crate::wire::MAD_SIZE);
        mad::Packet::new_unchecked(&mut m[..]).set_method(mad::Method::ReportResp);
        let to = MadAddr {
            qkey: crate::types::GSI_QKEY,
            ..addr
        };
        let _ = self.port.send(
            agent,
            SendRequest {
                addr: to,
                mad: &m,
                timeout_ms: 0,
                retries: 0,
            },
        );
        if let (Ok(n), Some(r)) = (notice, st.reports.as_mut()) {
            r.notices.push_back(n);
        }
    }

    /// Register the agent that serves Reports, once.
    pub(crate) fn serve_reports(&self) -> Result<()> {
        let mut st = self.lock();
        if st.reports.is_some() {
            return Ok(());
        }
        let report = mad::Method::Report.raw();
        let agent = self.port.register(AgentSpec {
            qp: Qp::Gsi,
            mgmt_class: mad::MgmtClass::SubnAdm,
            class_version: crate::wire::sa::CLASS_VERSION,
            rmpp_version: crate::wire::rmpp::VERSION,
            method_mask: [1 << report, 0],
            oui: 0,
            user_rmpp: false,
        })?;
        st.reports = Some(Reports {
            agent,
            notices: VecDeque::new(),
        });
        Ok(())
    }

    /// The next Notice reported, waiting up to `wait` for one.
    pub(crate) fn next_report(&self, wait: Duration) -> Option<crate::wire::sa::notice::Repr> {
        let deadline = Instant::now() + wait;
        let mut st = self.lock();
        loop {
            if let Some(n) = st.reports.as_mut().and_then(|r| r.notices.pop_front()) {
                return Some(n);
            }
            let left = deadline.checked_duration_since(Instant::now())?;
            if left.is_zero() || st.failed.is_some() {
                return None;
            }
            if st.receiving {
                st = self
                    .cond
                    .wait_timeout(st, left)
                    .unwrap_or_else(PoisonError::into_inner)
                    .0;
            } else {
                st = self.receive(st, left.min(SLICE));
            }
        }
    }

    /// Requeue the BUSY answers whose backoff has passed; how long until the next one.
    fn due(&self, st: &mut State) -> Duration {
        let now = Instant::now();
        let mut next = SLICE;
        let mut i = 0;
        while i < st.delayed.len() {
            let (at, tid) = st.delayed[i];
            if at <= now {
                st.delayed.swap_remove(i);
                self.enqueue(st, tid);
            } else {
                next = next.min(at - now);
                i += 1;
            }
        }
        next
    }

    /// One receiver turn: take up to a burst of messages from the port (waiting up to
    /// `wait` for the first), file them, send what the windows now allow.
    fn receive(&self, mut st: MutexGuard<'_, State>, wait: Duration) -> MutexGuard<'_, State> {
        st.receiving = true;
        let wait = wait.min(self.due(&mut st));
        drop(st);
        let mut taken = Vec::new();
        let mut outcome = Ok(());
        let mut timeout = wait;
        while taken.len() < BURST {
            let got = self.port.recv_with(Some(timeout), |e| {
                Ok(match e {
                    Event::Recv { agent, addr, mad } => Taken::Answer(*agent, *addr, mad.clone()),
                    Event::SendTimedOut { agent, header, .. } => {
                        Taken::TimedOut(*agent, low_tid(header))
                    }
                })
            });
            match got {
                Ok(t) => taken.push(t),
                Err(Error::TimedOut | Error::WouldBlock) => break,
                Err(e) => {
                    outcome = Err(e);
                    break;
                }
            }
            timeout = Duration::ZERO;
        }
        let mut st = self.lock();
        st.receiving = false;
        for t in taken {
            self.file(&mut st, t);
        }
        if let Err(e) = outcome {
            self.fail_all(&mut st, (e.errno(), e.to_string()));
        }
        self.due(&mut st);
        self.pump(&mut st);
        self.cond.notify_all();
        if st.to_wake.is_empty() {
            return st;
        }
        let wake = std::mem::take(&mut st.to_wake);
        drop(st);
        wake.into_iter().for_each(Waker::wake);
        self.lock()
    }

    fn fail_all(&self, st: &mut State, why: (i32, String)) {
        let tids: Vec<u32> = st
            .slots
            .iter()
            .filter(|(_, s)| !matches!(s.phase, Phase::Done(_)))
            .map(|(t, _)| *t)
            .collect();
        for tid in tids {
            self.finish(st, tid, Err(failure(&why)));
        }
        st.failed = Some(why);
    }

    /// Take a finished request's result, if it has finished.
    fn take(st: &mut State, tid: u32) -> Option<Result<Response>> {
        if !matches!(st.slots.get(&tid)?.phase, Phase::Done(_)) {
            return None;
        }
        match st.slots.remove(&tid)?.phase {
            Phase::Done(r) => Some(r),
            _ => None,
        }
    }

    /// Request `tid`'s result if it has finished.
    pub(crate) fn try_take(&self, tid: u32) -> Option<Result<Response>> {
        Self::take(&mut self.lock(), tid)
    }

    /// Block until request `tid` finishes (the blocking face).
    pub(crate) fn wait(&self, tid: u32) -> Result<Response> {
        let mut st = self.lock();
        loop {
            if let Some(r) = Self::take(&mut st, tid) {
                return r;
            }
            if !st.slots.contains_key(&tid) {
                return Err(Error::InvalidArgument("no such request"));
            }
            if st.receiving {
                st = self.cond.wait(st).unwrap_or_else(PoisonError::into_inner);
            } else {
                st = self.receive(st, SLICE);
            }
        }
    }

    /// The async face: the result if finished, else remember `waker` and make sure
    /// the driver runs.
    pub(crate) fn poll(self: &Arc<Self>, tid: u32, waker: &Waker) -> Option<Result<Response>> {
        let mut st = self.lock();
        if let Some(r) = Self::take(&mut st, tid) {
            return Some(r);
        }
        match st.slots.get_mut(&tid) {
            Some(slot) => match &mut slot.waker {
                Some(w) if w.will_wake(waker) => {}
                w => *w = Some(waker.clone()),
            },
            None => return Some(Err(Error::InvalidArgument("no such request"))),
        }
        drop(st);
        self.start_driver();
        None
    }

    pub(crate) fn stats(&self) -> ClientStats {
        self.lock().stats
    }

    /// The handle of `tid` was dropped.
    pub(crate) fn abandon(&self, tid: u32) {
        let mut st = self.lock();
        let done = match st.slots.get_mut(&tid) {
            Some(slot) => {
                slot.abandoned = true;
                slot.waker = None;
                matches!(slot.phase, Phase::Done(_))
            }
            None => false,
        };
        if done {
            st.slots.remove(&tid);
        }
    }

    /// Read and file whatever the port has queued, without blocking (for an outside
    /// event loop that polls the client's descriptor). Returns how many requests are
    /// still unfinished.
    pub(crate) fn drive(&self, wait: Duration) -> usize {
        let mut st = self.lock();
        if !st.receiving {
            st = self.receive(st, wait);
        }
        st.slots
            .values()
            .filter(|s| !matches!(s.phase, Phase::Done(_)))
            .count()
    }

    /// The thread that files answers for futures (a runtime-neutral future has no
    /// reactor to lean on). It holds the client only weakly: it ends once the last
    /// handle and future are gone.
    fn start_driver(self: &Arc<Self>) {
        if self.driver.swap(true, Ordering::AcqRel) {
            return;
        }
        let weak: Weak<Inner> = Arc::downgrade(self);
        let spawned = std::thread::Builder::new()
            .name("vmad-client".into())
            .spawn(move || {
                while let Some(inner) = weak.upgrade() {
                    let st = inner.lock();
                    if st.failed.is_some() {
                        break;
                    }
                    let idle = !st
                        .slots
                        .values()
                        .any(|s| s.waker.is_some() || !matches!(s.phase, Phase::Done(_)));
                    if st.receiving || idle {
                        let _ = inner.cond.wait_timeout(st, SLICE);
                    } else {
                        drop(inner.receive(st, SLICE));
                    }
                }
            });
        if spawned.is_err() {
            self.driver.store(false, Ordering::Release);
        }
    }
}
