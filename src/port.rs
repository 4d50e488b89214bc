//! The port: the one driver loop per port, and the only place that reads a clock.
//!
//! # Design
//!
//! A [`Port`] joins one [`Transport`] to one [`Engine`]. It owns a
//! **port thread** (named `vmad-port <ca>:<n>`) that alone touches the
//! transport. Each turn of its loop:
//!
//! 1. takes a bounded burst of received MADs and feeds them to
//!    [`Engine::handle_datagram`];
//! 2. calls [`Engine::handle_timeout`] when the engine's deadline has passed;
//! 3. drains [`Engine::poll_transmit`] straight into the transport's slots;
//! 4. if events were queued, marks the port's file descriptor readable and
//!    wakes the threads blocked in [`Port::recv_with`] / [`Port::poll`].
//!
//! When a turn found nothing to do, the thread keeps polling for
//! [`PortConfig::spin`], yielding the CPU between polls (so a reply that
//! arrives just after a request is picked up in microseconds), then parks in [`Transport::wait`] until the
//! engine's next deadline (a transport without a [`Waker`] is parked in
//! slices of [`PortConfig::park_slice`]).
//!
//! **Caller-driven progress.** The transport sits behind its own lock (the
//! *I/O lock*, always taken before the engine's). Every handoff between
//! threads costs a wake-up, and a subnet manager keeps only a few MADs on the
//! wire, so latency is its speed. Hence a thread that calls [`Port::send`]
//! runs the turn above itself when the I/O lock is free (the request goes
//! straight to the transport), and wakes the port thread only when it is
//! not; a thread waiting in [`Port::recv_with`] / [`Port::poll`] runs turns
//! for up to [`PortConfig::caller_spin`] before it blocks, so a reply is
//! usually handled by the thread that wants it. The port thread still runs
//! the timers and makes progress when nobody calls. It holds the I/O lock
//! while parked, and reads the engine's deadline under it: a send that cannot
//! take the lock then wakes it, so no deadline is missed.
//!
//! The engine's time is this module's monotonic clock: microseconds since
//! the port was opened, as a [`crate::time::Instant`].
//!
//! Any number of threads may call any method at once: every received
//! message goes to exactly one receiver. [`Port::close`] (or dropping the
//! last handle) stops and joins the thread, drops the transport (closing
//! the port for the fabric), and fails waiting receivers with EINVAL.

use std::io::{Read, Write};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::UnixStream;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant as Clock, SystemTime};

use crate::engine::{AgentId, AgentSpec, Engine, EngineConfig, EngineStats, Event, SendRequest};
use crate::pcap::{Capture, Direction, PcapConfig};
use crate::time::Instant;
use crate::transport::{Caps, PortAttrs, Transport, Waker};
use crate::types::Qp;
use crate::{Error, Result};

/// How a port's driver loop behaves.
#[derive(Debug, Clone)]
pub struct PortConfig {
    /// The engine's configuration.
    pub engine: EngineConfig,
    /// How long the port thread keeps polling (yielding the CPU between polls) after its
    /// last work before it parks. Longer: lower latency, more CPU. Default 200 µs: long
    /// enough that a request/response exchange never parks the thread in between.
    pub spin: Duration,
    /// Most MADs taken from the transport per turn.
    pub burst: usize,
    /// How long a thread waiting in [`Port::recv_with`] / [`Port::poll`] drives the
    /// transport itself (yielding between turns) before it blocks. Zero: never.
    pub caller_spin: Duration,
    /// Longest park when the transport has no [`Waker`].
    pub park_slice: Duration,
    /// Record every MAD sent and received (each RMPP segment and ACK) to a
    /// pcap file; see [`crate::pcap`].
    pub pcap: Option<PcapConfig>,
}

impl Default for PortConfig {
    fn default() -> Self {
        PortConfig {
            engine: EngineConfig::default(),
            spin: Duration::from_micros(200),
            burst: 32,
            caller_spin: Duration::from_micros(100),
            park_slice: Duration::from_millis(1),
            pcap: None,
        }
    }
}

