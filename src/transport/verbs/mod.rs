//! The verbs transport: vmad's own UD QP on an RDMA device (feature `verbs`).
//!
//! Userspace cannot own QP0 or QP1 (see the crate docs), so this transport
//! is a GMP **client** of remote QP1s and a full peer of other vmad
//! endpoints: its requests go to QPN 1 (or a vmad peer's QPN) with the GSI
//! Q_Key, and the replies come back to its own QPN. It cannot send SMPs and
//! never sees unsolicited traffic addressed to QP1: [`Caps`] says
//! `smi: false, gsi: true`.
//!
//! # Data path
//!
//! - One anonymous mapping (optionally huge pages, `mlock`ed where allowed)
//!   registered once as one MR, split into receive slots (40-byte GRH area +
//!   256-byte MAD) and send slots. [`Transport::recv_burst`] lends the
//!   received bytes in place; [`Transport::transmit`] lends a send slot. No
//!   copies between the NIC and the engine.
//! - One receive WR per slot; consumed slots are reposted as one chained
//!   `post_recv` per batch.
//! - Sends are queued and posted as one chained `post_send` (one doorbell,
//!   a system call on rxe) when the engine has nothing more to send or
//!   [`VerbsConfig::send_batch`] are queued.
//! - Separate send and receive CQs, polled in batches. By default
//!   ([`VerbsConfig::caller_driven`]) the transport has a ready descriptor
//!   ([`Transport::ready_fd`], `ready.rs`, where the rules that keep it
//!   truthful are written): a caller waiting for a MAD polls the CQ itself, for
//!   the port's caller spin, then sleeps on that descriptor; no port thread
//!   hands MADs over. Without it, an idle [`Transport::wait`] on the port
//!   thread polls for [`VerbsConfig::idle_spin`], then
//!   sleeps in the kernel on a completion channel (at once with
//!   [`VerbsConfig::completion_channel`]; on a CPU-starved host, e.g. the
//!   TCG-emulated test VM, that is also the faster mode). Either way
//!   [`Transport::waker`] ends a wait at once, and so does a send completion
//!   while a transmit found every send slot in flight (both CQs signal the
//!   channel; `send.rs`).
//! - Address handles are cached per destination, at most
//!   [`VerbsConfig::max_address_handles`] (least recently used out first,
//!   `ah_cache.rs`); a send's GRH always uses this port's source GID index,
//!   and its remote Q_Key is always the QP's (as the kernel's QP1 does,
//!   whatever the caller's `qkey`).
//!
//! # Events, failures, recovery
//!
//! Async events are read as they come (`events.rs`): port changes refresh
//! [`Transport::attrs`]; a fatal device error, or the device removed, ends
//! the transport (every call then fails with a non-transient error, which
//! the port turns into EIO for its callers); a QP that fell into the error
//! state is reset and its receives reposted (`recovery.rs`).
//! [`VerbsTransport::stats`] counts all of it.
//!
//! What rxe (the only device the tests have) cannot show: it never raises
//! DEVICE_FATAL (its removal is seen through sysfs, see `events.rs`),
//! QP_FATAL, LID, SM, P_Key or client-reregister events (a RoCE port has no
//! SM, LIDs or P_Key changes, and rxe ignores P_Keys); Debian's libibverbs
//! 44 leaves `active_speed_ex` 0; and as a RoCE port it needs a GRH anyway,
//! so `IBV_QPF_GRH_REQUIRED` (which rxe sets) changes nothing there. The
//! tests (`tests/it/rxe/faults.rs`) cover what it can: port down and up
//! under traffic, the device removed under a blocked receive, a QP forced
//! into the error state, ring exhaustion, the AH bound, an idle port's CPU
//! time, the rate, and sends it cannot address.
//!
//! # P_Keys and GRHs
//!
//! A UD send carries the QP's P_Key: neither `ibv_post_send`'s UD work
//! request nor `ibv_wr_set_ud_addr` has a P_Key index (the kernel's QP1
//! alone has one per send). So one transport serves one P_Key index,
//! [`VerbsConfig::pkey_index`]; a MAD addressed with another index is not
//! sent under the wrong partition but dropped and counted
//! ([`VerbsStats::unroutable`]), and the engine's timers report it. A port
//! flagged `IBV_QPF_GRH_REQUIRED` gets a GRH on every send; a destination
//! without a GID cannot be reached there and is dropped the same way.
//!
//! # RoCE
//!
//! On an Ethernet port every datagram needs a GRH. The source GID is the
//! port's first RoCE v2 IPv6 GID unless configured: with IPv4-mapped GIDs
//! the Linux MAD layer (at least 6.1) cannot match replies and RMPP ACKs to
//! its own sends, so kernel agents would appear to time out.
//!
//! # Privilege
//!
//! The GSI Q_Key 0x80010000 is a controlled Q_Key: setting it needs
//! CAP_NET_RAW (or `rdma system set privileged-qkey on`). Without it the
//! kernel refuses the QP with EPERM and [`VerbsTransport::open`] returns
//! [`crate::Error::NotPermitted`].
#![allow(unsafe_code)]

