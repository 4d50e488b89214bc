//! A MAD that `send` accepted is on the wire after a close that follows it, as the
//! kernel's `write()` on the umad device posts it before it returns (a server sends
//! its answer, then closes its port), nor after its agent's unregister.
//!
//! The send must find the transport busy, so that it leaves the MAD to whoever holds
//! it: the port's transport is wrapped in one whose `reread_attrs` (run under the I/O
//! lock by [`Port::refresh_attrs`]) holds the lock until the test lets go, which it
//! does only once the close has begun (the open reports itself closed). Before the
//! fix, the close dropped the MAD: the agent's queued MADs went with it, or the port
//! thread, finding the port closed, never turned again.

use std::io;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crossbeam_channel::{Receiver, Sender};
use vmad::engine::{RecvMeta, Transmit};
use vmad::transport::{Caps, PortAttrs, Transport, Waker};
use vmad::umad::{AgentSpec, Event, Port, PortConfig, SendRequest};
use vmad::wire::MAD_SIZE;

use crate::util::*;

const PERF: u8 = 0x04;
const GET: u8 = 0x01;
const GET_RESP: u8 = 0x81;

/// The fabric's transport, counting the MADs it sends, whose `reread_attrs` signals
/// `holding` and then waits for `release` (with the I/O lock held).
struct Held {
    inner: Box<dyn Transport>,
    holding: Sender<()>,
    release: Receiver<()>,
    sent: Arc<AtomicUsize>,
    /// Wakes asked of the transport: a thread waiting for the I/O lock asks for them.
    wakes: Arc<AtomicUsize>,
}

impl Transport for Held {
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
        self.inner.recv_burst(max, sink)
    }
    fn transmit(
        &mut self,
        fill: &mut dyn FnMut(&mut [u8; MAD_SIZE]) -> Option<Transmit>,
    ) -> io::Result<bool> {
        let sent = self.inner.transmit(fill)?;
        if sent {
            self.sent.fetch_add(1, Ordering::SeqCst);
        }
        Ok(sent)
    }
    fn wait(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        self.inner.wait(timeout)
    }
    fn waker(&self) -> Option<Waker> {
        let inner = self.inner.waker()?;
        let wakes = self.wakes.clone();
        Some(Waker::new(move || {
            wakes.fetch_add(1, Ordering::SeqCst);
            inner.wake();
        }))
    }
    fn clock(&self) -> Option<Arc<dyn vmad::clock::Clock>> {
        self.inner.clock()
    }
    fn register_agent(&mut self, spec: &AgentSpec, hi_tid: u32) -> vmad::Result<()> {
        self.inner.register_agent(spec, hi_tid)
    }
    fn unregister_agent(&mut self, hi_tid: u32) {
        self.inner.unregister_agent(hi_tid);
    }
    fn reread_attrs(&mut self) -> vmad::Result<()> {
        let _ = self.holding.send(());
        let _ = self.release.recv();
        self.inner.reread_attrs()
    }
}

/// What the server does right after its answer.
#[derive(Clone, Copy, PartialEq)]
enum Then {
    /// Close its only open.
    Close,
    /// Close, with another open of its port kept.
    CloseKeepingAnother,
    /// Unregister the agent that answered.
    Unregister,
}