/// What application threads and the port thread share, under one lock.
struct Core {
    engine: Engine,
    closed: bool,
    /// RMPP transfers that ended in ABORT/STOP (the kernel reports them to nobody).
    rmpp_aborts: u64,
    last_rmpp_abort: Option<Event>,
    /// The readable end handed out by [`Port::fd`] holds one byte iff a message is queued.
    fd_read: UnixStream,
    fd_write: UnixStream,
    fd_ready: bool,
}

impl Core {
    /// Drop the RMPP-abort notices at the head of the queue (they only count),
    /// then make the descriptor's readability match the queue.
    fn settle(&mut self) {
        while matches!(self.engine.peek_event(), Some(Event::RmppAborted { .. })) {
            self.last_rmpp_abort = self.engine.poll_event();
            self.rmpp_aborts += 1;
        }
        let want = self.engine.peek_event().is_some();
        if want && !self.fd_ready {
            // A non-blocking one-byte write to an empty socket buffer cannot fail short.
            self.fd_ready = self.fd_write.write(&[1]).is_ok();
        } else if !want && self.fd_ready {
            let mut b = [0u8; 1];
            self.fd_ready = self.fd_read.read(&mut b).is_err();
        }
    }
}

/// The transport side, under the I/O lock (taken before the core's lock).
struct Io {
    transport: Box<dyn Transport>,
    capture: Option<Capture>,
}

struct Shared {
    /// `None` once the port thread has ended (the transport is dropped).
    io: Mutex<Option<Io>>,
    core: Mutex<Core>,
    burst: usize,
    caller_spin: Duration,
    /// Signalled when events are queued or the port closes.
    ready: Condvar,
    waker: Option<Waker>,
    epoch: Clock,
    attrs: PortAttrs,
    caps: Caps,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Core> {
        self.core.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The engine's clock.
    fn now(&self) -> Instant {
        let micros = u64::try_from(self.epoch.elapsed().as_micros()).unwrap_or(u64::MAX);
        Instant::from_micros(micros)
    }

    fn wake(&self) {
        if let Some(w) = &self.waker {
            w.wake();
        }
    }

    /// Run one turn on the calling thread if the I/O lock is free. `None`: it was not
    /// (or the transport is gone); else whether the turn did any work.
    fn try_turn(&self) -> Option<bool> {
        let mut io = match self.io.try_lock() {
            Ok(io) => io,
            Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => return None,
        };
        let io = io.as_mut()?;
        Some(turn(self, io).0)
    }
}

/// An open port: its engine, its transport and the thread that drives them.
pub struct Port {
    shared: Arc<Shared>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl core::fmt::Debug for Port {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Port")
            .field("ca", &self.shared.attrs.ca_name)
            .field("port", &self.shared.attrs.port_num)
            .finish_non_exhaustive()
    }
}

impl Port {
    /// Start driving `transport`.
    ///
    /// # Errors
    /// EIO if the descriptor pair, the port thread or the capture file cannot be created.
    pub fn open(transport: Box<dyn Transport>, config: PortConfig) -> Result<Port> {
        let capture = match &config.pcap {
            Some(c) => Some(Capture::open(c, transport.attrs())?),
            None => None,
        };
        let (fd_read, fd_write) = UnixStream::pair()?;
        fd_read.set_nonblocking(true)?;
        fd_write.set_nonblocking(true)?;
        let waker = transport.waker();
        let attrs = transport.attrs().clone();
        let caps = transport.caps();
        let shared = Arc::new(Shared {
            io: Mutex::new(Some(Io { transport, capture })),
            burst: config.burst,
            caller_spin: config.caller_spin,
            core: Mutex::new(Core {
                engine: Engine::new(crate::entropy::seeded(&config.engine)),
                closed: false,
                rmpp_aborts: 0,
                last_rmpp_abort: None,
                fd_read,
                fd_write,
                fd_ready: false,
            }),
            ready: Condvar::new(),
            waker,
            epoch: Clock::now(),
            attrs,
            caps,
        });
        let name = format!(
            "vmad-port {}:{}",
            shared.attrs.ca_name, shared.attrs.port_num
        );
        let driver = shared.clone();
        let thread = std::thread::Builder::new()
            .name(name)
            .spawn(move || drive(&driver, &config))?;
        Ok(Port {
            shared,
            thread: Mutex::new(Some(thread)),
        })
    }

