//! The kernel transport: vmad's engine over the kernel's umad character devices
//! (`/dev/infiniband/umadN`, `issmN`), on the host's real CAs, found through
//! sysfs as libibumad finds them ([`sysfs`]).
//!
//! QP1 on every port, QP0 where the port has one (InfiniBand; RoCE has none:
//! an SMI agent is refused with EOPNOTSUPP). The kernel keeps its MAD layer
//! (QP0/QP1, the unmatched-request answers, the local SMA); vmad keeps
//! everything above it: RMPP, timeouts, retries, matching, queues.
//!
//! # How vmad and the kernel share the work
//!
//! **Agents.** Each engine agent is registered as its own kernel agent
//! ([`Transport::register_agent`], `IB_USER_MAD_REGISTER_AGENT2`) with the
//! same QP, class, version, OUI and method mask, and always with
//! `IB_USER_MAD_USER_RMPP`: the kernel passes every RMPP segment and ACK
//! through as a plain MAD and vmad's engine runs RMPP (it delivers RMPP-active
//! responses even when they match no send, which later segments never do).
//! The method mask is what makes the kernel route unsolicited requests here.
//!
//! **TIDs.** The kernel overwrites the high 32 bits of every request's TID
//! with its agent's `hi_tid` (`ib_umad_write`) and routes a
//! response by that word back to that agent (`find_mad_agent`). The
//! kernel's `hi_tid` is never told to userspace, and the engine routes
//! responses by its own agent's `hi_tid`. One kernel agent per engine agent
//! makes the translation exact and stateless: a response the kernel delivers
//! to kernel agent K has its TID's high word replaced by the `hi_tid` of K's
//! engine agent before the engine sees it; the low 32 bits are untouched. On
//! the way out nothing is translated: a request written through K gets K's
//! `hi_tid` from the kernel (the engine's high word says which K: the
//! engine agent's), and a response keeps the requester's TID. An RMPP ACK for
//! a response the engine receives carries a request method (the response bit
//! flipped) and so gets K's `hi_tid` back from the kernel, as the sender expects.
//! A timeout the engine reports (`Event::SendTimedOut`) carries the engine's
//! high word where the kernel's report carries its own; callers match the low
//! 32 bits (OpenSM and libibmad do).
//!
//! **Timeouts and retries.** The kernel delivers a non-RMPP response only while
//! a send it matches is outstanding (`ib_find_send_mad`), and drops responses
//! to sends written with `timeout_ms = 0`. The engine owns the timers and the
//! retries, so each request goes to the kernel with **0 retries** and a
//! timeout equal to the engine's wait for that attempt
//! ([`Transmit::timeout_ms`]): the kernel starts its timer at send completion,
//! after the engine started its own, so the kernel's never fires first and a
//! response the engine still waits for is always let through. An RMPP request
//! is harder: every segment carries the same TID, and each RMPP ACK coming back
//! is a response the kernel matches against those segments, ending the one it
//! finds (the final ACK would end a lone waiting last segment, and the answer
//! after it would be dropped). So the last [`RMPP_TAIL`] segments of a request
//! each ask the kernel to wait, for the engine's timeout plus [`RMPP_SLACK_MS`]
//! (the engine's response timer starts at the final ACK, after they left):
//! the few ACKs that arrive after they were written use up a few of them, and
//! the rest stay for the answer. Those left over expire later, unseen: the
//! kernel's timeout reports (`status` ETIMEDOUT) are dropped here, as the
//! engine reports its own.
//!
//! A retry reuses the TID, and the kernel refuses (EINVAL, `is_duplicate`) a
//! second request with the TID of one it still tracks. Its copy of the last
//! attempt expires just after the engine's, so a retry that finds it still
//! tracked waits here, unseen by the engine, until the kernel reports that
//! attempt done (its ETIMEDOUT report, or the response), then goes out. No
//! clock is read: while something waits, [`Transport::wait`] parks 1 ms at most.
//!
//! **SM role.** [`Transport::set_sm`] opens and closes `/dev/infiniband/issmN`
//! without blocking (EAGAIN while another SM holds it), and
//! [`CaProvider::issm_path`] names that device, so `umad_get_issm_path`
//! returns it as libibumad does. On RoCE the kernel has no SM role and refuses
//! the open.

