//! How frames move through the simulated fabric: LID routing, the
//! directed-route rules of IBA 14.2.2, and link crossings with faults.
//!
//! A frame is walked synchronously, in the sending thread, from node to
//! node until it is delivered into a port's queue, answered by an SMA
//! (whose response is walked back the same way), or dropped. A port's owner's GMPs
//! to another CA port follow the way the walk found for the previous one to the
//! same LID, for as long as nothing on it changed ([`super::shortcut`]).

use core::time::Duration;

use crate::engine::RecvMeta;
use crate::types::{MadAddr, Qp, GSI_QKEY};
use crate::wire::MAD_SIZE;

use super::{access, lock, pma, sma, FabricInner, Link, Node};
use crate::transport::sim::{Pkt, PERMISSIVE};
use crate::wire::mad::{self, Method, MgmtClass};
use crate::wire::smp;
use crate::wire::smp::dr::{Next, Smi, Verdict};
use crate::wire::smp::port_info::PortState;

/// A walk longer than this is a bug or a corrupted header: drop the frame.
const MAX_HOPS: u32 = 512;

/// Transactions of the SA remembered for [`FabricInner::for_sa`].
const SA_SENT_KEPT: usize = 1024;
/// What the SA wants sent.
type SaSends = Vec<(crate::engine::Transmit, Box<[u8; MAD_SIZE]>)>;

/// How a DR SMP reached the node that applies the rules to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Entry {
    /// Sent by the owner of this CA port, whose SMI already applied the
    /// sender's rules (C14-9:1 / C14-13:1), as the kernel does before posting to QP0.
    Wire(u8),
    /// Sent by this node's SMA, rules not yet applied (the port it answers for).
    Local(u8),
    /// LID-routed to this node (the LID-routed part before or after the DR part).
    LidTerminus,
    /// Arrived over a link on this port.
    Port(u8),
}

/// What the DR rules say to do next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum DrAction {
    Forward(u8),
    Handle,
    LidRoute(u16),
    Discard,
}

/// Where a LID-routed frame is at a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Hop {
    /// Sent from this node, by the owner or SMA of this port.
    From(u8),
    /// Arrived over a link on this port.
    In(u8),
}

/// How to treat a frame when it arrives over a link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Lid,
    Dr,
    Neighbour,
}

