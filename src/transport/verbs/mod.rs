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
//! - Separate send and receive CQs, polled in batches (busy polling);
//!   optionally a completion channel on the receive CQ so that
//!   [`Transport::wait`] sleeps in the kernel on idle ports
//!   ([`VerbsConfig::completion_channel`]; on a CPU-starved host, e.g. the
//!   TCG-emulated test VM, it is also the faster mode). Either way
//!   [`Transport::waker`] ends a wait at once.
//! - Address handles are cached per destination; a send's GRH always uses
//!   this port's source GID index, and its remote Q_Key is always the QP's
//!   (as the kernel's QP1 does, whatever the caller's `qkey`).
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

mod ffi;
mod ring;
mod wake;

use std::collections::HashMap;
use std::io;
use std::sync::Arc;
use std::time::{Duration, Instant as Clock};

use ibverbs_sys as sys;

use self::ffi::{Ah, Channel, Context, Cq, Pd, Qp as QueuePair, UdSend};
use self::ring::{Layout, Ring};
use super::{Caps, LinkLayer, PortAttrs, Transport, Waker};
use crate::engine::{RecvMeta, Transmit};
use crate::types::{GrhAddr, MadAddr, Qp, GSI_QKEY};
use crate::wire::{grh, MAD_SIZE};
use crate::{Error, Result};

/// How to open a verbs transport. Build with struct update syntax:
/// `VerbsConfig { device: Some("rxe0".into()), ..Default::default() }`.
#[derive(Debug, Clone)]
pub struct VerbsConfig {
    /// Device name (`mlx5_0`, `rxe0`); `None`: the first device.
    pub device: Option<String>,
    /// Port number; `None`: the first active port (else port 1).
    pub port: Option<u8>,
    /// Source GID index; `None`: on Ethernet the first RoCE v2 IPv6 GID that
    /// is neither link-local nor IPv4-mapped (falling back to IPv4-mapped,
    /// then any), on InfiniBand index 0.
    pub gid_index: Option<u16>,
    /// P_Key index of the QP (one UD QP serves one P_Key).
    pub pkey_index: u16,
    /// The QP's Q_Key, also used as the remote Q_Key of every send.
    pub qkey: u32,
    /// Receive slots (each with a posted receive).
    pub recv_slots: usize,
    /// Send slots (at most this many sends in flight).
    pub send_slots: usize,
    /// Back the rings with huge pages when the system has some reserved.
    pub huge_pages: bool,
    /// Sleep on a completion channel in [`Transport::wait`] instead of busy polling.
    pub completion_channel: bool,
    /// Most completions taken from a CQ per poll.
    pub poll_batch: usize,
    /// Consumed receive slots are reposted once this many have gathered.
    pub repost_batch: usize,
    /// Most sends posted with one doorbell (the queue is also posted
    /// whenever the engine has nothing more to send).
    pub send_batch: usize,
    /// Hop limit of the GRH on sends whose destination gives none.
    pub hop_limit: u8,
    /// Most cached address handles before the cache is flushed (when idle).
    pub max_address_handles: usize,
}

impl Default for VerbsConfig {
    fn default() -> Self {
        VerbsConfig {
            device: None,
            port: None,
            gid_index: None,
            pkey_index: 0,
            qkey: GSI_QKEY,
            recv_slots: 512,
            send_slots: 128,
            huge_pages: false,
            completion_channel: false,
            poll_batch: 32,
            repost_batch: 16,
            send_batch: 32,
            hop_limit: 64,
            max_address_handles: 4096,
        }
    }
}

/// Counters of the verbs data path.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct VerbsStats {
    /// MADs handed up.
    pub received: u64,
    /// Sends posted.
    pub sent: u64,
    /// Receive completions with an error status.
    pub recv_errors: u64,
    /// Send completions with an error status.
    pub send_errors: u64,
    /// Address handles created.
    pub ah_created: u64,
    /// Receives shorter than a MAD header (dropped).
    pub runts: u64,
}

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
    ahs: HashMap<AhKey, Ah>,
    ring: Ring,
    send_cq: Arc<Cq>,
    recv_cq: Arc<Cq>,
    channel: Option<Arc<Channel>>,
    pd: Arc<Pd>,
    _ctx: Arc<Context>,
    attrs: PortAttrs,
    config: VerbsConfig,
    sgid_index: u8,
    sgid: [u8; 16],
    free_send: Vec<u32>,
    /// Filled send slots not posted yet (see `queue`).
    pending: Vec<Pending>,
    /// Consumed receive slots waiting to be reposted: (wr_id, addr, len).
    repost: Vec<(u64, u64, u32)>,
    /// Receive completions taken by `wait` and not yet handed up.
    stash: Vec<sys::ibv_wc>,
    wcs: Vec<sys::ibv_wc>,
    armed: bool,
    wake: wake::Wake,
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