mod addr;
mod ah_cache;
mod attrs;
#[cfg(feature = "kernel")]
#[cfg_attr(docsrs, doc(cfg(feature = "kernel")))]
pub mod cas;
mod config;
mod events;
mod ffi;
mod ready;
mod recovery;
mod recv;
mod ring;
mod send;
mod slots;
mod wake;

use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::raw::c_int;
use std::sync::Arc;
use std::time::{Duration, Instant as Clock};

use ibverbs_sys as sys;

pub use self::config::{VerbsConfig, VerbsStats};
pub use self::events::AsyncEventCounts;

use self::ah_cache::AhCache;
use self::attrs::gid_rank;
use self::ffi::{Ah, Channel, Context, Cq, Pd, Qp as QueuePair};
use self::ready::ReadyFd;
use self::ring::{Layout, Ring};
use self::slots::SendSlots;
use super::{Caps, LinkLayer, PortAttrs, Transport, Waker};
use crate::engine::{RecvMeta, Transmit};
use crate::types::GrhAddr;
use crate::wire::MAD_SIZE;
use crate::{Error, Result};

/// Identifies an address handle: everything of the destination the AH encodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct AhKey {
    lid: u16,
    sl: u8,
    path_bits: u8,
    grh: Option<GrhAddr>,
}

/// A filled send slot waiting for the next doorbell.
#[derive(Debug, Clone, Copy)]
struct Pending {
    slot: u32,
    key: AhKey,
    len: u32,
    qpn: u32,
}

/// A UD QP on an RDMA port, as a [`Transport`]. See the module docs.
pub struct VerbsTransport {
    // Field order is drop order: the QP goes before the AHs and the ring it
    // uses, and everything before the CQs, PD and context (which the Arcs
    // inside the handles keep alive in any case).
    qp: QueuePair,
    ahs: AhCache<AhKey, Ah>,
    ring: Ring,
    send_cq: Arc<Cq>,
    recv_cq: Arc<Cq>,
    channel: Arc<Channel>,
    pd: Arc<Pd>,
    ctx: Arc<Context>,
    attrs: PortAttrs,
    /// `attrs` was re-read since [`Transport::attrs_changed`] last said so.
    attrs_dirty: bool,
    /// The port wants a GRH on every AH (`IBV_QPF_GRH_REQUIRED`).
    grh_required: bool,
    /// The context's async event fd (non-blocking).
    async_fd: c_int,
    /// A wait saw the async fd readable.
    async_ready: bool,
    /// Where the device's uverbs node is (see `events.rs`).
    uverbs_path: String,
    last_liveness: Clock,
    /// Calls of `poll_events` (see `events.rs`: the clock is read on some).
    liveness_polls: u32,
    /// Why the transport is gone, once it is.
    dead: Option<String>,
    /// Something suggests the QP is in the error state (see `recovery.rs`).
    qp_suspect: bool,
    /// Receives posted and not completed.
    recv_posted: usize,
    /// Sends posted and sends completed, since open (sends complete in order).
    posted_sends: u64,
    completed_sends: u64,
    config: VerbsConfig,
    sgid_index: u8,
    sgid: [u8; 16],
    /// Free and posted send slots (see `slots.rs`).
    send_slots: SendSlots,
    /// Filled send slots not posted yet (see `queue`).
    pending: Vec<Pending>,
    /// Consumed receive slots waiting to be reposted: (wr_id, addr, len).
    repost: Vec<(u64, u64, u32)>,
    /// Receive completions taken by `wait` and not yet handed up.
    stash: Vec<sys::ibv_wc>,
    wcs: Vec<sys::ibv_wc>,
    armed: bool,
    /// The send CQ is armed (only while `send_starved`).
    send_armed: bool,
    /// A transmit found every send slot in flight: a wait must end at the next send
    /// completion (a slot comes free), not sleep until the liveness check.
    send_starved: bool,
    wake: wake::Wake,
    /// Another descriptor an idle wait also sleeps on (see `also_wake_on`).
    extra_fd: Option<OwnedFd>,
    /// The ready descriptor, in the caller-driven mode (`ready.rs`). Declared after
    /// `extra_fd`, which it watches: it goes first.
    ready: Option<ReadyFd>,
    /// The last turn saw `extra_fd` readable (caller-driven mode).
    extra_seen: bool,
    stats: VerbsStats,
}

