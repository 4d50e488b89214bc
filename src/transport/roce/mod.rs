//! The RoCE v2 transport: vmad **is** QP1 of its own port, over a UDP socket.
//!
//! A RoCE v2 port is an IP address; its QP1 receives UD datagrams (BTH +
//! DETH + MAD + ICRC) on UDP port 4791. This transport binds that port on
//! one local address that no kernel RoCE device owns (its own address or
//! network namespace) and speaks the wire protocol itself, so the Linux
//! kernel's MAD layer on any RoCE port (rdma_rxe, a RoCE NIC) sees an
//! ordinary QP1 there: vmad answers its requests (the engine answers
//! unclaimed Get/Set with "unsupported method/attribute", as `ib_mad`
//! does) and sends requests to its QP1.
//!
//! - The port's GID is the bound address (IPv4 as `::ffff:a.b.c.d`); RoCE
//!   has no LIDs and no QP0: [`Caps`] `{ smi: false, gsi: true }`.
//! - Receive: only UD SEND Only to QP 1, with the GSI Q_Key and a P_Key
//!   matching the port's; the ICRC is checked on IPv6 (on IPv4 it covers
//!   the IP ID, which a UDP socket never sees). Everything else is dropped
//!   and counted in [`RoceStats`].
//! - Send: the ICRC is computed over the headers the kernel will write
//!   (IPv4: DF set, so ID 0); replies leave from the bound address, which is
//!   the address every request came to, as the kernel's response matching
//!   needs. Datagrams go to UDP 4791 of the destination GID, whatever
//!   source port a request came from.
//! - IPv6 datagrams from rxe carry UDP checksum 0, accepted through
//!   `UDP_NO_CHECK6_RX`.

mod ca;
pub mod codec;
mod sock;
#[cfg(test)]
mod tests;