fn is_ipv4_mapped(g: &[u8; 16]) -> bool {
    g[..10].iter().all(|&b| b == 0) && g[10] == 0xff && g[11] == 0xff
}

fn is_link_local(g: &[u8; 16]) -> bool {
    g[0] == 0xfe && g[1] & 0xc0 == 0x80
}

/// Rank a RoCE GID for use as the source: lower is better; `None`: unusable.
fn gid_rank(gid: &[u8; 16], gid_type: u32) -> Option<u8> {
    if gid.iter().all(|&b| b == 0) {
        return None;
    }
    let v2 = gid_type == sys::IBV_GID_TYPE_ROCE_V2;
    Some(match (v2, is_ipv4_mapped(gid), is_link_local(gid)) {
        (true, false, false) => 0,
        (true, true, _) => 1,
        (true, false, true) => 2,
        (false, ..) => 3,
    })
}

/// Gb/s of an `ibv_port_attr` width and speed, as `umad_get_port` reports `rate`.
fn rate_gbps(width: u8, speed: u8) -> u32 {
    let lanes = match width {
        1 => 1,
        2 => 4,
        4 => 8,
        8 => 12,
        16 => 2,
        _ => 0,
    };
    // Per-lane data rate in tenths of Gb/s (SDR, DDR, QDR, FDR10, FDR, EDR, HDR, NDR).
    let per_lane_tenths = match speed {
        1 => 25,
        2 => 50,
        4 | 8 => 100,
        16 => 140,
        32 => 250,
        64 => 500,
        128 => 1000,
        _ => 0,
    };
    lanes * per_lane_tenths / 10
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
        let channel = match config.completion_channel {
            true => Some(Channel::new(&ctx).map_err(step("ibv_create_comp_channel"))?),
            false => None,
        };
        let send_cq =
            Cq::new(&ctx, config.send_slots, None).map_err(step("ibv_create_cq(send)"))?;
        let recv_cq = Cq::new(&ctx, config.recv_slots, channel.as_ref())
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
        let attrs = PortAttrs {
            ca_name: opened.entry.name.clone(),
            port_num: port,
            node_type: opened.entry.node_type,
            node_guid: opened.entry.node_guid,
            port_guid,
            gid_prefix,
            lid: pattr.lid,
            lmc: pattr.lmc,
            sm_lid: pattr.sm_lid,
            sm_sl: pattr.sm_sl,
            state: u8::try_from(pattr.state).unwrap_or(0),
            phys_state: pattr.phys_state,
            rate: rate_gbps(pattr.active_width, pattr.active_speed),
            capmask: pattr.port_cap_flags,
            pkeys,
            link_layer,
        };
        Ok(VerbsTransport {
            free_send: (0..u32::try_from(config.send_slots).unwrap_or(u32::MAX))
                .rev()
                .collect(),
            repost: Vec::with_capacity(config.recv_slots),
            pending: Vec::with_capacity(config.send_batch),
            stash: Vec::new(),
            wcs: vec![Self::zero_wc(); config.poll_batch],
            qp,
            ahs: HashMap::new(),
            ring,
            send_cq,
            recv_cq,
            channel,
            pd,
            _ctx: ctx,
            attrs,
            sgid_index,
            sgid,
            config,
            armed: false,
            wake: wake::Wake::new().map_err(step("socketpair"))?,
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

    /// Data-path counters.
    pub fn stats(&self) -> VerbsStats {
        self.stats
    }

    fn meta(&self, wc: &sys::ibv_wc, slot: &[u8]) -> RecvMeta {
        let grh = if wc.wc_flags.0 & sys::ibv_wc_flags::IBV_WC_GRH.0 != 0 {
            grh::Packet::new_checked(&slot[..grh::LEN])
                .ok()
                .and_then(|p| {
                    let gid = p.source_gid()?;
                    let (hop_limit, traffic_class, flow_label) = match p.ip_version() {
                        grh::IpVersion::V4 => (p.ipv4_ttl(), p.ipv4_tos(), 0),
                        _ => (p.hop_limit(), p.tclass(), p.flow_label()),
                    };
                    Some(GrhAddr {
                        gid,
                        gid_index: self.sgid_index,
                        hop_limit,
                        traffic_class,
                        flow_label,
                    })
                })
        } else {
            None
        };
        RecvMeta {
            qp: Qp::Gsi,
            src: MadAddr {
                qpn: wc.src_qp & 0x00ff_ffff,
                qkey: 0,
                lid: wc.slid,
                sl: wc.sl,
                path_bits: wc.dlid_path_bits,
                grh,
                // A UD QP's completions carry no valid P_Key index: it is the QP's.
                pkey_index: self.config.pkey_index,
            },
        }
    }

    fn flush_reposts(&mut self, force: bool) -> io::Result<()> {
        if self.repost.is_empty() || (!force && self.repost.len() < self.config.repost_batch) {
            return Ok(());
        }
        let r = self.qp.post_recvs(self.ring.lkey(), &self.repost);
        self.repost.clear();
        r
    }

    /// Free the send slots whose sends completed.
    fn reap_sends(&mut self) -> io::Result<()> {
        let n = self.send_cq.poll(&mut self.wcs)?;
        for wc in &self.wcs[..n] {
            if !wc.is_valid() {
                self.stats.send_errors += 1;
            }
            self.free_send.push(u32::try_from(wc.wr_id()).unwrap_or(0));
        }
        Ok(())
    }

    /// The AH key of a destination: the GRH always uses this port's source GID.
    fn ah_key(&self, dest: &MadAddr) -> io::Result<AhKey> {
        let grh = match (dest.grh, self.attrs.link_layer) {
            (Some(g), _) => Some(GrhAddr {
                gid_index: self.sgid_index,
                hop_limit: if g.hop_limit == 0 {
                    self.config.hop_limit
                } else {
                    g.hop_limit
                },
                ..g
            }),
            (None, LinkLayer::Ethernet) => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "verbs: a RoCE destination needs a GRH (destination GID)",
                ))
            }
            (None, LinkLayer::InfiniBand) => None,
        };
        Ok(AhKey {
            lid: dest.lid,
            sl: dest.sl,
            path_bits: dest.path_bits,
            grh,
        })
    }

    /// Make sure the cache holds an AH for `key`.
    fn cache_ah(&mut self, key: AhKey) -> io::Result<()> {
        if self.ahs.contains_key(&key) {
            return Ok(());
        }
        let in_flight = self.config.send_slots - self.free_send.len();
        // An AH may be destroyed only when no posted send still uses it.
        if self.ahs.len() >= self.config.max_address_handles && in_flight == 0 {
            self.ahs.clear();
        }
        let mut attr = sys::ibv_ah_attr {
            dlid: key.lid,
            sl: key.sl,
            src_path_bits: key.path_bits,
            port_num: self.attrs.port_num,
            ..Default::default()
        };
        if let Some(g) = key.grh {
            attr.is_global = 1;
            attr.grh.dgid.raw = g.gid;
            attr.grh.sgid_index = g.gid_index;
            attr.grh.hop_limit = g.hop_limit;
            attr.grh.traffic_class = g.traffic_class;
            attr.grh.flow_label = g.flow_label;
        }
        let ah = Ah::new(&self.pd, &mut attr)?;
        self.stats.ah_created += 1;
        self.ahs.insert(key, ah);
        Ok(())
    }

    /// Queue a filled send slot; the queue is posted as one chain (one
    /// doorbell, which on rxe is one system call) when it is full or the
    /// engine has nothing more to send.
    fn queue(&mut self, slot: u32, t: &Transmit) -> io::Result<()> {
        if t.qp == Qp::Smi {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "verbs: QP0 (SMPs) cannot be used from userspace verbs",
            ));
        }
        let key = self.ah_key(&t.dest)?;
        self.cache_ah(key)?;
        self.pending.push(Pending {
            slot,
            key,
            len: u32::try_from(t.len.min(MAD_SIZE)).unwrap_or(0),
            qpn: t.dest.qpn,
        });
        Ok(())
    }

    /// Post the queued sends. A chain the device refuses loses its MADs as
    /// a datagram network would (the engine's timers and retries cover
    /// requests); the error is returned and counted.
    fn flush_sends(&mut self) -> io::Result<()> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let (ring, ahs, qkey) = (&self.ring, &self.ahs, self.config.qkey);
        let sends: Vec<UdSend<'_>> = self
            .pending
            .iter()
            .map(|p| UdSend {
                wr_id: u64::from(p.slot),
                addr: ring.send_addr(p.slot as usize),
                len: p.len,
                lkey: ring.lkey(),
                ah: &ahs[&p.key],
                remote_qpn: p.qpn,
                // As the kernel's QP1: every send carries the GSI Q_Key,
                // whatever the caller put in `qkey`.
                remote_qkey: qkey,
            })
            .collect();
        let result = self.qp.post_sends(&sends);
        drop(sends);
        let posted = match &result {
            Ok(()) => self.pending.len(),
            Err((n, _)) => *n,
        };
        self.stats.sent += posted as u64;
        for p in self.pending.drain(posted..) {
            self.stats.send_errors += 1;
            self.free_send.push(p.slot);
        }
        self.pending.clear();
        result.map_err(|(_, e)| e)
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
        let _ = self.flush_sends();
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
        self.flush_sends()?;
        let mut stash = std::mem::take(&mut self.stash);
        let room = max.saturating_sub(stash.len()).min(self.wcs.len());
        let n = if room > 0 {
            self.recv_cq.poll(&mut self.wcs[..room])?
        } else {
            0
        };
        stash.extend_from_slice(&self.wcs[..n]);
        let mut delivered = 0;
        for wc in &stash {
            let slot = usize::try_from(wc.wr_id()).unwrap_or(usize::MAX);
            if slot >= self.config.recv_slots {
                continue;
            }
            if wc.is_valid() {
                let bytes = self.ring.recv_slot(slot);
                let end = wc.len().min(bytes.len());
                if end >= grh::LEN + 24 {
                    let meta = self.meta(wc, bytes);
                    sink(meta, &bytes[grh::LEN..end]);
                    delivered += 1;
                } else {
                    self.stats.runts += 1;
                }
            } else {
                self.stats.recv_errors += 1;
                if wc
                    .error()
                    .is_some_and(|(status, _)| status == sys::ibv_wc_status::IBV_WC_WR_FLUSH_ERR)
                {
                    // The QP is in the error state: reposting would fail too.
                    continue;
                }
            }
            let (addr, len) = self.ring.recv_sge(slot);
            self.repost.push((slot as u64, addr, len));
        }
        stash.clear();
        self.stash = stash;
        self.stats.received += delivered as u64;
        self.flush_reposts(false)?;
        Ok(delivered)
    }

    fn transmit(
        &mut self,
        fill: &mut dyn FnMut(&mut [u8; MAD_SIZE]) -> Option<Transmit>,
    ) -> io::Result<bool> {
        if self.free_send.len() * 2 < self.config.send_slots {
            self.reap_sends()?;
        }
        let Some(slot) = self.free_send.pop() else {
            // Every slot is in flight: the MAD stays in the engine for the next turn.
            self.flush_sends()?;
            return Ok(false);
        };
        let Some(t) = fill(self.ring.send_slot(slot as usize)) else {
            self.free_send.push(slot);
            self.flush_sends()?;
            return Ok(false);
        };
        if let Err(e) = self.queue(slot, &t) {
            self.free_send.push(slot);
            return Err(e);
        }
        if self.pending.len() >= self.config.send_batch {
            self.flush_sends()?;
        }
        Ok(true)
    }

    fn wait(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        self.flush_sends()?;
        // Reposts held back for batching must not starve an idle port.
        self.flush_reposts(true)?;
        if !self.stash.is_empty() || self.wake.take() {
            return Ok(());
        }
        let Some(channel) = self.channel.clone() else {
            let deadline = timeout.map(|t| Clock::now() + t);
            while !self.peek_recv()? {
                if self.wake.take() || deadline.is_some_and(|d| Clock::now() >= d) {
                    break;
                }
                std::thread::yield_now();
            }
            return Ok(());
        };
        if !self.armed {
            self.recv_cq.arm()?;
            self.armed = true;
        }
        // A completion that landed before the arm raises no event: look first.
        if self.peek_recv()? {
            return Ok(());
        }
        let [event, woken] = wake::readable([channel.fd(), self.wake.fd()], timeout)?;
        if woken {
            self.wake.take();
        }
        if event && channel.take_event(&self.recv_cq) {
            self.armed = false;
        }
        Ok(())
    }

    fn waker(&self) -> Option<Waker> {
        Some(self.wake.waker())
    }
}

#[cfg(test)]
mod tests;
