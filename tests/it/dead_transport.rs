//! A transport that dies under the port: blocked and later receives, polls and sends
//! end with EIO (`umad_recv(3)`: "receive operation failed"), nothing hangs, and
//! the dead port keeps nothing of what was under way (its footprint is zero).

use std::io;
use std::os::fd::BorrowedFd;
use std::sync::Arc;
use std::time::Duration;

use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use vmad::engine::{AgentSpec, Event, Footprint, RecvMeta, SendRequest, Transmit};
use vmad::error::errno::{EINVAL, EIO};
use vmad::port::audit::PortAudit;
use vmad::port::{Port, PortConfig};
use vmad::transport::{Caps, PortAttrs, Transport, Waker};
use vmad::types::{MadAddr, Qp};
use vmad::wire::MAD_SIZE;

use crate::kernel_peer::{mad, pattern, spec, tid_of, transfer, Dir, ECHO, SIZE};
use crate::test_transport::Mortal;
use crate::util::gsi;

fn readable(fd: i32, ms: u16) -> bool {
    // SAFETY: the port owns fd and stays open for this call.
    let fd = unsafe { BorrowedFd::borrow_raw(fd) };
    let mut fds = [PollFd::new(fd, PollFlags::POLLIN)];
    poll(&mut fds, PollTimeout::from(ms)).unwrap() == 1
}

#[test]
fn a_dead_transport_ends_blocked_receives_and_polls_with_eio() {
    let (t, kill) = Mortal::new("mortal0");
    let port = Arc::new(Port::open(Box::new(t), PortConfig::default()).unwrap());
    let second = Arc::new(port.open_again().unwrap());
    let agent = port
        .register(AgentSpec {
            qp: Qp::Gsi,
            mgmt_class: 0x04.into(),
            class_version: 1,
            rmpp_version: 0,
            method_mask: [0; 2],
            oui: 0,
            user_rmpp: false,
        })
        .unwrap();
    assert!(!readable(port.fd(), 0));
    let (p1, p2) = (port.clone(), second.clone());
    let receiver = std::thread::spawn(move || p1.recv(None).map(|_| ()));
    let poller = std::thread::spawn(move || p2.poll(None));
    kill.send(()).unwrap();
    // Both blocked calls end (join would hang otherwise), with EIO.
    assert_eq!(receiver.join().unwrap().unwrap_err().errno(), EIO);
    assert_eq!(poller.join().unwrap().unwrap_err().errno(), EIO);
    // Later calls too, and the descriptors poll readable so poll(2) waiters wake.
    assert_eq!(port.recv(Some(Duration::ZERO)).unwrap_err().errno(), EIO);
    assert_eq!(second.poll(Some(Duration::ZERO)).unwrap_err().errno(), EIO);
    assert!(readable(port.fd(), 1000));
    assert!(readable(second.fd(), 1000));
    let mad = [0u8; 256];
    let send = port.send(
        agent,
        SendRequest {
            addr: MadAddr::default(),
            mad: &mad,
            timeout_ms: 100,
            retries: 0,
        },
    );
    assert_eq!(send.unwrap_err().errno(), EIO);
    assert!(port.failure().unwrap().contains("fabric gone"));
    // Closing still works and is final: EINVAL after.
    port.close();
    assert_eq!(port.recv(Some(Duration::ZERO)).unwrap_err().errno(), EINVAL);
    second.close();
}

/// The fabric's transport, failing for good once it has carried `left` more MADs
/// (sent and received together): a device removed in the middle of a transfer.
struct DiesAfter {
    inner: Box<dyn Transport>,
    left: usize,
}

impl DiesAfter {
    fn check(&self) -> io::Result<()> {
        if self.left == 0 {
            return Err(io::Error::new(io::ErrorKind::BrokenPipe, "device removed"));
        }
        Ok(())
    }
}

