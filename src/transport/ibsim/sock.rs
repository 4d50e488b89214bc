//! The two sockets of an ibsim client, local (abstract AF_UNIX) or remote (UDP).

use std::io;
use std::net::{Ipv4Addr, SocketAddr as InetAddr, ToSocketAddrs, UdpSocket};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr as UnixAddr, UnixDatagram};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use nix::sys::socket::MsgFlags;

/// The most datagrams one [`Sock::recv_batch`] takes.
pub(crate) const RECV_BATCH: usize = 16;

/// Where ibsim listens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    /// Local mode: abstract unix datagram sockets named `<sockname>:ctl`, `<sockname>:out<slot>`.
    Local {
        /// `IBSIM_SOCKNAME` (ibsim's default: `sim`).
        sockname: String,
    },
    /// Remote mode (`ibsim -r`): UDP, control on `port`, slot `i` on `port + 1 + i`.
    Remote {
        /// `IBSIM_SERVER_NAME`.
        host: String,
        /// `IBSIM_SERVER_PORT` (ibsim's default: 7070).
        port: u16,
    },
}

/// One datagram socket of either family.
#[derive(Debug)]
pub(crate) enum Sock {
    Unix(UnixDatagram),
    Udp(UdpSocket),
}

impl Sock {
    pub(crate) fn send(&self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Sock::Unix(s) => s.send(buf),
            Sock::Udp(s) => s.send(buf),
        }
    }

    pub(crate) fn recv(&self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Sock::Unix(s) => s.recv(buf),
            Sock::Udp(s) => s.recv(buf),
        }
    }

    /// Receive one datagram if one is queued, without blocking (`WouldBlock` if none),
    /// whatever the socket's own blocking mode: its sends keep their write timeout.
    pub(crate) fn recv_now(&self, buf: &mut [u8]) -> io::Result<usize> {
        let got = nix::sys::socket::recv(self.as_raw_fd(), buf, MsgFlags::MSG_DONTWAIT);
        got.map_err(io::Error::from)
    }

    /// Receive up to `bufs.len()` (at most [`RECV_BATCH`]) queued datagrams in one
    /// system call, without blocking (`WouldBlock` if none): datagram `i` is in
    /// `bufs[i]`, `lens[i]` bytes (a longer one is cut to its buffer). Fewer than asked
    /// means the queue was empty when the call returned: no further read needed to
    /// find that out (one `recv` per MAD and one more per burst, before).
    // The OS edge: recvmmsg(2) straight, as std has no such call and nix's wrapper
    // allocates its headers per call.
    #[allow(unsafe_code)]
    pub(crate) fn recv_batch<const N: usize>(
        &self,
        bufs: &mut [[u8; N]],
        lens: &mut [usize; RECV_BATCH],
    ) -> io::Result<usize> {
        use nix::libc;
        let want = bufs.len().min(RECV_BATCH);
        // SAFETY: iovec and mmsghdr are plain C structs for which all-zero bytes are a
        // valid value (null pointers, zero lengths).
        let mut iov: [libc::iovec; RECV_BATCH] = unsafe { core::mem::zeroed() };
        // SAFETY: as above.
        let mut hdr: [libc::mmsghdr; RECV_BATCH] = unsafe { core::mem::zeroed() };
        for ((v, h), buf) in iov.iter_mut().zip(hdr.iter_mut()).zip(bufs.iter_mut()) {
            v.iov_base = buf.as_mut_ptr().cast();
            v.iov_len = N;
            h.msg_hdr.msg_iov = v;
            h.msg_hdr.msg_iovlen = 1;
        }
        // SAFETY: the first `want` headers each point at one iovec of `iov`, which
        // points at a buffer of `bufs` of its stated length; all outlive the call,
        // which writes only into those buffers and headers (no name, no control data).
        let got = unsafe {
            libc::recvmmsg(
                self.as_raw_fd(),
                hdr.as_mut_ptr(),
                want as libc::c_uint,
                libc::MSG_DONTWAIT,
                core::ptr::null_mut(),
            )
        };
        let got = usize::try_from(got).map_err(|_| io::Error::last_os_error())?;
        for (len, h) in lens.iter_mut().zip(&hdr[..got]) {
            *len = h.msg_len as usize;
        }
        Ok(got)
    }

    /// Send one datagram without blocking (`WouldBlock` while the peer's queue is full).
    pub(crate) fn send_now(&self, buf: &[u8]) -> io::Result<usize> {
        let sent = nix::sys::socket::send(self.as_raw_fd(), buf, MsgFlags::MSG_DONTWAIT);
        sent.map_err(io::Error::from)
    }

    pub(crate) fn set_read_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        match self {
            Sock::Unix(s) => s.set_read_timeout(t),
            Sock::Udp(s) => s.set_read_timeout(t),
        }
    }
}

impl AsRawFd for Sock {
    fn as_raw_fd(&self) -> RawFd {
        match self {
            Sock::Unix(s) => s.as_raw_fd(),
            Sock::Udp(s) => s.as_raw_fd(),
        }
    }
}

impl AsFd for Sock {
    fn as_fd(&self) -> BorrowedFd<'_> {
        match self {
            Sock::Unix(s) => s.as_fd(),
            Sock::Udp(s) => s.as_fd(),
        }
    }
}

/// ibsim's `make_name()`: the abstract name **with** its trailing NUL, which
/// counts in the address length (abstract names match on exact length).
pub(crate) fn abstract_addr(name: &str) -> io::Result<UnixAddr> {
    let mut bytes = Vec::with_capacity(name.len() + 1);
    bytes.extend_from_slice(name.as_bytes());
    bytes.push(0);
    UnixAddr::from_abstract_name(&bytes)
}