pub mod sysfs;

mod dev;

use std::collections::{HashMap, HashSet, VecDeque};
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use nix::poll::{PollFd, PollFlags, PollTimeout};

use self::dev::{RegReq2, Umad, USER_RMPP};
use self::sysfs::Sysfs;
use super::registry::{self, CaInfo, CaProvider};
use super::{Caps, LinkLayer, PortAttrs, Transport, Waker};
use crate::engine::{AgentSpec, RecvMeta, Transmit};
use crate::types::Qp;
use crate::wire::mad::{MgmtClass, Packet as Mad};
use crate::wire::rmpp::{Packet as RmppPacket, FLAG_ACTIVE, SEGMENT_PAYLOAD};
use crate::wire::umad::{Packet as UmadHdr, HEADER_LEN};
use crate::wire::MAD_SIZE;
use crate::{Error, Result};

/// What an RMPP request's last segment adds to the engine's timeout in the kernel's
/// wait (ms): the engine waits from the final ACK, which may come an ACK timeout or
/// more after that segment left; 40 s is RMPP's own limit for a whole transfer.
pub const RMPP_SLACK_MS: u32 = 40_000;

/// How many of an RMPP request's last segments ask the kernel to wait for the
/// response: each RMPP ACK the request gets back also matches (and so ends) one of
/// them, and a window of 64 draws one or two ACKs, so many stay for the response.
pub const RMPP_TAIL: u32 = 128;

/// How often a held retry gives way to an EINVAL it cannot explain before it is
/// dropped (the engine then times the attempt out).
const HELD_TRIES: u32 = 2_000;

/// The umad ABI this transport speaks (`IB_UMAD_ABI_VERSION`).
const ABI_VERSION: u64 = 5;

/// A kernel agent standing for one engine agent.
#[derive(Debug, Clone, Copy)]
struct KernelAgent {
    kernel_id: u32,
    hi_tid: u32,
    qp: Qp,
    class: u8,
}

/// A request the kernel tracks: its agent, class and TID low word.
type SendKey = (u32, u8, u32);

/// A MAD written later (a retry whose previous attempt the kernel still tracks).
struct Held {
    bytes: Box<[u8; HEADER_LEN + MAD_SIZE]>,
    key: Option<SendKey>,
    tries: u32,
}

/// vmad on one port of a host CA, through its umad device.
pub struct KernelTransport {
    umad: Umad,
    attrs: PortAttrs,
    issm_path: PathBuf,
    issm: Option<File>,
    agents: Vec<KernelAgent>,
    /// Requests written with a kernel timeout and not yet reported done.
    outstanding: HashSet<SendKey>,
    held: VecDeque<Held>,
    /// Segment counts of the RMPP requests being sent, by kernel agent and TID low word.
    rmpp_totals: HashMap<(u32, u32), u32>,
    /// The transmit buffer when no MAD waits in it.
    tx_spare: Option<Box<[u8; HEADER_LEN + MAD_SIZE]>>,
    rx: Box<[u8; HEADER_LEN + MAD_SIZE]>,
    wake_rx: UnixStream,
    wake_tx: Arc<UnixStream>,
}

impl core::fmt::Debug for KernelTransport {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("KernelTransport")
            .field("ca", &self.attrs.ca_name)
            .field("port", &self.attrs.port_num)
            .field("agents", &self.agents.len())
            .finish_non_exhaustive()
    }
}

