//! Ports on a transport with a ready descriptor ([`Transport::ready_fd`]), as ibsim's
//! and the kernel's are: a link of two transports over a pair of unix datagram
//! sockets, so each side's descriptor polls readable exactly when a MAD waits. The
//! tests check what the port promises there: a caller waiting in receive reads the
//! transport itself (only once the descriptor says there is something to read), the port thread reads it when nobody waits (a peer that is never
//! read stalls), closing or failing the port ends a blocked receive, timers still fire
//! while a caller waits, and a descriptor handed out by `Port::fd` stays truthful.

use std::cell::Cell;
use std::io;
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::net::UnixDatagram;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use vmad::engine::{Event, RecvMeta, SendRequest, Transmit};
use vmad::port::audit::PortAudit;
use vmad::port::cabi::WaitHooks;
use vmad::port::{Port, PortConfig};
use vmad::transport::{Caps, PortAttrs, Transport};
use vmad::types::{MadAddr, Qp};
use vmad::wire::MAD_SIZE;

use crate::hostile::agent;
use crate::test_transport::active_port;
use crate::util::{be64, gmp_mad, gsi, PATIENCE};

const PERF: u8 = 0x04;
const GET: u8 = 0x01;
const GET_RESP: u8 = 0x81;
/// A datagram: the sender's LID (2 bytes), then the MAD.
const FRAME: usize = 2 + MAD_SIZE;

thread_local! {
    /// Reads of a link's socket made on this thread.
    static READS: Cell<usize> = const { Cell::new(0) };
}

/// One end of the link: QP1 only, LID `lid`; the other end is the only peer.
struct LinkEnd {
    attrs: PortAttrs,
    sock: UnixDatagram,
}

fn link() -> (LinkEnd, LinkEnd) {
    let (a, b) = UnixDatagram::pair().unwrap();
    a.set_nonblocking(true).unwrap();
    b.set_nonblocking(true).unwrap();
    let end = |sock, lid: u16| LinkEnd {
        attrs: active_port(&format!("link{lid}"), lid),
        sock,
    };
    (end(a, 1), end(b, 2))
}

impl Transport for LinkEnd {
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
        READS.with(|r| r.set(r.get() + 1));
        let mut n = 0;
        let mut frame = [0u8; FRAME];
        while n < max {
            match self.sock.recv(&mut frame) {
                Ok(FRAME) => {}
                Ok(_) => continue,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                // The other end is gone: so is this link.
                Err(e) => return Err(e),
            }
            let lid = u16::from_be_bytes([frame[0], frame[1]]);
            let meta = RecvMeta {
                qp: Qp::Gsi,
                src: MadAddr { lid, ..gsi(lid) },
                local_qpn: None,
            };
            sink(meta, &frame[2..]);
            n += 1;
        }
        Ok(n)
    }

    fn transmit(
        &mut self,
        fill: &mut dyn FnMut(&mut [u8; MAD_SIZE]) -> Option<Transmit>,
    ) -> io::Result<bool> {
        let mut mad = [0u8; MAD_SIZE];
        if fill(&mut mad).is_none() {
            return Ok(false);
        }
        let mut frame = [0u8; FRAME];
        frame[..2].copy_from_slice(&self.attrs.lid.to_be_bytes());
        frame[2..].copy_from_slice(&mad);
        // Blocking until the peer has room: the peer's port must keep reading. Its
        // socket polls writable when it has; a peer that stops reading for good fails
        // the send after a minute (a hang guard, not a timing goal).
        let give_up = Instant::now() + 6 * PATIENCE;
        loop {
            match self.sock.send(&frame) {
                Ok(_) => return Ok(true),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    let left = give_up.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        return Err(io::Error::new(io::ErrorKind::BrokenPipe, "peer stalled"));
                    }
                    let mut fds = [PollFd::new(self.sock.as_fd(), PollFlags::POLLOUT)];
                    let ms = PollTimeout::try_from(left.as_millis().min(60_000) as i32)
                        .unwrap_or(PollTimeout::MAX);
                    match poll(&mut fds, ms) {
                        Ok(_) | Err(nix::errno::Errno::EINTR) => {}
                        Err(e) => return Err(e.into()),
                    }
                }
                Err(e) => return Err(e),
            }
        }
    }

    fn wait(&mut self, _timeout: Option<Duration>) -> io::Result<()> {
        unreachable!("a port never parks in wait() on a transport with a ready descriptor")
    }

    fn ready_fd(&self) -> Option<BorrowedFd<'_>> {
        Some(self.sock.as_fd())
    }
}

fn ports() -> (Port, Port) {
    let (a, b) = link();
    (
        Port::open(Box::new(a), PortConfig::default()).unwrap(),
        Port::open(Box::new(b), PortConfig::default()).unwrap(),
    )
}

/// Until a caller is blocked on `port`'s descriptors.
fn wait_for_a_waiter(port: &Port) {
    let give_up = Instant::now() + PATIENCE;
    while port.callers_waiting() == 0 {
        assert!(Instant::now() < give_up, "no caller blocked");
        thread::yield_now();
    }
}

fn get(port: &Port, agent: vmad::engine::AgentId, tid: u64, timeout_ms: u32) {
    port.send(
        agent,
        SendRequest {
            addr: gsi(2),
            mad: &gmp_mad(PERF, 1, GET, tid, 0x10),
            timeout_ms,
            retries: 0,
        },
    )
    .unwrap();
}