use std::io;
use std::net::{IpAddr, Ipv6Addr, SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

pub use self::ca::register_ca;
use self::codec::{Flow, Header, Reject};
use super::{Caps, LinkLayer, PortAttrs, Transport, Waker};
use crate::engine::{RecvMeta, Transmit};
use crate::types::{GrhAddr, MadAddr, Qp, GSI_QKEY};
use crate::wire::MAD_SIZE;
use crate::Result;

/// The IANA UDP port of RoCE v2.
pub const ROCE_UDP_PORT: u16 = 4791;

/// How to open a RoCE transport.
#[derive(Debug, Clone)]
pub struct RoceConfig {
    /// The local address that is this port's GID. No kernel RoCE device may own it.
    pub addr: IpAddr,
    /// UDP port to bind (4791; tests use others).
    pub udp_port: u16,
    /// UDP port datagrams are sent to (4791; tests use others).
    pub peer_port: u16,
    /// The port's P_Key (its whole P_Key table).
    pub pkey: u16,
    /// CA name reported in [`PortAttrs`].
    pub ca_name: String,
}

impl RoceConfig {
    /// A port on `addr`, UDP 4791, default P_Key, CA `vmadroce0`.
    pub fn new(addr: IpAddr) -> RoceConfig {
        RoceConfig {
            addr,
            udp_port: ROCE_UDP_PORT,
            peer_port: ROCE_UDP_PORT,
            pkey: crate::types::DEFAULT_PKEY,
            ca_name: "vmadroce0".into(),
        }
    }
}

/// A non-blocking UDP socket on `addr:port` with the options this transport
/// sets (IPv6: zero UDP checksums accepted; IPv4: DF, so IP ID 0): for tools
/// and tests that exchange hand-built datagrams ([`codec`]) with RoCE ports.
///
/// # Errors
///
/// As [`RoceTransport::open`].
pub fn udp_socket(addr: IpAddr, port: u16) -> Result<UdpSocket> {
    sock::bind(addr, port)
}

/// Counters of a RoCE port, shared with whoever holds a [`RoceTransport::stats`] handle.
#[derive(Debug, Default)]
pub struct RoceStats {
    /// MADs handed up.
    pub received: AtomicU64,
    /// Datagrams sent.
    pub sent: AtomicU64,
    /// Dropped: ICRC mismatch.
    pub bad_icrc: AtomicU64,
    /// Dropped: Q_Key is not the GSI Q_Key.
    pub bad_qkey: AtomicU64,
    /// Dropped: P_Key does not match the port's.
    pub bad_pkey: AtomicU64,
    /// Dropped: not UD SEND Only (or TVer not 0).
    pub bad_opcode: AtomicU64,
    /// Dropped: destination QP is not 1.
    pub bad_qp: AtomicU64,
    /// Dropped: too short for a MAD, or not a 256-byte MAD.
    pub runts: AtomicU64,
    /// IPv4 datagrams handed up without an ICRC check (see the module docs).
    pub unverified: AtomicU64,
    /// Sends dropped: no GID to send to, a GID of the other IP family, or QP0.
    pub unroutable: AtomicU64,
}

impl RoceStats {
    /// One counter's value.
    pub fn get(counter: &AtomicU64) -> u64 {
        counter.load(Ordering::Relaxed)
    }
}

fn bump(counter: &AtomicU64) {
    counter.fetch_add(1, Ordering::Relaxed);
}

/// vmad as QP1 of a RoCE v2 address. See the module docs.
#[derive(Debug)]
pub struct RoceTransport {
    sock: Arc<UdpSocket>,
    local: SocketAddr,
    peer_port: u16,
    attrs: PortAttrs,
    pkey: u16,
    psn: u32,
    stats: Arc<RoceStats>,
    rx: Box<[u8; 2048]>,
    tx: Box<[u8; 2048]>,
}

/// Count a dropped datagram (and report it with the `tracing` feature).
fn dropped<T>(counter: &AtomicU64, _reason: &'static str) -> Option<T> {
    vmad_debug!(reason = _reason, "datagram dropped");
    bump(counter);
    None
}

impl RoceTransport {
    /// Bind `config.addr`, UDP `config.udp_port`.
    ///
    /// # Errors
    ///
    /// EADDRINUSE ([`crate::Error::AddressInUse`]) if the UDP port is taken
    /// on that address (an rxe or RoCE NIC owns it); EIO
    /// ([`crate::Error::Io`]) for other socket failures (e.g. the address is
    /// not local: EADDRNOTAVAIL).
    pub fn open(config: RoceConfig) -> Result<RoceTransport> {
        let sock = sock::bind(config.addr, config.udp_port)?;
        let local = sock.local_addr()?;
        let pkey = config.pkey;
        let attrs = port_attrs(&config);
        Ok(RoceTransport {
            sock: Arc::new(sock),
            local,
            peer_port: config.peer_port,
            attrs,
            pkey,
            psn: 0,
            stats: Arc::default(),
            rx: Box::new([0; 2048]),
            tx: Box::new([0; 2048]),
        })
    }

    /// The port's GID (the bound address; IPv4 mapped).
    pub fn gid(&self) -> [u8; 16] {
        codec::gid_of(self.local.ip())
    }

    /// The bound socket address.
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// The port's counters (a shared handle: it keeps counting after the
    /// transport moved into a [`crate::port::Port`]).
    pub fn stats(&self) -> Arc<RoceStats> {
        self.stats.clone()
    }

    /// For fuzzing only: the check [`Transport::recv_burst`] makes of each datagram
    /// (`d` as `recv_from` returned it, from `from`), without reading the socket: the
    /// MAD's range in `d` and its source, or `None` (dropped, and counted). Not a
    /// stable API.
    #[doc(hidden)]
    pub fn accept_for_fuzzing(
        &self,
        d: &[u8],
        from: SocketAddr,
    ) -> Option<(core::ops::Range<usize>, RecvMeta)> {
        self.accept(d, from)
    }

    /// Check one datagram from `from`; the MAD's range and its source on success.
    fn accept(&self, d: &[u8], from: SocketAddr) -> Option<(core::ops::Range<usize>, RecvMeta)> {
        let s = &self.stats;
        let flow = Flow {
            src: (from.ip(), from.port()),
            dst: (self.local.ip(), self.local.port()),
        };
        let v6 = matches!(self.local.ip(), IpAddr::V6(_));
        let ud = match codec::parse(d, v6.then_some(&flow)) {
            Ok(ud) => ud,
            Err(Reject::Runt) => return dropped(&s.runts, "runt or not a MAD"),
            Err(Reject::Opcode) => return dropped(&s.bad_opcode, "not a UD SEND"),
            Err(Reject::Icrc) => return dropped(&s.bad_icrc, "bad ICRC"),
        };
        if ud.payload.len() != MAD_SIZE {
            return dropped(&s.runts, "runt or not a MAD");
        }
        if ud.dest_qp != 1 {
            return dropped(&s.bad_qp, "not for QP1");
        }
        if ud.qkey != GSI_QKEY {
            return dropped(&s.bad_qkey, "bad Q_Key");
        }
        if !pkey_match(ud.pkey, self.pkey) {
            return dropped(&s.bad_pkey, "P_Key mismatch");
        }
        if !v6 {
            bump(&s.unverified);
        }
        bump(&s.received);
        let src = MadAddr {
            qpn: ud.src_qp,
            qkey: 0,
            lid: 0,
            sl: 0,
            path_bits: 0,
            grh: Some(GrhAddr {
                gid: codec::gid_of(from.ip()),
                gid_index: 0,
                hop_limit: 64,
                traffic_class: 0,
                flow_label: 0,
            }),
            pkey_index: 0,
        };
        Some((
            ud.payload,
            RecvMeta {
                qp: Qp::Gsi,
                src,
                local_qpn: None,
            },
        ))
    }

    /// Where a MAD for `dest` goes: UDP 4791 (or the configured port) of its GID.
    fn route(&self, dest: &MadAddr) -> Option<SocketAddr> {
        let gid = dest.grh?.gid;
        let v6 = Ipv6Addr::from(gid);
        let ip = match (self.local.ip(), v6.to_ipv4_mapped()) {
            (IpAddr::V4(_), Some(v4)) => IpAddr::V4(v4),
            (IpAddr::V6(_), None) => IpAddr::V6(v6),
            _ => return None,
        };
        Some(SocketAddr::new(ip, self.peer_port))
    }
}

/// What a port on `config` reports; no socket needed.
fn port_attrs(config: &RoceConfig) -> PortAttrs {
    // GID 0 = prefix:GUID is the port's address, as `umad_get_port` readers expect.
    let gid = codec::gid_of(config.addr);
    let half = |r: core::ops::Range<usize>| u64::from_be_bytes(gid[r].try_into().unwrap_or([0; 8]));
    let guid = half(8..16);
    PortAttrs {
        ca_name: config.ca_name.clone(),
        port_num: 1,
        node_type: 1,
        node_guid: guid,
        port_guid: guid,
        gid_prefix: half(0..8),
        lid: 0,
        lmc: 0,
        sm_lid: 0,
        sm_sl: 0,
        state: 4,
        phys_state: 5,
        rate: 10,
        // IsDeviceManagementSupported | IsVendorClassSupported; no SM bits.
        capmask: 0x0008_0000 | 0x0000_0008,
        pkeys: vec![config.pkey],
        link_layer: LinkLayer::Ethernet,
    }
}

/// IBA 10.9.3: the low 15 bits match and at least one side is a full member.
fn pkey_match(a: u16, b: u16) -> bool {
    a & 0x7fff == b & 0x7fff && a & 0x7fff != 0 && (a | b) & 0x8000 != 0
}

impl Transport for RoceTransport {
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
        let mut n = 0;
        // Dropped datagrams do not count against `max`, but a flood of them
        // must not keep the port here forever.
        let mut budget = max.saturating_mul(4).max(16);
        while n < max && budget > 0 {
            budget -= 1;
            let (len, from) = match self.sock.recv_from(&mut self.rx[..]) {
                Ok(r) => r,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                // ICMP errors of earlier sends surface here (ECONNREFUSED): not ours to fail on.
                Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => continue,
                Err(e) => return Err(e),
            };
            if len == 1 && from == self.local {
                continue; // a wake (see `waker`)
            }
            if let Some((range, meta)) = self.accept(&self.rx[..len], from) {
                sink(meta, &self.rx[range]);
                n += 1;
            }
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
        let to = match (t.qp, self.route(&t.dest)) {
            (Qp::Gsi, Some(to)) => to,
            _ => {
                bump(&self.stats.unroutable);
                return Ok(true);
            }
        };
        let header = Header {
            pkey: self.pkey,
            dest_qp: t.dest.qpn,
            psn: self.psn,
            qkey: if t.dest.qkey == 0 {
                GSI_QKEY
            } else {
                t.dest.qkey
            },
            src_qp: 1,
        };
        self.psn = (self.psn + 1) & 0xff_ffff;
        let flow = Flow {
            src: (self.local.ip(), self.local.port()),
            dst: (to.ip(), to.port()),
        };
        let len = codec::emit(
            &mut self.tx[..],
            &header,
            &mad[..t.len.min(MAD_SIZE)],
            &flow,
        );
        loop {
            match self.sock.send_to(&self.tx[..len], to) {
                Ok(_) => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                // A full socket buffer or an unreachable peer loses this datagram,
                // as a fabric would: the engine's timeouts and retries cover it.
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::ConnectionRefused
                    ) || e.raw_os_error() == Some(libc::ENETUNREACH)
                        || e.raw_os_error() == Some(libc::EHOSTUNREACH) =>
                {
                    bump(&self.stats.unroutable);
                    return Ok(true);
                }
                Err(e) => return Err(e),
            }
        }
        bump(&self.stats.sent);
        Ok(true)
    }

    fn wait(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        sock::wait_readable(&self.sock, timeout)
    }

    fn waker(&self) -> Option<Waker> {
        // A runt datagram to ourselves ends the poll; recv_burst drops it as such.
        let (sock, to) = (self.sock.clone(), self.local);
        Some(Waker::new(move || {
            let _ = sock.send_to(&[0], to);
        }))
    }
}