impl KernelTransport {
    /// Open `port` of CA `ca` (0: the first active port, as libibumad picks it).
    ///
    /// # Errors
    /// ENODEV for an unknown CA or port, or no umad device for it; EOPNOTSUPP for a
    /// umad ABI other than 5; EACCES/EIO from opening the device.
    pub fn open(sysfs: &Sysfs, ca: &str, port: u8) -> Result<KernelTransport> {
        let info = sysfs.ca_info(ca)?;
        let attrs = pick_port(&info, port)?.clone();
        let abi = sysfs.abi_version()?;
        if abi < ABI_VERSION {
            return Err(Error::Unsupported("the kernel's umad ABI is older than 5"));
        }
        let id = sysfs.umad_id(ca, attrs.port_num)?;
        let path = PathBuf::from(format!("/dev/infiniband/umad{id}"));
        let umad = Umad::open(&path)
            .map_err(|e| Error::Io(io::Error::new(e.kind(), format!("{}: {e}", path.display()))))?;
        umad.enable_pkey()?;
        let (wake_rx, wake_tx) = UnixStream::pair()?;
        wake_rx.set_nonblocking(true)?;
        wake_tx.set_nonblocking(true)?;
        vmad_debug!(target: "vmad::transport", ca = ca, port = attrs.port_num, dev = %path.display(), "kernel transport open");
        Ok(KernelTransport {
            umad,
            issm_path: PathBuf::from(format!("/dev/infiniband/issm{id}")),
            attrs,
            issm: None,
            agents: Vec::new(),
            outstanding: HashSet::new(),
            held: VecDeque::new(),
            rmpp_totals: HashMap::new(),
            tx_spare: None,
            rx: Box::new([0; HEADER_LEN + MAD_SIZE]),
            wake_rx,
            wake_tx: Arc::new(wake_tx),
        })
    }

    /// The umad device's descriptor: readable when a MAD waits (for a transport that
    /// waits on it beside others: the hybrid one).
    pub fn readiness_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.umad.as_fd()
    }

    /// Whether a retry waits for the kernel to forget its previous attempt: a
    /// [`Transport::wait`] done elsewhere must then return within 1 ms (see the
    /// module docs), since no descriptor says when.
    pub fn holds_sends(&self) -> bool {
        !self.held.is_empty()
    }

    /// Write what was held back, oldest first, as far as the kernel lets it.
    fn flush_held(&mut self) -> io::Result<()> {
        for _ in 0..self.held.len() {
            let Some(mut h) = self.held.pop_front() else {
                break;
            };
            if h.key.is_some_and(|k| self.outstanding.contains(&k)) {
                self.held.push_back(h);
                continue;
            }
            h.tries += 1;
            if let Some(h) = self.write(h)? {
                self.held.push_back(h);
            }
        }
        Ok(())
    }

    /// Write one MAD; gives it back when it must wait (EINVAL for a tracked TID,
    /// or the kernel short of memory). Errors only when the device is gone.
    fn write(&mut self, h: Held) -> io::Result<Option<Held>> {
        match self.umad.write(&h.bytes[..]) {
            Ok(_) => {
                self.outstanding.extend(h.key);
                self.tx_spare.get_or_insert(h.bytes);
                Ok(None)
            }
            Err(e) => match e.raw_os_error() {
                Some(libc_errno::EINVAL) if h.key.is_some() && h.tries < HELD_TRIES => Ok(Some(h)),
                Some(libc_errno::EAGAIN | libc_errno::ENOMEM | libc_errno::EINTR)
                    if h.tries < HELD_TRIES =>
                {
                    Ok(Some(h))
                }
                Some(libc_errno::ENODEV | libc_errno::EIO) => Err(e),
                _ => {
                    vmad_debug!(target: "vmad::transport", error = %e, "the kernel refused a MAD; dropped");
                    Ok(None)
                }
            },
        }
    }

    /// Whether an RMPP request segment is one of the last [`RMPP_TAIL`] of its message
    /// (the ones the kernel is asked to wait on; see the module docs). The first
    /// segment's PayloadLength gives the count.
    fn rmpp_tail(&mut self, kernel_id: u32, mad: &[u8]) -> bool {
        let r = RmppPacket::new_unchecked(mad);
        let key = (kernel_id, tid_low(mad));
        if r.is_first() {
            let total = (r.paylen_newwin() as usize).div_ceil(SEGMENT_PAYLOAD) as u32;
            self.rmpp_totals.insert(key, total.max(1));
        }
        let total = self.rmpp_totals.get(&key).copied().unwrap_or(0);
        if r.is_last() {
            self.rmpp_totals.remove(&key);
        }
        r.is_last() || r.seg_num().saturating_add(RMPP_TAIL) > total
    }

    /// The kernel agent to write a MAD of `class` on `qp` through: a request through
    /// the agent whose engine `hi_tid` it carries, anything else through one of the QP.
    fn agent_for(&self, qp: Qp, class: u8, request_hi: Option<u32>) -> Option<KernelAgent> {
        let on_qp = || self.agents.iter().filter(|a| a.qp == qp);
        request_hi
            .and_then(|hi| on_qp().find(|a| a.hi_tid == hi))
            .or_else(|| on_qp().find(|a| a.class == class))
            .or_else(|| on_qp().next())
            .copied()
    }
}