impl std::fmt::Debug for VerbsTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VerbsTransport")
            .field("ca", &self.attrs.ca_name)
            .field("port", &self.attrs.port_num)
            .field("qpn", &self.qp.qp_num())
            .field("sgid_index", &self.sgid_index)
            .finish_non_exhaustive()
    }
}

/// The names of the RDMA devices present (empty when the kernel has no RDMA support).
///
/// # Errors
///
/// [`Error::Io`] (EIO) when libibverbs fails for another reason than ENOSYS.
pub fn devices() -> Result<Vec<String>> {
    let mut all = Vec::new();
    // Opening the first device is the price of sharing one path with `open`.
    ffi::open_device(Some("\0no such device"), &mut all)?;
    Ok(all)
}

fn qkey_error(e: &io::Error, qkey: u32) -> Error {
    if e.raw_os_error() == Some(1) && qkey & 0x8000_0000 != 0 {
        Error::NotPermitted(
            "the kernel refused the controlled Q_Key (0x80010000, the GSI Q_Key) on vmad's UD QP: \
             run with CAP_NET_RAW, or allow it with `rdma system set privileged-qkey on`",
        )
    } else {
        Error::Io(io::Error::new(
            e.kind(),
            format!("ibv_modify_qp(INIT): {e}"),
        ))
    }
}

/// Name the verb that failed in the error (EIO keeps the OS error's kind).
fn step(what: &'static str) -> impl Fn(io::Error) -> Error {
    move |e| Error::Io(io::Error::new(e.kind(), format!("{what}: {e}")))
}

