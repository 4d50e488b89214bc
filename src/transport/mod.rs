//! Transports: how MADs reach a fabric.
//!
//! | transport | QP0 (SMPs) | QP1 (GMPs) | needs |
//! |---|---|---|---|
//! | `kernel` | where the port has one (not on RoCE) | yes: the kernel's QP1 through `/dev/infiniband/umadN` | a host CA, read/write on its umad device |
//! | `hybrid` | as `kernel` | client GMPs over vmad's UD QP (`verbs`), the rest as `kernel` | both of theirs |
//! | `sim` | yes | yes | nothing: an in-process fabric |
//! | `ibsim` | yes | yes | a running ibsim |
//! | `verbs` | no | own UD QP: client of remote QP1s, peer of vmad | an RDMA device, CAP_NET_RAW |
//! | `roce` | no (RoCE has no QP0) | yes: vmad is QP1 of its own address | UDP 4791 on a free address |
//!
//! None of them is a default here: a port's transport follows from the CA it
//! opens ([`registry`]). The process-wide registry offers the embedded fabric's
//! CAs (`vmadsim0`, `vmadsim1`, over `sim`) until others are registered; the
//! C library picks the host's CAs (`kernel`, or `hybrid` where built in) when
//! the host has any, else the embedded fabric, unless `VMAD_TRANSPORT` says
//! otherwise; the `vmad` command's `--transport` defaults to `sim`.
//!
//! A transport moves whole 256-byte MADs. It never interprets them beyond
//! what its wire format needs; matching, timers and RMPP are the engine's.

#[cfg(all(feature = "kernel", feature = "verbs"))]
#[cfg_attr(docsrs, doc(cfg(all(feature = "kernel", feature = "verbs"))))]
pub mod hybrid;
pub mod ibsim;
#[cfg(feature = "kernel")]
pub mod kernel;
pub mod registry;
#[cfg(feature = "roce")]
#[cfg_attr(docsrs, doc(cfg(feature = "roce")))]
pub mod roce;
pub mod sim;
#[cfg(feature = "verbs")]
#[cfg_attr(docsrs, doc(cfg(feature = "verbs")))]
pub mod verbs;

use std::io;
use std::os::fd::BorrowedFd;
use std::sync::Arc;
use std::time::Duration;

use crate::engine::{AgentSpec, RecvMeta, Transmit};
use crate::wire::MAD_SIZE;

/// What a transport can carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Caps {
    /// QP0 (SMPs) is available.
    pub smi: bool,
    /// QP1 (or vmad's own UD QP standing for it) is available.
    pub gsi: bool,
}

/// Link layer of a port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkLayer {
    /// InfiniBand (LIDs, QP0).
    InfiniBand,
    /// Ethernet (RoCE: GIDs only, GRH mandatory, no QP0).
    Ethernet,
}

/// What a transport knows of its port: what `umad_get_port` reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortAttrs {
    /// CA name (`vmadsim0`, `mlx5_0`, …), under 20 bytes.
    pub ca_name: String,
    /// Port number.
    pub port_num: u8,
    /// Node type (1 CA, 2 switch, 3 router).
    pub node_type: u8,
    /// Node GUID.
    pub node_guid: u64,
    /// Port GUID.
    pub port_guid: u64,
    /// GID prefix.
    pub gid_prefix: u64,
    /// Base LID (0 on RoCE).
    pub lid: u16,
    /// LMC.
    pub lmc: u8,
    /// SM LID.
    pub sm_lid: u16,
    /// SM SL.
    pub sm_sl: u8,
    /// Port state (4 = Active).
    pub state: u8,
    /// Physical state (5 = LinkUp).
    pub phys_state: u8,
    /// Rate, Gb/s.
    pub rate: u32,
    /// PortInfo:CapabilityMask.
    pub capmask: u32,
    /// P_Key table.
    pub pkeys: Vec<u16>,
    /// Link layer.
    pub link_layer: LinkLayer,
}

/// A MAD transport. All calls are non-blocking except [`Transport::wait`].
pub trait Transport: Send {
    /// What this transport can carry.
    fn caps(&self) -> Caps;

    /// The port this transport is attached to.
    fn attrs(&self) -> &PortAttrs;

    /// Hand up to `max` received MADs to `sink`, without blocking; returns how many.
    /// The bytes are lent for the call only (zero copy from the transport's buffers).
    fn recv_burst(
        &mut self,
        max: usize,
        sink: &mut dyn FnMut(RecvMeta, &[u8]),
    ) -> io::Result<usize>;

