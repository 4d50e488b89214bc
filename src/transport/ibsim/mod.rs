//! The ibsim transport: real QP0/QP1 on the OFED fabric simulator, in Rust.
//!
//! [ibsim](https://github.com/linux-rdma/ibsim) simulates a fabric of switches
//! and CAs with working SMAs and PMAs; OpenSM and infiniband-diags run against
//! it through the `libumad2sim.so` preload. vmad attaches to it directly, with
//! no C and no preload: [`IbsimTransport`] speaks ibsim's client protocol
//! ([`proto`]) over its two sockets.
//!
//! **What you get:** SMPs (LID-routed and directed route) and GMPs to any port
//! of the fabric, answered by ibsim's SMA/PMA, by OpenSM's SM/SA, or by other
//! clients. RMPP works: ibsim carries one 256-byte MAD per datagram and knows
//! nothing of RMPP, so vmad's engine segments and reassembles at both ends
//! (`capi/tests/ibsim-diags.sh` checks a whole GetTable from OpenSM on vmad).
//! Only umad2sim, ibsim's preload, has no RMPP: under it a GetTable is cut to
//! its first MAD. **What you do not get:** unsolicited QP0/QP1 requests,
//! unless the client attaches as the node's SM (`issm`: one per node). ibsim
//! attaches a client to a node's first port (CA port 1, switch port 0).
//!
//! **Drops.** ibsim never delays a packet; every packet it cannot deliver
//! (no route, link down, injected `Error`, no receiver) comes straight back
//! with status 110. [`DropPolicy`] says what the transport does with these
//! echoes: by default it counts and discards them, so vmad's own timers and
//! retries run; with [`DropPolicy::Report`] it also queues their headers on a
//! [`DropMonitor`]; with [`DropPolicy::Timeout`] the port hands them to the
//! engine, which ends the dropped attempt at once (retry now, or ETIMEDOUT).
//!
//! **TIDs.** ibsim overwrites bits 63..48 of every request's TID with the
//! client's slot and routes responses by them. The transport remembers what
//! those bits were and puts them back in responses (and in drop reports),
//! so the engine sees its own TIDs.

mod ca;
mod control;
mod monitor;
pub mod proto;
mod sock;
mod tid;

use std::io;
use std::os::fd::{AsFd, BorrowedFd};
use std::time::Duration;

use nix::poll::{PollFd, PollFlags, PollTimeout};

pub use ca::{register_ca, register_ca_in};
pub use monitor::{DropMonitor, DroppedMad};
pub use sock::Endpoint;

use self::control::{node_candidates, query_attrs, Control};
use self::proto::{CtlType, Request, PERMISSIVE_LID, REQUEST_LEN};
use self::sock::{Sock, RECV_BATCH};
use self::tid::TidRestore;
use super::{Caps, PortAttrs, Transport};
use crate::engine::{RecvMeta, Transmit};
use crate::types::{MadAddr, Qp};
use crate::wire::MAD_SIZE;

/// What the transport does with the packets ibsim returns undelivered (status 110).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DropPolicy {
    /// Count and discard them: the request times out on vmad's own timers
    /// and is retried as configured, as on a real fabric.
    #[default]
    Ignore,
    /// Count them and queue their headers on the [`DropMonitor`] for the
    /// application to read; vmad's timers still decide when a request fails.
    Report,
    /// Count them and end the dropped request's attempt at once in the
    /// engine ([`crate::engine::Engine::handle_undelivered`]): the next retry
    /// goes out immediately, and the last one completes with ETIMEDOUT
    /// without waiting for the timeout (what umad2sim users are used to).
    Timeout,
}