impl VerbsTransport {
    /// Open a device and port, create the UD QP and register the rings.
    ///
    /// # Errors
    ///
    /// - [`Error::NoDevice`] (ENODEV): no RDMA device at all (no RDMA support in
    ///   the kernel: libibverbs' ENOSYS, or an empty list), no device of that
    ///   name, or no such port. [`devices`] lists what there is.
    /// - [`Error::NotPermitted`] (EPERM): the kernel refused the Q_Key 0x80010000
    ///   (needs CAP_NET_RAW or `rdma system set privileged-qkey on`).
    /// - [`Error::LimitReached`] (ENOMEM): RLIMIT_MEMLOCK too low to pin the rings.
    /// - [`Error::InvalidArgument`] (EINVAL): no usable GID on a RoCE port, or a
    ///   configured slot count of 0.
    /// - [`Error::Io`] (EIO): any other verbs failure, with the OS error.
    pub fn open(config: VerbsConfig) -> Result<VerbsTransport> {
        if config.recv_slots == 0
            || config.send_slots == 0
            || config.poll_batch == 0
            || config.send_batch == 0
        {
            return Err(Error::InvalidArgument(
                "verbs: slot counts and poll batch must be > 0",
            ));
        }
        let mut names = Vec::new();
        let opened = ffi::open_device(config.device.as_deref(), &mut names)?.ok_or_else(|| {
            Error::NoDevice(match &config.device {
                Some(d) => format!("no RDMA device {d} (there are: {names:?})"),
                None => "no RDMA device (load rdma_rxe or a NIC driver)".into(),
            })
        })?;
        let ctx = opened.ctx;
        let (port, pattr) = Self::pick_port(&ctx, config.port)?;
        let link_layer = if u32::from(pattr.link_layer) == sys::IBV_LINK_LAYER_ETHERNET {
            LinkLayer::Ethernet
        } else {
            LinkLayer::InfiniBand
        };
        let gids = ctx.gid_entries(port, u32::try_from(pattr.gid_tbl_len).unwrap_or(0));
        // SAFETY: `raw` is the plain byte view of the GID union; every bit pattern is valid.
        let gid_of = |e: &sys::ibv_gid_entry| unsafe { e.gid.raw };
        let chosen = match (config.gid_index, link_layer) {
            (Some(i), _) => gids.iter().find(|e| e.gid_index == u32::from(i)),
            (None, LinkLayer::Ethernet) => gids
                .iter()
                .filter_map(|e| gid_rank(&gid_of(e), e.gid_type).map(|r| (r, e)))
                .min_by_key(|(r, e)| (*r, e.gid_index))
                .map(|(_, e)| e),
            (None, LinkLayer::InfiniBand) => gids.iter().find(|e| e.gid_index == 0),
        };
        let (sgid_index, sgid) = match chosen {
            Some(e) => (u8::try_from(e.gid_index).unwrap_or(0), gid_of(e)),
            None if link_layer == LinkLayer::Ethernet => return Err(Error::InvalidArgument(
                "verbs: no usable GID on this RoCE port (configure an IP address on its netdev)",
            )),
            None => (0, [0; 16]),
        };
        let mut pkeys = Vec::new();
        for i in 0..pattr.pkey_tbl_len {
            pkeys.push(ctx.query_pkey(port, i).map_err(step("ibv_query_pkey"))?);
        }

        let pd = Pd::new(&ctx).map_err(step("ibv_alloc_pd"))?;
        let channel = Channel::new(&ctx).map_err(step("ibv_create_comp_channel"))?;
        let async_fd = ctx
            .async_fd_nonblocking()
            .map_err(step("fcntl(async_fd)"))?;
        // Both CQs signal the one channel: a send completion must end a wait while
        // sends wait for a free slot (see `send_starved`).
        let send_cq = Cq::new(&ctx, config.send_slots, Some(&channel))
            .map_err(step("ibv_create_cq(send)"))?;
        let recv_cq = Cq::new(&ctx, config.recv_slots, Some(&channel))
            .map_err(step("ibv_create_cq(recv)"))?;
        let mut qp = QueuePair::new_ud(
            &pd,
            &send_cq,
            &recv_cq,
            config.send_slots,
            config.recv_slots,
        )
        .map_err(step("ibv_create_qp(UD)"))?;
        qp.to_init(port, config.pkey_index, config.qkey)
            .map_err(|e| qkey_error(&e, config.qkey))?;
        qp.to_rts().map_err(step("ibv_modify_qp(RTR/RTS)"))?;
        let layout = Layout {
            recv_slots: config.recv_slots,
            send_slots: config.send_slots,
        };
        let ring = Ring::new(&pd, layout, config.huge_pages)?;
        let all: Vec<_> = (0..config.recv_slots)
            .map(|i| {
                let (addr, len) = ring.recv_sge(i);
                (i as u64, addr, len)
            })
            .collect();
        qp.post_recvs(ring.lkey(), &all)
            .map_err(step("ibv_post_recv"))?;

        let (gid_prefix, port_guid) = match link_layer {
            LinkLayer::InfiniBand => {
                let g0 = gids
                    .iter()
                    .find(|e| e.gid_index == 0)
                    .map(gid_of)
                    .unwrap_or_default();
                (
                    u64::from_be_bytes(g0[..8].try_into().unwrap_or_default()),
                    u64::from_be_bytes(g0[8..].try_into().unwrap_or_default()),
                )
            }
            LinkLayer::Ethernet => (
                u64::from_be_bytes(sgid[..8].try_into().unwrap_or_default()),
                opened.entry.node_guid,
            ),
        };
        let mut attrs = PortAttrs {
            ca_name: opened.entry.name.clone(),
            port_num: port,
            node_type: opened.entry.node_type,
            node_guid: opened.entry.node_guid,
            port_guid,
            gid_prefix,
            lid: 0,
            lmc: 0,
            sm_lid: 0,
            sm_sl: 0,
            state: 0,
            phys_state: 0,
            rate: 0,
            capmask: 0,
            pkeys,
            link_layer,
        };
        attrs::apply(&mut attrs, &pattr);
        let ready = match config.caller_driven {
            // SAFETY: the async fd is the context's, open until `ctx` is dropped (closed by
            // ibv_close_device); borrowed for the registration only (epoll drops a watched
            // file by itself when it is closed).
            true => Some(
                ReadyFd::new(channel.as_fd(), unsafe { BorrowedFd::borrow_raw(async_fd) })
                    .map_err(step("epoll"))?,
            ),
            false => None,
        };
        Ok(VerbsTransport {
            send_slots: SendSlots::new(config.send_slots),
            repost: Vec::with_capacity(config.recv_slots),
            pending: Vec::with_capacity(config.send_batch),
            stash: Vec::new(),
            wcs: vec![Self::zero_wc(); config.poll_batch],
            qp,
            ahs: AhCache::new(config.max_address_handles),
            ring,
            send_cq,
            recv_cq,
            channel,
            pd,
            ctx,
            attrs,
            attrs_dirty: false,
            grh_required: pattr.flags & attrs::QPF_GRH_REQUIRED != 0,
            async_fd,
            async_ready: false,
            // Only a node seen now can vanish later (a sysfs elsewhere: no check).
            uverbs_path: Some(&opened.entry.uverbs_path)
                .filter(|p| std::path::Path::new(p).exists())
                .cloned()
                .unwrap_or_default(),
            last_liveness: Clock::now(),
            liveness_polls: 0,
            dead: None,
            qp_suspect: false,
            recv_posted: config.recv_slots,
            posted_sends: 0,
            completed_sends: 0,
            sgid_index,
            sgid,
            config,
            armed: false,
            send_armed: false,
            send_starved: false,
            wake: wake::Wake::new().map_err(step("socketpair"))?,
            extra_fd: None,
            ready,
            extra_seen: false,
            stats: VerbsStats::default(),
        })
    }

