//! The driver lends a transport slots until the transport says it has no more, even when
//! the engine has nothing left: a transport may hold what it was given until then, as
//! `verbs` rings its doorbell once per burst (when `fill` returns `None`). A driver that
//! stopped after the last MAD (`b443016`, reverted) left each request unposted until the
//! port's next turn: on `hybrid` in the rxe VM, a round trip of a second. The fabric's
//! transport is wrapped in one that holds MADs as `verbs` does and counts every time
//! the port goes on to anything else (a receive, a wait) with a MAD still held.

use std::io;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use vmad::engine::{RecvMeta, Transmit};
use vmad::transport::{Caps, PortAttrs, Transport, Waker};
use vmad::umad::{AgentSpec, Event, Port, PortConfig, SendRequest};
use vmad::wire::MAD_SIZE;

use crate::util::*;

const PERF: u8 = 0x04;
const GET: u8 = 0x01;
const GET_RESP: u8 = 0x81;

/// The fabric's transport, holding what `transmit` is given until a `transmit` whose
/// `fill` has nothing (then it sends it all), as a doorbell does.
struct Doorbell {
    inner: Box<dyn Transport>,
    held: Vec<([u8; MAD_SIZE], Transmit)>,
    /// Times the port went on to another call with MADs still held (they are sent
    /// then, so that the test ends either way).
    left_held: Arc<AtomicUsize>,
}

impl Doorbell {
    fn ring(&mut self) -> io::Result<()> {
        for (mad, t) in std::mem::take(&mut self.held) {
            let mut once = Some(t);
            self.inner.transmit(&mut |slot| {
                let t = once.take()?;
                *slot = mad;
                Some(t)
            })?;
        }
        Ok(())
    }

    /// The port moved on: nothing may be held now.
    fn moved_on(&mut self) -> io::Result<()> {
        if !self.held.is_empty() {
            self.left_held.fetch_add(1, Ordering::SeqCst);
            self.ring()?;
        }
        Ok(())
    }
}

impl Transport for Doorbell {
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
        self.moved_on()?;
        self.inner.recv_burst(max, sink)
    }
    fn transmit(
        &mut self,
        fill: &mut dyn FnMut(&mut [u8; MAD_SIZE]) -> Option<Transmit>,
    ) -> io::Result<bool> {
        let mut slot = [0u8; MAD_SIZE];
        match fill(&mut slot) {
            Some(t) => {
                self.held.push((slot, t));
                Ok(true)
            }
            None => {
                self.ring()?;
                Ok(false)
            }
        }
    }
    fn wait(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        self.moved_on()?;
        self.inner.wait(timeout)
    }
    fn waker(&self) -> Option<Waker> {
        self.inner.waker()
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
}

#[test]
fn every_turn_rings_the_doorbell_of_what_it_sent() {
    // Virtual time: no request times out, whoever turns when.
    let clock = vmad::clock::VirtualClock::new();
    let fabric = vmad::subnet::Fabric::builder()
        .clock(clock)
        .ca("tbell0")
        .ca("tbell1")
        .link("tbell0", 1, "tbell1", 1)
        .build()
        .unwrap();
    let left_held = Arc::new(AtomicUsize::new(0));
    let bell = Doorbell {
        inner: vmad::transport::registry::open("tbell0", 1).unwrap(),
        held: Vec::new(),
        left_held: left_held.clone(),
    };
    let client = Port::open(Box::new(bell), PortConfig::default()).unwrap();
    let server = Arc::new(
        Port::open(
            vmad::transport::registry::open("tbell1", 1).unwrap(),
            PortConfig::default(),
        )
        .unwrap(),
    );
    let c_agent = client.register(client_spec(PERF, 1)).unwrap();
    let s_agent = server.register(server_spec(PERF, 1, 1 << GET)).unwrap();
    let answering = {
        let server = server.clone();
        std::thread::spawn(move || {
            while let Ok(Event::Recv { addr, mad, .. }) = server.recv(None) {
                let mut resp = [0u8; 256];
                resp.copy_from_slice(&mad[..256]);
                resp[3] = GET_RESP;
                let answer = SendRequest {
                    addr,
                    mad: &resp,
                    timeout_ms: 0,
                    retries: 0,
                };
                if server.send(s_agent, answer).is_err() {
                    return;
                }
            }
        })
    };
    for tid in 1..=50u64 {
        let get = gmp_mad(PERF, 1, GET, tid, 0x10);
        let req = SendRequest {
            addr: gsi(2),
            mad: &get,
            timeout_ms: 1000,
            retries: 0,
        };
        client.send(c_agent, req).unwrap();
        match client.recv(None).unwrap() {
            Event::Recv { mad, .. } => assert_eq!(mad[3], GET_RESP, "round trip {tid}"),
            other => panic!("round trip {tid}: {other:?}"),
        }
    }
    assert_eq!(
        left_held.load(Ordering::SeqCst),
        0,
        "the port went on with sent MADs still behind the doorbell"
    );
    server.close();
    answering.join().unwrap();
    drop(fabric);
}
