//! What `benches/port.rs` and `examples/port_instructions.rs` share: the two ports of
//! the rows, their agents and MADs, and the responder, so that the instruction counts
//! and quick timings are of the same rows as the criterion bench.

use std::sync::Arc;
use std::thread;

use vmad::engine::{AgentId, AgentSpec, Event, SendRequest};
use vmad::port::{Port, PortConfig};
use vmad::subnet::Fabric;
use vmad::types::{MadAddr, Qp, GSI_QKEY};

pub(crate) const PERF: u8 = 0x04;
pub(crate) const SA: u8 = 0x03;

/// Ports 1 of CAs `{prefix}0` (LID 1) and `{prefix}1` (LID 2), linked, on a fabric of
/// their own.
pub(crate) fn ports(prefix: &str) -> (Arc<Port>, Arc<Port>) {
    let (n0, n1) = (format!("{prefix}0"), format!("{prefix}1"));
    let f = Fabric::builder()
        .ca(&n0)
        .ca(&n1)
        .link(&n0, 1, &n1, 1)
        .build_private()
        .expect("a two-CA fabric");
    let open = |n: &str| {
        let t = f.open(n, 1).expect("the CA's port");
        Arc::new(Port::open(Box::new(t), PortConfig::default()).expect("a port"))
    };
    (open(&n0), open(&n1))
}

pub(crate) fn spec(class: u8, version: u8, rmpp: u8, methods: &[u8]) -> AgentSpec {
    let mut mask = [0u64; 2];
    for &m in methods {
        mask[usize::from(m / 64)] |= 1 << (m % 64);
    }
    AgentSpec {
        qp: Qp::Gsi,
        mgmt_class: class.into(),
        class_version: version,
        rmpp_version: rmpp,
        method_mask: mask,
        oui: 0,
        user_rmpp: false,
    }
}

/// The GSI of the port at `lid`.
pub(crate) fn to(lid: u16) -> MadAddr {
    MadAddr {
        qpn: 1,
        qkey: GSI_QKEY,
        lid,
        ..MadAddr::default()
    }
}

pub(crate) fn mad(class: u8, version: u8, method: u8, tid: u64) -> [u8; 256] {
    let mut m = [0u8; 256];
    m[..4].copy_from_slice(&[1, class, version, method]);
    m[8..16].copy_from_slice(&tid.to_be_bytes());
    m
}

/// Answer every request on `port` with `reply(request)` until the port closes.
pub(crate) fn responder(
    port: Arc<Port>,
    agent: AgentId,
    reply: impl Fn(&[u8]) -> Vec<u8> + Send + 'static,
) -> thread::JoinHandle<()> {
    thread::spawn(move || {
        while let Ok(ev) = port.recv(None) {
            if let Event::Recv { addr, mad, .. } = ev {
                let resp = reply(&mad);
                let req = SendRequest {
                    addr,
                    mad: &resp,
                    timeout_ms: 0,
                    retries: 5,
                };
                if port.send(agent, req).is_err() {
                    return;
                }
            }
        }
    })
}

/// A GetTableResp to `request`: its header, RMPP active, then `payload`.
pub(crate) fn gettable_resp(request: &[u8], payload: &[u8]) -> Vec<u8> {
    let mut r = request[..56].to_vec();
    r[3] = 0x92;
    r[24..36].fill(0);
    r[24] = 1;
    r[26] = 1;
    r.extend_from_slice(payload);
    r
}

/// The caller's ends of the floor's channels: to the echo thread, and back from it.
pub(crate) type FloorLink = (
    crossbeam_channel::Sender<[u8; 256]>,
    crossbeam_channel::Receiver<[u8; 256]>,
);

/// The round trip's floor: a thread that echoes each 256-byte MAD sent through a
/// crossbeam channel, spinning as a waiting caller does, until the link is dropped.
pub(crate) fn floor_echo() -> (FloorLink, thread::JoinHandle<()>) {
    let (to_b, at_b) = crossbeam_channel::unbounded::<[u8; 256]>();
    let (to_a, at_a) = crossbeam_channel::unbounded::<[u8; 256]>();
    let echo = thread::spawn(move || loop {
        match at_b.try_recv() {
            Ok(mut m) => {
                m[3] = 0x81;
                if to_a.send(m).is_err() {
                    return;
                }
            }
            Err(crossbeam_channel::TryRecvError::Empty) => thread::yield_now(),
            Err(crossbeam_channel::TryRecvError::Disconnected) => return,
        }
    });
    ((to_b, at_a), echo)
}

/// One round trip of the floor: `m` out, its echo back (spinning as the echo does).
pub(crate) fn floor_round_trip(link: &FloorLink, m: [u8; 256]) -> [u8; 256] {
    link.0.send(m).expect("the echo thread");
    loop {
        match link.1.try_recv() {
            Ok(m) => return m,
            Err(_) => thread::yield_now(),
        }
    }
}
