//! The server's main thread: ibsim's control channel and the clients' data sockets.

use std::collections::BTreeMap;
use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr as UnixAddr, UnixDatagram};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use nix::poll::{PollFd, PollFlags, PollTimeout};
use nix::sys::socket::{
    self, sockopt, AddressFamily, ControlMessageOwned, MsgFlags, SockFlag, SockType,
};

use super::link::{self, ClientOut, PortLink, SLOT_SHIFT};
use super::{lock, Shared};
use crate::transport::ibsim::proto::{ClientInfo, CtlRepr, CtlType, CTL_LEN, REQUEST_LEN};
use crate::wire::{mad, rmpp};

/// How often the server looks for clients that died without a word.
const REAP_EVERY: Duration = Duration::from_millis(500);

/// The most clients at once: the slot travels in 16 TID bits.
const MAX_SLOTS: usize = 1 << 16;

/// An attached client, as the server keeps it.
#[derive(Debug)]
pub(crate) struct Client {
    pub(crate) node: String,
    pub(crate) port: u8,
    pub(crate) pid: i32,
    /// Where its control requests come from (`<base>:ctl<id>`).
    ctl_addr: Vec<u8>,
    pub(crate) out: Arc<ClientOut>,
}

/// The clients and the ports they hold open (behind [`Shared::state`]).
#[derive(Default)]
pub(crate) struct State {
    pub(crate) clients: BTreeMap<u16, Client>,
    pub(crate) ports: BTreeMap<(String, u8), Arc<PortLink>>,
    /// Where the search for a free slot starts.
    next_slot: u16,
}

/// The abstract name `name` as ibsim's `make_name` builds it (trailing NUL counted).
fn abstract_addr(name: &str) -> io::Result<UnixAddr> {
    let mut b = name.as_bytes().to_vec();
    b.push(0);
    UnixAddr::from_abstract_name(&b)
}

/// Bind ibsim's control socket `<base>:ctl`, taking its callers' credentials.
pub(crate) fn bind_ctl(base: &str) -> crate::Result<OwnedFd> {
    let fd = socket::socket(
        AddressFamily::Unix,
        SockType::Datagram,
        SockFlag::SOCK_CLOEXEC,
        None,
    )
    .map_err(io::Error::from)?;
    let mut name = format!("{base}:ctl").into_bytes();
    name.push(0);
    let addr = socket::UnixAddr::new_abstract(&name).map_err(io::Error::from)?;
    socket::bind(fd.as_raw_fd(), &addr)
        .map_err(|e| crate::Error::AddressInUse(format!("ibsim socket {base}:ctl: {e}")))?;
    socket::setsockopt(&fd, sockopt::PassCred, &true).map_err(io::Error::from)?;
    Ok(fd)
}

/// How soon the loop looks again at ports holding frames back (link delays).
const HELD_EVERY: Duration = Duration::from_millis(1);