/// IBA 14.2.2.2 (outgoing, C14-9) and 14.2.2.4 (returning, C14-13), applied at `node`.
/// Updates the hop pointer and return path in `mad`.
fn dr_step(node: &Node, entry: Entry, mad: &mut [u8; MAD_SIZE], dlid: u16) -> DrAction {
    let mut smp = smp::Packet::new_unchecked(&mut mad[..]);
    let (p, n) = (smp.hop_pointer(), smp.hop_count());
    let returning = smp.is_returning();
    if n > smp::MAX_HOPS {
        return DrAction::Discard;
    }
    let own_lid = node.lid(0).max(node.lid(1));
    let lid_routed_part = |lid: u16| lid != PERMISSIVE && dlid != PERMISSIVE && dlid != own_lid;
    match (returning, entry) {
        // The sender's SMI has stepped the pointer (as the engine and the kernel do),
        // without the port check: it did not know its port.
        (false, Entry::Wire(port)) => {
            if n == 0 && p == 1 {
                DrAction::Handle
            } else if n > 0 && p == 1 && lid_routed_part(smp.dr_slid()) {
                // The DR part starts where the LID-routed part ends (DrSLID is the source).
                smp.set_hop_pointer(0);
                DrAction::LidRoute(dlid)
            } else if n > 0 && p == 1 && smp.out_port() == port {
                DrAction::Forward(port)
            } else {
                DrAction::Discard
            }
        }
        (true, Entry::Wire(port)) => {
            if n == 0 && p == 0 {
                DrAction::Handle
            } else if n > 0 && p == n && lid_routed_part(smp.dr_dlid()) {
                // Back along the LID-routed tail to the switch that ended the DR part.
                DrAction::LidRoute(dlid)
            } else if n > 0 && p == n {
                DrAction::Forward(port)
            } else {
                DrAction::Discard
            }
        }
        // Outgoing, sent from here or starting the DR part after a LID-routed part.
        (false, Entry::Local(_) | Entry::LidTerminus) => {
            if entry != Entry::LidTerminus && p == 0 && n > 0 && lid_routed_part(smp.dr_slid()) {
                // C14-4: the SMP is LID-routed to the node where the DR part starts.
                return DrAction::LidRoute(dlid);
            }
            if p == 0 && n > 0 {
                // C14-9:1; a CA's SMA answers through the port it was asked on.
                let port = match entry {
                    Entry::Local(port) if !node.is_switch() => Some(port),
                    _ => None,
                };
                let smi = Smi {
                    switch: node.is_switch(),
                    port,
                };
                match smp.smi_send(smi) {
                    Verdict::Handle => DrAction::Forward(smp.out_port()),
                    Verdict::Discard => DrAction::Discard,
                }
            } else if p == 0 && n == 0 {
                smp.set_hop_pointer(1);
                DrAction::Handle
            } else if p == n + 1 && entry == Entry::LidTerminus {
                DrAction::Handle
            } else {
                DrAction::Discard
            }
        }
        // Returning, sent by the responder, or by the switch ending the LID-routed tail.
        (true, Entry::Local(_) | Entry::LidTerminus) => {
            if n > 0 && p == n + 1 {
                if entry != Entry::LidTerminus && lid_routed_part(smp.dr_dlid()) {
                    // Back along the LID-routed tail to the switch that ended the DR part.
                    return DrAction::LidRoute(dlid);
                }
                // C14-13:1, without the port check: the response leaves where the request came in.
                match smp.smi_send(Smi::END_NODE) {
                    Verdict::Handle => DrAction::Forward(smp.out_port()),
                    Verdict::Discard => DrAction::Discard,
                }
            } else if n > 0 && p == n && entry == Entry::LidTerminus {
                // Sent back along the tail by a port owner that already stepped the pointer.
                DrAction::Forward(smp.out_port())
            } else if n == 0 && p == 1 {
                smp.set_hop_pointer(0);
                DrAction::Handle
            } else if p == 0 && entry == Entry::LidTerminus {
                DrAction::Handle
            } else {
                DrAction::Discard
            }
        }
        // Arrived over a link.
        (_, Entry::Port(in_port)) => {
            if u16::from(p) == u16::from(n) + 1 && (n > 0 || !returning) {
                // Past the end of its path: no sender's SMI puts that on a link.
                return DrAction::Discard;
            }
            let smi = Smi {
                switch: node.is_switch(),
                port: Some(in_port),
            };
            if smp.smi_recv(smi) == Verdict::Discard {
                return DrAction::Discard;
            }
            let next = smp.smi_next();
            if next == Next::Here {
                return DrAction::Handle;
            }
            // The port the switch sends it on is the path's: no port to check.
            if smp.smi_send(Smi { port: None, ..smi }) == Verdict::Discard {
                return DrAction::Discard;
            }
            match (next, smp.segment_end_lid()) {
                (Next::Forward, _) => DrAction::Forward(smp.out_port()),
                (_, PERMISSIVE) => DrAction::Handle,
                (_, lid) => DrAction::LidRoute(lid),
            }
        }
    }
}

/// LID → (node, port), as the SMAs' LIDs stand now: indexed by LID, so the walk of
/// each frame finds its destination with one load instead of a search of a map
/// (the table only grows, to the highest LID ever assigned: at most 48 Ki entries).
#[derive(Debug, Default)]
pub(crate) struct LidTable(Vec<Option<(usize, u8)>>);

impl LidTable {
    pub(crate) fn get(&self, lid: &u16) -> Option<&(usize, u8)> {
        self.0.get(usize::from(*lid))?.as_ref()
    }

    pub(crate) fn insert(&mut self, lid: u16, at: (usize, u8)) {
        let i = usize::from(lid);
        if self.0.len() <= i {
            self.0.resize(i + 1, None);
        }
        self.0[i] = Some(at);
    }