    fn pick_port(ctx: &Context, want: Option<u8>) -> Result<(u8, sys::ibv_port_attr)> {
        if let Some(p) = want {
            let attr = ctx
                .query_port(p)
                .map_err(|_| Error::NoDevice(format!("the device has no port {p}")))?;
            return Ok((p, attr));
        }
        let mut first = None;
        for p in 1..=u8::MAX {
            let Ok(attr) = ctx.query_port(p) else { break };
            if attr.state == sys::ibv_port_state::IBV_PORT_ACTIVE {
                return Ok((p, attr));
            }
            first.get_or_insert((p, attr));
        }
        first.ok_or_else(|| Error::NoDevice("the device has no ports".into()))
    }

    fn zero_wc() -> sys::ibv_wc {
        // SAFETY: `ibv_wc` is plain old data (integers only); all-zero is a valid value.
        unsafe { std::mem::zeroed() }
    }

    /// The QP number peers send to (what a vmad peer puts in `MadAddr::qpn`).
    pub fn qpn(&self) -> u32 {
        self.qp.qp_num()
    }

    /// The source GID and its index.
    pub fn source_gid(&self) -> ([u8; 16], u8) {
        (self.sgid, self.sgid_index)
    }

    /// Whether the rings got huge pages, and whether `mlock` succeeded.
    pub fn pinning(&self) -> (bool, bool) {
        let p = self.ring.pinning();
        (p.huge, p.locked)
    }