/// The client's two sockets before CONNECT: control connected, data bound.
pub(crate) struct Unattached {
    pub(crate) ctl: Sock,
    pub(crate) data: Sock,
    /// The id to put in CONNECT (nonzero).
    pub(crate) id: u32,
}

static NEXT_ID: AtomicU32 = AtomicU32::new(0);

/// An id for the `in<id>`/`ctl<id>` names, unique among this process's live
/// clients and unlikely to be another process's pid (umad2sim uses its pid).
fn local_id(attempt: u32) -> u32 {
    let n = NEXT_ID
        .fetch_add(1, Ordering::Relaxed)
        .wrapping_add(attempt);
    // Bit 30 keeps it above any pid; it stays positive as ibsim's `int` formats it.
    0x4000_0000 | ((std::process::id() & 0xf_ffff) << 10) | (n & 0x3ff)
}

pub(crate) fn open(endpoint: &Endpoint) -> io::Result<Unattached> {
    match endpoint {
        Endpoint::Local { sockname } => open_local(sockname),
        Endpoint::Remote { host, port } => open_remote(host, *port),
    }
}

fn open_local(base: &str) -> io::Result<Unattached> {
    let server = abstract_addr(&format!("{base}:ctl"))?;
    let mut last_err = None;
    // A name can be taken by a live client of ours or by a process whose pid matches.
    for attempt in 0..64 {
        let id = local_id(attempt);
        let ctl = match UnixDatagram::bind_addr(&abstract_addr(&format!("{base}:ctl{id}"))?) {
            Ok(s) => s,
            Err(e) if e.kind() == io::ErrorKind::AddrInUse => {
                last_err = Some(e);
                continue;
            }
            Err(e) => return Err(e),
        };
        // Bound before CONNECT: ibsim connects its slot to `in<id>` and exits if it cannot.
        let data = match UnixDatagram::bind_addr(&abstract_addr(&format!("{base}:in{id}"))?) {
            Ok(s) => s,
            Err(e) if e.kind() == io::ErrorKind::AddrInUse => {
                last_err = Some(e);
                continue;
            }
            Err(e) => return Err(e),
        };
        ctl.connect_addr(&server)?;
        return Ok(Unattached {
            ctl: Sock::Unix(ctl),
            data: Sock::Unix(data),
            id,
        });
    }
    Err(last_err.unwrap_or_else(|| io::Error::from(io::ErrorKind::AddrInUse)))
}

fn resolve(host: &str, port: u16) -> io::Result<InetAddr> {
    (host, port)
        .to_socket_addrs()?
        .find(InetAddr::is_ipv4)
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                format!("no IPv4 address for ibsim server {host}"),
            )
        })
}

fn open_remote(host: &str, port: u16) -> io::Result<Unattached> {
    let ctl = UdpSocket::bind((Ipv4Addr::UNSPECIFIED, 0))?;
    ctl.connect(resolve(host, port)?)?;
    let data = UdpSocket::bind((Ipv4Addr::UNSPECIFIED, 0))?;
    // Remote mode: the id is the data socket's port; ibsim sends to <our ip>:<id>.
    let id = u32::from(data.local_addr()?.port());
    Ok(Unattached {
        ctl: Sock::Udp(ctl),
        data: Sock::Udp(data),
        id,
    })
}

/// Connect the data socket to ibsim's socket for `slot`.
pub(crate) fn connect_data(endpoint: &Endpoint, data: &Sock, slot: u32) -> io::Result<()> {
    match (endpoint, data) {
        (Endpoint::Local { sockname }, Sock::Unix(s)) => {
            s.connect_addr(&abstract_addr(&format!("{sockname}:out{slot}"))?)
        }
        (Endpoint::Remote { host, port }, Sock::Udp(s)) => {
            let p = u32::from(*port) + 1 + slot;
            let p = u16::try_from(p).map_err(|_| {
                io::Error::new(io::ErrorKind::InvalidInput, "ibsim slot port out of range")
            })?;
            s.connect(resolve(host, p)?)
        }
        _ => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "socket family does not match the endpoint",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn abstract_names_keep_the_trailing_nul() {
        let a = abstract_addr("sim:ctl").unwrap();
        assert_eq!(a.as_abstract_name(), Some(&b"sim:ctl\0"[..]));
    }

    #[test]
    fn local_ids_are_positive_nonzero_and_distinct() {
        let a = local_id(0);
        let b = local_id(0);
        assert_ne!(a, b);
        for id in [a, b] {
            assert!(id != 0 && i32::try_from(id).is_ok());
        }
    }

    #[test]
    fn a_batch_takes_what_is_queued_in_one_call_and_cuts_a_long_datagram() {
        let (tx, rx) = UnixDatagram::pair().unwrap();
        let rx = Sock::Unix(rx);
        let mut bufs = [[0u8; 4]; RECV_BATCH];
        let mut lens = [0usize; RECV_BATCH];
        let err = rx.recv_batch(&mut bufs, &mut lens).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::WouldBlock);
        for d in [&b"ab"[..], b"cdef", b"ghijkl"] {
            tx.send(d).unwrap();
        }
        // Asked for two: two, the third stays queued.
        assert_eq!(rx.recv_batch(&mut bufs[..2], &mut lens).unwrap(), 2);
        assert_eq!(
            (&bufs[0][..lens[0]], &bufs[1][..lens[1]]),
            (&b"ab"[..], &b"cdef"[..])
        );
        // Asked for more than is queued: what is there, cut to the buffer.
        assert_eq!(rx.recv_batch(&mut bufs, &mut lens).unwrap(), 1);
        assert_eq!(&bufs[0][..lens[0]], b"ghij");
        let err = rx.recv_batch(&mut bufs, &mut lens).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::WouldBlock);
    }
}