    pub(crate) fn remove(&mut self, lid: &u16) {
        if let Some(slot) = self.0.get_mut(usize::from(*lid)) {
            *slot = None;
        }
    }
}

impl FabricInner {
    /// The owner of `(node, port)` sends `pkt` (a DR SMP with its hop pointer already
    /// stepped by the sender's SMI, as the engine and the kernel do), or an SMA sends a
    /// LID-routed response.
    pub(crate) fn originate(&self, node: usize, port: u8, mut pkt: Pkt, delay: Duration) {
        self.walk_from(node, port, &mut pkt, delay);
    }

    /// [`FabricInner::originate`] of a frame the caller keeps. The walk passes the frame
    /// on by reference: by value, each step was a copy of it.
    pub(crate) fn walk_from(&self, node: usize, port: u8, pkt: &mut Pkt, delay: Duration) {
        if pkt.is_dr_smp() {
            self.dr_walk(node, Entry::Wire(port), pkt, delay);
        } else if pkt.dlid == PERMISSIVE && pkt.class() == MgmtClass::SubnLid && pkt.dqp == 0 {
            // A LID-routed SMP to the permissive LID: whoever is at the other end takes it.
            self.cross(node, port, pkt, delay, Mode::Neighbour);
        } else {
            self.lid_walk(node, Hop::From(port), pkt, delay);
        }
    }

    /// The port a LID-routed frame for `dlid` leaves `node` by: a switch's LFT, or
    /// the port a CA sends on (`from`).
    fn lid_out(&self, node: usize, from: u8, dlid: u16) -> Option<u8> {
        let here = &self.nodes[node];
        if here.is_switch() {
            return here.conf.read().route(dlid);
        }
        Some(from)
    }

    /// LID routing at `node`.
    fn lid_walk(&self, node: usize, at: Hop, pkt: &mut Pkt, delay: Duration) {
        let here = &self.nodes[node];
        let dest = self.lid_owner(pkt.dlid);
        if let Some((_, dest_port)) = dest.filter(|d| d.0 == node) {
            if pkt.is_dr_smp() {
                self.dr_walk(node, Entry::LidTerminus, pkt, delay);
            } else {
                let port = match at {
                    Hop::In(p) if !here.is_switch() => p,
                    _ => dest_port,
                };
                self.handle(node, port, pkt, delay);
            }
            return;
        }
        let from = match at {
            Hop::In(_) if !here.is_switch() => return, // CAs do not forward.
            Hop::In(p) | Hop::From(p) => p,
        };
        let Some(out) = self.lid_out(node, from, pkt.dlid).filter(|&o| o != 0) else {
            // No route: a switch discards it, as a real one counts it.
            if here.is_switch() {
                here.traffic[usize::from(from)].discard();
            }
            return;
        };
        if matches!(at, Hop::From(_)) && !here.is_switch() && !pkt.spoofed {
            // The sending CA's LID is the source.
            pkt.slid = here.lid(out);
        }
        self.cross(node, out, pkt, delay, Mode::Lid);
    }

    fn dr_walk(&self, node: usize, entry: Entry, pkt: &mut Pkt, delay: Duration) {
        let here = &self.nodes[node];
        match dr_step(here, entry, &mut pkt.mad, pkt.dlid) {
            DrAction::Discard => {}
            DrAction::Handle => {
                let port = match entry {
                    Entry::Wire(p) | Entry::Local(p) | Entry::Port(p) => p,
                    Entry::LidTerminus => self.lid_owner(pkt.dlid).map_or(0, |(_, p)| p),
                };
                self.handle(node, port, pkt, delay);
            }
            DrAction::Forward(out) => {
                pkt.slid = PERMISSIVE;
                pkt.dlid = PERMISSIVE;
                self.cross(node, out, pkt, delay, Mode::Dr);
            }
            DrAction::LidRoute(lid) => {
                pkt.slid = here.lid(0).max(here.lid(1));
                pkt.dlid = lid;
                // Leave through the routing table, as any LID-routed frame from here.
                let Some((dest, _)) = self.lid_owner(lid) else {
                    return;
                };
                let from = match entry {
                    Entry::Wire(p) | Entry::Local(p) | Entry::Port(p) => p,
                    Entry::LidTerminus => 0,
                };
                if dest == node {
                    self.dr_walk(node, Entry::LidTerminus, pkt, delay);
                } else if let Some(out) = self.lid_out(node, from, lid).filter(|&o| o != 0) {
                    self.cross(node, out, pkt, delay, Mode::Lid);
                }
            }
        }
    }