    /// Lend one transmit slot to `fill`, which writes a MAD and says where it goes,
    /// or returns `None` (nothing to send; the slot is not used). Returns whether one was sent.
    ///
    /// A caller lends slots until this returns `false`, even when it knows there is
    /// nothing more to send: a transport may hold what `fill` wrote until then (`verbs`
    /// rings its doorbell once per burst, when `fill` has nothing more). Stopping
    /// after the last MAD left it unposted until the next turn: a round trip of a
    /// second on `hybrid` (`b443016`, reverted).
    fn transmit(
        &mut self,
        fill: &mut dyn FnMut(&mut [u8; MAD_SIZE]) -> Option<Transmit>,
    ) -> io::Result<bool>;

    /// Block until a MAD may be ready to receive, or `timeout` passes (`None`: no limit).
    /// Spurious returns are allowed.
    fn wait(&mut self, timeout: Option<Duration>) -> io::Result<()>;

    /// [`Transport::wait`] in two halves, for a port thread that waits without holding
    /// the transport (so that a caller never finds it held by a thread asleep): under
    /// the I/O lock, [`Transport::park_limit`]; then, without it, the [`Parker`] this
    /// returns, which any [`Waker`] wakes too. `None` (the default): the port thread
    /// waits in [`Transport::wait`], holding the transport.
    fn parker(&self) -> Option<Parker> {
        None
    }

    /// With a [`Transport::parker`]: what [`Transport::wait`] does before it blocks.
    /// `None`: do not block (something is ready to receive, or a wake came); else the
    /// longest the parker may block (`timeout`, or less where the transport holds
    /// something back until a due time; `None` inside: no limit).
    fn park_limit(&mut self, timeout: Option<Duration>) -> Option<Option<Duration>> {
        Some(timeout)
    }

    /// A handle that makes a [`Transport::wait`] running on another thread return early.
    /// `None` (the default): the port then parks in short slices instead.
    fn waker(&self) -> Option<Waker> {
        None
    }

    /// A count of the MADs [`Transport::recv_burst`] would find (or hold back until a
    /// due time), readable from any thread without the transport: a waiting caller
    /// that spins watches it between turns, where a turn to find out takes the port's
    /// locks and reads the clock. `None` (the default): the caller spins on turns.
    fn arrivals(&self) -> Option<Arrivals> {
        None
    }

    /// A descriptor that polls readable whenever [`Transport::recv_burst`] may find a MAD,
    /// which any thread may poll without holding the transport. A transport that has
    /// one is never waited on with [`Transport::wait`]: the port's threads poll this
    /// descriptor instead, so that a thread waiting to receive reads the transport
    /// itself (a MAD wakes only the thread that wants it) and a sender never waits for
    /// a parked thread to let go of the transport. Default: `None`.
    fn ready_fd(&self) -> Option<BorrowedFd<'_>> {
        None
    }

    /// With a [`Transport::ready_fd`]: the longest the port may go without calling
    /// [`Transport::recv_burst`] while the descriptor stays quiet (for a transport that
    /// checks its peer, or retries what it held back, from there); asked after every
    /// turn. Default: no limit.
    fn idle_limit(&self) -> Option<Duration> {
        None
    }

    /// With a [`Transport::ready_fd`]: whether MADs already taken off the descriptor
    /// wait for [`Transport::recv_burst`] (the descriptor no longer shows them), as when
    /// a send had to read to make room. The port then receives again in the same turn.
    /// Default: never.
    fn rx_held(&self) -> bool {
        false
    }

    /// The local QP number the MAD of the last [`Transport::transmit`] left from, where
    /// that is not its `qp`'s own (0 or 1): vmad's UD QP standing in for QP1 (the verbs
    /// transport; the hybrid transport when it sent that MAD over verbs). The port's
    /// pcap capture shows it, and so the path each MAD took. Default: `None`.
    fn sent_via(&self) -> Option<u32> {
        None
    }

    /// The clock a port driving this transport reads, when the fabric behind it keeps
    /// its own (a sim fabric built with [`crate::subnet::FabricBuilder::clock`]);
    /// [`crate::port::PortConfig::clock`] overrides it. `None` (the default): the OS's.
    fn clock(&self) -> Option<Arc<dyn crate::clock::Clock>> {
        None
    }

    /// Whether spinning (the port thread's [`crate::port::PortConfig::spin`], a waiting
    /// caller's `caller_spin`) can get a MAD sooner. `false` where the work is done by
    /// the kernel behind a descriptor the port blocks on ([`Transport::wait`]): there
    /// spinning only takes CPU from the kernel, and the port runs without it.
    /// Default: `true`.
    fn busy_poll(&self) -> bool {
        true
    }

    /// Hand `sink` the first 24 bytes of each MAD this transport has learned
    /// never reached its destination since the last call (ibsim's status-110
    /// echoes, under `DropPolicy::Timeout`). The port feeds them to
    /// [`crate::engine::Engine::handle_undelivered`]. Default: none.
    fn take_undelivered(&mut self, _sink: &mut dyn FnMut(&[u8])) {}

    /// Whether [`Transport::attrs`] changed since the last call (the transport re-read
    /// them after a port event: state, LID, SM, P_Keys). The port then copies them, so
    /// that [`crate::port::Port::attrs`] shows them. Default: never.
    fn attrs_changed(&mut self) -> bool {
        false
    }

    /// Ask the fabric for the port's attributes again, where the transport learns them
    /// only by asking (ibsim tells its clients nothing when an SM sets a port's LID or
    /// SM LID); [`Transport::attrs`] then shows them. Transports that keep them current
    /// (port events, the embedded fabric) have nothing to do. Default: nothing.
    ///
    /// # Errors
    /// What asking fails with (EIO when the fabric does not answer).
    fn reread_attrs(&mut self) -> crate::Result<()> {
        Ok(())
    }

    /// The port registered an engine agent whose requests carry `hi_tid` in their TID's
    /// high word. A transport that must announce agents to the fabric (the kernel's
    /// umad device routes responses and unsolicited requests only to registered agents)
    /// does it here. Default: nothing to do.
    ///
    /// # Errors
    /// What the fabric refuses (EINVAL for a method another process serves,
    /// EOPNOTSUPP for a QP the port lacks); the port then unregisters the agent.
    fn register_agent(&mut self, _spec: &AgentSpec, _hi_tid: u32) -> crate::Result<()> {
        Ok(())
    }

    /// The engine agent with `hi_tid` was unregistered. Default: nothing to do.
    fn unregister_agent(&mut self, _hi_tid: u32) {}

    /// Take (`on`) or give up the SM role on this port, as opening and closing the
    /// kernel's `/dev/infiniband/issmN` does: PortInfo:CapabilityMask.IsSM set or
    /// cleared, and SM-bound traffic (traps, SA requests) sent to this port.
    ///
    /// # Errors
    /// EOPNOTSUPP ([`crate::Error::Unsupported`], the default) where the transport has no
    /// such role; EBUSY or EIO where the fabric refuses it (another SM holds the node).
    fn set_sm(&mut self, _on: bool) -> crate::Result<()> {
        Err(crate::Error::Unsupported(
            "this transport has no SM role (issm)",
        ))
    }
}

