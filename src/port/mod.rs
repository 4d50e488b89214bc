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
//! message goes to exactly one receiver.
//!
//! **Several opens.** As each `open()` of the kernel's umad device gets its own
//! file descriptor, [`Port::open_again`] gives another handle on the same port
//! (one transport, one engine, one thread) with its own agents, its own receive
//! queue and its own descriptor: a message goes to the open whose agent it is for.
//! (libibmad 56 and later open an SMI and a GSI port of each CA this way.)
//! [`Port::close`] (or dropping the handle) ends that open: its agents are
//! unregistered and its waiting receivers fail with EINVAL. Closing the last one
//! stops and joins the thread and drops the transport (closing the port for the fabric).
//!
//! **A dead transport.** When the transport fails for good (ibsim killed, a socket
//! error, a device removed), the port stops driving it: every open's queued
//! messages can still be received, then every receive, poll and send fails with
//! EIO (`umad_recv(3)`: "receive operation failed"), blocked callers included;
//! the descriptors poll readable so `poll(2)` waiters see it too.

use std::collections::{BTreeMap, VecDeque};
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::UnixStream;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant as Clock, SystemTime};

use crate::clock::{Clock as TimeSource, SystemClock, Tick};
use crate::engine::{
    AgentId, AgentSpec, Engine, EngineConfig, EngineStats, Event, RmppAbort, SendRequest,
};
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
    /// The engine's clock. `None` (the default): the transport's
    /// ([`Transport::clock`]: the sim fabric's, when it was built with one), else the
    /// OS's monotonic clock. A [`crate::clock::VirtualClock`] makes timeouts, retries
    /// and RMPP timers happen when a test advances it.
    pub clock: Option<Arc<dyn TimeSource>>,
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
            clock: None,
        }
    }
}

/// One open of the port: what one `open()` of the kernel's umad device holds.
#[derive(Debug)]
struct Open {
    /// Messages for this open's agents, oldest first.
    queue: VecDeque<Event>,
    /// The readable end handed out by [`Port::fd`] holds one byte iff a message is
    /// queued (or the port has failed).
    fd_read: UnixStream,
    fd_write: UnixStream,
    fd_ready: bool,
}

impl Open {
    fn new() -> io::Result<Open> {
        let (fd_read, fd_write) = UnixStream::pair()?;
        fd_read.set_nonblocking(true)?;
        fd_write.set_nonblocking(true)?;
        Ok(Open {
            queue: VecDeque::new(),
            fd_read,
            fd_write,
            fd_ready: false,
        })
    }

    /// Make the descriptor's readability say `want`.
    fn signal(&mut self, want: bool) {
        if want && !self.fd_ready {
            // A non-blocking one-byte write to an empty socket buffer cannot fail short.
            self.fd_ready = self.fd_write.write(&[1]).is_ok();
        } else if !want && self.fd_ready {
            let mut b = [0u8; 1];
            self.fd_ready = self.fd_read.read(&mut b).is_err();
        }
    }
}

/// What application threads and the port thread share, under one lock.
struct Core {
    engine: Engine,
    /// Every open is closed: the port is gone.
    closed: bool,
    /// Why the transport stopped for good; then receives (once queues are empty),
    /// polls and sends fail with EIO.
    failed: Option<String>,
    /// The opens, by key (0: the first).
    opens: BTreeMap<u32, Open>,
    next_open: u32,
    /// The open that registered each agent, by agent id.
    owners: Vec<Option<u32>>,
    /// Most messages one open's queue holds (the engine's `max_events`).
    max_queued: usize,
}

