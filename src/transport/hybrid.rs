//! The hybrid transport: one port of a host CA, two paths, chosen per MAD
//! (features `kernel` and `verbs`).
//!
//! - **verbs** ([`VerbsTransport`]): the GMPs the port sends as a client.
//!   A request leaves from vmad's own UD QP, so its answer (and every RMPP
//!   segment and ACK of the exchange) comes back to that QP's pinned ring,
//!   busy-polled: no kernel MAD layer on this path.
//! - **kernel** ([`KernelTransport`]): SMPs (QP0), and whatever must arrive at
//!   QP1: unsolicited requests to a registered agent, traps, reports, SA
//!   requests to an SM. The answers to those go back the way they came.
//!
//! # Which path a MAD takes
//!
//! In [`Transport::transmit`], the engine writes the MAD straight into a verbs
//! send slot; if it must go through the kernel it is copied into the kernel's
//! buffer instead (256 bytes) and the verbs slot is handed back unused.
//! While every verbs slot is in flight the engine writes into a buffer of the
//! transport's own: a MAD for the kernel goes out at once (the kernel path does
//! not wait for verbs slots), a MAD for verbs is held (one) and leaves first
//! when a slot frees, so each path keeps its order.
//!
//! | MAD | path |
//! |---|---|
//! | on QP0 (SMP) | kernel |
//! | a request (response bit clear) | verbs, unless addressed with a P_Key index other than the verbs QP's (a UD QP has one P_Key): kernel |
//! | a response whose request came in through verbs (a vmad peer that addressed the verbs QP) | verbs |
//! | any other response | kernel |
//!
//! RMPP needs nothing more: the segments and ACKs of a transfer carry its TID
//! and the method kind of its request or response side. An ACK for a
//! response being received carries a request method (verbs: the response came
//! to the verbs QP); an ACK for a request being received carries a response
//! method, and so takes the request's path (the `via_verbs` set below).
//!
//! # TIDs
//!
//! Through verbs nothing rewrites the TID: requests keep the engine's high
//! word and responses come back with it. Through the kernel the kernel
//! transport translates as its docs say. Every engine agent is registered with
//! the kernel (the kernel path needs a kernel agent for unsolicited requests,
//! and for the answers to requests that go through the kernel).
//!
//! # Waiting
//!
//! By default (`VerbsConfig::caller_driven`) the port's descriptor is the verbs
//! transport's ready descriptor, an epoll fd that also watches the umad device
//! (`verbs/ready.rs`): a caller waiting for a MAD polls it and runs the turn
//! itself, and a turn reads the umad device only when that turn saw it
//! readable (or while the kernel holds sends back: its receive retries them).
//! What follows is the mode without it (`VMAD_VERBS_CALLER_DRIVEN=0`).
//!
//! The two transports sleep differently (verbs: busy polling, then its
//! completion channel; kernel: `poll` on the umad device). The verbs transport
//! does the waiting and is given the umad descriptor to sleep on as well
//! ([`VerbsTransport::also_wake_on`]): one `poll` covers both, and the verbs
//! waker ends it. A kernel MAD that arrives while verbs busy-polls (at most
//! `idle_spin`, 1 ms) waits until the spin ends. While the kernel transport
//! holds a retry back, a wait lasts 1 ms at most (it has no descriptor).
//!
//! # Counters and pcap
//!
//! [`PathCounters`] counts MADs sent and received per path. The port's pcap
//! capture shows the path of each MAD as the wire would: one that went over
//! verbs carries the verbs QP's number (a received one's [`RecvMeta::local_qpn`],
//! a sent one's [`Transport::sent_via`]) as its destination or source QP in the
//! BTH/DETH, one through the kernel QP 1 (or 0).

use std::collections::{HashSet, VecDeque};
use std::io;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::kernel::sysfs::Sysfs;
use super::kernel::KernelTransport;
use super::registry::{CaInfo, CaProvider};
use super::verbs::{VerbsConfig, VerbsTransport};
use super::{Caps, PortAttrs, Transport, Waker};
use crate::engine::{AgentSpec, RecvMeta, Transmit};
use crate::types::Qp;
use crate::wire::mad::Packet as Mad;
use crate::wire::MAD_SIZE;
use crate::Result;