/// What one `read()` of `len` bytes into `rx` (header + MAD) is: a MAD for an agent of
/// ours (the MAD is `rx[HEADER_LEN..]`, its response TID given back the engine agent's
/// high word), or nothing (too short, a send's completion status, an unknown agent).
fn take_read(
    agents: &[KernelAgent],
    outstanding: &mut HashSet<SendKey>,
    rx: &mut [u8; HEADER_LEN + MAD_SIZE],
    len: usize,
) -> Option<RecvMeta> {
    if len < HEADER_LEN + 24 {
        return None;
    }
    let (hdr, mad) = rx.split_at_mut(HEADER_LEN);
    let hdr = UmadHdr::new_unchecked(&hdr[..]);
    let kernel_id = hdr.agent_id();
    let key = (
        kernel_id,
        u8::from(Mad::new_unchecked(&mad[..]).mgmt_class()),
        tid_low(mad),
    );
    if hdr.status() != 0 {
        // The kernel's own timeout of a send (ETIMEDOUT, 24 bytes of it): that
        // attempt is no longer tracked; the engine's timers report timeouts.
        if hdr.status() != libc_errno::ETIMEDOUT {
            vmad_debug!(target: "vmad::transport", status = hdr.status(), "kernel send status");
        }
        outstanding.remove(&key);
        return None;
    }
    let agent = agents.iter().find(|a| a.kernel_id == kernel_id)?;
    let mut pkt = Mad::new_unchecked(&mut mad[..]);
    if pkt.is_response() {
        // Routed by the kernel agent's hi_tid: give it the engine agent's.
        outstanding.remove(&key);
        pkt.set_tid((u64::from(agent.hi_tid) << 32) | u64::from(key.2));
    }
    Some(RecvMeta {
        qp: agent.qp,
        src: hdr.addr(),
        local_qpn: None,
    })
}

/// For fuzzing only: what the transport does with the bytes a `read()` of the umad
/// device returns, without the device (the `umad_header` fuzz target). Not a stable API.
#[doc(hidden)]
pub mod fuzzing {
    use std::collections::HashSet;

    use super::{take_read, KernelAgent, RecvMeta, SendKey, HEADER_LEN, MAD_SIZE};
    use crate::types::Qp;

    /// The receive side of one open port: its kernel agents and tracked sends.
    #[derive(Debug)]
    pub struct Rx {
        agents: Vec<KernelAgent>,
        outstanding: HashSet<SendKey>,
        rx: Box<[u8; HEADER_LEN + MAD_SIZE]>,
    }

    impl Rx {
        /// A port with kernel agents `(kernel id, engine TID high word, QP, class)`.
        pub fn new(agents: &[(u32, u32, Qp, u8)]) -> Rx {
            Rx {
                agents: agents
                    .iter()
                    .map(|&(kernel_id, hi_tid, qp, class)| KernelAgent {
                        kernel_id,
                        hi_tid,
                        qp,
                        class,
                    })
                    .collect(),
                outstanding: HashSet::new(),
                rx: Box::new([0; HEADER_LEN + MAD_SIZE]),
            }
        }