    /// Cross the link on `(node, out)`, applying its faults, and arrive at the far end.
    fn cross(&self, node: usize, out: u8, pkt: &mut Pkt, delay: Duration, mode: Mode) {
        let here = &self.nodes[node];
        if out == 0 || out > here.num_ports {
            return;
        }
        let Some(link_index) = here.links[usize::from(out)] else {
            return;
        };
        pkt.hops += 1;
        if pkt.hops > MAX_HOPS {
            return;
        }
        let link: &Link = &self.links[link_index];
        if !link.up.load(std::sync::atomic::Ordering::Acquire) {
            return; // A link that is down carries nothing.
        }
        let (peer, in_port) = link.peer(node, out);
        // Only SMPs cross a link before the SM has brought both ends up (IBA 7.2: Init
        // passes SMPs only, Armed receives others but does not send them).
        if pkt.dqp != 0
            && !(self.port_state(node, out) == PortState::Active
                && self.port_state(peer, in_port) >= PortState::Armed)
        {
            here.traffic[usize::from(out)].discard();
            return;
        }
        here.traffic[usize::from(out)].sent(pkt.len);
        let verdict = lock(&link.faults).judge(pkt.len, !pkt.duplicate);
        if verdict.lose {
            // The receiver sees a packet it cannot accept.
            self.nodes[peer].traffic[usize::from(in_port)].rcv_error();
            return;
        }
        self.nodes[peer].traffic[usize::from(in_port)].received(pkt.len);
        if let Some((pos, mask)) = verdict.corrupt {
            pkt.mad[pos] ^= mask;
        }
        let delay = delay + verdict.delay;
        if verdict.duplicate {
            let mut copy = Pkt {
                duplicate: true,
                ..pkt.clone()
            };
            self.arrive(peer, in_port, &mut copy, delay, mode);
        }
        self.arrive(peer, in_port, pkt, delay, mode);
    }

    fn port_state(&self, node: usize, port: u8) -> PortState {
        let conf = self.nodes[node].conf.read();
        conf.ports
            .get(usize::from(port))
            .map_or(PortState::Down, |p| p.state)
    }

    fn arrive(&self, node: usize, in_port: u8, pkt: &mut Pkt, delay: Duration, mode: Mode) {
        match mode {
            Mode::Lid => self.lid_walk(node, Hop::In(in_port), pkt, delay),
            Mode::Dr => self.dr_walk(node, Entry::Port(in_port), pkt, delay),
            Mode::Neighbour => self.handle(node, in_port, pkt, delay),
        }
    }

    /// The frame has reached its node: the SMA answers, or the port's owner gets it.
    fn handle(&self, node: usize, port: u8, pkt: &mut Pkt, delay: Duration) {
        if self.admit(node, port, pkt) {
            self.handle_admitted(node, port, pkt, delay);
        }
    }