/// How many requests received through verbs are remembered for their
/// responses' path; the oldest are forgotten first (a response that late goes
/// through the kernel, as to a stranger).
const VIA_VERBS_KEPT: usize = 4096;

/// MADs per path since the transport opened (shared: read it from a handle
/// taken before the transport went into a port).
#[derive(Debug, Default)]
pub struct PathCounters {
    /// MADs sent through vmad's UD QP.
    pub verbs_sent: AtomicU64,
    /// MADs received on vmad's UD QP.
    pub verbs_received: AtomicU64,
    /// MADs written to the kernel's umad device.
    pub kernel_sent: AtomicU64,
    /// MADs read from the kernel's umad device.
    pub kernel_received: AtomicU64,
}

impl PathCounters {
    /// (verbs sent, verbs received, kernel sent, kernel received).
    pub fn snapshot(&self) -> (u64, u64, u64, u64) {
        let r = |c: &AtomicU64| c.load(Ordering::Relaxed);
        (
            r(&self.verbs_sent),
            r(&self.verbs_received),
            r(&self.kernel_sent),
            r(&self.kernel_received),
        )
    }
}

/// A request received through verbs: class and TID (all 64 bits, the sender's).
type ReqKey = (u8, u64);

/// A kernel and a verbs transport on one port of a host CA. See the module docs.
pub struct HybridTransport {
    // Drop order: verbs first, it polls the kernel transport's descriptor.
    verbs: VerbsTransport,
    kernel: KernelTransport,
    attrs: PortAttrs,
    verbs_pkey_index: u16,
    via_verbs: HashSet<ReqKey>,
    via_verbs_order: VecDeque<ReqKey>,
    /// Requests seen in the current verbs burst (kept to reuse its allocation).
    burst_requests: Vec<ReqKey>,
    counters: Arc<PathCounters>,
    /// The last MAD `transmit` took went over verbs (see `sent_via`).
    last_via_verbs: bool,
    /// A MAD for verbs taken while every verbs slot was in flight (see `split`).
    held: Option<Held>,
}

impl core::fmt::Debug for HybridTransport {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("HybridTransport")
            .field("kernel", &self.kernel)
            .field("verbs", &self.verbs)
            .finish_non_exhaustive()
    }
}

impl HybridTransport {
    /// Open `port` of CA `ca` (0: the first active port) through the kernel, and a
    /// verbs UD QP on the same port.
    ///
    /// # Errors
    /// What [`KernelTransport::open`] and [`VerbsTransport::open`] return; EPERM
    /// ([`Error::NotPermitted`](crate::Error::NotPermitted)) where the GSI Q_Key is not permitted.
    pub fn open(sysfs: &Sysfs, ca: &str, port: u8) -> Result<HybridTransport> {
        let kernel = KernelTransport::open(sysfs, ca, port)?;
        let config = VerbsConfig {
            device: Some(ca.to_owned()),
            port: Some(kernel.attrs().port_num),
            ..VerbsConfig::default()
        };
        let verbs_pkey_index = config.pkey_index;
        let mut verbs = VerbsTransport::open(config)?;
        verbs.also_wake_on(kernel.readiness_fd())?;
        vmad_debug!(target: "vmad::transport", ca = ca, qpn = verbs.qpn(), "hybrid transport open");
        Ok(HybridTransport {
            attrs: kernel.attrs().clone(),
            verbs,
            kernel,
            verbs_pkey_index,
            via_verbs: HashSet::new(),
            via_verbs_order: VecDeque::new(),
            burst_requests: Vec::new(),
            last_via_verbs: false,
            held: None,
            counters: Arc::default(),
        })
    }

    /// The per-path counters (a handle that stays valid after the transport moved).
    pub fn counters(&self) -> Arc<PathCounters> {
        self.counters.clone()
    }

    /// The verbs QP number (where vmad peers address this port's client side).
    pub fn verbs_qpn(&self) -> u32 {
        self.verbs.qpn()
    }

    fn remember_verbs_request(&mut self, key: ReqKey) {
        if !self.via_verbs.insert(key) {
            return;
        }
        self.via_verbs_order.push_back(key);
        if self.via_verbs_order.len() > VIA_VERBS_KEPT {
            if let Some(old) = self.via_verbs_order.pop_front() {
                self.via_verbs.remove(&old);
            }
        }
    }
}