thread_local! {
    /// Set on the server's loop thread: what the fabric queues for a port while the
    /// loop walks a frame is handed out by the loop before it waits again.
    static IN_LOOP: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// The main loop: until `shared.stop`.
///
/// Per MAD as ibsim's loop: a client's datagram is read, walked through the fabric in
/// this thread, and what the fabric queued for the open ports meanwhile (the answer)
/// is sent to its client, with no other thread woken. A frame another thread queues
/// (a sweep from the control socket) wakes the loop through `wake`.
pub(crate) fn run(shared: &Arc<Shared>, ctl: &OwnedFd, wake: &UnixDatagram) {
    IN_LOOP.with(|l| l.set(true));
    let s = Arc::downgrade(shared);
    shared
        .fabric
        .on_arrival(crate::subnet::ArrivalHook(Box::new(move |_, _| {
            if !IN_LOOP.with(std::cell::Cell::get) {
                if let Some(s) = s.upgrade() {
                    s.wake();
                }
            }
        })));
    let mut last_reap = Instant::now();
    let mut held = false;
    let mut last_work = Instant::now();
    loop {
        if shared.stop.load(Ordering::Acquire) {
            return;
        }
        let socks: Vec<(u16, Arc<ClientOut>)> = lock(&shared.state)
            .clients
            .iter()
            .map(|(&s, c)| (s, c.out.clone()))
            .collect();
        let mut fds = vec![
            PollFd::new(ctl.as_fd(), PollFlags::POLLIN),
            PollFd::new(wake.as_fd(), PollFlags::POLLIN),
        ];
        fds.extend(
            socks
                .iter()
                .map(|(_, c)| PollFd::new(c.sock.as_fd(), PollFlags::POLLIN)),
        );
        let t = if held { HELD_EVERY } else { REAP_EVERY };
        let t = match shared.spin {
            Some(spin) if last_work.elapsed() < spin => PollTimeout::ZERO,
            _ => PollTimeout::try_from(t).unwrap_or(PollTimeout::MAX),
        };
        match nix::poll::poll(&mut fds, t) {
            Ok(_) | Err(nix::errno::Errno::EINTR) => {}
            Err(_) => return,
        }
        let ready = |f: &PollFd| f.revents().is_some_and(|r| !r.is_empty());
        let wake_ready = ready(&fds[1]);
        let ctl_ready = ready(&fds[0]);
        let data_ready: Vec<usize> = (0..socks.len()).filter(|&i| ready(&fds[i + 2])).collect();
        drop(fds);
        // Only a spinning server needs the clock here: no read per turn otherwise.
        if shared.spin.is_some() && (wake_ready || ctl_ready || !data_ready.is_empty()) {
            last_work = Instant::now();
        }
        if wake_ready {
            let mut b = [0u8; 16];
            while wake.recv(&mut b).is_ok() {}
        }
        let mut lost = false;
        for i in data_ready {
            let (slot, out) = &socks[i];
            take_data(shared, *slot, out);
            lost |= out.dead.load(Ordering::Relaxed);
        }
        // A slot freed now must not keep its socket (and name) alive through this turn.
        drop(socks);
        if ctl_ready {
            serve_ctl(shared, ctl);
        }
        let ports: Vec<Arc<PortLink>> = lock(&shared.state).ports.values().cloned().collect();
        held = false;
        for p in ports {
            lost |= p.drain(&mut held);
        }
        // A socket in error stays readable: free its client now, not in half a second.
        if lost || wake_ready || last_reap.elapsed() >= REAP_EVERY {
            reap(shared);
            last_reap = Instant::now();
        }
    }
}

/// Read what a client sent and put it on the fabric from its port.
fn take_data(shared: &Shared, slot: u16, out: &ClientOut) {
    let port = {
        let st = lock(&shared.state);
        let Some(c) = st.clients.get(&slot) else {
            return;
        };
        st.ports.get(&(c.node.clone(), c.port)).cloned()
    };
    let mut buf = [0u8; REQUEST_LEN + 1];
    for _ in 0..64 {
        let n = match out.sock.recv(&mut buf) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => {
                out.dead.store(true, Ordering::Relaxed);
                return;
            }
        };
        // ibsim takes exactly one `sim_request`; anything else is not a packet.
        if n != REQUEST_LEN {
            continue;
        }
        out.sent.fetch_add(1, Ordering::Relaxed);
        let mut pkt = [0u8; REQUEST_LEN];
        pkt.copy_from_slice(&buf[..REQUEST_LEN]);
        stamp_tid(&mut pkt[32..], slot);
        if let Some(p) = &port {
            let m = &pkt[32..];
            let data = link::rmpp_type(m) == Some(rmpp::RmppType::Data);
            if data && mad::Packet::new_unchecked(m).method().is_response_bit() {
                let tid = mad::Packet::new_unchecked(m).tid();
                link::note_sender(&p.senders, tid, slot);
            }
            p.send(&pkt);
        }
    }
}

/// ibsim's `update_trid`: a request leaves with the client's slot in TID bits 63..48,
/// so its response finds the client again. An RMPP ACK, STOP or ABORT a client sends
/// answers a transfer to its own request: it gets the slot too, as the SA saw it.
fn stamp_tid(m: &mut [u8], slot: u16) {
    let Ok(h) = mad::Packet::new_checked(&m[..]) else {
        return;
    };
    let response = h.method().is_response_bit();
    let class = h.mgmt_class();
    let control = link::rmpp_type(m).is_some_and(|t| t != rmpp::RmppType::Data);
    let dr_back = class == mad::MgmtClass::SubnDirectedRoute
        && crate::wire::smp::Packet::new_unchecked(&m[..]).is_returning();
    if (!response && !dr_back) || (response && control) {
        let mut h = mad::Packet::new_unchecked(&mut m[..]);
        let tid = h.tid();
        h.set_tid((tid & !(0xffff << SLOT_SHIFT)) | (u64::from(slot) << SLOT_SHIFT));
    }
}