    /// [`FabricInner::handle`] once the port's access checks have let the frame in.
    pub(super) fn handle_admitted(&self, node: usize, port: u8, pkt: &mut Pkt, delay: Duration) {
        let here = &self.nodes[node];
        let is_smp = pkt.class().is_smp() && pkt.dqp == 0;
        let is_request = pkt.is_request();
        let out = if here.is_switch() { 0 } else { port };
        if is_smp && !is_request && self.sm.catch(node, port, pkt) {
            return;
        }
        if is_smp
            && pkt.header().method() == Method::Trap
            && self.sm.master_seat() == Some((node, port))
        {
            self.trap_to_sm(node, port, pkt, delay);
            return;
        }
        if pkt.dqp == 1 && is_request && pkt.class() == MgmtClass::Perf {
            if let Some(resp) = pma::answer(self, node, port, pkt) {
                self.respond(node, out, resp, delay);
                return;
            }
        }
        if self.sm.master_seat() == Some((node, port)) && self.for_sa(node, port, pkt) {
            let sa = super::read(&self.sa).clone();
            self.serve_sa(sa.as_ref(), node, port, pkt, delay);
            return;
        }
        if is_smp && is_request {
            match sma::answer(self, node, port, pkt) {
                sma::Answer::Reply(resp) => {
                    self.respond(node, out, *resp, delay);
                    return;
                }
                sma::Answer::Discard => return,
                sma::Answer::NotMine => {}
            }
        }
        if here.is_switch() {
            return; // No GSI on simulated switches; no SM behind port 0.
        }
        let is_request = pkt.is_request();
        if !self.deliver(node, port, pkt, delay) && is_request {
            if let Some(resp) = sma::unclaimed(self, node, port, pkt) {
                self.respond(node, out, resp, delay);
            }
        }
    }

    /// The built-in SM takes a trap: TrapRepress back to the sender (IBA 14.2.5.1),
    /// then the Notice to the SA, which reports it to its subscribers.
    fn trap_to_sm(&self, node: usize, port: u8, pkt: &Pkt, delay: Duration) {
        let mut repress = sma::respond(self, node, port, pkt, 0, &[0; smp::DATA_LEN]);
        mad::Packet::new_unchecked(&mut repress.mad[..]).set_method(Method::TrapRepress);
        smp::Packet::new_unchecked(&mut repress.mad[..])
            .data_mut()
            .copy_from_slice(pkt.smp_view().data());
        self.respond(node, port, repress, delay);
        let sa = super::read(&self.sa).clone();
        let db = self.subnet_db();
        let sends = sa.trap(pkt.smp_view().data(), &db);
        self.send_from_sm(node, port, sends, delay);
    }

    /// Whether a MAD at the master SM's port is the SA's, as the kernel's MAD layer
    /// would tell an SA agent's traffic from a client's on the same port: a new
    /// request (not an RMPP ACK, STOP or ABORT, which answer someone's transfer) is;
    /// anything else only if it answers a MAD the SA sent (its TID, from that peer).
    /// A request for a method an SA-class agent of the port's owner serves is the
    /// owner's (an application serving the SA itself on the SM's port).
    fn for_sa(&self, node: usize, port: u8, pkt: &Pkt) -> bool {
        if pkt.dqp != 1 || pkt.class() != MgmtClass::SubnAdm || pkt.from_sa {
            return false;
        }
        let rmpp = crate::wire::rmpp::Packet::new_unchecked(&pkt.mad[..]);
        let control = rmpp.is_active() && rmpp.rmpp_type() != crate::wire::rmpp::RmppType::Data;
        let method = pkt.header().method();
        if !method.is_response_bit() && !control {
            let method = usize::from(u8::from(method));
            let served_here = lock(&self.sa_local).iter().any(|&(n, p, _, mask)| {
                n == node && p == port && mask[method / 64] & (1 << (method % 64)) != 0
            });
            return !served_here;
        }
        let tid = pkt.header().tid();
        lock(&self.sa_sent).contains(&(tid, pkt.slid))
    }

    /// Hand an SA MAD that reached the master SM's port to the in-fabric SA, and send
    /// its answers from that port's QP1.
    fn serve_sa(&self, sa: &dyn super::SaPort, node: usize, port: u8, pkt: &Pkt, delay: Duration) {
        let meta = RecvMeta {
            qp: Qp::Gsi,
            src: MadAddr {
                qpn: pkt.sqp,
                qkey: pkt.qkey,
                lid: pkt.slid,
                sl: pkt.sl,
                path_bits: 0,
                grh: pkt.grh,
                pkey_index: pkt.pkey_index,
            },
            local_qpn: None,
        };
        let db = self.subnet_db();
        let sends = sa.exchange(meta, &pkt.mad[..pkt.len], &db);
        self.send_from_sm(node, port, sends, delay);
    }

