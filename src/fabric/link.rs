//! One open CA port of the served fabric and the ibsim clients attached to it.
//!
//! A port is opened once ([`crate::subnet::Fabric::open`]) however many clients sit on
//! it, and driven by the server's loop: it puts the clients' MADs on the fabric and
//! hands what the fabric delivers to the client it is for, as ibsim does: a response
//! by the slot in TID bits 63..48, anything else to the port's SM client.

use std::collections::VecDeque;
use std::io;
use std::os::fd::AsFd;
use std::os::unix::net::UnixDatagram;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nix::poll::{PollFd, PollFlags, PollTimeout};

use crate::engine::{RecvMeta, Transmit};
use crate::transport::ibsim::proto::{Request, PERMISSIVE_LID, REQUEST_LEN};
use crate::transport::sim::SimTransport;
use crate::transport::Transport;
use crate::types::{MadAddr, Qp, GSI_QKEY};
use crate::wire::{mad, rmpp, smp, MAD_SIZE};

/// How long a send waits for a client that does not read before the MAD is dropped
/// (and the client's later MADs are dropped at once until it reads again).
const STALL: Duration = Duration::from_millis(200);

/// The bits of a TID that carry the client's slot (as ibsim's `update_trid`).
pub(crate) const SLOT_SHIFT: u32 = 48;

/// One attached client as the port's thread sees it.
#[derive(Debug)]
pub(crate) struct ClientOut {
    pub(crate) slot: u16,
    /// `<base>:out<slot>`, connected to the client's `<base>:in<id>`.
    pub(crate) sock: UnixDatagram,
    /// Takes the port's unsolicited requests (CONNECT with issm, or SET_ISSM 1).
    pub(crate) issm: AtomicBool,
    /// A send found the client gone: the server frees its slot.
    pub(crate) dead: AtomicBool,
    /// The last send timed out on a full queue.
    stalled: AtomicBool,
    /// MADs handed to the client.
    pub(crate) delivered: AtomicU64,
    /// MADs the client sent.
    pub(crate) sent: AtomicU64,
    /// The most MADs the client is handed (`ctl hold`); later ones wait in `held`,
    /// in order, until the limit is lifted.
    pub(crate) hold: AtomicU64,
    held: Mutex<VecDeque<Box<[u8]>>>,
}

impl ClientOut {
    pub(crate) fn new(slot: u16, sock: UnixDatagram, issm: bool) -> ClientOut {
        ClientOut {
            slot,
            sock,
            issm: AtomicBool::new(issm),
            dead: AtomicBool::new(false),
            stalled: AtomicBool::new(false),
            delivered: AtomicU64::new(0),
            sent: AtomicU64::new(0),
            hold: AtomicU64::new(u64::MAX),
            held: Mutex::default(),
        }
    }

    /// Hand `pkt` to the client, or hold it while the client has had its `hold`.
    /// False when it was lost (see [`ClientOut::send`]).
    pub(crate) fn hand(&self, pkt: &[u8]) -> bool {
        let mut held = super::lock(&self.held);
        // What was held goes first: the client sees its MADs in the fabric's order.
        self.hand_held(&mut held);
        if !held.is_empty()
            || self.delivered.load(Ordering::Relaxed) >= self.hold.load(Ordering::Relaxed)
        {
            held.push_back(pkt.into());
            return true;
        }
        self.send(pkt)
    }

    fn hand_held(&self, held: &mut VecDeque<Box<[u8]>>) {
        while self.delivered.load(Ordering::Relaxed) < self.hold.load(Ordering::Relaxed) {
            let Some(p) = held.pop_front() else { break };
            let _ = self.send(&p);
        }
    }

    /// Set the client's limit (`u64::MAX`: none) and hand out what it now allows.
    pub(crate) fn set_hold(&self, limit: u64) {
        let mut held = super::lock(&self.held);
        self.hold.store(limit, Ordering::Relaxed);
        self.hand_held(&mut held);
    }

    /// Send one datagram; a client whose queue stays full loses it (a MAD lost on the
    /// wire: its sender times out), and one that is gone is marked dead.
    fn send(&self, pkt: &[u8]) -> bool {
        loop {
            match self.sock.send(pkt) {
                Ok(_) => {
                    self.stalled.store(false, Ordering::Relaxed);
                    self.delivered.fetch_add(1, Ordering::Relaxed);
                    return true;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    if self.stalled.load(Ordering::Relaxed) {
                        return false;
                    }
                    let mut fds = [PollFd::new(self.sock.as_fd(), PollFlags::POLLOUT)];
                    let t = PollTimeout::try_from(STALL).unwrap_or(PollTimeout::MAX);
                    match nix::poll::poll(&mut fds, t) {
                        Ok(0) => {
                            self.stalled.store(true, Ordering::Relaxed);
                            return false;
                        }
                        Ok(_) | Err(nix::errno::Errno::EINTR) => {}
                        Err(_) => return false,
                    }
                }
                Err(_) => {
                    self.dead.store(true, Ordering::Relaxed);
                    return false;
                }
            }
        }
    }
}