        /// A request written with a kernel timeout: (kernel id, class, TID low word).
        pub fn note_outstanding(&mut self, key: (u32, u8, u32)) {
            self.outstanding.insert(key);
        }

        /// How many written requests are still tracked.
        pub fn outstanding(&self) -> usize {
            self.outstanding.len()
        }

        /// `bytes` as one `read()` returns them (cut to the transport's buffer, as the
        /// read would be): the MAD handed up and its metadata, if any.
        pub fn read(&mut self, bytes: &[u8]) -> Option<(RecvMeta, &[u8])> {
            let len = bytes.len().min(self.rx.len());
            self.rx[..len].copy_from_slice(&bytes[..len]);
            let meta = take_read(&self.agents, &mut self.outstanding, &mut self.rx, len)?;
            Some((meta, &self.rx[HEADER_LEN..]))
        }
    }
}

/// Errno values, named (nix's are an enum; these are compared with raw OS errors).
mod libc_errno {
    pub(super) const EINTR: i32 = nix::errno::Errno::EINTR as i32;
    pub(super) const EIO: i32 = nix::errno::Errno::EIO as i32;
    pub(super) const EAGAIN: i32 = nix::errno::Errno::EAGAIN as i32;
    pub(super) const ENOMEM: i32 = nix::errno::Errno::ENOMEM as i32;
    pub(super) const ENODEV: i32 = nix::errno::Errno::ENODEV as i32;
    pub(super) const EINVAL: i32 = nix::errno::Errno::EINVAL as i32;
    pub(super) const ETIMEDOUT: u32 = nix::errno::Errno::ETIMEDOUT as u32;
}

/// libibumad's port choice for port 0: the first active port, else the first with
/// its link up, else the first not disabled; an explicit port must exist.
pub(crate) fn pick_port(info: &CaInfo, port: u8) -> Result<&PortAttrs> {
    let found = if port != 0 {
        info.ports.iter().find(|p| p.port_num == port)
    } else {
        info.ports
            .iter()
            .find(|p| p.state == 4)
            .or_else(|| info.ports.iter().find(|p| p.phys_state == 5))
            .or_else(|| info.ports.iter().find(|p| p.phys_state != 3))
    };
    found.ok_or_else(|| Error::NoDevice(format!("{} has no usable port {port}", info.name)))
}

fn tid_low(mad: &[u8]) -> u32 {
    (Mad::new_unchecked(mad).tid() & 0xffff_ffff) as u32
}

impl Transport for KernelTransport {
    fn caps(&self) -> Caps {
        Caps {
            smi: self.attrs.link_layer == LinkLayer::InfiniBand,
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
        self.flush_held()?;
        let mut n = 0;
        while n < max {
            let len = match self.umad.read(&mut self.rx[..]) {
                Ok(len) => len,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) => return Err(e),
            };
            let Some(meta) = take_read(&self.agents, &mut self.outstanding, &mut self.rx, len)
            else {
                continue;
            };
            sink(meta, &self.rx[HEADER_LEN..]);
            n += 1;
        }
        Ok(n)
    }