/// Answer `n` Gets on `server`'s port, then return.
fn serve(port: Arc<Port>, n: usize) -> thread::JoinHandle<()> {
    let agent = agent(&port, PERF, 1, 0, &[GET]);
    thread::spawn(move || {
        for _ in 0..n {
            let (addr, mut mad) = match port.recv(Some(PATIENCE)).unwrap() {
                Event::Recv { addr, mad, .. } => (addr, mad),
                other => panic!("{other:?}"),
            };
            mad[3] = GET_RESP;
            port.send(
                agent,
                SendRequest {
                    addr,
                    mad: &mad,
                    timeout_ms: 0,
                    retries: 0,
                },
            )
            .unwrap();
        }
    })
}

#[test]
fn requests_and_answers_cross_ports_that_wait_on_the_descriptor() {
    let (a, b) = ports();
    let b = Arc::new(b);
    let server = serve(b.clone(), 200);
    let client = agent(&a, PERF, 1, 0, &[]);
    for tid in 0..200u64 {
        get(&a, client, tid, 5_000);
        match a.recv(Some(PATIENCE)).unwrap() {
            Event::Recv { mad, .. } => {
                // Method, status (0: answered by the server, not refused) and TID.
                let got = (mad[3], u16::from_be_bytes([mad[4], mad[5]]), be64(&mad, 8));
                assert_eq!((got.0, got.1, got.2 & 0xffff_ffff), (GET_RESP, 0, tid));
            }
            other => panic!("{other:?}"),
        }
    }
    server.join().unwrap();
    assert_eq!(a.stats().received, 200);
}

/// The drop-in's blocking `umad_recv` looks for a message before it polls the
/// descriptors: that turn does not read the transport (the poll says whether a read
/// would find anything), while a zero-timeout receive reads it itself.
#[test]
fn a_receive_before_a_wait_leaves_the_transport_to_the_poll() {
    let (a, _b) = ports();
    let reads = || READS.with(Cell::get);
    let before = reads();
    let r = a.recv_before_wait_with(|e| Ok(e.clone()));
    assert!(matches!(r, Err(vmad::Error::WouldBlock)), "{r:?}");
    assert_eq!(
        reads(),
        before,
        "no read of the transport on the caller's thread"
    );
    let r = a.recv_with(Some(Duration::ZERO), |e| Ok(e.clone()));
    assert!(matches!(r, Err(vmad::Error::WouldBlock)), "{r:?}");
    assert!(
        reads() > before,
        "a zero-timeout receive reads the transport itself"
    );
}

#[test]
fn with_nobody_receiving_the_port_thread_keeps_reading() {
    // A unix datagram socket holds only a few datagrams: 500 requests get through only
    // if B's port thread reads them while nobody calls receive on B.
    let (a, b) = ports();
    let _server = agent(&b, PERF, 1, 0, &[GET]);
    let client = agent(&a, PERF, 1, 0, &[]);
    for tid in 0..500 {
        get(&a, client, tid, 0);
    }
    for tid in 0..500u64 {
        match b.recv(Some(PATIENCE)).unwrap() {
            Event::Recv { mad, .. } => assert_eq!(be64(&mad, 8) & 0xffff_ffff, tid),
            other => panic!("{other:?}"),
        }
    }
    assert!(a.failure().is_none(), "{:?}", a.failure());
}

#[test]
fn a_timeout_fires_while_a_caller_waits_on_the_descriptor() {
    // B's end is never read: no answer, not even a refusal.
    let (a, b) = link();
    let a = Port::open(Box::new(a), PortConfig::default()).unwrap();
    let client = agent(&a, PERF, 1, 0, &[]);
    get(&a, client, 9, 30);
    match a.recv(Some(PATIENCE)).unwrap() {
        Event::SendTimedOut { .. } => {}
        other => panic!("{other:?}"),
    }
    drop(b);
}

#[test]
fn closing_the_port_ends_a_receive_blocked_on_the_descriptor() {
    let (a, _b) = ports();
    let a = Arc::new(a);
    let _agent = agent(&a, PERF, 1, 0, &[GET]);
    let waiter = {
        let a = a.clone();
        thread::spawn(move || a.recv(None))
    };
    wait_for_a_waiter(&a);
    a.close();
    let got = waiter.join().unwrap();
    assert!(matches!(got, Err(vmad::Error::InvalidPort)), "{got:?}");
}

#[test]
fn a_failed_transport_ends_a_receive_blocked_on_the_descriptor_with_eio() {
    let (a, b) = ports();
    let a = Arc::new(a);
    let client = agent(&a, PERF, 1, 0, &[]);
    let waiter = {
        let a = a.clone();
        thread::spawn(move || a.recv(None))
    };
    wait_for_a_waiter(&a);
    // B's end closes: A's next send fails for good.
    drop(b);
    get(&a, client, 1, 1_000);
    let got = waiter.join().unwrap();
    assert_eq!(
        got.map(|_| ()).map_err(|e| e.errno()),
        Err(vmad::error::errno::EIO)
    );
}

#[test]
fn a_descriptor_handed_out_polls_readable_when_a_message_arrives() {
    let (a, b) = ports();
    let _server = agent(&b, PERF, 1, 0, &[GET]);
    let client = agent(&a, PERF, 1, 0, &[]);
    let fd = b.fd();
    get(&a, client, 5, 0);
    // Nobody calls into B: only its port thread can have read the MAD.
    let mut fds = [nix::poll::PollFd::new(
        // SAFETY: the port owns the descriptor and outlives this poll.
        unsafe { BorrowedFd::borrow_raw(fd) },
        nix::poll::PollFlags::POLLIN,
    )];
    let n = nix::poll::poll(&mut fds, nix::poll::PollTimeout::from(10_000u16)).unwrap();
    assert_eq!(n, 1, "B's descriptor shows the request");
    match b.recv(Some(Duration::ZERO)).unwrap() {
        Event::Recv { mad, .. } => assert_eq!(be64(&mad, 8) & 0xffff_ffff, 5),
        other => panic!("{other:?}"),
    }
}