    /// Make an idle [`Transport::wait`] also return when `fd` is readable (the
    /// hybrid transport's kernel umad device): one `poll` sleeps on both.
    /// The transport polls a duplicate of `fd` (same open file, so the same
    /// readiness), which it owns: nothing depends on how long the caller keeps `fd`.
    ///
    /// # Errors
    /// [`Error::Io`] if the descriptor cannot be duplicated (EMFILE).
    pub fn also_wake_on(&mut self, fd: BorrowedFd<'_>) -> Result<()> {
        let fd = fd.try_clone_to_owned()?;
        if let Some(r) = &self.ready {
            r.add_extra(fd.as_fd())?;
        }
        self.extra_fd = Some(fd);
        Ok(())
    }

    /// Whether the descriptor of [`VerbsTransport::also_wake_on`] may be readable: as
    /// the last receive burst saw it in the caller-driven mode, else always (the hybrid
    /// transport reads its umad device only then).
    pub(crate) fn extra_readable(&self) -> bool {
        self.ready.is_none() || self.extra_seen
    }

    /// Data-path counters, recoveries and async events.
    pub fn stats(&self) -> VerbsStats {
        self.stats
    }

    /// [`VerbsStats::unroutable`] alone (the hybrid transport reads it on every send).
    pub(crate) fn unroutable(&self) -> u64 {
        self.stats.unroutable
    }

    /// Put the QP in the error state, as a fatal QP error would, to test
    /// recovery: the transport finds it and resets the QP by itself.
    ///
    /// # Errors
    ///
    /// [`Error::Io`] when the device refuses the state change.
    #[doc(hidden)]
    pub fn inject_qp_error(&mut self) -> Result<()> {
        self.break_qp().map_err(step("ibv_modify_qp(ERR)"))
    }

    fn flush_reposts(&mut self, force: bool) -> io::Result<()> {
        if self.repost.is_empty() || (!force && self.repost.len() < self.config.repost_batch) {
            return Ok(());
        }
        if self.qp.post_recvs(self.ring.lkey(), &self.repost).is_err() {
            // A QP in the error state refuses posts (recovery then reposts every
            // slot); otherwise the slots wait here for the next try.
            self.qp_suspect = true;
            return Ok(());
        }
        self.recv_posted += self.repost.len();
        self.repost.clear();
        Ok(())
    }

    /// Take receive completions into the stash (used by `wait`); returns whether any.
    fn peek_recv(&mut self) -> io::Result<bool> {
        let n = self.recv_cq.poll(&mut self.wcs[..1])?;
        if n > 0 {
            self.stash.push(self.wcs[0]);
        }
        Ok(n > 0)
    }
}

impl Drop for VerbsTransport {
    fn drop(&mut self) {
        // Sends the engine already handed over still leave (best effort).
        if self.dead.is_none() {
            let _ = self.flush_sends();
        }
    }
}

impl Transport for VerbsTransport {
    fn caps(&self) -> Caps {
        Caps {
            smi: false,
            gsi: true,
        }
    }

    fn attrs(&self) -> &PortAttrs {
        &self.attrs
    }

    fn recv_burst(
        &mut self,
        max: usize,
        sink: &mut dyn FnMut(RecvMeta, &[u8]),
    ) -> io::Result<usize> {
        self.receive(max, sink)
    }

    fn transmit(
        &mut self,
        fill: &mut dyn FnMut(&mut [u8; MAD_SIZE]) -> Option<Transmit>,
    ) -> io::Result<bool> {
        if self.send_slots.free_len() * 2 < self.config.send_slots {
            self.reap_sends()?;
        }
        let slot = match self.send_slots.take() {
            Some(slot) => Some(slot),
            None => self.starved()?,
        };
        let Some(slot) = slot else {
            // Every slot is in flight: the MAD stays in the engine for the next turn,
            // which a send completion starts (see `wait`, and `starved`).
            self.flush_sends()?;
            return Ok(false);
        };
        // SAFETY: a free slot was never posted, or its send completion was polled
        // (`reap_sends`), or the QP was reset since (`recovery.rs`); it is posted
        // (`queue`, `flush_sends`) only after `fill` returns.
        let Some(t) = fill(unsafe { self.ring.send_slot(slot as usize) }) else {
            self.send_slots.put_back(slot);
            self.flush_sends()?;
            return Ok(false);
        };
        match self.queue(slot, &t) {
            Ok(true) => {}
            Ok(false) => {
                self.send_slots.put_back(slot);
                return Ok(true);
            }
            Err(e) => {
                self.send_slots.put_back(slot);
                return Err(e);
            }
        }
        if self.pending.len() >= self.config.send_batch {
            self.flush_sends()?;
        }
        Ok(true)
    }