impl Core {
    /// Hand the engine's events to the opens whose agents they are for, then make each
    /// descriptor's readability match its queue.
    fn settle(&mut self) {
        while let Some(event) = self.engine.poll_event() {
            let (Event::Recv { agent, .. } | Event::SendTimedOut { agent, .. }) = &event;
            let agent = *agent;
            let owner = self.owners.get(agent.0 as usize).copied().flatten();
            let Some(open) = owner.and_then(|k| self.opens.get_mut(&k)) else {
                // Its open closed after the engine queued it: nobody can receive it.
                continue;
            };
            // As the engine's own limit: never a timeout report, nor an answer to one of
            // the open's requests (a response); a dropped request is forgotten by the
            // duplicate filter, so its retry gets through.
            let keep = match &event {
                Event::SendTimedOut { .. } => true,
                Event::Recv { mad, .. } => {
                    crate::wire::mad::Packet::new_checked(&mad[..]).is_ok_and(|m| m.is_response())
                }
            };
            if !keep && open.queue.len() >= self.max_queued {
                self.engine.undeliver(&event);
                continue;
            }
            open.queue.push_back(event);
        }
        let failed = self.failed.is_some();
        for open in self.opens.values_mut() {
            let want = failed || !open.queue.is_empty();
            open.signal(want);
        }
    }

    /// The error for a caller once the transport has failed.
    fn failure(&self) -> Option<Error> {
        self.failed.as_ref().map(|why| {
            Error::Io(io::Error::new(
                io::ErrorKind::BrokenPipe,
                format!("the port's transport failed: {why}"),
            ))
        })
    }

    /// Record that the transport stopped for good (the first reason is kept).
    fn fail(&mut self, why: String) {
        if self.failed.is_none() {
            vmad_debug!(target: "vmad::port", reason = %why, "transport failed");
            self.failed = Some(why);
        }
        self.settle();
    }