    fn transmit(
        &mut self,
        fill: &mut dyn FnMut(&mut [u8; MAD_SIZE]) -> Option<Transmit>,
    ) -> io::Result<bool> {
        self.flush_held()?;
        // One buffer, reused until a MAD has to wait in it (the port asks once per
        // turn more than there is to send).
        let mut bytes = self
            .tx_spare
            .take()
            .unwrap_or_else(|| Box::new([0u8; HEADER_LEN + MAD_SIZE]));
        let slot: &mut [u8; MAD_SIZE] = (&mut bytes[HEADER_LEN..])
            .try_into()
            .expect("MAD_SIZE bytes");
        let Some(tx) = fill(slot) else {
            self.tx_spare = Some(bytes);
            return Ok(false);
        };
        let mad = Mad::new_unchecked(&bytes[HEADER_LEN..]);
        let (class, response) = (u8::from(mad.mgmt_class()), mad.is_response());
        let flags = bytes[HEADER_LEN + 26];
        let rmpp_active = MgmtClass::from(class).is_rmpp_class() && flags & FLAG_ACTIVE != 0;
        let request_hi = (!response).then(|| (mad.tid() >> 32) as u32);
        let Some(agent) = self.agent_for(tx.qp, class, request_hi) else {
            vmad_debug!(target: "vmad::transport", class = class, "no kernel agent on that QP; MAD dropped");
            return Ok(true);
        };
        let timeout_ms = match (response, rmpp_active) {
            (true, _) => 0,
            (false, false) => tx.timeout_ms,
            (false, true) if tx.timeout_ms != 0 => {
                let tail = self.rmpp_tail(agent.kernel_id, &bytes[HEADER_LEN..]);
                if tail {
                    tx.timeout_ms.saturating_add(RMPP_SLACK_MS)
                } else {
                    0
                }
            }
            (false, true) => 0,
        };
        // The kernel refuses a second request with a TID it tracks (RMPP-active ones
        // are exempt): those are the sends to hold back.
        let key = (timeout_ms != 0 && !rmpp_active)
            .then(|| (agent.kernel_id, class, tid_low(&bytes[HEADER_LEN..])));
        {
            let mut hdr = UmadHdr::new_unchecked(&mut bytes[..HEADER_LEN]);
            hdr.set_agent_id(agent.kernel_id);
            hdr.set_timeout_ms(timeout_ms);
            hdr.set_retries(0);
            hdr.set_addr(&tx.dest);
        }
        let h = Held {
            bytes,
            key,
            tries: 0,
        };
        if key.is_some_and(|k| self.outstanding.contains(&k)) {
            self.held.push_back(h);
        } else if let Some(h) = self.write(h)? {
            self.held.push_back(h);
        }
        Ok(true)
    }

    fn wait(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        let timeout = if self.held.is_empty() {
            timeout
        } else {
            Some(timeout.map_or(Duration::from_millis(1), |t| {
                t.min(Duration::from_millis(1))
            }))
        };
        let t = match timeout {
            None => PollTimeout::NONE,
            Some(t) => {
                PollTimeout::try_from(t.as_micros().div_ceil(1000).min(i32::MAX as u128) as i32)
                    .unwrap_or(PollTimeout::MAX)
            }
        };
        let mut fds = [
            PollFd::new(self.umad.as_fd(), PollFlags::POLLIN),
            PollFd::new(self.wake_rx.as_fd(), PollFlags::POLLIN),
        ];
        match nix::poll::poll(&mut fds, t) {
            Ok(_) | Err(nix::errno::Errno::EINTR) => {}
            Err(e) => return Err(e.into()),
        }
        let mut drain = [0u8; 64];
        while matches!((&self.wake_rx).read(&mut drain), Ok(n) if n > 0) {}
        Ok(())
    }