/// How to reach ibsim and where to attach.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IbsimConfig {
    /// ibsim's sockets.
    pub endpoint: Endpoint,
    /// Node to attach to: an ibsim node id (`"H1"`), a NodeDescription, or a
    /// GUID (`0x…`, tried as the ibnetdiscover names `H-<guid>`, `S-<guid>`,
    /// `R-<guid>`). `None`: ibsim's default node (the first in its topology).
    pub node: Option<String>,
    /// Attach as the node's SM: receive unsolicited QP0/QP1 requests and set
    /// PortInfo:CapabilityMask.IsSM. ibsim allows one such client per node.
    pub issm: bool,
    /// A QP above 1 this client serves (0: none).
    pub qp: u32,
    /// What to do with undelivered-packet echoes.
    pub drops: DropPolicy,
    /// How long a control-channel call waits for ibsim's answer.
    pub ctl_timeout: Duration,
}

impl Default for IbsimConfig {
    fn default() -> Self {
        IbsimConfig {
            endpoint: Endpoint::Local {
                sockname: "sim".into(),
            },
            node: None,
            issm: false,
            qp: 0,
            drops: DropPolicy::Ignore,
            ctl_timeout: Duration::from_secs(2),
        }
    }
}

impl IbsimConfig {
    /// The configuration umad2sim would use, from the environment:
    /// `IBSIM_SERVER_NAME` (+ `IBSIM_SERVER_PORT`, default 7070) selects remote
    /// mode, else `IBSIM_SOCKNAME` (default `sim`); `SIM_HOST` names the node;
    /// `SIM_SET_ISSM` (any value) attaches as SM. vmad's own
    /// `VMAD_IBSIM_DROPS=report` selects [`DropPolicy::Report`], `=timeout`
    /// [`DropPolicy::Timeout`].
    pub fn from_env() -> IbsimConfig {
        let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
        let endpoint = match var("IBSIM_SERVER_NAME") {
            Some(host) => Endpoint::Remote {
                host,
                port: var("IBSIM_SERVER_PORT")
                    .and_then(|p| p.parse().ok())
                    .unwrap_or(7070),
            },
            None => Endpoint::Local {
                sockname: var("IBSIM_SOCKNAME").unwrap_or_else(|| "sim".into()),
            },
        };
        IbsimConfig {
            endpoint,
            node: var("SIM_HOST"),
            issm: std::env::var_os("SIM_SET_ISSM").is_some(),
            drops: match var("VMAD_IBSIM_DROPS").as_deref() {
                Some("report") => DropPolicy::Report,
                Some("timeout") => DropPolicy::Timeout,
                _ => DropPolicy::Ignore,
            },
            ..IbsimConfig::default()
        }
    }
}

/// How long a parked transport goes without a word from ibsim before it asks
/// ibsim whether it is still there (a dead ibsim then fails the port within
/// about this long, plus the control timeout if it hangs instead).
const LIVENESS: Duration = Duration::from_millis(500);

/// How long a send waits for room in ibsim's queue for us before it fails (a hung ibsim).
const SEND_TIMEOUT: Duration = Duration::from_secs(2);

/// A vmad transport attached to one node of a running ibsim.
///
/// No thread of its own: whoever drives the port reads ibsim's data socket
/// ([`Transport::ready_fd`]), so a MAD from ibsim wakes only the thread
/// that waits for it, as under umad2sim. The socket must still never stay
/// unread for long (ibsim busy-waits when a client's queue is full, stalling
/// the whole fabric): the port's own thread reads it whenever no caller is
/// waiting on it. [`Transport::transmit`] writes straight to ibsim's
/// socket: it can wait only while ibsim's queue for this client (10 deep)
/// is full, which ibsim empties as it runs, since it never waits on us.
/// A write timeout (2 s) bounds that against a hung ibsim.
#[derive(Debug)]
pub struct IbsimTransport {
    attrs: PortAttrs,
    node_id: String,
    config: IbsimConfig,
    data: Sock,
    /// Datagrams read while a send waited for room in ibsim's queue (see
    /// `send_packet`), handed up before the socket's.
    backlog: std::collections::VecDeque<[u8; REQUEST_LEN]>,
    /// Where [`Sock::recv_batch`] receives (kept: 4.6 KiB not zeroed per turn).
    rx_bufs: Vec<[u8; REQUEST_LEN + 1]>,
    tids: TidRestore,
    monitor: DropMonitor,
    ctl: Control,
    /// When ibsim was last heard from (a datagram, or a control answer).
    heard: std::time::Instant,
}