    /// What the transport reports about the port (`umad_get_port`).
    pub fn attrs(&self) -> &PortAttrs {
        &self.shared.attrs
    }

    /// What the transport can carry.
    pub fn caps(&self) -> Caps {
        self.shared.caps
    }

    /// Register an agent.
    ///
    /// # Errors
    /// EINVAL on a closed port; EOPNOTSUPP for an SMI (GSI) agent on a transport without
    /// QP0 (QP1); otherwise as [`Engine::register`] (EINVAL, ENOMEM).
    pub fn register(&self, spec: AgentSpec) -> Result<AgentId> {
        let has_qp = match spec.qp {
            Qp::Smi => self.shared.caps.smi,
            Qp::Gsi => self.shared.caps.gsi,
        };
        if !has_qp {
            return Err(Error::Unsupported("this transport lacks that QP"));
        }
        let mut core = self.live()?;
        core.engine.register(spec)
    }

    /// Unregister an agent; its outstanding sends are dropped, its queued messages stay.
    ///
    /// # Errors
    /// EINVAL on a closed port or for an agent that is not registered.
    pub fn unregister(&self, agent: AgentId) -> Result<()> {
        self.live()?.engine.unregister(agent)
    }

    /// The TID high word the engine stamps on `agent`'s requests.
    pub fn hi_tid(&self, agent: AgentId) -> Option<u32> {
        self.shared.lock().engine.hi_tid(agent)
    }

    /// Queue a MAD and send it from this thread if the transport is free (else the
    /// port thread sends it).
    ///
    /// # Errors
    /// EINVAL on a closed port; otherwise as [`Engine::send`] (EINVAL, EMSGSIZE).
    pub fn send(&self, agent: AgentId, req: SendRequest<'_>) -> Result<()> {
        {
            let mut core = self.live()?;
            let now = self.shared.now();
            core.engine.send(now, agent, req)?;
        }
        if self.shared.try_turn().is_none() {
            self.shared.wake();
        }
        Ok(())
    }

    /// Wait for the next message and offer it to `take`: if `take` returns `Ok`, the
    /// message is consumed; if it returns `Err`, the message stays at the head of the
    /// queue and the error is returned (how ENOSPC keeps a message for a bigger buffer).
    ///
    /// `timeout`: `None` waits forever, zero does not wait.
    ///
    /// # Errors
    /// EWOULDBLOCK when nothing is queued and `timeout` is zero; ETIMEDOUT when a
    /// positive `timeout` passes; EINVAL if the port is (or gets) closed; or `take`'s error.
    pub fn recv_with<R>(
        &self,
        timeout: Option<Duration>,
        mut take: impl FnMut(&Event) -> Result<R>,
    ) -> Result<R> {
        let deadline = timeout.map(|t| Clock::now() + t);
        let mut spin = Spin::new(&self.shared, timeout);
        let mut core = self.live()?;
        loop {
            core.settle();
            if let Some(event) = core.engine.peek_event() {
                let taken = take(event)?;
                core.engine.poll_event();
                core.settle();
                return Ok(taken);
            }
            if spin.active() {
                drop(core);
                spin.turn(&self.shared);
                core = self.live()?;
                continue;
            }
            core = self.wait_ready(core, timeout, deadline)?;
        }
    }

    /// The next message (see [`Port::recv_with`] for `timeout`).
    ///
    /// # Errors
    /// As [`Port::recv_with`].
    pub fn recv(&self, timeout: Option<Duration>) -> Result<Event> {
        self.recv_with(timeout, |e| Ok(e.clone()))
    }