impl Transport for DiesAfter {
    fn caps(&self) -> Caps {
        self.inner.caps()
    }
    fn attrs(&self) -> &PortAttrs {
        self.inner.attrs()
    }
    fn recv_burst(
        &mut self,
        max: usize,
        sink: &mut dyn FnMut(RecvMeta, &[u8]),
    ) -> io::Result<usize> {
        self.check()?;
        let n = self.inner.recv_burst(max.min(self.left), sink)?;
        self.left -= n;
        Ok(n)
    }
    fn transmit(
        &mut self,
        fill: &mut dyn FnMut(&mut [u8; MAD_SIZE]) -> Option<Transmit>,
    ) -> io::Result<bool> {
        self.check()?;
        let sent = self.inner.transmit(fill)?;
        self.left -= usize::from(sent);
        Ok(sent)
    }
    fn wait(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        self.check()?;
        self.inner.wait(timeout)
    }
    fn waker(&self) -> Option<Waker> {
        self.inner.waker()
    }
    fn clock(&self) -> Option<Arc<dyn vmad::clock::Clock>> {
        self.inner.clock()
    }
}

/// MADs the dying port carries before its transport fails: some 4,800 segments
/// make the 1 MiB transfer, so the failure comes in its middle.
const UNDER_WAY: usize = 64;

/// A port whose transport fails in the middle of a 1 MiB RMPP transfer (sending it,
/// or receiving it as the answer to its Get) ends the request with EIO and keeps
/// nothing of it: no transaction, RMPP session, reassembly, unsent MAD or timer
/// (the engine abandoned), in virtual time (no timer can have ended anything).
fn transfer_cut(prefix: &str, dir: Dir) {
    let (n0, n1) = (format!("{prefix}0"), format!("{prefix}1"));
    let clock = vmad::clock::VirtualClock::new();
    let fabric = vmad::subnet::Fabric::builder()
        .clock(clock)
        .ca(&n0)
        .ca(&n1)
        .link(&n0, 1, &n1, 1)
        .build()
        .unwrap();
    let server = Port::open(
        vmad::transport::registry::open(&n0, 1).unwrap(),
        PortConfig::default(),
    )
    .unwrap();
    let dying = DiesAfter {
        inner: vmad::transport::registry::open(&n1, 1).unwrap(),
        left: UNDER_WAY,
    };
    let client = Port::open(Box::new(dying), PortConfig::default()).unwrap();
    let s_agent = server.register(spec(0x30, true, &[0x01, 0x02])).unwrap();
    let c_agent = client.register(spec(0x30, true, &[])).unwrap();
    let tid = 0x6001;
    let req = transfer(dir, tid);
    client
        .send(
            c_agent,
            SendRequest {
                addr: gsi(1),
                mad: &req,
                timeout_ms: 1000,
                retries: 0,
            },
        )
        .unwrap();
    if dir == Dir::Receive {
        // The server answers the Get with 1 MiB, which the client's port dies receiving.
        let Event::Recv { addr, mad: get, .. } = server.recv(None).unwrap() else {
            panic!("the server got no request");
        };
        let data: Vec<u8> = (0..SIZE).map(pattern).collect();
        let answer = mad(0x30, 0x81, tid_of(&get), ECHO, SIZE as u32, true, &data);
        let answer = SendRequest {
            addr,
            mad: &answer,
            timeout_ms: 0,
            retries: 0,
        };
        server.send(s_agent, answer).unwrap();
    }
    let e = client
        .recv(None)
        .expect_err("the transfer ended with the port alive");
    assert_eq!(e.errno(), EIO, "{e}");
    assert!(client.failure().unwrap().contains("device removed"));
    assert_eq!(
        client.footprint(),
        Footprint::default(),
        "the dead port keeps what nobody will drive again"
    );
    client.check_invariants().expect("engine invariants");
    // A send is refused, and leaves nothing either.
    let again = client.send(
        c_agent,
        SendRequest {
            addr: gsi(1),
            mad: &transfer(Dir::Receive, tid + 1),
            timeout_ms: 1000,
            retries: 0,
        },
    );
    assert_eq!(again.unwrap_err().errno(), EIO);
    assert_eq!(client.footprint(), Footprint::default());
    drop(client);
    drop(server);
    fabric.unregister();
}

#[test]
fn a_transport_dead_in_the_middle_of_an_rmpp_send_leaves_a_footprint_of_zero() {
    transfer_cut("dtrs", Dir::Send);
}

#[test]
fn a_transport_dead_in_the_middle_of_an_rmpp_receive_leaves_a_footprint_of_zero() {
    transfer_cut("dtrr", Dir::Receive);
}