    fn ready_fd(&self) -> Option<BorrowedFd<'_>> {
        Some(self.umad.as_fd())
    }

    fn idle_limit(&self) -> Option<Duration> {
        // Sends held back until the kernel stops tracking their TID are retried at
        // the next turn: no later than this.
        (!self.held.is_empty()).then(|| Duration::from_millis(1))
    }

    fn busy_poll(&self) -> bool {
        // The kernel does the receiving (and, for RMPP, most of the work of the far
        // side on the same host); a spinning port only takes its CPU. In the rxe VM
        // (2 vCPUs, TCG) without spinning RMPP 64 KiB / 1 MiB took 0.88x / 0.96x the
        // time of classic libibumad on an idle host (scripts/bench-kernel); the runs
        // with spinning were 4x slower, though on a busier host.
        false
    }

    fn waker(&self) -> Option<Waker> {
        let tx = self.wake_tx.clone();
        // A full socket buffer already means "wake up": WouldBlock is fine.
        Some(Waker::new(move || drop((&*tx).write(&[1]))))
    }

    fn register_agent(&mut self, spec: &AgentSpec, hi_tid: u32) -> Result<()> {
        let mut req = RegReq2 {
            qpn: spec.qp.qpn(),
            mgmt_class: u8::from(spec.mgmt_class),
            mgmt_class_version: spec.class_version,
            flags: USER_RMPP,
            method_mask: spec.method_mask,
            oui: spec.oui,
            rmpp_version: spec.rmpp_version,
            ..RegReq2::default()
        };
        let kernel_id = self.umad.register(&mut req).map_err(|e| match e.raw_os_error() {
            Some(libc_errno::EINVAL) => Error::InvalidArgument(
                "the kernel refused the agent (EINVAL: a method another agent serves, or a class, version or OUI it rejects)",
            ),
            Some(errno) if errno == nix::errno::Errno::EPROTONOSUPPORT as i32 => {
                Error::Unsupported("the kernel refused the agent: the port has no such QP (RoCE has no QP0)")
            }
            _ => Error::Io(e),
        })?;
        self.agents.push(KernelAgent {
            kernel_id,
            hi_tid,
            qp: spec.qp,
            class: u8::from(spec.mgmt_class),
        });
        Ok(())
    }

    fn unregister_agent(&mut self, hi_tid: u32) {
        let Some(i) = self.agents.iter().position(|a| a.hi_tid == hi_tid) else {
            return;
        };
        let agent = self.agents.swap_remove(i);
        // Its sends die with it, unreported: forget them and what waits behind them.
        self.outstanding.retain(|k| k.0 != agent.kernel_id);
        self.held
            .retain(|h| h.key.is_none_or(|k| k.0 != agent.kernel_id));
        if let Err(_e) = self.umad.unregister(agent.kernel_id) {
            vmad_debug!(target: "vmad::transport", error = %_e, "unregister failed");
        }
    }

    fn set_sm(&mut self, on: bool) -> Result<()> {
        if !on {
            self.issm = None;
            return Ok(());
        }
        if self.issm.is_none() {
            let file = dev::open_issm(&self.issm_path).map_err(|e| {
                Error::Io(io::Error::new(
                    e.kind(),
                    format!("{}: {e}", self.issm_path.display()),
                ))
            })?;
            self.issm = Some(file);
        }
        Ok(())
    }
}

/// The host's CAs, as a [`CaProvider`] (described from sysfs at each call, so states
/// and LIDs an SM changes are reported as they are now).
#[derive(Debug)]
pub struct KernelCas {
    sysfs: Sysfs,
}

impl KernelCas {
    /// The CAs of `sysfs`.
    pub fn new(sysfs: Sysfs) -> KernelCas {
        KernelCas { sysfs }
    }
}

impl CaProvider for KernelCas {
    fn ca_info(&self, name: &str) -> Option<CaInfo> {
        self.sysfs.ca_info(name).ok()
    }

    fn open(&self, name: &str, port: u8) -> Result<Box<dyn Transport>> {
        Ok(Box::new(KernelTransport::open(&self.sysfs, name, port)?))
    }

    fn issm_path(&self, name: &str, port: u8) -> Result<Option<PathBuf>> {
        let info = self.sysfs.ca_info(name)?;
        let port = pick_port(&info, port)?.port_num;
        let id = self.sysfs.umad_id(name, port)?;
        Ok(Some(PathBuf::from(format!("/dev/infiniband/issm{id}"))))
    }
}

/// The host's CA names (libibumad's list); empty where there are none.
pub fn host_cas() -> Vec<String> {
    Sysfs::host().ca_names()
}

/// Register every host CA with the CA registry, all under [`KernelCas`].
///
/// # Errors
/// ENODEV if the host has no CA; EADDRINUSE if a name is already registered.
pub fn register_host_cas() -> Result<Vec<String>> {
    register_host_cas_under(Arc::new(KernelCas::new(Sysfs::host())))
}