/// A port opened for its clients. The server's loop drives it: it puts a client's
/// MAD on the fabric from its own thread (the fabric walks it there, SMAs answering
/// on the way), then takes what the port received and hands it out, with no thread
/// of the port's own to wake per MAD (ibsim's loop has none either).
pub(crate) struct PortLink {
    pub(crate) clients: Arc<Mutex<Vec<Arc<ClientOut>>>>,
    /// (TID, slot) of the RMPP transfers the port's clients send (their Data
    /// segments): the ACKs and STOPs that answer them go to that client.
    pub(crate) senders: Arc<Mutex<VecDeque<(u64, u16)>>>,
    t: Mutex<SimTransport>,
}

impl PortLink {
    pub(crate) fn new(t: SimTransport) -> PortLink {
        PortLink {
            clients: Arc::default(),
            senders: Arc::default(),
            t: Mutex::new(t),
        }
    }

    /// Put a client's `sim_request` (TID already rewritten) on the fabric.
    pub(crate) fn send(&self, pkt: &[u8; REQUEST_LEN]) {
        let mut t = lock(&self.t);
        // A MAD the fabric chokes on (a bug there) loses itself, not the server.
        let send = std::panic::AssertUnwindSafe(|| to_fabric(&mut t, pkt));
        let _ = std::panic::catch_unwind(send);
    }

    /// Take or give up the SM role on the port.
    pub(crate) fn set_sm(&self, on: bool) -> crate::Result<()> {
        lock(&self.t).set_sm(on)
    }

    /// Hand what the port received to its clients. True if a client was found gone;
    /// `held` is set when frames wait in the port for a later time (link delays).
    pub(crate) fn drain(&self, held: &mut bool) -> bool {
        let mut t = lock(&self.t);
        if t.queued() == 0 {
            return false;
        }
        // The SM may have moved the port's LID since the last frames.
        let own_lid = t.refresh_attrs().lid;
        let mut lost = false;
        let mut list: Option<Vec<Arc<ClientOut>>> = None;
        loop {
            let mut got = 0;
            let _ = t.recv_burst(64, &mut |meta, m| {
                got += 1;
                let mut mad = [0u8; MAD_SIZE];
                let n = m.len().min(MAD_SIZE);
                mad[..n].copy_from_slice(&m[..n]);
                let list = list.get_or_insert_with(|| lock(&self.clients).clone());
                let Some(to) = route(list, &self.senders, &mad) else {
                    return;
                };
                let pkt = to_client(&meta, &mad, n, own_lid);
                if !to.hand(&pkt[..]) && to.dead.load(Ordering::Relaxed) {
                    lost = true;
                }
            });
            if got < 64 {
                break;
            }
        }
        *held |= t.queued() > 0;
        lost
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The RMPP type of an RMPP-active MAD of an RMPP class; None for any other MAD.
pub(crate) fn rmpp_type(m: &[u8]) -> Option<rmpp::RmppType> {
    let h = mad::Packet::new_checked(m).ok()?;
    let r = rmpp::Packet::new_checked(m).ok()?;
    (h.mgmt_class().is_rmpp_class() && r.rmpp_version() != 0 && r.is_active())
        .then(|| r.rmpp_type())
}

/// How many RMPP transfers per port are remembered for routing their ACKs.
const SENDERS_KEPT: usize = 256;

/// Remember that client `slot` sends an RMPP transfer with `tid` from this port.
pub(crate) fn note_sender(senders: &Mutex<VecDeque<(u64, u16)>>, tid: u64, slot: u16) {
    let mut s = lock(senders);
    if s.contains(&(tid, slot)) {
        return;
    }
    if s.len() == SENDERS_KEPT {
        s.pop_front();
    }
    s.push_back((tid, slot));
}

/// Which client gets a MAD the fabric delivered to the port.
fn route<'a>(
    clients: &'a [Arc<ClientOut>],
    senders: &Mutex<VecDeque<(u64, u16)>>,
    m: &[u8; MAD_SIZE],
) -> Option<&'a Arc<ClientOut>> {
    let h = mad::Packet::new_unchecked(&m[..]);
    let s = smp::Packet::new_unchecked(&m[..]);
    let dr = h.mgmt_class() == mad::MgmtClass::SubnDirectedRoute;
    let issm = || clients.iter().find(|c| c.issm.load(Ordering::Relaxed));
    let by_slot = |slot: u16| clients.iter().find(|c| c.slot == slot);
    if h.method().is_response_bit() || dr && s.is_returning() {
        let control = rmpp_type(&m[..]).is_some_and(|t| t != rmpp::RmppType::Data);
        if control {
            // An ACK or STOP answers a transfer a client here sends (an SA's GetTable
            // answer): its TID carries the requester's slot, not the sender's, and
            // the requester may sit on this very port.
            let tid = h.tid();
            let sender = lock(senders).iter().rev().find(|e| e.0 == tid).map(|e| e.1);
            if let Some(c) = sender.and_then(by_slot) {
                return Some(c);
            }
        }
        // ibsim's `client_by_trid`: the slot the request left with.
        if let Some(c) = by_slot((h.tid() >> SLOT_SHIFT) as u16) {
            return Some(c);
        }
        return if control { issm() } else { None };
    }
    // A request: the port's SM client, as ibsim; where none, the port's only client
    // (ibsim drops it), whose engine answers what it does not serve.
    issm().or_else(|| (clients.len() == 1).then(|| &clients[0]))
}