/// A MAD and where it goes, out of the engine and not sent yet.
type Held = ([u8; MAD_SIZE], Transmit);

/// What the verbs path did with one `transmit`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum VerbsTook {
    /// Every send slot in flight: `fill` was not called.
    NoSlot,
    /// `fill` gave nothing (or a MAD for the kernel).
    Nothing,
    /// Queued for the device.
    Queued,
    /// Taken and dropped: the verbs QP cannot address it ([`VerbsStats::unroutable`](super::verbs::VerbsStats)).
    Dropped,
}

/// The two paths as [`split`] uses them (a trait so that tests can stand in for the devices).
trait Paths {
    fn verbs(
        &mut self,
        fill: &mut dyn FnMut(&mut [u8; MAD_SIZE]) -> Option<Transmit>,
    ) -> io::Result<VerbsTook>;
    /// Whether the kernel took the MAD.
    fn kernel(&mut self, mad: &[u8; MAD_SIZE], t: Transmit) -> io::Result<bool>;
}

struct Devices<'a> {
    verbs: &'a mut VerbsTransport,
    kernel: &'a mut KernelTransport,
}

impl Paths for Devices<'_> {
    fn verbs(
        &mut self,
        fill: &mut dyn FnMut(&mut [u8; MAD_SIZE]) -> Option<Transmit>,
    ) -> io::Result<VerbsTook> {
        let dropped = self.verbs.unroutable();
        let mut asked = false;
        let took = self.verbs.transmit(&mut |slot| {
            asked = true;
            fill(slot)
        })?;
        Ok(match (asked, took) {
            (false, _) => VerbsTook::NoSlot,
            (true, false) => VerbsTook::Nothing,
            (true, true) if self.verbs.unroutable() != dropped => VerbsTook::Dropped,
            (true, true) => VerbsTook::Queued,
        })
    }

    fn kernel(&mut self, mad: &[u8; MAD_SIZE], t: Transmit) -> io::Result<bool> {
        let mut once = Some(t);
        self.kernel.transmit(&mut |slot| {
            let t = once.take()?;
            *slot = *mad;
            Some(t)
        })
    }
}

/// Where one `transmit` put a MAD.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Sent {
    /// None taken.
    Nothing,
    /// Queued on verbs.
    Verbs,
    /// Taken for verbs, held until a slot frees.
    Held,
    /// Taken for verbs and dropped there (not sent).
    Dropped,
    /// Written to the kernel.
    Kernel,
}

/// One MAD out of `held` or the engine (`fill`), down the path `to_verbs` picks. A held
/// MAD goes first; while it waits for a slot nothing else is taken (one is held at
/// most, and a MAD for verbs could come next). With no verbs slot free the engine
/// writes into a local buffer, so a MAD for the kernel is not held up by verbs.
fn split(
    paths: &mut dyn Paths,
    held: &mut Option<Held>,
    to_verbs: &dyn Fn(&[u8; MAD_SIZE], &Transmit) -> bool,
    fill: &mut dyn FnMut(&mut [u8; MAD_SIZE]) -> Option<Transmit>,
) -> io::Result<Sent> {
    let verbs_sent = |took| match took {
        VerbsTook::Dropped => Sent::Dropped,
        _ => Sent::Verbs,
    };
    if held.is_some() {
        let took = paths.verbs(&mut |slot| {
            let (mad, t) = held.take()?;
            *slot = mad;
            Some(t)
        })?;
        return Ok(match took {
            VerbsTook::NoSlot | VerbsTook::Nothing => Sent::Nothing,
            took => verbs_sent(took),
        });
    }
    let mut for_kernel: Option<Held> = None;
    let took = paths.verbs(&mut |slot| {
        let t = fill(slot)?;
        if to_verbs(slot, &t) {
            Some(t)
        } else {
            for_kernel = Some((*slot, t));
            None
        }
    })?;
    match took {
        VerbsTook::Queued | VerbsTook::Dropped => return Ok(verbs_sent(took)),
        VerbsTook::Nothing => {}
        VerbsTook::NoSlot => {
            let mut mad = [0u8; MAD_SIZE];
            let Some(t) = fill(&mut mad) else {
                return Ok(Sent::Nothing);
            };
            if to_verbs(&mad, &t) {
                *held = Some((mad, t));
                return Ok(Sent::Held);
            }
            for_kernel = Some((mad, t));
        }
    }
    let Some((mad, t)) = for_kernel else {
        return Ok(Sent::Nothing);
    };
    Ok(match paths.kernel(&mad, t)? {
        true => Sent::Kernel,
        false => Sent::Nothing,
    })
}