/// One control request: answer it to its sender.
fn serve_ctl(shared: &Arc<Shared>, ctl: &OwnedFd) {
    loop {
        let mut buf = [0u8; CTL_LEN + 1];
        let mut iov = [io::IoSliceMut::new(&mut buf)];
        let mut space = nix::cmsg_space!(socket::UnixCredentials);
        let got = socket::recvmsg::<socket::UnixAddr>(
            ctl.as_raw_fd(),
            &mut iov,
            Some(&mut space),
            MsgFlags::MSG_DONTWAIT,
        );
        let Ok(msg) = got else {
            return;
        };
        let len = msg.bytes;
        let from = msg.address;
        let mut cred = None;
        if let Ok(cmsgs) = msg.cmsgs() {
            for c in cmsgs {
                if let ControlMessageOwned::ScmCredentials(uc) = c {
                    cred = Some((uc.uid(), uc.pid()));
                }
            }
        }
        // Only the server's own user may attach: another's datagram gets no answer.
        let (Some(from), Some((uid, pid))) = (from, cred) else {
            continue;
        };
        if uid != shared.uid {
            continue;
        }
        let Some(req) = CtlRepr::parse(&buf[..len.min(buf.len())]) else {
            continue;
        };
        let Some(name) = from.as_abstract() else {
            continue;
        };
        let reply = answer(shared, &req, name, pid);
        let _ = socket::sendto(
            ctl.as_raw_fd(),
            &reply.emit(),
            &from,
            MsgFlags::MSG_DONTWAIT,
        );
    }
}

fn refuse(req: &CtlRepr) -> CtlRepr {
    CtlRepr {
        ctl_type: CtlType::Error,
        ..*req
    }
}

fn answer(shared: &Arc<Shared>, req: &CtlRepr, from: &[u8], pid: i32) -> CtlRepr {
    if req.ctl_type == CtlType::Connect {
        return connect(shared, req, from, pid).unwrap_or_else(|| refuse(req));
    }
    let Ok(slot) = u16::try_from(req.client_id) else {
        return refuse(req);
    };
    let (node, port) = {
        let st = lock(&shared.state);
        match st.clients.get(&slot) {
            // Only the client itself may speak for its slot.
            Some(c) if c.ctl_addr == from => (c.node.clone(), c.port),
            _ => return refuse(req),
        }
    };
    let Some((ni, pi, attrs)) = shared.fabric.smp_view(&node, port) else {
        return refuse(req);
    };
    let mut data = [0u8; 64];
    match req.ctl_type {
        CtlType::Disconnect => {
            free(shared, slot);
        }
        CtlType::GetPort => {
            data[0..2].copy_from_slice(&attrs.lid.to_ne_bytes());
            data[2] = attrs.state;
        }
        CtlType::GetVendor => {
            // struct sim_vendor {u32 vendor_id, part_id, hw_ver; u64 fw_ver}, host order.
            data[0..4].copy_from_slice(&0x1405u32.to_ne_bytes());
            data[4..8].copy_from_slice(&0x7664u32.to_ne_bytes());
            data[8..12].copy_from_slice(&1u32.to_ne_bytes());
            data[16..24].copy_from_slice(&0x0001_0000u64.to_ne_bytes());
        }
        CtlType::GetGid => {
            // As ibsim: the prefix big-endian, then the node GUID in host order.
            data[0..8].copy_from_slice(&attrs.gid_prefix.to_be_bytes());
            data[8..16].copy_from_slice(&attrs.node_guid.to_ne_bytes());
        }
        CtlType::GetGuid => data[0..8].copy_from_slice(&attrs.node_guid.to_ne_bytes()),
        CtlType::GetNodeInfo => {
            data = ni;
            // ibsim's quirk, which its clients expect: PortGUID holds the node GUID.
            data[20..28].copy_from_slice(&attrs.node_guid.to_be_bytes());
        }
        CtlType::GetPortInfo => {
            let which = req.data[0];
            if which != 0 && which != port {
                match shared.fabric.smp_view(&node, which) {
                    Some((_, p, _)) => data = p,
                    None => return refuse(req),
                }
            } else {
                data = pi;
            }
            // IsSM set by the built-in SM is not a client's: the built-in SM steps aside
            // for any client that takes the role, so clients must not see a holder to
            // respect (vmad's ibsim client refuses SET_ISSM where IsSM is set).
            let asked = if which == 0 { port } else { which };
            let held = lock(&shared.state)
                .clients
                .values()
                .any(|c| (&c.node, c.port) == (&node, asked) && c.out.issm.load(Ordering::Relaxed));
            if !held {
                let cap = u32::from_be_bytes([data[20], data[21], data[22], data[23]]);
                let cap = cap & !crate::wire::smp::port_info::CAP_IS_SM;
                data[20..24].copy_from_slice(&cap.to_be_bytes());
            }
        }
        CtlType::GetPkeys => {
            for (c, k) in data.chunks_exact_mut(2).zip(&attrs.pkeys) {
                c.copy_from_slice(&k.to_be_bytes());
            }
        }
        CtlType::SetIssm => {
            let on = i32::from_ne_bytes([req.data[0], req.data[1], req.data[2], req.data[3]]) != 0;
            if set_issm(shared, slot, on).is_err() {
                return refuse(req);
            }
        }
        _ => return refuse(req),
    }
    CtlRepr { data, ..*req }
}