/// A MAD from the fabric as ibsim hands it to a client.
fn to_client(meta: &RecvMeta, m: &[u8; MAD_SIZE], len: usize, own_lid: u16) -> [u8; REQUEST_LEN] {
    let mut pkt = [0u8; REQUEST_LEN];
    let mut req = Request::new_unchecked(&mut pkt[..]);
    req.mad_mut().copy_from_slice(m);
    let dr = mad::Packet::new_unchecked(&m[..]).mgmt_class() == mad::MgmtClass::SubnDirectedRoute;
    if dr {
        // ibsim walks directed routes whole and hands them over with hop pointer 0.
        smp::Packet::new_unchecked(req.mad_mut()).set_hop_pointer(0);
        req.set_dlid(PERMISSIVE_LID);
        req.set_slid(PERMISSIVE_LID);
    } else {
        req.set_dlid(own_lid);
        req.set_slid(meta.src.lid);
    }
    req.set_dqp(meta.qp.qpn());
    req.set_sqp(meta.src.qpn);
    req.set_status(0);
    req.set_length(len as u64);
    pkt
}

/// A client's `sim_request` put on the fabric from the port.
fn to_fabric(t: &mut SimTransport, pkt: &[u8; REQUEST_LEN]) {
    let req = Request::new_unchecked(&pkt[..]);
    let mut m = [0u8; MAD_SIZE];
    m.copy_from_slice(req.mad());
    let class = mad::Packet::new_unchecked(&m[..]).mgmt_class();
    let smi = class.is_smp();
    if class == mad::MgmtClass::SubnDirectedRoute {
        // ibsim's clients send directed routes with hop pointer 0 (no kernel SMI in
        // between); the fabric takes them as a sender's SMI leaves them.
        let mut s = smp::Packet::new_unchecked(&mut m[..]);
        let step = if s.is_returning() { s.hop_count() } else { 1 };
        s.set_hop_pointer(step);
    }
    let dest = MadAddr {
        qpn: if smi { 0 } else { req.dqp() },
        qkey: GSI_QKEY,
        lid: req.dlid(),
        sl: 0,
        path_bits: 0,
        grh: None,
        pkey_index: 0,
    };
    let qp = if smi { Qp::Smi } else { Qp::Gsi };
    let _ = t.transmit(&mut |buf| {
        *buf = m;
        Some(Transmit {
            qp,
            dest,
            len: MAD_SIZE,
            timeout_ms: 0,
        })
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client(slot: u16, issm: bool) -> Arc<ClientOut> {
        let (a, _b) = UnixDatagram::pair().unwrap();
        Arc::new(ClientOut::new(slot, a, issm))
    }

    fn gmp(method: u8, tid: u64) -> [u8; MAD_SIZE] {
        let mut m = [0u8; MAD_SIZE];
        m[0] = 1;
        m[1] = 0x03; // SubnAdm
        m[2] = 2;
        m[3] = method;
        m[8..16].copy_from_slice(&tid.to_be_bytes());
        m
    }

    fn rmpp(method: u8, tid: u64, rmpp_type: u8) -> [u8; MAD_SIZE] {
        let mut m = gmp(method, tid);
        m[24] = 1; // RMPPVersion
        m[25] = rmpp_type;
        m[26] = 0x01 << 4 | 0x01; // RRespTime, Active
        m
    }

    #[test]
    fn a_held_client_gets_its_limit_then_the_rest_in_order_once_released() {
        let (a, b) = UnixDatagram::pair().unwrap();
        b.set_nonblocking(true).unwrap();
        let c = ClientOut::new(1, a, false);
        c.set_hold(2);
        for i in 0..5u8 {
            assert!(c.hand(&[i]));
        }
        let mut got = Vec::new();
        let mut buf = [0u8; 4];
        while let Ok(n) = b.recv(&mut buf) {
            got.extend_from_slice(&buf[..n]);
        }
        assert_eq!(got, [0, 1]);
        c.set_hold(3);
        assert!(c.hand(&[5]));
        c.set_hold(u64::MAX);
        assert!(c.hand(&[6]));
        while let Ok(n) = b.recv(&mut buf) {
            got.extend_from_slice(&buf[..n]);
        }
        assert_eq!(got, [0, 1, 2, 3, 4, 5, 6]);
    }

    fn slot_of(c: Option<&Arc<ClientOut>>) -> Option<u16> {
        c.map(|c| c.slot)
    }

    #[test]
    fn responses_go_by_the_slot_in_their_tid_requests_to_the_sm_client() {
        let clients = vec![client(3, false), client(7, true)];
        let senders = Mutex::default();
        let tid = |slot: u64| slot << SLOT_SHIFT | 0x42;
        assert_eq!(
            slot_of(route(&clients, &senders, &gmp(0x81, tid(3)))),
            Some(3)
        );
        assert_eq!(
            slot_of(route(&clients, &senders, &gmp(0x81, tid(7)))),
            Some(7)
        );
        // A response for a slot not on this port: nobody.
        assert_eq!(slot_of(route(&clients, &senders, &gmp(0x81, tid(9)))), None);
        // A request: the SM client, whatever its TID says.
        assert_eq!(
            slot_of(route(&clients, &senders, &gmp(0x01, tid(3)))),
            Some(7)
        );
    }

    #[test]
    fn a_request_without_an_sm_client_goes_to_a_sole_client_only() {
        let one = vec![client(4, false)];
        let senders = Mutex::default();
        assert_eq!(slot_of(route(&one, &senders, &gmp(0x01, 1))), Some(4));
        let two = vec![client(4, false), client(5, false)];
        assert_eq!(slot_of(route(&two, &senders, &gmp(0x01, 1))), None);
    }

    #[test]
    fn an_rmpp_ack_goes_to_the_sender_of_the_transfer_not_the_requester() {
        // The SA client (slot 2) answers a GetTable of the requester (slot 5) on the
        // same port: the requester's ACK carries slot 5 in its TID.
        let clients = vec![client(2, false), client(5, false)];
        let senders = Mutex::default();
        let tid = 5 << SLOT_SHIFT | 0x99;
        note_sender(&senders, tid, 2);
        let ack = rmpp(0x92, tid, 2);
        assert_eq!(slot_of(route(&clients, &senders, &ack)), Some(2));
        // The Data segments themselves go to the requester.
        let data = rmpp(0x92, tid, 1);
        assert_eq!(slot_of(route(&clients, &senders, &data)), Some(5));
        // An ABORT of a transfer nobody here sends goes by the slot in its TID.
        let abort = rmpp(0x92, 5 << SLOT_SHIFT | 0x100, 4);
        assert_eq!(slot_of(route(&clients, &senders, &abort)), Some(5));
    }

    #[test]
    fn directed_routes_reach_clients_with_hop_pointer_zero_and_permissive_lids() {
        let mut m = [0u8; MAD_SIZE];
        m[0] = 1;
        m[1] = 0x81;
        m[3] = 0x81;
        m[4] = 0x80; // D bit: returning
        m[6] = 2; // hop pointer
        m[7] = 2; // hop count
        let meta = RecvMeta {
            qp: Qp::Smi,
            src: MadAddr::default(),
            local_qpn: None,
        };
        let pkt = to_client(&meta, &m, MAD_SIZE, 7);
        let r = Request::new_unchecked(&pkt[..]);
        assert_eq!((r.dlid(), r.slid(), r.dqp()), (0xffff, 0xffff, 0));
        assert_eq!(r.mad()[6], 0);
        assert_eq!(r.length(), 256);
    }
}