    fn owns(&self, key: u32, agent: AgentId) -> bool {
        self.owners.get(agent.0 as usize).copied().flatten() == Some(key)
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
    clock: Arc<dyn TimeSource>,
    /// The transport's view of the port, refreshed when it says it changed.
    attrs: std::sync::RwLock<PortAttrs>,
    caps: Caps,
    /// The port thread, joined when the last open closes.
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Core> {
        self.core.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The engine's clock.
    fn now(&self) -> Instant {
        self.clock.now()
    }

    fn wake(&self) {
        if let Some(w) = &self.waker {
            w.wake();
        }
    }

    /// Run `f` under the I/O lock (the core's lock must not be held); `None` once the
    /// port thread has ended (the transport is gone).
    fn with_io<R>(&self, f: impl FnOnce(&mut Io) -> R) -> Option<R> {
        // The port thread holds the I/O lock while it is parked: wake it and take the
        // lock in one of the gaps it leaves between turns. Never block on the lock: the
        // thread may park again before a blocked waiter is scheduled, and only another
        // wake would free it.
        let started = Clock::now();
        loop {
            let mut io = match self.io.try_lock() {
                Ok(io) => io,
                Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner(),
                Err(std::sync::TryLockError::WouldBlock) => {
                    self.wake();
                    if started.elapsed() <= Duration::from_millis(2) {
                        std::thread::yield_now();
                    } else {
                        std::thread::sleep(Duration::from_micros(50));
                    }
                    continue;
                }
            };
            return io.as_mut().map(f);
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

impl Tick for Shared {
    /// The port's clock jumped: run a turn now, so that what fell due (a resend, a
    /// timeout report) is done when the jump returns.
    fn tick(&self) {
        self.with_io(|io| turn(self, io));
    }
}

/// An open port: a handle on its engine, its transport and the thread that drives
/// them. Each handle is one open (see [`Port::open_again`]).
pub struct Port {
    shared: Arc<Shared>,
    /// This open's key in the core's table.
    key: u32,
}

impl core::fmt::Debug for Port {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Port")
            .field("ca", &self.attrs().ca_name)
            .field("port", &self.attrs().port_num)
            .field("open", &self.key)
            .finish_non_exhaustive()
    }
}

impl Port {
    /// Start driving `transport`; the handle returned is the port's first open. A
    /// transport that says spinning does not help ([`Transport::busy_poll`]) runs with
    /// `spin` and `caller_spin` zero.
    ///
    /// # Errors
    /// EIO if the descriptor pair, the port thread or the capture file cannot be created.
    pub fn open(transport: Box<dyn Transport>, mut config: PortConfig) -> Result<Port> {
        if !transport.busy_poll() {
            // See Transport::busy_poll: spinning would only slow the kernel down.
            config.spin = Duration::ZERO;
            config.caller_spin = Duration::ZERO;
        }
        let capture = match &config.pcap {
            Some(c) => Some(Capture::open(c, transport.attrs())?),
            None => None,
        };
        let waker = transport.waker();
        let clock = config
            .clock
            .clone()
            .or_else(|| transport.clock())
            .unwrap_or_else(|| Arc::new(SystemClock::new()));
        let attrs = transport.attrs().clone();
        let caps = transport.caps();
        let shared = Arc::new(Shared {
            io: Mutex::new(Some(Io { transport, capture })),
            burst: config.burst,
            caller_spin: config.caller_spin,
            core: Mutex::new(Core {
                engine: Engine::new(crate::entropy::seeded(&config.engine)),
                closed: false,
                failed: None,
                opens: BTreeMap::from([(0, Open::new()?)]),
                next_open: 1,
                owners: Vec::new(),
                max_queued: config.engine.max_events,
            }),
            ready: Condvar::new(),
            waker,
            clock,
            attrs: std::sync::RwLock::new(attrs),
            caps,
            thread: Mutex::new(None),
        });
        let name = {
            let a = shared.attrs.read().unwrap_or_else(PoisonError::into_inner);
            format!("vmad-port {}:{}", a.ca_name, a.port_num)
        };
        let ticked: Weak<dyn Tick> = Arc::downgrade(&shared) as Weak<Shared>;
        shared.clock.attach(ticked);
        let driver = shared.clone();
        let thread = std::thread::Builder::new()
            .name(name)
            .spawn(move || drive(&driver, &config))?;
        *shared.thread.lock().unwrap_or_else(PoisonError::into_inner) = Some(thread);
        Ok(Port { shared, key: 0 })
    }

    /// Another open of the same port, as a second `open()` of the kernel's umad device:
    /// its own agents, receive queue and descriptor; the transport, the engine (and so
    /// the 32-agent limit and the TID space) and the thread are shared. The port lives
    /// until every open is closed.
    ///
    /// # Errors
    /// EINVAL if this open is closed; EIO if the transport has failed or no descriptor
    /// pair can be made.
    pub fn open_again(&self) -> Result<Port> {
        let mut core = self.live()?;
        let open = Open::new()?;
        let key = core.next_open;
        core.next_open = key
            .checked_add(1)
            .ok_or(Error::LimitReached("opens of one port exhausted"))?;
        core.opens.insert(key, open);
        Ok(Port {
            shared: self.shared.clone(),
            key,
        })
    }

    /// How many opens of this port are open now.
    pub fn opens(&self) -> usize {
        self.shared.lock().opens.len()
    }

    /// What the transport reports about the port (`umad_get_port`), as of its last
    /// refresh (a transport that reads port events keeps it current).
    pub fn attrs(&self) -> PortAttrs {
        self.shared
            .attrs
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// What the transport can carry.
    pub fn caps(&self) -> Caps {
        self.shared.caps
    }

    /// Register an agent for this open.
    ///
    /// # Errors
    /// EINVAL on a closed port; EIO once the transport has failed; EOPNOTSUPP for an
    /// SMI (GSI) agent on a transport without QP0 (QP1); otherwise as
    /// [`Engine::register`] (EINVAL, ENOMEM).
    pub fn register(&self, spec: AgentSpec) -> Result<AgentId> {
        let has_qp = match spec.qp {
            Qp::Smi => self.shared.caps.smi,
            Qp::Gsi => self.shared.caps.gsi,
        };
        if !has_qp {
            return Err(Error::Unsupported("this transport lacks that QP"));
        }
        let (id, hi_tid) = {
            let mut core = self.live()?;
            let id = core.engine.register(spec)?;
            let slot = id.0 as usize;
            if core.owners.len() <= slot {
                core.owners.resize(slot + 1, None);
            }
            core.owners[slot] = Some(self.key);
            (id, core.engine.hi_tid(id).unwrap_or_default())
        };
        // The transport's lock comes before the core's: announce it with the core free.
        let announced = self
            .with_transport(|t| t.register_agent(&spec, hi_tid))
            .and_then(|r| r);
        if let Err(e) = announced {
            let mut core = self.shared.lock();
            let _ = core.engine.unregister(id);
            core.owners[id.0 as usize] = None;
            return Err(e);
        }
        Ok(id)
    }

    /// Unregister one of this open's agents; its outstanding sends are dropped, its
    /// queued messages stay.
    ///
    /// # Errors
    /// EINVAL on a closed port or for an agent this open has not registered.
    pub fn unregister(&self, agent: AgentId) -> Result<()> {
        let mut core = self.open_core()?;
        if !core.owns(self.key, agent) {
            return Err(Error::UnknownAgent(agent.0));
        }
        let hi_tid = core.engine.hi_tid(agent);
        core.engine.unregister(agent)?;
        core.owners[agent.0 as usize] = None;
        drop(core);
        if let Some(hi_tid) = hi_tid {
            // A transport already gone has nothing left to unregister.
            let _ = self.with_transport(|t| t.unregister_agent(hi_tid));
        }
        Ok(())
    }

    /// The TID high word the engine stamps on `agent`'s requests.
    pub fn hi_tid(&self, agent: AgentId) -> Option<u32> {
        self.shared.lock().engine.hi_tid(agent)
    }

    /// Queue a MAD and send it from this thread if the transport is free (else the
    /// port thread sends it).
    ///
    /// # Errors
    /// EINVAL on a closed port or an agent of another open; EIO once the transport has
    /// failed; otherwise as [`Engine::send`] (EINVAL, EMSGSIZE).
    pub fn send(&self, agent: AgentId, req: SendRequest<'_>) -> Result<()> {
        {
            let mut core = self.live()?;
            if !core.owns(self.key, agent) {
                return Err(Error::UnknownAgent(agent.0));
            }
            let now = self.shared.now();
            core.engine.send(now, agent, req)?;
        }
        if self.shared.try_turn().is_none() {
            self.shared.wake();
        }
        Ok(())
    }

    /// Wait for this open's next message and offer it to `take`: if `take` returns
    /// `Ok`, the message is consumed; if it returns `Err`, the message stays at the
    /// head of the queue and the error is returned (how ENOSPC keeps a message for a
    /// bigger buffer).
    ///
    /// `timeout`: `None` waits forever, zero does not wait.
    ///
    /// # Errors
    /// EWOULDBLOCK when nothing is queued and `timeout` is zero; ETIMEDOUT when a
    /// positive `timeout` passes; EINVAL if the open is (or gets) closed; EIO when
    /// nothing is queued and the transport has failed (or fails while waiting); or
    /// `take`'s error.
    pub fn recv_with<R>(
        &self,
        timeout: Option<Duration>,
        mut take: impl FnMut(&Event) -> Result<R>,
    ) -> Result<R> {
        let deadline = timeout.map(|t| Clock::now() + t);
        let mut spin = Spin::new(&self.shared, timeout);
        let mut core = self.open_core()?;
        loop {
            core.settle();
            let open = core.opens.get_mut(&self.key).ok_or(Error::InvalidPort)?;
            if let Some(event) = open.queue.front() {
                let taken = take(event)?;
                open.queue.pop_front();
                core.settle();
                return Ok(taken);
            }
            if let Some(e) = core.failure() {
                return Err(e);
            }
            if spin.active() {
                drop(core);
                spin.turn(&self.shared);
                core = self.open_core()?;
                continue;
            }
            core = self.wait_ready(core, timeout, deadline)?;
        }
    }

    /// This open's next message (see [`Port::recv_with`] for `timeout`).
    ///
    /// # Errors
    /// As [`Port::recv_with`].
    pub fn recv(&self, timeout: Option<Duration>) -> Result<Event> {
        self.recv_with(timeout, |e| Ok(e.clone()))
    }

    /// Wait until a message is queued for this open (`umad_poll`). Another thread may
    /// take it first. A zero timeout still runs one turn of the port, so it reports
    /// what a non-blocking receive would find.
    ///
    /// # Errors
    /// ETIMEDOUT if none is queued within `timeout` (at once when zero); EINVAL if the
    /// open is (or gets) closed; EIO when nothing is queued and the transport has failed.
    pub fn poll(&self, timeout: Option<Duration>) -> Result<()> {
        let deadline = timeout.map(|t| Clock::now() + t);
        let mut spin = Spin::new(&self.shared, timeout);
        let mut core = self.open_core()?;
        loop {
            core.settle();
            let open = core.opens.get(&self.key).ok_or(Error::InvalidPort)?;
            if !open.queue.is_empty() {
                return Ok(());
            }
            if let Some(e) = core.failure() {
                return Err(e);
            }
            if spin.active() {
                drop(core);
                spin.turn(&self.shared);
                core = self.open_core()?;
                continue;
            }
            core = match self.wait_ready(core, timeout, deadline) {
                Err(Error::WouldBlock) => return Err(Error::TimedOut),
                other => other?,
            };
        }
    }

    /// A descriptor that polls readable exactly while a message is queued for this
    /// open (or the transport has failed). It stays owned by the port: valid until
    /// this open is closed; -1 after.
    pub fn fd(&self) -> RawFd {
        self.shared
            .lock()
            .opens
            .get(&self.key)
            .map_or(-1, |o| o.fd_read.as_raw_fd())
    }

    /// The engine's counters (the receive-queue limit is applied per open: messages it
    /// drops count in `queue_drops`, not in `delivered`).
    pub fn stats(&self) -> EngineStats {
        self.shared.lock().engine.stats()
    }

    /// What the engine and the opens' queues hold now (tests and the soak watch it
    /// stay bounded).
    #[doc(hidden)]
    pub fn footprint(&self) -> crate::engine::Footprint {
        let core = self.shared.lock();
        let mut f = core.engine.footprint();
        for open in core.opens.values() {
            f.events += open.queue.len();
            f.event_bytes += open
                .queue
                .iter()
                .map(|e| match e {
                    Event::Recv { mad, .. } => mad.capacity(),
                    _ => 0,
                })
                .sum::<usize>();
        }
        f
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

    /// RMPP transfers that ended in ABORT or STOP so far (the engine's count; the
    /// kernel reports them to nobody, and they are never queued).
    pub fn rmpp_aborts(&self) -> u64 {
        self.shared.lock().engine.stats().rmpp_aborts
    }

    /// The most recent RMPP transfer that ended in ABORT or STOP, if any.
    pub fn last_rmpp_abort(&self) -> Option<RmppAbort> {
        self.shared.lock().engine.last_rmpp_abort()
    }

    /// Why the transport failed, once it has (then calls fail with EIO).
    pub fn failure(&self) -> Option<String> {
        self.shared.lock().failed.clone()
    }

    /// Whether this open is still open (the transport may have failed: see [`Port::failure`]).
    pub fn is_open(&self) -> bool {
        let core = self.shared.lock();
        !core.closed && core.opens.contains_key(&self.key)
    }

    /// Take (`on`) or give up the SM role on the port (what opening and closing
    /// `/dev/infiniband/issmN` does); see [`Transport::set_sm`].
    ///
    /// # Errors
    /// EINVAL on a closed port; EIO once the transport has failed; otherwise the
    /// transport's answer (EOPNOTSUPP where it has no such role, EBUSY/EIO if refused).
    pub fn set_sm(&self, on: bool) -> Result<()> {
        drop(self.live()?);
        self.with_transport(|t| t.set_sm(on))?
    }

    /// Run `f` on the transport, under the I/O lock (the core's lock must not be held).
    ///
    /// # Errors
    /// EINVAL once the port thread has ended (the transport is gone).
    fn with_transport<R>(&self, f: impl FnOnce(&mut dyn Transport) -> R) -> Result<R> {
        self.shared
            .with_io(|io| f(io.transport.as_mut()))
            .ok_or(Error::InvalidPort)
    }

    /// Close this open: its agents are unregistered, its queued messages dropped and its
    /// waiting receivers fail with EINVAL. The last open's close stops the port thread
    /// and releases the transport. Idempotent.
    pub fn close(&self) {
        let mut gone = Vec::new();
        let last = {
            let mut core = self.shared.lock();
            if core.opens.remove(&self.key).is_some() {
                for slot in 0..core.owners.len() {
                    if core.owners[slot] == Some(self.key) {
                        core.owners[slot] = None;
                        let agent = AgentId(slot as u32);
                        gone.extend(core.engine.hi_tid(agent));
                        // Registered by this open, so known to the engine.
                        let _ = core.engine.unregister(agent);
                    }
                }
            }
            let last = core.opens.is_empty();
            if last {
                core.closed = true;
            }
            last
        };
        self.shared.ready.notify_all();
        if !last {
            for hi_tid in gone {
                let _ = self.with_transport(|t| t.unregister_agent(hi_tid));
            }
            return;
        }
        self.shared.wake();
        let thread = self
            .shared
            .thread
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(t) = thread {
            // A panic on the port thread has already been reported; closing still succeeds.
            let _ = t.join();
        }
    }

    /// The core, if this open is open and the transport works (for register and send).
    fn live(&self) -> Result<MutexGuard<'_, Core>> {
        let core = self.open_core()?;
        match core.failure() {
            Some(e) => Err(e),
            None => Ok(core),
        }
    }

    /// The core, if this open is open (its queue may still be read after a failure).
    fn open_core(&self) -> Result<MutexGuard<'_, Core>> {
        let core = self.shared.lock();
        if core.closed || !core.opens.contains_key(&self.key) {
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
        if core.closed || !core.opens.contains_key(&self.key) {
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

/// Fails the port when the port thread ends while opens remain (a dead transport, or
/// a panic), so that no receiver waits forever on a port nobody drives.
struct ClosedOnExit<'a>(&'a Shared);

impl Drop for ClosedOnExit<'_> {
    fn drop(&mut self) {
        {
            let mut core = self.0.lock();
            if !core.closed {
                core.fail("the port thread ended".into());
            }
        }
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
    if core.closed || core.failed.is_some() {
        return (false, None);
    }
    let now = shared.now();
    let before = core.engine.pending_events();
    let engine = &mut core.engine;
    let cap = &mut io.capture;
    let transport = &mut io.transport;
    let received = transport.recv_burst(shared.burst, &mut |meta, mad| {
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
    });
    let received = match received {
        Ok(n) => n,
        Err(e) if is_transient(&e) => 0,
        Err(e) => {
            core.fail(format!("receive failed: {e}"));
            shared.ready.notify_all();
            return (false, None);
        }
    };
    let engine = &mut core.engine;
    transport.take_undelivered(&mut |header| engine.handle_undelivered(now, header));
    if transport.attrs_changed() {
        *shared.attrs.write().unwrap_or_else(PoisonError::into_inner) = transport.attrs().clone();
    }
    if engine.poll_timeout().is_some_and(|t| t <= now) {
        engine.handle_timeout(now);
    }
    let mut sent = 0usize;
    let mut failed = None;
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
            Err(e) if is_transient(&e) => {
                vmad_debug!(target: "vmad::transport", error = %e, "transmit failed");
                break;
            }
            Err(e) => {
                failed = Some(format!("send failed: {e}"));
                break;
            }
        }
    }
    let deadline = engine.poll_timeout();
    if let Some(why) = failed {
        core.fail(why);
        shared.ready.notify_all();
        return (false, None);
    }
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
        {
            let core = shared.lock();
            if core.closed || core.failed.is_some() {
                break;
            }
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
        let until = deadline.and_then(|d| shared.clock.park_limit(d));
        let limit = if has_waker {
            until
        } else {
            Some(until.map_or(config.park_slice, |u| u.min(config.park_slice)))
        };
        if limit.is_some_and(|l| l.is_zero()) {
            continue;
        }
        match io.transport.wait(limit) {
            Ok(()) => {}
            Err(e) if is_transient(&e) => std::thread::sleep(config.park_slice),
            Err(e) => {
                shared.lock().fail(format!("wait failed: {e}"));
                shared.ready.notify_all();
            }
        }
        idle_since = None;
    }
}

/// Whether a transport error may pass (a retry can succeed); any other means the
/// transport is gone (see [`Transport`]'s contract).
fn is_transient(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted | io::ErrorKind::TimedOut
    )
}