    fn wait(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        self.poll_events(true, false)?;
        self.flush_sends()?;
        // Reposts held back for batching must not starve an idle port.
        self.flush_reposts(true)?;
        if !self.stash.is_empty() || self.wake.take() || self.slot_freed()? {
            return Ok(());
        }
        let start = Clock::now();
        let deadline = timeout.map(|t| start + t);
        if !self.config.completion_channel {
            // Busy-poll a while: a reply that comes soon costs no wake-up.
            let spin_until = start + self.config.idle_spin;
            let until = deadline.map_or(spin_until, |d| d.min(spin_until));
            while !self.peek_recv()? {
                if self.wake.take() || self.slot_freed()? {
                    return Ok(());
                }
                if Clock::now() >= until {
                    break;
                }
                std::thread::yield_now();
            }
            if !self.stash.is_empty() || deadline.is_some_and(|d| Clock::now() >= d) {
                return Ok(());
            }
        }
        if !self.armed {
            self.recv_cq.arm()?;
            self.armed = true;
        }
        if self.send_starved && !self.send_armed {
            self.send_cq.arm()?;
            self.send_armed = true;
        }
        // A completion that landed before the arm raises no event: look first.
        if self.peek_recv()? || self.slot_freed()? {
            return Ok(());
        }
        let starved = self.send_starved;
        // Sleep, but wake to look for the device now and then (see `events.rs`).
        let left = deadline.map(|d| d.saturating_duration_since(Clock::now()));
        let limit = left.map_or(events::LIVENESS_EVERY, |l| l.min(events::LIVENESS_EVERY));
        // SAFETY: the async fd is the context's, open until `self.ctx` is dropped (closed
        // by ibv_close_device); borrowed for this call only.
        let async_fd = unsafe { BorrowedFd::borrow_raw(self.async_fd) };
        let fds = [
            Some(self.channel.as_fd()),
            Some(self.wake.fd()),
            Some(async_fd),
            self.extra_fd.as_ref().map(AsFd::as_fd),
        ];
        // From here a wake writes the socket (see `wake.rs`).
        let Some(asleep) = self.wake.sleep() else {
            return Ok(());
        };
        let [event, woken, async_ready, extra] = wake::readable(fds, Some(limit))?;
        self.async_ready |= async_ready;
        let at_liveness = left.is_none_or(|l| l >= events::LIVENESS_EVERY);
        if starved && at_liveness && !(event || woken || async_ready || extra) {
            self.stats.starved_timeouts += 1;
        }
        if woken {
            asleep.woken();
        } else {
            drop(asleep);
        }
        if event {
            self.take_cq_events();
        }
        // Async events are read by the next call (`poll_events`), liveness too.
        Ok(())
    }

    fn attrs_changed(&mut self) -> bool {
        std::mem::take(&mut self.attrs_dirty)
    }

    fn sent_via(&self) -> Option<u32> {
        Some(self.qpn())
    }

    fn waker(&self) -> Option<Waker> {
        Some(self.wake.waker())
    }

    fn ready_fd(&self) -> Option<BorrowedFd<'_>> {
        self.ready.as_ref().map(ReadyFd::fd)
    }

    fn idle_limit(&self) -> Option<Duration> {
        // Rule 7 of `ready.rs`: the device's removal raises no event on rxe.
        self.ready.as_ref().map(|_| events::LIVENESS_EVERY)
    }

    fn rx_held(&self) -> bool {
        self.ready.as_ref().is_some_and(ReadyFd::leftover_pending)
    }
}

#[cfg(test)]
mod tests;