    /// Wait until a message is queued (`umad_poll`). Another thread may take it first.
    ///
    /// # Errors
    /// ETIMEDOUT if none is queued within `timeout` (at once when zero); EINVAL if the
    /// port is (or gets) closed.
    pub fn poll(&self, timeout: Option<Duration>) -> Result<()> {
        let deadline = timeout.map(|t| Clock::now() + t);
        let mut spin = Spin::new(&self.shared, timeout);
        let mut core = self.live()?;
        loop {
            core.settle();
            if core.engine.peek_event().is_some() {
                return Ok(());
            }
            if spin.active() {
                drop(core);
                spin.turn(&self.shared);
                core = self.live()?;
                continue;
            }
            core = match self.wait_ready(core, timeout, deadline) {
                Err(Error::WouldBlock) => return Err(Error::TimedOut),
                other => other?,
            };
        }
    }

    /// A descriptor that polls readable exactly while a message is queued.
    /// It stays owned by the port: valid until the port is closed.
    pub fn fd(&self) -> RawFd {
        self.shared.lock().fd_read.as_raw_fd()
    }

    /// The engine's counters.
    pub fn stats(&self) -> EngineStats {
        self.shared.lock().engine.stats()
    }

    /// What the engine holds now (tests and the soak watch it stay bounded).
    #[doc(hidden)]
    pub fn footprint(&self) -> crate::engine::Footprint {
        self.shared.lock().engine.footprint()
    }

    /// The engine's self-check ([`Engine::check_invariants`]).
    ///
    /// # Errors
    ///
    /// A description of the first broken invariant.
    #[doc(hidden)]
    pub fn check_invariants(&self) -> core::result::Result<(), String> {
        self.shared.lock().engine.check_invariants()
    }

    /// RMPP transfers that ended in ABORT or STOP so far (counted, never queued).
    pub fn rmpp_aborts(&self) -> u64 {
        self.shared.lock().rmpp_aborts
    }

    /// The most recent RMPP abort notice ([`Event::RmppAborted`]), if any.
    pub fn last_rmpp_abort(&self) -> Option<Event> {
        self.shared.lock().last_rmpp_abort.clone()
    }

    /// Whether the port is still open.
    pub fn is_open(&self) -> bool {
        !self.shared.lock().closed
    }

    /// Stop the port thread and release the transport. Idempotent.
    pub fn close(&self) {
        self.shared.lock().closed = true;
        self.shared.ready.notify_all();
        self.shared.wake();
        let thread = self
            .thread
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(t) = thread {
            // A panic on the port thread has already been reported; closing still succeeds.
            let _ = t.join();
        }
    }

    fn live(&self) -> Result<MutexGuard<'_, Core>> {
        let core = self.shared.lock();
        if core.closed {
            return Err(Error::InvalidPort);
        }
        Ok(core)
    }

    /// Block on the condition variable until woken, the deadline, or close.
    fn wait_ready<'a>(
        &self,
        core: MutexGuard<'a, Core>,
        timeout: Option<Duration>,
        deadline: Option<Clock>,
    ) -> Result<MutexGuard<'a, Core>> {
        let core = match deadline {
            None => self
                .shared
                .ready
                .wait(core)
                .unwrap_or_else(PoisonError::into_inner),
            Some(d) => {
                let left = d.saturating_duration_since(Clock::now());
                if left.is_zero() {
                    return Err(if timeout == Some(Duration::ZERO) {
                        Error::WouldBlock
                    } else {
                        Error::TimedOut
                    });
                }
                self.shared
                    .ready
                    .wait_timeout(core, left)
                    .unwrap_or_else(PoisonError::into_inner)
                    .0
            }
        };
        if core.closed {
            return Err(Error::InvalidPort);
        }
        Ok(core)
    }
}

impl Drop for Port {
    fn drop(&mut self) {
        self.close();
    }
}

/// Marks the port closed when the port thread ends, even by a panic, so that no
/// receiver waits forever on a port nobody drives.
struct ClosedOnExit<'a>(&'a Shared);

impl Drop for ClosedOnExit<'_> {
    fn drop(&mut self) {
        self.0.lock().closed = true;
        self.0.ready.notify_all();
        // Close the port for the fabric (a caller mid-turn finishes first).
        let io = self
            .0
            .io
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        drop(io);
    }
}

/// A waiting caller's bounded spell of driving the port itself.
struct Spin {
    /// When the spell ends (`None`: no spell beyond the first turn).
    until: Option<Clock>,
    /// The first turn is always taken, even with a zero timeout (a non-blocking
    /// receive still makes progress).
    once: bool,
}

