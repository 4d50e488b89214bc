//! The UDP socket of a RoCE v2 port, with the options std does not offer.

use std::io;
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::os::fd::AsFd;
use std::time::Duration;

use nix::poll::{PollFd, PollFlags, PollTimeout};
use nix::sys::socket::setsockopt;

use crate::{Error, Result};

/// Linux's `UDP_NO_CHECK6_RX` socket option (its UDP UAPI); libc does not name it.
const UDP_NO_CHECK6_RX: libc::c_int = 102;

/// Accept IPv6 UDP datagrams with checksum 0, which rxe sends.
#[derive(Debug, Clone, Copy)]
struct NoCheck6Rx;
nix::setsockopt_impl!(
    NoCheck6Rx,
    libc::IPPROTO_UDP,
    UDP_NO_CHECK6_RX,
    bool,
    nix::sys::socket::sockopt::SetBool
);

/// `IP_MTU_DISCOVER`: with `IP_PMTUDISC_DO` (DF set) Linux sends IP ID 0,
/// which the ICRC of an IPv4 datagram covers.
#[derive(Debug, Clone, Copy)]
struct MtuDiscover;
nix::setsockopt_impl!(
    MtuDiscover,
    libc::IPPROTO_IP,
    libc::IP_MTU_DISCOVER,
    usize,
    nix::sys::socket::sockopt::SetUsize
);

/// Bind `addr:port` for RoCE v2, non-blocking.
pub(super) fn bind(addr: IpAddr, port: u16) -> Result<UdpSocket> {
    let sa = SocketAddr::new(addr, port);
    let sock = UdpSocket::bind(sa).map_err(|e| match e.kind() {
        io::ErrorKind::AddrInUse => Error::AddressInUse(format!(
            "UDP {sa} is taken: a RoCE device (rdma_rxe or a RoCE NIC) or another \
             vmad owns RoCE v2 on this address; give vmad an address (or network \
             namespace) of its own"
        )),
        _ => Error::Io(e),
    })?;
    let opt = |e: nix::Error| Error::Io(io::Error::from(e));
    match addr {
        IpAddr::V6(_) => setsockopt(&sock, NoCheck6Rx, &true).map_err(opt)?,
        IpAddr::V4(_) => {
            setsockopt(&sock, MtuDiscover, &(libc::IP_PMTUDISC_DO as usize)).map_err(opt)?
        }
    }
    sock.set_nonblocking(true)?;
    Ok(sock)
}

/// Wait until `sock` is readable or `timeout` passes.
pub(super) fn wait_readable(sock: &UdpSocket, timeout: Option<Duration>) -> io::Result<()> {
    let t = match timeout {
        None => PollTimeout::NONE,
        // Round up: a sub-millisecond wait must not become a busy loop of zero waits.
        Some(t) => PollTimeout::try_from(t.as_micros().div_ceil(1000).min(i32::MAX as u128) as i32)
            .unwrap_or(PollTimeout::MAX),
    };
    let mut fds = [PollFd::new(sock.as_fd(), PollFlags::POLLIN)];
    match nix::poll::poll(&mut fds, t) {
        Ok(_) | Err(nix::Error::EINTR) => Ok(()),
        Err(e) => Err(e.into()),
    }
}