/// Whether a MAD the engine wrote goes through verbs (see the table in the module docs).
fn goes_via_verbs(
    via_verbs: &HashSet<ReqKey>,
    verbs_pkey_index: u16,
    mad: &[u8; MAD_SIZE],
    t: &Transmit,
) -> bool {
    if t.qp == Qp::Smi {
        return false;
    }
    let m = Mad::new_unchecked(&mad[..]);
    if m.is_response() {
        via_verbs.contains(&(u8::from(m.mgmt_class()), m.tid()))
    } else {
        t.dest.pkey_index == verbs_pkey_index
    }
}

impl Transport for HybridTransport {
    fn caps(&self) -> Caps {
        self.kernel.caps()
    }

    fn attrs(&self) -> &PortAttrs {
        &self.attrs
    }

    fn recv_burst(
        &mut self,
        max: usize,
        sink: &mut dyn FnMut(RecvMeta, &[u8]),
    ) -> io::Result<usize> {
        let mut requests = std::mem::take(&mut self.burst_requests);
        let from_verbs = self.verbs.recv_burst(max, &mut |meta, mad| {
            let m = Mad::new_unchecked(mad);
            if !m.is_response() {
                requests.push((u8::from(m.mgmt_class()), m.tid()));
            }
            sink(meta, mad);
        })?;
        for key in requests.drain(..) {
            self.remember_verbs_request(key);
        }
        self.burst_requests = requests;
        // With the ready descriptor the umad device is read only when the verbs turn saw
        // it readable (else every turn would be a read that finds nothing), or while the
        // kernel holds sends back (its receive burst retries them).
        let from_kernel = if self.verbs.extra_readable() || self.kernel.holds_sends() {
            self.kernel
                .recv_burst(max.saturating_sub(from_verbs), sink)?
        } else {
            0
        };
        let c = &self.counters;
        c.verbs_received
            .fetch_add(from_verbs as u64, Ordering::Relaxed);
        c.kernel_received
            .fetch_add(from_kernel as u64, Ordering::Relaxed);
        Ok(from_verbs + from_kernel)
    }

    fn transmit(
        &mut self,
        fill: &mut dyn FnMut(&mut [u8; MAD_SIZE]) -> Option<Transmit>,
    ) -> io::Result<bool> {
        let (via_verbs, pkey_index) = (&self.via_verbs, self.verbs_pkey_index);
        let mut paths = Devices {
            verbs: &mut self.verbs,
            kernel: &mut self.kernel,
        };
        let to_verbs =
            |mad: &[u8; MAD_SIZE], t: &Transmit| goes_via_verbs(via_verbs, pkey_index, mad, t);
        let sent = split(&mut paths, &mut self.held, &to_verbs, fill)?;
        // A held MAD will leave from the verbs QP: the capture says so when it is taken.
        self.last_via_verbs = matches!(sent, Sent::Verbs | Sent::Held);
        let c = &self.counters;
        match sent {
            Sent::Nothing => return Ok(false),
            // Counted when queued, not when held; a dropped one was not sent.
            Sent::Verbs => c.verbs_sent.fetch_add(1, Ordering::Relaxed),
            Sent::Kernel => c.kernel_sent.fetch_add(1, Ordering::Relaxed),
            Sent::Held | Sent::Dropped => 0,
        };
        Ok(true)
    }

    fn wait(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        // A retry the kernel holds has no descriptor that says when it can go. (A MAD
        // held for a verbs slot has: the verbs wait ends at the next send completion.)
        let timeout = match self.kernel.holds_sends() {
            true => Some(timeout.map_or(Duration::from_millis(1), |t| {
                t.min(Duration::from_millis(1))
            })),
            false => timeout,
        };
        self.verbs.wait(timeout)
    }