/// A client on `{prefix}1` asks the server on `{prefix}0` (the held transport); the
/// server answers and at once does `then`; the client gets the answer.
fn answer_then(prefix: &str, then: Then) {
    let keep_another = then == Then::CloseKeepingAnother;
    let (n0, n1) = (format!("{prefix}0"), format!("{prefix}1"));
    // Virtual time: the client's request never times out while the test runs.
    let clock = vmad::clock::VirtualClock::new();
    let fabric = vmad::subnet::Fabric::builder()
        .clock(clock)
        .ca(&n0)
        .ca(&n1)
        .link(&n0, 1, &n1, 1)
        .build()
        .unwrap();
    let (holding_tx, holding) = crossbeam_channel::unbounded();
    let (release, release_rx) = crossbeam_channel::unbounded();
    let sent = Arc::new(AtomicUsize::new(0));
    let wakes = Arc::new(AtomicUsize::new(0));
    let held = Held {
        wakes: wakes.clone(),
        inner: vmad::transport::registry::open(&n0, 1).unwrap(),
        holding: holding_tx,
        release: release_rx,
        sent: sent.clone(),
    };
    let server = Arc::new(Port::open(Box::new(held), PortConfig::default()).unwrap());
    let other = keep_another.then(|| server.open_again().unwrap());
    let client = Port::open(
        vmad::transport::registry::open(&n1, 1).unwrap(),
        PortConfig::default(),
    )
    .unwrap();
    let s_agent = server.register(server_spec(PERF, 1, 1 << GET)).unwrap();
    let c_agent = client.register(client_spec(PERF, 1)).unwrap();

    let get = gmp_mad(PERF, 1, GET, 0x77, 0x10);
    let req = SendRequest {
        addr: gsi(1),
        mad: &get,
        timeout_ms: 1000,
        retries: 0,
    };
    client.send(c_agent, req).unwrap();
    let Event::Recv { addr, mad, .. } = server.recv(None).unwrap() else {
        panic!("the server got no request");
    };

    // The transport busy: the answer is left queued for its holder.
    let holder = {
        let server = server.clone();
        std::thread::spawn(move || server.refresh_attrs().map(|_| ()))
    };
    holding.recv().unwrap();
    let before = sent.load(Ordering::SeqCst);
    let mut resp = [0u8; 256];
    resp.copy_from_slice(&mad[..256]);
    resp[3] = GET_RESP;
    let answer = SendRequest {
        addr,
        mad: &resp,
        timeout_ms: 0,
        retries: 0,
    };
    server.send(s_agent, answer).unwrap();
    let woken = wakes.load(Ordering::SeqCst);
    let closer = {
        let server = server.clone();
        std::thread::spawn(move || match then {
            Then::Unregister => server.unregister(s_agent).unwrap(),
            _ => server.close(),
        })
    };
    if then == Then::Unregister {
        // The unregister waits for the I/O lock (asking the holder to wake): before
        // the fix, it had dropped the agent's queued answer by then.
        while wakes.load(Ordering::SeqCst) == woken {
            std::thread::yield_now();
        }
    } else {
        while server.is_open() {
            std::thread::yield_now();
        }
    }
    release.send(()).unwrap();
    closer.join().unwrap();
    holder.join().unwrap().unwrap();
    assert_eq!(
        sent.load(Ordering::SeqCst),
        before + 1,
        "the answer left the port before its close (or unregister) returned"
    );
    let Event::Recv { mad, .. } = client.recv(None).unwrap() else {
        panic!("the client got a timeout report, not the answer");
    };
    assert_eq!((mad[3], be64(&mad, 8) & 0xffff_ffff), (GET_RESP, 0x77));
    drop(other);
    drop(server);
    drop(client);
    fabric.unregister();
}

#[test]
fn an_answer_sent_before_the_last_close_is_transmitted() {
    answer_then("ucsl", Then::Close);
}

#[test]
fn an_answer_sent_before_a_close_that_leaves_another_open_is_transmitted() {
    answer_then("ucso", Then::CloseKeepingAnother);
}

#[test]
fn an_answer_sent_before_its_agent_is_unregistered_is_transmitted() {
    answer_then("ucsu", Then::Unregister);
}

/// A port thread that parks the moment it has nothing to do (`PortConfig::spin` zero:
/// no gap between a wake and its next park) still lets a register, an unregister and a
/// close have the transport it holds while parked. Before the fix they tried the lock
/// in a loop, asking the thread to wake, and waited for a gap that a thread parking
/// again at once never left: the close hung (first seen in `cargo bench --bench port`
/// with the port thread's spin set to zero).
#[test]
fn a_port_thread_that_never_spins_lets_go_of_the_transport() {
    let prefix = "ucsz";
    let (n0, n1) = (format!("{prefix}0"), format!("{prefix}1"));
    let fabric = vmad::subnet::Fabric::builder()
        .ca(&n0)
        .ca(&n1)
        .link(&n0, 1, &n1, 1)
        .build()
        .unwrap();
    let config = PortConfig {
        spin: Duration::ZERO,
        caller_spin: Duration::ZERO,
        ..PortConfig::default()
    };
    let open = |n: &str| {
        Port::open(
            vmad::transport::registry::open(n, 1).unwrap(),
            config.clone(),
        )
        .unwrap()
    };
    let (server, client) = (open(&n0), open(&n1));
    let mut s_agent = server.register(server_spec(PERF, 1, 1 << GET)).unwrap();
    let c_agent = client.register(client_spec(PERF, 1)).unwrap();
    for round in 0..20u64 {
        let get = gmp_mad(PERF, 1, GET, round, 0x10);
        let req = SendRequest {
            addr: gsi(1),
            mad: &get,
            timeout_ms: 5000,
            retries: 0,
        };
        client.send(c_agent, req).unwrap();
        let Event::Recv { addr, mad, .. } = server.recv(Some(PATIENCE)).unwrap() else {
            panic!("the server got a timeout report");
        };
        let mut resp = [0u8; 256];
        resp.copy_from_slice(&mad[..256]);
        resp[3] = GET_RESP;
        let answer = SendRequest {
            addr,
            mad: &resp,
            timeout_ms: 0,
            retries: 0,
        };
        server.send(s_agent, answer).unwrap();
        let Event::Recv { mad, .. } = client.recv(Some(PATIENCE)).unwrap() else {
            panic!("the client got a timeout report, not the answer");
        };
        assert_eq!(be64(&mad, 8) & 0xffff_ffff, round);
        // Each of these takes the transport from the parked port thread.
        server.unregister(s_agent).unwrap();
        s_agent = server.register(server_spec(PERF, 1, 1 << GET)).unwrap();
        server.refresh_attrs().unwrap();
    }
    client.close();
    server.close();
    fabric.unregister();
}