/// Register every host CA with the CA registry under `provider` (the hybrid and verbs
/// transports' providers, or a caller's wrapper of one).
///
/// # Errors
/// ENODEV if the host has no CA; EADDRINUSE if a name is already registered.
pub fn register_host_cas_under(provider: Arc<dyn CaProvider>) -> Result<Vec<String>> {
    let names = host_cas();
    if names.is_empty() {
        return Err(Error::NoDevice("no CA under /sys/class/infiniband".into()));
    }
    registry::register_cas(&names, provider)?;
    Ok(names)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One `read()`: a header for kernel agent `id` with `status`, then a MAD.
    fn read_of(id: u32, status: u32, method: u8, tid: u64) -> [u8; HEADER_LEN + MAD_SIZE] {
        let mut b = [0u8; HEADER_LEN + MAD_SIZE];
        let mut h = UmadHdr::new_unchecked(&mut b[..HEADER_LEN]);
        h.set_agent_id(id);
        h.set_status(status);
        b[HEADER_LEN..HEADER_LEN + 4].copy_from_slice(&[1, 0x04, 1, method]);
        b[HEADER_LEN + 8..HEADER_LEN + 16].copy_from_slice(&tid.to_be_bytes());
        b
    }

    #[test]
    fn a_read_ends_tracked_sends_and_routes_responses_to_the_engine_agent() {
        let mut rx = fuzzing::Rx::new(&[(7, 0xabcd, Qp::Gsi, 0x04)]);
        rx.note_outstanding((7, 0x04, 5));
        rx.note_outstanding((7, 0x04, 6));
        // A send's ETIMEDOUT completion: untracked, nothing goes up.
        assert!(rx
            .read(&read_of(7, 110, 0x01, 5)[..HEADER_LEN + 24])
            .is_none());
        assert_eq!(rx.outstanding(), 1);
        // The response: tracked no more, its TID given the engine agent's high word.
        let (meta, mad) = rx.read(&read_of(7, 0, 0x81, 0x1234_0000_0006)).expect("up");
        assert_eq!(meta.qp, Qp::Gsi);
        assert_eq!(Mad::new_unchecked(mad).tid(), 0xabcd_0000_0006);
        assert_eq!(rx.outstanding(), 0);
        // An unknown kernel agent, and a read too short for a MAD header.
        assert!(rx.read(&read_of(8, 0, 0x81, 6)).is_none());
        assert!(rx
            .read(&read_of(7, 0, 0x81, 6)[..HEADER_LEN + 23])
            .is_none());
    }

    fn port(n: u8, state: u8, phys_state: u8) -> PortAttrs {
        PortAttrs {
            ca_name: "mlx".into(),
            port_num: n,
            node_type: 1,
            node_guid: 1,
            port_guid: 1,
            gid_prefix: 0,
            lid: 0,
            lmc: 0,
            sm_lid: 0,
            sm_sl: 0,
            state,
            phys_state,
            rate: 0,
            capmask: 0,
            pkeys: vec![0xffff],
            link_layer: LinkLayer::InfiniBand,
        }
    }

    fn ca(ports: Vec<PortAttrs>) -> CaInfo {
        CaInfo {
            name: "mlx".into(),
            node_type: 1,
            node_guid: 1,
            system_guid: 1,
            fw_ver: String::new(),
            ca_type: String::new(),
            hw_ver: String::new(),
            ports,
        }
    }

    /// Port 0 picks as libibumad's resolve_ca_port: active, else link up, else not
    /// disabled; an explicit port must exist.
    #[test]
    fn port_zero_picks_as_libibumad() {
        let picked = |ports| pick_port(&ca(ports), 0).map(|p| p.port_num).ok();
        assert_eq!(picked(vec![port(1, 1, 2), port(2, 4, 5)]), Some(2));
        assert_eq!(picked(vec![port(1, 1, 2), port(2, 2, 5)]), Some(2));
        assert_eq!(picked(vec![port(1, 1, 3), port(2, 1, 2)]), Some(2));
        assert_eq!(picked(vec![port(1, 1, 3)]), None);
        assert_eq!(pick_port(&ca(vec![port(1, 1, 3)]), 1).unwrap().port_num, 1);
        assert!(pick_port(&ca(vec![port(1, 4, 5)]), 2).is_err());
    }
}