    /// Send the SA's MADs from the SM's port QP1.
    fn send_from_sm(&self, node: usize, port: u8, sends: SaSends, delay: Duration) {
        let here = &self.nodes[node];
        for (tx, mad) in sends {
            {
                // Remember what may be answered (ACKs of a GetTable, ReportResps).
                let tid = mad::Packet::new_unchecked(&mad[..]).tid();
                let mut sent = lock(&self.sa_sent);
                if !sent.contains(&(tid, tx.dest.lid)) {
                    if sent.len() == SA_SENT_KEPT {
                        sent.pop_front();
                    }
                    sent.push_back((tid, tx.dest.lid));
                }
            }
            let pkey = {
                let conf = here.conf.read();
                let table = &conf.ports[here.mgmt_port(port)].pkeys;
                table
                    .get(usize::from(tx.dest.pkey_index))
                    .or(table.first())
                    .copied()
            };
            let resp = Pkt {
                mad: *mad,
                len: tx.len.min(MAD_SIZE),
                slid: here.lid(port),
                dlid: tx.dest.lid,
                sqp: 1,
                dqp: tx.dest.qpn,
                sl: tx.dest.sl,
                pkey_index: tx.dest.pkey_index,
                pkey: pkey.unwrap_or(crate::types::DEFAULT_PKEY),
                qkey: GSI_QKEY,
                spoofed: false,
                grh: None,
                hops: 0,
                duplicate: false,
                from_sa: true,
            };
            self.originate(node, port, resp, delay);
        }
    }

    /// The receiving port's checks, as its HCA makes them before any software sees
    /// the frame: on QP1, the GSI Q_Key and a P_Key its table accepts (IBA 9.6.1.1,
    /// 10.9.3); refused frames are counted. Records the accepting P_Key index.
    /// QP0 takes any Q_Key and P_Key (SMPs are P_Key-exempt, IBA 10.9.2).
    fn admit(&self, node: usize, port: u8, pkt: &mut Pkt) -> bool {
        let here = &self.nodes[node];
        let index = {
            let conf = here.conf.read();
            access::pkey_index(&conf.ports[here.mgmt_port(port)].pkeys, pkt.pkey)
        };
        pkt.pkey_index = index.unwrap_or(0);
        if pkt.dqp != 1 || here.is_switch() {
            return true;
        }
        if pkt.qkey != GSI_QKEY {
            here.count(port, |c| c.qkey_violations += 1);
            return false;
        }
        if index.is_none() {
            here.count(port, |c| c.pkey_violations += 1);
            return false;
        }
        true
    }

    /// Send a response made at `node` (by its SMA, or for its closed port).
    fn respond(&self, node: usize, out: u8, resp: Pkt, delay: Duration) {
        if resp.is_dr_smp() {
            self.dr_walk(node, Entry::Local(out), &mut { resp }, delay);
        } else {
            self.originate(node, out, resp, delay);
        }
    }

    /// Queue the frame for the owner of `(node, port)`; false when nobody has the
    /// port open (frames for QPs other than 0 and 1 are dropped either way, and so
    /// are frames the port's full receive queue has no room for).
    fn deliver(&self, node: usize, port: u8, pkt: &Pkt, delay: Duration) -> bool {
        let qp = match pkt.dqp {
            0 => Qp::Smi,
            1 => Qp::Gsi,
            _ => return true,
        };
        let endpoints = &self.nodes[node].endpoints;
        let Some(slot) = endpoints.get(usize::from(port)) else {
            return true;
        };
        let pushed = match lock(slot).as_ref() {
            Some(queue) => queue.push(qp, pkt, delay, &*self.clock),
            None => return false,
        };
        // A full queue drops the frame, counted, and the sender goes on: a slow
        // reader never holds up the thread that walks the frame.
        match pushed {
            Ok(()) => {
                if let Some(hook) = self.on_arrival.get() {
                    (hook.0)(node, port);
                }
            }
            Err(_) => self.nodes[node].count(port, |c| c.rcv_queue_overflows += 1),
        }
        true
    }
}
