//! A transport that dies under the port: blocked and later receives, polls and sends
//! end with EIO (`umad_recv(3)`: "receive operation failed"), nothing hangs.

use std::os::fd::BorrowedFd;
use std::sync::Arc;
use std::time::Duration;

use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use vmad::engine::{AgentSpec, SendRequest};
use vmad::error::errno::{EINVAL, EIO};
use vmad::port::{Port, PortConfig};
use vmad::types::{MadAddr, Qp};

use crate::test_transport::Mortal;

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
