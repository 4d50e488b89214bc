//! The port: the one driver loop per port, and the only place that reads a clock.
//!
//! # Design
//!
//! A [`Port`] joins one [`Transport`] to one [`Engine`], with a **port thread**
//! (named `vmad-port <ca>:<n>`) that keeps it going when nobody calls. The
//! transport sits behind its own lock (the *I/O lock*, always taken before the
//! engine's); whoever holds it runs a **turn**:
//!
//! 1. takes a bounded burst of received MADs and feeds them to
//!    [`Engine::handle_datagram`];
//! 2. calls [`Engine::handle_timeout`] when the engine's deadline has passed;
//! 3. drains [`Engine::poll_transmit`] straight into the transport's slots;
//! 4. hands the engine's events to the opens' queues, marks the descriptors of
//!    opens that someone polls readable, and wakes the threads blocked in
//!    [`Port::recv_with`] / [`Port::poll`].
//!
//! **Caller-driven progress.** Every handoff between threads costs a wake-up,
//! and a subnet manager keeps only a few MADs on the wire, so latency is its
//! speed. So a thread that calls [`Port::send`] runs a turn itself, and a
//! thread waiting in [`Port::recv_with`] / [`Port::poll`] runs turns for a
//! short spin (the `spin` module's policy: only while the port's recent waits
//! were that short, and never when a yield shows the CPU is wanted) before it
//! blocks, so a reply is usually handled by the thread that wants it. How
//! threads block depends on the transport:
//!
//! - **With a ready descriptor** ([`Transport::ready_fd`]: ibsim, the kernel's
//!   umad device, the verbs and hybrid transports' epoll fd) nobody holds the transport between turns. A blocked caller
//!   polls its open's descriptor and the transport's, and runs the turn itself
//!   when the transport's turns readable: a MAD wakes one thread, the one that
//!   waits for it. The port thread reads the transport only while no caller
//!   does, and runs the timers (see the `ready` module). A sender only sends.
//! - **Without** (the embedded fabric, `roce`; verbs with
//!   `VMAD_VERBS_CALLER_DRIVEN=0`), the port thread keeps polling
//!   for [`PortConfig::spin`] after its last work, yielding the CPU between
//!   polls, then parks until the engine's next deadline. With a
//!   [`Parker`](crate::transport::Parker) (the embedded fabric) it parks without
//!   the transport, so a caller always runs its own turn; it publishes the
//!   deadline it will wake for under the I/O lock, and a turn elsewhere that
//!   moves the deadline earlier wakes it. Else it parks in [`Transport::wait`]
//!   holding the I/O lock (a transport without a
//!   [`Waker`](crate::transport::Waker) in slices of [`PortConfig::park_slice`]),
//!   having read the deadline under it: a send that cannot take the lock wakes
//!   it, so no deadline is missed, and a thread that needs the transport for
//!   anything else (register, unregister, a close's flush) announces itself as a
//!   spinning caller does, so that the thread lets go of it and stands by.
//!   Blocked callers wait on a condition variable the turns signal.
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
//! the descriptors poll readable so `poll(2)` waiters see it too. What nobody
//! will drive again goes at once ([`Engine::abandon`]): outstanding requests end
//! without a completion of their own (as the kernel flushes an agent's sends when
//! its device goes, its reads failing with EIO), RMPP sessions both ways, unsent
//! MADs and timers, so a dead port holds no more than its queued messages.

// Public for other crates of the workspace and for tests, but no part of the API: the
// hooks of vmad-capi's wait.c, and the self-checks of tests and the soak.
#[doc(hidden)]
pub mod audit;
#[doc(hidden)]
pub mod cabi;
mod driver;
mod opens;
mod ready;
mod shared;
mod spin;
mod waiting;

use self::driver::drive;
use self::opens::{Core, Open};
use self::ready::Ready;
use self::shared::{Io, Shared};
use self::spin::SpinPolicy;

use std::collections::BTreeMap;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError, Weak};
use std::time::Duration;