/// SET_ISSM: the client takes the port's unsolicited MADs and the SM role (the
/// built-in SM steps aside), or gives both up.
fn set_issm(shared: &Shared, slot: u16, on: bool) -> crate::Result<()> {
    let st = lock(&shared.state);
    let c = st
        .clients
        .get(&slot)
        .ok_or(crate::Error::InvalidArgument("no such client"))?;
    let others = st.clients.iter().any(|(&s, o)| {
        s != slot && (&o.node, o.port) == (&c.node, c.port) && o.out.issm.load(Ordering::Relaxed)
    });
    if on && others {
        return Err(crate::Error::AddressInUse(
            "an SM client is already on the port".into(),
        ));
    }
    let link = st
        .ports
        .get(&(c.node.clone(), c.port))
        .ok_or(crate::Error::InvalidArgument("no such port"))?;
    link.set_sm(on)?;
    c.out.issm.store(on, Ordering::Relaxed);
    Ok(())
}

fn connect(shared: &Arc<Shared>, req: &CtlRepr, from: &[u8], pid: i32) -> Option<CtlRepr> {
    let info = ClientInfo::parse(&req.data)?;
    let node = if info.node_id.is_empty() {
        shared.default_ca.clone()
    } else {
        shared
            .fabric
            .ca_names()
            .into_iter()
            .find(|n| *n == info.node_id)?
    };
    let port = 1;
    let mut st = lock(&shared.state);
    if info.issm
        && st
            .clients
            .values()
            .any(|c| (&c.node, c.port) == (&node, port) && c.out.issm.load(Ordering::Relaxed))
    {
        return None;
    }
    // Round robin, not the lowest free slot: a late response for a slot's last holder
    // (its TID carries the slot) does not reach the next one.
    let slot = (0..MAX_SLOTS)
        .map(|i| st.next_slot.wrapping_add(i as u16))
        .find(|s| !st.clients.contains_key(s))?;
    st.next_slot = slot.wrapping_add(1);
    let base = &shared.sockname;
    let sock = UnixDatagram::bind_addr(&abstract_addr(&format!("{base}:out{slot}")).ok()?).ok()?;
    sock.connect_addr(&abstract_addr(&format!("{base}:in{}", info.id)).ok()?)
        .ok()?;
    sock.set_nonblocking(true).ok()?;
    if let std::collections::btree_map::Entry::Vacant(e) = st.ports.entry((node.clone(), port)) {
        let t = shared.fabric.open(&node, port).ok()?;
        e.insert(Arc::new(PortLink::new(t)));
    }
    let out = Arc::new(ClientOut::new(slot, sock, info.issm));
    out.set_hold(shared.hold.load(std::sync::atomic::Ordering::Relaxed));
    if let Some(p) = st.ports.get(&(node.clone(), port)) {
        lock(&p.clients).push(out.clone());
    }
    st.clients.insert(
        slot,
        Client {
            node: node.clone(),
            port,
            pid,
            ctl_addr: from.to_vec(),
            out,
        },
    );
    let reply = ClientInfo {
        id: u32::from(slot),
        node_id: node,
        ..info
    };
    Some(CtlRepr::request(
        req.client_id,
        CtlType::Connect,
        &reply.emit(),
    ))
}