impl IbsimTransport {
    /// Attach to ibsim as [`IbsimConfig::from_env`] says.
    ///
    /// # Errors
    ///
    /// As [`IbsimTransport::connect`].
    pub fn from_env() -> crate::Result<IbsimTransport> {
        IbsimTransport::connect(IbsimConfig::from_env())
    }

    /// Attach to ibsim: take a client slot on the chosen node and learn its port.
    ///
    /// # Errors
    ///
    /// [`crate::Error::NoDevice`] (ENODEV) if ibsim refuses the attachment
    /// (unknown node, all ten slots taken, an SM already on the node);
    /// [`crate::Error::Io`] (EIO) if ibsim cannot be reached or does not answer.
    pub fn connect(config: IbsimConfig) -> crate::Result<IbsimTransport> {
        let candidates = node_candidates(config.node.as_deref());
        let mut last = None;
        for node in &candidates {
            match IbsimTransport::connect_to(&config, node) {
                Ok(t) => return Ok(t),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| crate::Error::NoDevice("no ibsim node to attach to".into())))
    }

    fn connect_to(config: &IbsimConfig, node: &str) -> crate::Result<IbsimTransport> {
        let un = sock::open(&config.endpoint)?;
        let mut ctl = Control {
            sock: un.ctl,
            slot: None,
            timeout: config.ctl_timeout,
        };
        let info = match ctl.connect(un.id, config.qp, config.issm, node) {
            Ok(info) => info,
            // ibsim answers a refused CONNECT with a bare ERROR: unknown node or no slot.
            Err(e) if e.kind() == io::ErrorKind::Other => {
                return Err(crate::Error::NoDevice(ca::refused(node)))
            }
            Err(e) => return Err(e.into()),
        };
        // From here on `ctl` owns the slot: any `?` below frees it.
        let slot = info.id;
        sock::connect_data(&config.endpoint, &un.data, slot)?;
        let attrs = query_attrs(&ctl)?;
        if config.issm {
            ctl.call(CtlType::SetIssm, &1i32.to_ne_bytes())?;
        }
        let data = un.data;
        let tids = TidRestore::new(4096);
        let monitor = DropMonitor::new(config.drops != DropPolicy::Ignore);
        Ok(IbsimTransport {
            attrs,
            node_id: info.node_id,
            config: config.clone(),
            data,
            backlog: std::collections::VecDeque::new(),
            rx_bufs: Vec::new(),
            tids,
            monitor,
            ctl,
            heard: std::time::Instant::now(),
        })
    }

    /// The ibsim node id this transport is attached to (e.g. `"H1"`).
    pub fn node_id(&self) -> &str {
        &self.node_id
    }

    /// The client slot ibsim gave (0..10): also what it writes into TID bits 63..48.
    pub fn slot(&self) -> u32 {
        self.ctl.slot.unwrap_or(0)
    }

    /// The configuration this transport was attached with.
    pub fn config(&self) -> &IbsimConfig {
        &self.config
    }

    /// A handle on the undelivered-packet echoes (count, pending flag, reports),
    /// usable after the transport has been moved into a port.
    pub fn drop_monitor(&self) -> DropMonitor {
        self.monitor.clone()
    }

    /// Ask ibsim again for the port's PortInfo and P_Keys (the SM changes
    /// LID, state and SM LID after attachment), and return the new attributes.
    ///
    /// # Errors
    ///
    /// [`crate::Error::Io`] (EIO) if ibsim does not answer.
    pub fn refresh_attrs(&mut self) -> crate::Result<&PortAttrs> {
        self.attrs = query_attrs(&self.ctl)?;
        Ok(&self.attrs)
    }

    /// Set or clear PortInfo:CapabilityMask.IsSM on the port (ibsim may send
    /// Trap 144 to the SM), as opening `/dev/infiniband/issmN` does.
    ///
    /// # Errors
    ///
    /// [`crate::Error::Io`] (EIO) if ibsim does not answer or refuses.
    pub fn set_issm(&mut self, on: bool) -> crate::Result<()> {
        self.ctl
            .call(CtlType::SetIssm, &i32::from(on).to_ne_bytes())?;
        Ok(())
    }