    fn waker(&self) -> Option<Waker> {
        self.verbs.waker()
    }

    fn ready_fd(&self) -> Option<std::os::fd::BorrowedFd<'_>> {
        // The verbs transport's epoll fd, which watches the umad device too.
        self.verbs.ready_fd()
    }

    fn idle_limit(&self) -> Option<Duration> {
        // The kernel's 1 ms while it holds sends back, else the verbs liveness check.
        match (self.kernel.idle_limit(), self.verbs.idle_limit()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn rx_held(&self) -> bool {
        self.verbs.rx_held()
    }

    fn sent_via(&self) -> Option<u32> {
        self.last_via_verbs.then(|| self.verbs.qpn())
    }

    fn busy_poll(&self) -> bool {
        // The client path is a busy-polled CQ: spinning gets its answers sooner.
        true
    }

    fn attrs_changed(&mut self) -> bool {
        if !self.verbs.attrs_changed() {
            return false;
        }
        // The verbs transport re-read the port after an event; the names stay the kernel's.
        let fresh = self.verbs.attrs();
        self.attrs = PortAttrs {
            ca_name: self.attrs.ca_name.clone(),
            port_num: self.attrs.port_num,
            ..fresh.clone()
        };
        true
    }

    fn register_agent(&mut self, spec: &AgentSpec, hi_tid: u32) -> Result<()> {
        self.kernel.register_agent(spec, hi_tid)
    }

    fn unregister_agent(&mut self, hi_tid: u32) {
        self.kernel.unregister_agent(hi_tid);
    }

    fn set_sm(&mut self, on: bool) -> Result<()> {
        self.kernel.set_sm(on)
    }
}

/// The host's CAs with every port opened as a [`HybridTransport`] (described and
/// given their `issm` devices as [`super::kernel::KernelCas`] does).
#[derive(Debug)]
pub struct HybridCas {
    sysfs: Sysfs,
    kernel: super::kernel::KernelCas,
}

impl HybridCas {
    /// The CAs of `sysfs`.
    pub fn new(sysfs: Sysfs) -> HybridCas {
        HybridCas {
            kernel: super::kernel::KernelCas::new(sysfs.clone()),
            sysfs,
        }
    }
}

impl CaProvider for HybridCas {
    fn ca_info(&self, name: &str) -> Option<CaInfo> {
        self.kernel.ca_info(name)
    }

    fn open(&self, name: &str, port: u8) -> Result<Box<dyn Transport>> {
        Ok(Box::new(HybridTransport::open(&self.sysfs, name, port)?))
    }

    fn issm_path(&self, name: &str, port: u8) -> Result<Option<PathBuf>> {
        self.kernel.issm_path(name, port)
    }
}

/// Register every host CA with the CA registry, all under [`HybridCas`].
///
/// # Errors
/// ENODEV if the host has no CA; EADDRINUSE if a name is already registered.
pub fn register_host_cas() -> Result<Vec<String>> {
    super::kernel::register_host_cas_under(Arc::new(HybridCas::new(Sysfs::host())))
}

/// Whether this process may set the GSI Q_Key (0x80010000) on its own UD QP on
/// `ca`, and why: `Ok` with the reason, or the kernel's refusal.
///
/// With CAP_NET_RAW (effective) it may. Without it the kernel may still allow it
/// (`rdma system set privileged-qkey on`, Linux 6.7 and later): that setting lives
/// in RDMA netlink, which vmad does not speak, so vmad asks the kernel itself. It
/// opens a throw-away UD QP on `ca` and sets the Q_Key, the same `ibv_modify_qp`
/// the hybrid transport makes; the kernel's answer covers whatever policy it
/// applies.
///
/// # Errors
/// [`Error::NotPermitted`](crate::Error::NotPermitted) (EPERM) when the kernel refuses the Q_Key; any other
/// error of [`VerbsTransport::open`] when the probe could not ask (no such device,
/// no usable GID, RLIMIT_MEMLOCK).
pub fn gsi_qkey_permission(ca: &str) -> Result<&'static str> {
    if has_cap_net_raw() {
        return Ok("this process has CAP_NET_RAW");
    }
    let probe = VerbsConfig {
        device: Some(ca.to_owned()),
        recv_slots: 1,
        send_slots: 1,
        poll_batch: 1,
        repost_batch: 1,
        send_batch: 1,
        ..VerbsConfig::default()
    };
    VerbsTransport::open(probe)
        .map(|_| "the kernel allowed it on a probe QP without CAP_NET_RAW (privileged-qkey on)")
}

