//! A transport that dies under the port: blocked and later receives, polls and sends
//! end with EIO (`umad_recv(3)`: "receive operation failed"), nothing hangs.

use std::io;
use std::os::fd::BorrowedFd;
use std::sync::Arc;
use std::time::Duration;

use crossbeam_channel::{Receiver, Sender};
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use vmad::engine::{AgentSpec, RecvMeta, SendRequest, Transmit};
use vmad::error::errno::{EINVAL, EIO};
use vmad::port::{Port, PortConfig};
use vmad::transport::{Caps, LinkLayer, PortAttrs, Transport, Waker};
use vmad::types::{MadAddr, Qp};
use vmad::wire::MAD_SIZE;

/// A transport that carries nothing and fails for good once `kill` is sent.
struct Mortal {
    attrs: PortAttrs,
    kill: Receiver<()>,
    wake: (Sender<()>, Receiver<()>),
    dead: bool,
}

impl Mortal {
    fn new() -> (Mortal, Sender<()>) {
        let (tx, rx) = crossbeam_channel::unbounded();
        let attrs = PortAttrs {
            ca_name: "mortal0".into(),
            port_num: 1,
            node_type: 1,
            node_guid: 1,
            port_guid: 1,
            gid_prefix: 0,
            lid: 1,
            lmc: 0,
            sm_lid: 1,
            sm_sl: 0,
            state: 4,
            phys_state: 5,
            rate: 10,
            capmask: 0,
            pkeys: vec![0xffff],
            link_layer: LinkLayer::InfiniBand,
        };
        let t = Mortal {
            attrs,
            kill: rx,
            wake: crossbeam_channel::unbounded(),
            dead: false,
        };
        (t, tx)
    }

    fn check(&mut self) -> io::Result<()> {
        if self.kill.try_recv().is_ok() {
            self.dead = true;
        }
        if self.dead {
            return Err(io::Error::new(io::ErrorKind::BrokenPipe, "fabric gone"));
        }
        Ok(())
    }
}

impl Transport for Mortal {
    fn caps(&self) -> Caps {
        Caps {
            smi: true,
            gsi: true,
        }
    }

    fn attrs(&self) -> &PortAttrs {
        &self.attrs
    }

    fn recv_burst(
        &mut self,
        _max: usize,
        _sink: &mut dyn FnMut(RecvMeta, &[u8]),
    ) -> io::Result<usize> {
        self.check().map(|()| 0)
    }

    fn transmit(
        &mut self,
        fill: &mut dyn FnMut(&mut [u8; MAD_SIZE]) -> Option<Transmit>,
    ) -> io::Result<bool> {
        self.check()?;
        let mut slot = [0u8; MAD_SIZE];
        Ok(fill(&mut slot).is_some())
    }

    fn wait(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        // Block until killed, woken or timed out (the port thread parks here).
        let kill = self.kill.clone();
        let wake = self.wake.1.clone();
        crossbeam_channel::select! {
            recv(kill) -> _ => self.dead = true,
            recv(wake) -> _ => {},
            default(timeout.unwrap_or(Duration::from_secs(3600))) => {},
        }
        self.check()
    }

    fn waker(&self) -> Option<Waker> {
        let tx = self.wake.0.clone();
        Some(Waker::new(move || {
            let _ = tx.send(());
        }))
    }
}

fn readable(fd: i32, ms: u16) -> bool {
    // SAFETY: the port owns fd and stays open for this call.
    let fd = unsafe { BorrowedFd::borrow_raw(fd) };
    let mut fds = [PollFd::new(fd, PollFlags::POLLIN)];
    poll(&mut fds, PollTimeout::from(ms)).unwrap() == 1
}

#[test]
fn a_dead_transport_ends_blocked_receives_and_polls_with_eio() {
    let (t, kill) = Mortal::new();
    let port = Arc::new(Port::open(Box::new(t), PortConfig::default()).unwrap());
    let second = Arc::new(port.open_again().unwrap());
    let agent = port
        .register(AgentSpec {
            qp: Qp::Gsi,
            mgmt_class: 0x04,
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