impl Spin {
    fn new(shared: &Shared, timeout: Option<Duration>) -> Spin {
        let spin = match timeout {
            Some(t) => t.min(shared.caller_spin),
            None => shared.caller_spin,
        };
        Spin {
            until: (!spin.is_zero()).then(|| Clock::now() + spin),
            once: true,
        }
    }

    fn active(&self) -> bool {
        self.once || self.until.is_some_and(|u| Clock::now() < u)
    }

    fn turn(&mut self, shared: &Shared) {
        self.once = false;
        if shared.try_turn() != Some(true) {
            // Nothing came in: let the thread that will send it run.
            std::thread::yield_now();
        }
    }
}

/// One turn (see the module docs) with the I/O lock held: returns whether it did any
/// work, and the engine's next deadline.
fn turn(shared: &Shared, io: &mut Io) -> (bool, Option<Instant>) {
    let mut core = shared.lock();
    if core.closed {
        return (false, None);
    }
    let now = shared.now();
    let before = core.engine.pending_events();
    let engine = &mut core.engine;
    let cap = &mut io.capture;
    let transport = &mut io.transport;
    let received = transport
        .recv_burst(shared.burst, &mut |meta, mad| {
            if let Some(c) = cap {
                c.record(
                    SystemTime::now(),
                    Direction::Received,
                    meta.qp,
                    &meta.src,
                    mad,
                );
            }
            engine.handle_datagram(now, meta, mad)
        })
        .inspect_err(|_e| {
            vmad_debug!(target: "vmad::transport", error = %_e, "recv failed");
        })
        .unwrap_or(0);
    transport.take_undelivered(&mut |header| engine.handle_undelivered(now, header));
    if engine.poll_timeout().is_some_and(|t| t <= now) {
        engine.handle_timeout(now);
    }
    let mut sent = 0usize;
    loop {
        let more = transport.transmit(&mut |slot| {
            let tx = engine.poll_transmit(now, slot);
            if let (Some(t), Some(c)) = (&tx, cap.as_mut()) {
                c.record(
                    SystemTime::now(),
                    Direction::Sent,
                    t.qp,
                    &t.dest,
                    &slot[..t.len],
                );
            }
            tx
        });
        match more {
            Ok(true) => sent += 1,
            Ok(false) => break,
            Err(_e) => {
                vmad_debug!(target: "vmad::transport", error = %_e, "transmit failed");
                break;
            }
        }
    }
    let deadline = engine.poll_timeout();
    if core.engine.pending_events() != before {
        core.settle();
        shared.ready.notify_all();
    }
    (received + sent > 0, deadline)
}

/// The port thread.
fn drive(shared: &Shared, config: &PortConfig) {
    let _closed_on_exit = ClosedOnExit(shared);
    let has_waker = shared.waker.is_some();
    let mut idle_since: Option<Clock> = None;
    loop {
        let mut guard = shared.io.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(io) = guard.as_mut() else { break };
        if shared.lock().closed {
            break;
        }
        let (worked, deadline) = turn(shared, io);
        if worked {
            idle_since = None;
            continue;
        }
        let now = Clock::now();
        let since = *idle_since.get_or_insert(now);
        if now.duration_since(since) < config.spin {
            // Yield rather than burn (and without the I/O lock, so callers can drive):
            // on a busy machine the thread that will send us the next frame may need this core.
            drop(guard);
            std::thread::yield_now();
            continue;
        }
        // Park until the engine's next deadline (or a wake / arrival). The deadline was read
        // under the I/O lock, still held: a later send cannot take it, so it wakes us.
        let until = deadline.map(|d| {
            let micros = d.as_micros().saturating_sub(shared.now().as_micros());
            Duration::from_micros(micros)
        });
        let limit = if has_waker {
            until
        } else {
            Some(until.map_or(config.park_slice, |u| u.min(config.park_slice)))
        };
        if limit.is_some_and(|l| l.is_zero()) {
            continue;
        }
        if io.transport.wait(limit).is_err() {
            std::thread::sleep(config.park_slice);
        }
        idle_since = None;
    }
}