/// Whether CAP_NET_RAW is in this process's effective set.
fn has_cap_net_raw() -> bool {
    const CAP_NET_RAW: u32 = 13;
    let Ok(status) = std::fs::read_to_string("/proc/self/status") else {
        return false;
    };
    status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        .is_some_and(|caps| caps & (1 << CAP_NET_RAW) != 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::MadAddr;

    fn tx(qp: Qp, pkey_index: u16) -> Transmit {
        Transmit {
            qp,
            dest: MadAddr {
                qpn: 1,
                pkey_index,
                ..MadAddr::default()
            },
            len: MAD_SIZE,
            timeout_ms: 0,
        }
    }

    fn mad(class: u8, method: u8, tid: u64) -> [u8; MAD_SIZE] {
        let mut m = [0u8; MAD_SIZE];
        m[0] = 1;
        m[1] = class;
        m[2] = 1;
        m[3] = method;
        m[8..16].copy_from_slice(&tid.to_be_bytes());
        m
    }

    /// The path table of the module docs, row by row.
    #[test]
    fn each_mad_takes_its_path() {
        let mut via = HashSet::new();
        via.insert((0x09, 0x1234_0000_0007));
        let go = |m: [u8; MAD_SIZE], t: Transmit| goes_via_verbs(&via, 0, &m, &t);
        // Requests: verbs, except SMPs and another P_Key index.
        assert!(go(mad(0x09, 0x01, 5), tx(Qp::Gsi, 0)));
        assert!(!go(mad(0x81, 0x01, 5), tx(Qp::Smi, 0)));
        assert!(!go(mad(0x09, 0x01, 5), tx(Qp::Gsi, 1)));
        // Responses: verbs only for a request that came through verbs (class and TID).
        assert!(go(mad(0x09, 0x81, 0x1234_0000_0007), tx(Qp::Gsi, 0)));
        assert!(!go(mad(0x03, 0x81, 0x1234_0000_0007), tx(Qp::Gsi, 0)));
        assert!(!go(mad(0x09, 0x81, 0x1234_0000_0008), tx(Qp::Gsi, 0)));
        // TrapRepress is a response: it answers a trap that came through the kernel.
        assert!(!go(mad(0x03, 0x07, 9), tx(Qp::Gsi, 0)));
    }

    /// Stands in for the devices: `free` verbs slots (a send uses one for good), MADs
    /// with a TID in `unroutable` dropped by verbs; the TIDs each path took.
    #[derive(Default)]
    struct FakePaths {
        free: usize,
        unroutable: Vec<u64>,
        verbs: Vec<u64>,
        kernel: Vec<u64>,
    }

    fn tid(mad: &[u8; MAD_SIZE]) -> u64 {
        Mad::new_unchecked(&mad[..]).tid()
    }

    impl Paths for FakePaths {
        fn verbs(
            &mut self,
            fill: &mut dyn FnMut(&mut [u8; MAD_SIZE]) -> Option<Transmit>,
        ) -> io::Result<VerbsTook> {
            if self.free == 0 {
                return Ok(VerbsTook::NoSlot);
            }
            let mut slot = [0xa5; MAD_SIZE];
            if fill(&mut slot).is_none() {
                return Ok(VerbsTook::Nothing);
            }
            if self.unroutable.contains(&tid(&slot)) {
                return Ok(VerbsTook::Dropped);
            }
            self.free -= 1;
            self.verbs.push(tid(&slot));
            Ok(VerbsTook::Queued)
        }

        fn kernel(&mut self, mad: &[u8; MAD_SIZE], _t: Transmit) -> io::Result<bool> {
            self.kernel.push(tid(mad));
            Ok(true)
        }
    }

    /// An engine queue of (TID, to verbs) MADs: requests, on P_Key index 0 (verbs) or 1 (kernel).
    fn engine(queue: &[(u64, bool)]) -> VecDeque<([u8; MAD_SIZE], Transmit)> {
        queue
            .iter()
            .map(|&(tid, verbs)| (mad(0x09, 0x01, tid), tx(Qp::Gsi, u16::from(!verbs))))
            .collect()
    }

    fn turn(
        paths: &mut FakePaths,
        held: &mut Option<Held>,
        queue: &mut VecDeque<([u8; MAD_SIZE], Transmit)>,
    ) -> Sent {
        let via = HashSet::new();
        let to_verbs = |m: &[u8; MAD_SIZE], t: &Transmit| goes_via_verbs(&via, 0, m, t);
        split(paths, held, &to_verbs, &mut |slot| {
            let (m, t) = queue.pop_front()?;
            *slot = m;
            Some(t)
        })
        .unwrap()
    }

    /// The bug: with every verbs slot in flight the engine was not even asked, so a
    /// MAD for the kernel waited behind verbs slots. Now it goes; a MAD for verbs is
    /// held and leaves first when a slot frees; each path keeps its order.
    #[test]
    fn the_kernel_path_is_not_held_up_by_full_verbs_slots() {
        let mut paths = FakePaths::default();
        let mut held = None;
        let mut q = engine(&[(1, false), (2, true), (3, false), (4, true)]);
        assert_eq!(turn(&mut paths, &mut held, &mut q), Sent::Kernel);
        assert_eq!(turn(&mut paths, &mut held, &mut q), Sent::Held);
        // One held at most: nothing more is taken while it waits.
        assert_eq!(turn(&mut paths, &mut held, &mut q), Sent::Nothing);
        assert_eq!((paths.kernel.clone(), q.len()), (vec![1], 2));
        paths.free = 1;
        assert_eq!(turn(&mut paths, &mut held, &mut q), Sent::Verbs);
        assert!(held.is_none());
        assert_eq!(turn(&mut paths, &mut held, &mut q), Sent::Kernel);
        assert_eq!(turn(&mut paths, &mut held, &mut q), Sent::Held);
        paths.free = 5;
        assert_eq!(turn(&mut paths, &mut held, &mut q), Sent::Verbs);
        assert_eq!(turn(&mut paths, &mut held, &mut q), Sent::Nothing);
        assert_eq!(paths.verbs, vec![2, 4]);
        assert_eq!(paths.kernel, vec![1, 3]);
    }

    /// With free slots, MADs go straight down their paths; a MAD verbs cannot address
    /// is reported as dropped, not sent (it was counted in `verbs_sent`).
    #[test]
    fn a_mad_verbs_drops_is_not_sent() {
        let mut paths = FakePaths {
            free: 8,
            unroutable: vec![2],
            ..FakePaths::default()
        };
        let mut held = None;
        let mut q = engine(&[(1, true), (2, true), (3, false)]);
        assert_eq!(turn(&mut paths, &mut held, &mut q), Sent::Verbs);
        assert_eq!(turn(&mut paths, &mut held, &mut q), Sent::Dropped);
        assert_eq!(turn(&mut paths, &mut held, &mut q), Sent::Kernel);
        assert_eq!(turn(&mut paths, &mut held, &mut q), Sent::Nothing);
        assert_eq!((paths.verbs, paths.kernel), (vec![1], vec![3]));
        // A held MAD that turns out unroutable is dropped too, not counted as sent.
        let mut paths = FakePaths {
            unroutable: vec![5],
            ..FakePaths::default()
        };
        let mut q = engine(&[(5, true)]);
        assert_eq!(turn(&mut paths, &mut held, &mut q), Sent::Held);
        paths.free = 1;
        assert_eq!(turn(&mut paths, &mut held, &mut q), Sent::Dropped);
        assert!(held.is_none() && paths.verbs.is_empty());
    }

    #[test]
    fn the_capability_is_read_from_proc() {
        // Whatever the answer, it must agree with the status file's CapEff line.
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        let eff = status.lines().find(|l| l.starts_with("CapEff:")).unwrap();
        let bits = u64::from_str_radix(eff[7..].trim(), 16).unwrap();
        assert_eq!(has_cap_net_raw(), bits & (1 << 13) != 0);
    }
}