/// Forget a client: its slot, its socket, its SM role, and its port once it was the
/// port's last client.
pub(crate) fn free(shared: &Shared, slot: u16) {
    let link = {
        let mut st = lock(&shared.state);
        let Some(c) = st.clients.remove(&slot) else {
            return;
        };
        let key = (c.node.clone(), c.port);
        let last = !st
            .clients
            .values()
            .any(|o| (&o.node, o.port) == (&key.0, key.1));
        if let Some(p) = st.ports.get(&key) {
            lock(&p.clients).retain(|o| o.slot != slot);
            if c.out.issm.load(Ordering::Relaxed) && !last {
                let _ = p.set_sm(false);
            }
        }
        if last {
            st.ports.remove(&key)
        } else {
            None
        }
    };
    // Closing the port (joining its thread, giving the SM role back) outside the lock.
    drop(link);
}

/// Free the clients found gone: a failed send, or a process that is no more.
fn reap(shared: &Shared) {
    let gone: Vec<u16> = lock(&shared.state)
        .clients
        .iter()
        .filter(|(_, c)| c.out.dead.load(Ordering::Relaxed) || !alive(c.pid))
        .map(|(&s, _)| s)
        .collect();
    for slot in gone {
        free(shared, slot);
    }
}

/// Whether process `pid` still runs (a zombie does not: its sockets are closed).
fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.trim_start().chars().next())
            .is_some_and(|state| state != 'Z' && state != 'X'),
        Err(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mad(class: u8, method: u8, tid: u64) -> [u8; 256] {
        let mut m = [0u8; 256];
        m[0] = 1;
        m[1] = class;
        m[3] = method;
        m[8..16].copy_from_slice(&tid.to_be_bytes());
        m
    }

    fn tid(m: &[u8]) -> u64 {
        u64::from_be_bytes(m[8..16].try_into().unwrap())
    }

    #[test]
    fn requests_and_rmpp_acks_carry_the_slot_responses_keep_their_tid() {
        let orig = 0xabcd_0001_0000_0042;
        let mut req = mad(0x03, 0x12, orig);
        stamp_tid(&mut req, 9);
        assert_eq!(tid(&req), 0x0009_0001_0000_0042);
        let mut resp = mad(0x04, 0x81, orig);
        stamp_tid(&mut resp, 9);
        assert_eq!(tid(&resp), orig);
        let mut ack = mad(0x03, 0x92, orig);
        ack[24] = 1;
        ack[25] = 2; // ACK
        ack[26] = 1; // Active
        stamp_tid(&mut ack, 9);
        assert_eq!(tid(&ack), 0x0009_0001_0000_0042);
        let mut data = ack;
        data[25] = 1; // Data: an answer's segment keeps its requester's TID
        data[8..16].copy_from_slice(&orig.to_be_bytes());
        stamp_tid(&mut data, 9);
        assert_eq!(tid(&data), orig);
        let mut dr_back = mad(0x81, 0x81, orig);
        dr_back[4] = 0x80;
        stamp_tid(&mut dr_back, 9);
        assert_eq!(tid(&dr_back), orig);
        // Too short to be a MAD: left alone.
        let mut short = [0u8; 8];
        stamp_tid(&mut short, 9);
        assert_eq!(short, [0u8; 8]);
    }

    #[test]
    fn only_live_processes_are_alive() {
        assert!(alive(std::process::id() as i32));
        assert!(!alive(i32::MAX));
    }
}