    /// Send one datagram to ibsim. While its queue for us is full, ibsim itself may be
    /// stuck handing us its replies (it busy-waits on a full client), so take those
    /// into `backlog` and retry, for up to [`SEND_TIMEOUT`] against a hung ibsim.
    fn send_packet(&mut self, pkt: &[u8]) -> io::Result<()> {
        let mut give_up = None;
        loop {
            match self.data.send_now(pkt) {
                Ok(_) => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    let now = std::time::Instant::now();
                    let give_up = *give_up.get_or_insert(now + SEND_TIMEOUT);
                    if now >= give_up {
                        return Err(e);
                    }
                    self.take_backlog()?;
                    let mut fds = [PollFd::new(
                        self.data.as_fd(),
                        PollFlags::POLLOUT | PollFlags::POLLIN,
                    )];
                    match nix::poll::poll(&mut fds, PollTimeout::from(10u8)) {
                        Ok(_) | Err(nix::errno::Errno::EINTR) => {}
                        Err(e) => return Err(e.into()),
                    }
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Read every datagram ibsim has queued for us into `backlog`.
    fn take_backlog(&mut self) -> io::Result<()> {
        let mut pkt = [0u8; REQUEST_LEN + 1];
        loop {
            match self.data.recv_now(&mut pkt) {
                Ok(REQUEST_LEN) => {
                    let mut held = [0u8; REQUEST_LEN];
                    held.copy_from_slice(&pkt[..REQUEST_LEN]);
                    self.backlog.push_back(held);
                }
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }

    /// After [`LIVENESS`] without a word from ibsim, ask it something: its death shows
    /// on no socket of ours until we send.
    fn check_alive(&mut self) -> io::Result<()> {
        if self.heard.elapsed() < LIVENESS {
            return Ok(());
        }
        match self.ctl.call(CtlType::GetPort, &[]) {
            Ok(_) => self.heard = std::time::Instant::now(),
            // Busy, not gone: the next idle turn asks again.
            Err(e) if e.kind() == io::ErrorKind::TimedOut => {}
            Err(e) => {
                return Err(io::Error::new(
                    io::ErrorKind::BrokenPipe,
                    format!("ibsim is gone: {e}"),
                ))
            }
        }
        Ok(())
    }

    /// Turn a drop echo into a report, or decide the packet goes up.
    /// Returns the packet's metadata if it is to be delivered.
    fn classify(&mut self, pkt: &mut [u8]) -> Option<RecvMeta> {
        classify(&mut self.tids, &self.monitor, pkt)
    }
}

/// [`IbsimTransport::classify`] on the parts of the transport it uses (a free function
/// so that [`fuzzing`] runs the same code without sockets).
fn classify(tids: &mut TidRestore, monitor: &DropMonitor, pkt: &mut [u8]) -> Option<RecvMeta> {
    let req = Request::new_unchecked(&pkt[..]);
    let status = req.status();
    let (dlid, slid, dqp, sqp) = (req.dlid(), req.slid(), req.dqp(), req.sqp());
    let mad = &mut pkt[32..];
    if status != 0 {
        // Our own packet, returned undelivered: dlid/dqp are where we sent it.
        tids.restore_echo(mad);
        vmad_debug!(status, dlid, dqp, "MAD returned undelivered");
        monitor.record(DroppedMad::from_echo(mad, sqp, dqp, dlid, status));
        return None;
    }
    tids.restore_response(mad);
    smi_recv(mad);
    Some(RecvMeta {
        qp: if dqp == 0 { Qp::Smi } else { Qp::Gsi },
        src: MadAddr {
            qpn: sqp,
            qkey: 0,
            lid: slid,
            ..MadAddr::default()
        },
        local_qpn: None,
    })
}

/// ibsim walks the whole directed route itself, the local hop included, and
/// takes only SMPs with hop pointer 0 (as libibmad writes them, and as
/// umad2sim passes them, with no kernel SMI in between). The engine, like the
/// kernel, has already stepped the pointer as the local SMI does: undo that.
fn smi_send(mad: &mut [u8]) {
    let mut smp = crate::wire::smp::Packet::new_unchecked(mad);
    if smp.is_directed_route() {
        smp.set_hop_pointer(0);
    }
}

/// A directed-route request ibsim forwards to us arrives with hop pointer 0;
/// at its destination a real SMI leaves it at the hop count, which is what
/// the engine checks. Responses (D bit) come back with pointer 0, as after
/// a real SMI's last step.
fn smi_recv(mad: &mut [u8]) {
    let mut smp = crate::wire::smp::Packet::new_unchecked(mad);
    if smp.is_directed_route() && !smp.is_returning() {
        smp.set_hop_pointer(smp.hop_count());
    }
}

impl Transport for IbsimTransport {
    fn caps(&self) -> Caps {
        Caps {
            smi: true,
            gsi: true,
        }
    }

    fn attrs(&self) -> &PortAttrs {
        &self.attrs
    }

    fn reread_attrs(&mut self) -> crate::Result<()> {
        self.refresh_attrs().map(|_| ())
    }

    fn recv_burst(
        &mut self,
        max: usize,
        sink: &mut dyn FnMut(RecvMeta, &[u8]),
    ) -> io::Result<usize> {
        let mut n = 0;
        while n < max {
            let Some(mut held) = self.backlog.pop_front() else {
                break;
            };
            self.heard = std::time::Instant::now();
            if let Some(meta) = self.classify(&mut held) {
                sink(meta, &held[32..]);
                n += 1;
            }
        }
        // One byte more than a request: a longer datagram is not ibsim's.
        let mut bufs = core::mem::take(&mut self.rx_bufs);
        bufs.resize(RECV_BATCH, [0; REQUEST_LEN + 1]);
        let mut lens = [0usize; RECV_BATCH];
        let mut failed = None;
        while n < max {
            let want = (max - n).min(RECV_BATCH);
            let got = match self.data.recv_batch(&mut bufs[..want], &mut lens) {
                Ok(got) => got,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    failed = Some(e);
                    break;
                }
            };
            self.heard = std::time::Instant::now();
            for (pkt, &len) in bufs.iter_mut().zip(&lens[..got]) {
                // A stray or truncated datagram: not ibsim's.
                if len != REQUEST_LEN {
                    continue;
                }
                let pkt = &mut pkt[..REQUEST_LEN];
                if let Some(meta) = self.classify(pkt) {
                    sink(meta, &pkt[32..]);
                    n += 1;
                }
            }
            if got < want {
                break;
            }
        }
        self.rx_bufs = bufs;
        if let Some(e) = failed {
            return Err(e);
        }
        if n == 0 {
            self.check_alive()?;
        }
        Ok(n)
    }

    fn transmit(
        &mut self,
        fill: &mut dyn FnMut(&mut [u8; MAD_SIZE]) -> Option<Transmit>,
    ) -> io::Result<bool> {
        let mut mad = [0u8; MAD_SIZE];
        let Some(t) = fill(&mut mad) else {
            return Ok(false);
        };
        let mut pkt = [0u8; REQUEST_LEN];
        let mut req = Request::new_unchecked(&mut pkt[..]);
        req.set_dlid(t.dest.lid);
        // ibsim swaps dlid and slid for the reply: a DR SMP needs 0xffff both ways,
        // a LID-routed one 0 ("fill in my LID").
        req.set_slid(if t.dest.lid == PERMISSIVE_LID {
            PERMISSIVE_LID
        } else {
            0
        });
        req.set_dqp(t.dest.qpn);
        req.set_sqp(t.qp.qpn());
        req.set_status(0);
        req.set_length(t.len.min(MAD_SIZE) as u64);
        smi_send(&mut mad);
        req.mad_mut().copy_from_slice(&mad);
        self.tids.note_send(&pkt[32..]);
        self.send_packet(&pkt)?;
        Ok(true)
    }

    fn wait(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        if !self.backlog.is_empty() {
            return Ok(());
        }
        // Bounded by LIVENESS, so that a silent ibsim is asked whether it is there.
        let t = timeout.map_or(LIVENESS, |t| t.min(LIVENESS));
        let t = PollTimeout::try_from(t.as_micros().div_ceil(1000).min(i32::MAX as u128) as i32)
            .unwrap_or(PollTimeout::MAX);
        let mut fds = [PollFd::new(self.data.as_fd(), PollFlags::POLLIN)];
        match nix::poll::poll(&mut fds, t) {
            Ok(0) => self.check_alive(),
            Ok(_) | Err(nix::errno::Errno::EINTR) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    fn ready_fd(&self) -> Option<BorrowedFd<'_>> {
        Some(self.data.as_fd())
    }

    fn idle_limit(&self) -> Option<Duration> {
        Some(LIVENESS)
    }

    fn rx_held(&self) -> bool {
        !self.backlog.is_empty()
    }

    fn busy_poll(&self) -> bool {
        // ibsim runs on this host and answers every MAD itself: a spinning caller only
        // takes its CPU (and OpenSM's). OpenSM's sweep of 1,612 nodes (scripts/bench-opensm
        // --all, medians of 5 alternating pairs, 2-core machine): with the spin 1.11x
        // umad2sim's time idle and 1.90x with a core busy, without 0.93x and 1.17x.
        false
    }

    fn set_sm(&mut self, on: bool) -> crate::Result<()> {
        // SET_ISSM both sets IsSM and makes this client the one ibsim hands the node's
        // unsolicited QP0/QP1 requests to. Like the kernel's issm device, refuse while
        // another client holds the role (ibsim itself would let a second one take it).
        if on && !self.config.issm {
            let now = query_attrs(&self.ctl)?;
            if now.capmask & crate::wire::smp::port_info::CAP_IS_SM != 0 {
                return Err(crate::Error::AddressInUse(format!(
                    "ibsim node {} already has an SM (PortInfo:CapMask.IsSM is set)",
                    self.node_id
                )));
            }
        }
        self.set_issm(on)?;
        self.config.issm = on;
        Ok(())
    }

    fn take_undelivered(&mut self, sink: &mut dyn FnMut(&[u8])) {
        if self.config.drops == DropPolicy::Timeout && self.monitor.pending() {
            for dropped in self.monitor.take() {
                sink(&dropped.header);
            }
        }
    }
}

/// For fuzzing only: what the transport does with the datagrams ibsim's data socket
/// delivers, without the sockets (the `ibsim_proto` fuzz target). Not a stable API.
#[doc(hidden)]
pub mod fuzzing {
    use super::{classify, DropMonitor, DroppedMad, RecvMeta, TidRestore, REQUEST_LEN};

    /// The receive side of one attached transport.
    #[derive(Debug)]
    pub struct Rx {
        tids: TidRestore,
        monitor: DropMonitor,
    }

    impl Default for Rx {
        fn default() -> Rx {
            Rx {
                tids: TidRestore::new(4096),
                monitor: DropMonitor::new(true),
            }
        }
    }

    impl Rx {
        /// Remember a MAD as sent (the `sim_request`'s MAD bytes), as `transmit` does.
        pub fn note_send(&mut self, mad: &[u8]) {
            self.tids.note_send(mad);
        }

        /// One datagram as `recv_burst` receives it: the MAD and its metadata if it goes up.
        pub fn receive<'a>(&mut self, datagram: &'a mut [u8]) -> Option<(RecvMeta, &'a [u8])> {
            if datagram.len() != REQUEST_LEN {
                return None;
            }
            let meta = classify(&mut self.tids, &self.monitor, datagram)?;
            Some((meta, &datagram[32..]))
        }

        /// The drop reports recorded so far.
        pub fn take_dropped(&self) -> Vec<DroppedMad> {
            self.monitor.take()
        }
    }
}