/// Blocks until something may have arrived for a transport, a [`Waker`] wakes it, or
/// at most the given time (see [`Transport::parker`]); returns early at times, as a
/// condition variable does.
#[derive(Clone)]
pub struct Parker(Arc<dyn Fn(Option<Duration>) + Send + Sync>);

impl Parker {
    /// A parker that runs `park`.
    pub fn new(park: impl Fn(Option<Duration>) + Send + Sync + 'static) -> Parker {
        Parker(Arc::new(park))
    }

    /// Block for at most `limit` (`None`: until something arrives or a wake).
    pub fn park(&self, limit: Option<Duration>) {
        (self.0)(limit)
    }
}

impl core::fmt::Debug for Parker {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("Parker")
    }
}

/// What a transport has received and not yet handed to a turn (see
/// [`Transport::arrivals`]).
#[derive(Debug, Clone)]
pub struct Arrivals(Arc<dyn ArrivalCount>);

/// Where a transport counts its arrivals (see [`Arrivals`]).
pub trait ArrivalCount: core::fmt::Debug + Send + Sync {
    /// Up by one when a MAD arrives, down when a turn receives it.
    fn arrivals(&self) -> usize;
}

impl ArrivalCount for std::sync::atomic::AtomicUsize {
    fn arrivals(&self) -> usize {
        self.load(std::sync::atomic::Ordering::Acquire)
    }
}

impl Arrivals {
    /// Arrivals counted in `count` (an `AtomicUsize`, or wherever the transport keeps
    /// its count): up by one when a MAD arrives, down when a turn receives it.
    pub fn new(count: Arc<dyn ArrivalCount>) -> Arrivals {
        Arrivals(count)
    }

    /// How many a turn would find now (or hold back until they are due).
    pub fn count(&self) -> usize {
        self.0.arrivals()
    }
}

/// Ends a [`Transport::wait`] early, from any thread (see [`Transport::waker`]).
#[derive(Clone)]
pub struct Waker(Arc<dyn Fn() + Send + Sync>);

impl Waker {
    /// A waker that runs `wake` (which must not block).
    pub fn new(wake: impl Fn() + Send + Sync + 'static) -> Waker {
        Waker(Arc::new(wake))
    }

    /// Make the current or next `wait` return.
    pub fn wake(&self) {
        (self.0)()
    }
}

impl core::fmt::Debug for Waker {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("Waker")
    }
}