use crate::clock::{Clock as TimeSource, SystemClock, Tick};
use crate::engine::{
    AgentId, AgentSpec, Engine, EngineConfig, EngineStats, Event, RmppAbort, SendRequest,
};
use crate::pcap::{Capture, PcapConfig};
use crate::transport::{Caps, PortAttrs, Transport};
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
    /// Longest park when the transport has no [`Waker`](crate::transport::Waker).
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
        let ready = match transport.ready_fd() {
            Some(fd) => Some(Ready::new(fd.try_clone_to_owned()?)?),
            None => None,
        };
        let waker = transport.waker();
        let parker = transport.parker();
        let arrivals = transport.arrivals();
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
            spin: SpinPolicy::new(config.caller_spin),
            spinners: std::sync::atomic::AtomicUsize::new(0),
            parked: std::sync::atomic::AtomicBool::new(false),
            parker,
            planned: std::sync::atomic::AtomicU64::new(0),
            core: Mutex::new(Core {
                engine: Engine::new(crate::entropy::seeded(&config.engine)),
                closed: false,
                failed: None,
                opens: BTreeMap::from([(0, Open::new()?)]),
                next_open: 1,
                owners: Vec::new(),
                max_queued: config.engine.max_events,
                cv_waiters: 0,
            }),
            ready: Condvar::new(),
            waker,
            arrivals,
            fdwait: ready,
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

    /// [`Port::attrs`] as the fabric has them now: the transport asks again where it
    /// learns them only by asking (ibsim: an SM that came up after the port was opened
    /// has since set its LID and SM LID); elsewhere the same as [`Port::attrs`].
    ///
    /// # Errors
    /// EINVAL on a closed port; what asking fails with (EIO when ibsim does not answer).
    pub fn refresh_attrs(&self) -> Result<PortAttrs> {
        let attrs = self.with_transport(|t| t.reread_attrs().map(|()| t.attrs().clone()))??;
        *self
            .shared
            .attrs
            .write()
            .unwrap_or_else(PoisonError::into_inner) = attrs.clone();
        Ok(attrs)
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
            return Err(Error::Unsupported(match spec.qp {
                Qp::Smi => "this port has no QP0 for SMPs (a RoCE port has none, and vmad's own UD QP cannot be QP0)",
                Qp::Gsi => "this port has no QP1 for GMPs",
            }));
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

    /// Unregister one of this open's agents: what its sends queued is put on the wire
    /// first (as [`close`](Self::close) does), then its outstanding sends are dropped;
    /// its queued messages stay.
    ///
    /// # Errors
    /// EINVAL on a closed port or for an agent this open has not registered.
    pub fn unregister(&self, agent: AgentId) -> Result<()> {
        if !self.open_core()?.owns(self.key, agent) {
            return Err(Error::UnknownAgent(agent.0));
        }
        // The engine drops what an unregistered agent queued: a send accepted before
        // this call must not be lost to it.
        self.shared.flush();
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
        // One clock read for the send and its turn.
        let os_now = std::time::Instant::now();
        {
            let mut core = self.live()?;
            if !core.owns(self.key, agent) {
                return Err(Error::UnknownAgent(agent.0));
            }
            core.engine.send(self.shared.clock.at(os_now), agent, req)?;
        }
        // With a ready descriptor, whoever waits for the answer reads the transport: a
        // sender only sends (one system call fewer per MAD).
        let receive = self.shared.fdwait.is_none();
        if self.shared.try_turn_at(receive, os_now).is_none() {
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
        take: impl FnMut(&Event) -> Result<R>,
    ) -> Result<R> {
        self.recv_inner(timeout, timeout != Some(Duration::ZERO), None, take)
    }

    /// As [`Port::recv_with`], but a wait spins up to `spin` (while the port's recent
    /// waits were that short, and while no other thread wants the CPU) before it
    /// blocks, whatever the transport's [`Transport::busy_poll`] says: for a caller
    /// that keeps many requests in flight and owns its thread (a discovery sweep).
    pub(crate) fn recv_spinning<R>(
        &self,
        timeout: Option<Duration>,
        spin: Duration,
        take: impl FnMut(&Event) -> Result<R>,
    ) -> Result<R> {
        self.recv_inner(timeout, timeout != Some(Duration::ZERO), Some(spin), take)
    }

    /// This open's next message (see [`Port::recv_with`] for `timeout`).
    ///
    /// # Errors
    /// As [`Port::recv_with`].
    pub fn recv(&self, timeout: Option<Duration>) -> Result<Event> {
        // The event is moved out of the queue, not cloned (an RMPP message's whole
        // payload would be copied).
        let will_wait = timeout != Some(Duration::ZERO);
        self.wait_queued(timeout, will_wait, None, |open, engine| {
            let event = open.queue.pop_front()?;
            // Read by the application: from now on a retry of it is delivered.
            engine.taken(&event);
            Some(Ok(event))
        })
    }

    /// Wait until a message is queued for this open (`umad_poll`). Another thread may
    /// take it first. A zero timeout still runs one turn of the port, so it reports
    /// what a non-blocking receive would find.
    ///
    /// # Errors
    /// ETIMEDOUT if none is queued within `timeout` (at once when zero); EINVAL if the
    /// open is (or gets) closed; EIO when nothing is queued and the transport has failed.
    pub fn poll(&self, timeout: Option<Duration>) -> Result<()> {
        let will_wait = timeout != Some(Duration::ZERO);
        let queued = |open: &mut Open, _: &mut Engine| (!open.queue.is_empty()).then_some(Ok(()));
        match self.wait_queued(timeout, will_wait, None, queued) {
            Err(Error::WouldBlock) => Err(Error::TimedOut),
            other => other,
        }
    }

    /// A descriptor that polls readable exactly while a message is queued for this
    /// open (or the transport has failed). It stays owned by the port: valid until
    /// this open is closed; -1 after.
    pub fn fd(&self) -> RawFd {
        if let Some(r) = &self.shared.fdwait {
            // Polled from outside: the port thread must keep reading the transport.
            r.watch();
        }
        let mut core = self.shared.lock();
        let failed = core.failed.is_some();
        core.opens.get_mut(&self.key).map_or(-1, |o| {
            o.handed_out = true;
            o.show(failed);
            o.fd_read.as_raw_fd()
        })
    }

    /// The engine's counters (the receive-queue limit is applied per open: messages it
    /// drops count in `queue_drops`, not in `delivered`).
    pub fn stats(&self) -> EngineStats {
        self.shared.lock().engine.stats()
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

    /// Close this open: what its sends queued is put on the wire first (as the kernel's
    /// `write()` posts a MAD before it returns, a send is never lost to a close after
    /// it), then its agents are unregistered, its queued messages dropped and its
    /// waiting receivers fail with EINVAL. The last open's close stops the port thread
    /// and releases the transport. Idempotent.
    ///
    /// Only what the transport takes now is sent: MADs beyond its free send slots (the
    /// verbs transport's 128) are dropped with the agents, as the kernel's unregister
    /// flushes its overflow list; an RMPP transfer stops where its window stands.
    pub fn close(&self) {
        // First the open leaves the table, so that no send of it is accepted after the
        // flush (they fail with EINVAL); its agents stay registered through the flush,
        // as the engine drops what an unregistered agent queued.
        // The close that empties the table ends the port: after its flush, which sends
        // what every open queued, whoever closes at the same time included.
        let last = {
            let mut core = self.shared.lock();
            if core.opens.remove(&self.key).is_none() {
                // Closed before (or by another thread now, which finishes it).
                return;
            }
            core.opens.is_empty()
        };
        self.shared.flush();
        let mut gone = Vec::new();
        {
            let mut core = self.shared.lock();
            for slot in 0..core.owners.len() {
                if core.owners[slot] == Some(self.key) {
                    core.owners[slot] = None;
                    let agent = AgentId(slot as u32);
                    gone.extend(core.engine.hi_tid(agent));
                    // Registered by this open, so known to the engine.
                    let _ = core.engine.unregister(agent);
                }
            }
            if last {
                core.closed = true;
            }
        }
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
}

impl Drop for Port {
    fn drop(&mut self) {
        self.close();
    }
}
