//! What the engine fuzz targets share: a byte reader, a small-limit engine with
//! a few agents, and the checks run after every step.

use core::time::Duration;

use vmad::engine::rmpp::RmppConfig;
use vmad::engine::{AgentId, AgentSpec, Engine, EngineConfig, Event, RecvMeta};
use vmad::time::Instant;
use vmad::types::{MadAddr, Qp, GSI_QKEY};
use vmad::wire::MAD_SIZE;

/// Reads the fuzzer's bytes as a stream of small decisions; zeros once exhausted.
pub struct Bytes<'a>(pub &'a [u8]);

impl Bytes<'_> {
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
    pub fn u8(&mut self) -> u8 {
        let (&b, rest) = self.0.split_first().unwrap_or((&0, &[]));
        self.0 = rest;
        b
    }
    pub fn u16(&mut self) -> u16 {
        u16::from_be_bytes([self.u8(), self.u8()])
    }
    pub fn u32(&mut self) -> u32 {
        u32::from_be_bytes([self.u8(), self.u8(), self.u8(), self.u8()])
    }
    /// Up to `max` raw bytes.
    pub fn take(&mut self, max: usize) -> &[u8] {
        let n = max.min(self.0.len());
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        head
    }
}

/// Limits small enough that a fuzz input reaches them.
pub fn config() -> EngineConfig {
    EngineConfig {
        rng_seed: Some(1),
        max_events: 32,
        max_outstanding_per_agent: 4,
        max_reassemblies_per_peer: 2,
        max_reassemblies: 4,
        duplicate_request_window: Duration::from_millis(500),
        rmpp: RmppConfig {
            window: 4,
            ack_timeout: Duration::from_millis(20),
            total_timeout: Duration::from_millis(300),
            linger: Duration::from_millis(100),
            max_message: 8 << 10,
        },
    }
}

/// The agents every fuzzed engine has (by index in the returned list).
pub fn agents(engine: &mut Engine) -> Vec<AgentId> {
    specs()
        .into_iter()
        .map(|s| engine.register(s).expect("agent"))
        .collect()
}

/// The specs of [`agents`].
pub fn specs() -> Vec<AgentSpec> {
    let spec = |qp, class, version, rmpp, methods: &[u8], oui| {
        let mut mask = [0u64; 2];
        for &m in methods {
            mask[usize::from(m / 64)] |= 1 << (m % 64);
        }
        AgentSpec {
            qp,
            mgmt_class: vmad::wire::mad::MgmtClass::from(class),
            class_version: version,
            rmpp_version: rmpp,
            method_mask: mask,
            oui,
            user_rmpp: false,
        }
    };
    let specs = [
        spec(Qp::Gsi, 0x03, 2, 1, &[0x01, 0x02, 0x12, 0x14], 0), // SA server, RMPP
        spec(Qp::Gsi, 0x03, 2, 1, &[], 0),                       // SA client, RMPP
        spec(Qp::Gsi, 0x04, 1, 0, &[0x01, 0x02], 0),             // PerfMgt server
        spec(Qp::Gsi, 0x04, 1, 0, &[], 0),                       // PerfMgt client
        spec(Qp::Gsi, 0x30, 1, 1, &[0x01, 0x06], 0x1405),        // vendor, RMPP
        spec(Qp::Smi, 0x81, 1, 0, &[0x01, 0x02], 0),             // DR SMPs
        spec(Qp::Smi, 0x01, 1, 0, &[], 0),                       // LID SMP client
    ];
    specs.to_vec()
}

/// A peer: one of three LIDs, sometimes with a GRH.
pub fn peer(b: &mut Bytes<'_>) -> MadAddr {
    let sel = b.u8();
    let mut addr = MadAddr {
        qpn: 1,
        qkey: GSI_QKEY,
        lid: 1 + u16::from(sel % 3),
        ..MadAddr::default()
    };
    if sel & 0x80 != 0 {
        addr.grh = Some(vmad::types::GrhAddr {
            gid: [sel & 0x0f; 16],
            ..Default::default()
        });
    }
    addr
}

pub fn meta(qp: Qp, src: MadAddr) -> RecvMeta {
    RecvMeta {
        qp,
        src: MadAddr {
            qpn: qp.qpn(),
            qkey: 0,
            ..src
        },
        local_qpn: None,
    }
}

/// Drain the engine's outputs; returns what was transmitted (for loopback answers).
pub fn drain(engine: &mut Engine, now: Instant, events: usize) -> Vec<[u8; MAD_SIZE]> {
    let mut out = Vec::new();
    let mut slot = [0u8; MAD_SIZE];
    while let Some(tx) = engine.poll_transmit(now, &mut slot) {
        assert!(tx.len <= MAD_SIZE);
        if out.len() < 64 {
            out.push(slot);
        }
    }
    for _ in 0..events {
        match engine.poll_event() {
            Some(Event::Recv { mad, .. }) => {
                assert!(mad.len() <= engine.config().rmpp.max_message.max(MAD_SIZE));
            }
            Some(_) => {}
            None => break,
        }
    }
    out
}

/// Every invariant, and the memory bounds, after a step.
pub fn check(engine: &Engine, sends_in_flight_cap: usize) {
    if let Err(broken) = engine.check_invariants() {
        panic!("invariant broken: {broken}");
    }
    let f = engine.footprint();
    let c = engine.config();
    assert!(
        f.recv_sessions <= c.max_reassemblies + 4096,
        "sessions {f:?}"
    );
    assert!(
        f.reassembly_bytes <= c.max_reassemblies * (2 * (64 << 10) + 4 * MAD_SIZE),
        "reassembly memory {f:?}"
    );
    assert!(f.dedup <= c.max_events, "dedup {f:?}");
    assert!(
        f.events <= c.max_events + sends_in_flight_cap,
        "events {f:?}"
    );
}

/// A MAD for a transport's receive path to carry: a header of a class the agents of
/// [`specs`] know (picked by `kind`), the TID from the fuzzer, then a few bytes
/// overwritten where the fuzzer says.
pub fn mad(b: &mut Bytes<'_>) -> [u8; MAD_SIZE] {
    let mut m = [0u8; MAD_SIZE];
    let (class, version) = match b.u8() % 7 {
        0 => (0x03, 2),
        1 => (0x04, 1),
        2 => (0x30, 1),
        3 => (0x81, 1),
        4 => (0x01, 1),
        5 => (0x09, 1),
        _ => (b.u8(), b.u8()),
    };
    m[..4].copy_from_slice(&[1, class, version, b.u8()]);
    m[8..16].copy_from_slice(&u64::from(b.u32()).to_be_bytes());
    m[16..18].copy_from_slice(&b.u16().to_be_bytes());
    if class == 0x30 {
        m[37..40].copy_from_slice(&[0x00, 0x14, 0x05]);
    }
    for _ in 0..(b.u8() % 8) {
        let at = usize::from(b.u8());
        m[at] = b.u8();
    }
    m
}

/// Hand one received MAD to the engine as a transport would, then drain it and check it.
pub fn deliver(engine: &mut Engine, meta: RecvMeta, mad: &[u8]) {
    engine.handle_datagram(Instant::ZERO, meta, mad);
    drain(engine, Instant::ZERO, usize::MAX);
    check(engine, 0);
}
