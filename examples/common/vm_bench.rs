//! What `rxe_bench` and `roce_bench` share: their requests, agents and
//! round trips against a kernel or vmad peer inside the rxe VM.

use std::time::{Duration, Instant};

use vmad::engine::{AgentId, AgentSpec, Event, SendRequest};
use vmad::port::Port;
use vmad::types::{GrhAddr, MadAddr, Qp, GSI_QKEY};

/// The vendor range 2 OUI the VM fixtures (`tests/rxe/*.c`) use.
pub(crate) const OUI: u32 = 0x00_14_05;

/// An environment variable the bench scripts set.
pub(crate) fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| {
        panic!("{name} unset: run through scripts/bench-rxe or scripts/bench-roce")
    })
}

/// A count from the environment, or `default`.
pub(crate) fn count(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A GSI agent for `class` serving `methods` (RMPP for vendor range 2).
pub(crate) fn spec(class: u8, methods: u64) -> AgentSpec {
    AgentSpec {
        qp: Qp::Gsi,
        mgmt_class: class.into(),
        class_version: 1,
        rmpp_version: u8::from(class >= 0x30),
        method_mask: [methods, 0],
        oui: if class >= 0x30 { OUI } else { 0 },
        user_rmpp: false,
    }
}

/// QP `qpn` behind `gid`, with the GSI Q_Key.
pub(crate) fn dest(gid: [u8; 16], qpn: u32) -> MadAddr {
    MadAddr {
        qpn,
        qkey: GSI_QKEY,
        grh: Some(GrhAddr {
            gid,
            hop_limit: 64,
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// A Get of the fixtures' echo attribute; in vendor range 2, `attr_mod` asks
/// for an RMPP response of that many bytes.
pub(crate) fn get(class: u8, tid: u64, attr_mod: u32) -> Vec<u8> {
    use vmad::wire::{mad, rmpp, vendor};
    let mut m = vec![0u8; vmad::wire::MAD_SIZE];
    mad::Repr {
        base_version: mad::BASE_VERSION,
        mgmt_class: class.into(),
        class_version: 1,
        method: mad::Method::Get,
        status: mad::MadStatus::OK,
        class_specific: 0,
        tid,
        attr_id: 0xff10,
        attr_mod,
    }
    .emit(&mut mad::Packet::new_unchecked(&mut m[..]));
    if vendor::is_vendor_range2(class) {
        rmpp::Packet::new_unchecked(&mut m[..]).set_rmpp_version(rmpp::VERSION);
        vendor::Packet::new_unchecked(&mut m[..]).set_oui(OUI);
    }
    m
}

/// The answer to `req` (a request's bytes): GetResp, the request's attribute
/// modifier's worth of `fill` bytes after the vendor header as an RMPP message when
/// `rmpp`, else the request echoed.
pub(crate) fn answer(req: &[u8], rmpp: bool, fill: impl Fn(usize) -> u8) -> Vec<u8> {
    use vmad::wire::{mad, rmpp as r, vendor};
    let mut resp = if rmpp {
        let size = mad::Packet::new_unchecked(req).attr_mod() as usize;
        let mut v = req[..vendor::DATA_OFFSET].to_vec();
        v.extend((0..size).map(fill));
        r::Packet::new_unchecked(&mut v[..]).set_resp_time_flags(0, r::FLAG_ACTIVE);
        v
    } else {
        req.to_vec()
    };
    mad::Packet::new_unchecked(&mut resp[..]).set_method(mad::Method::GetResp);
    resp
}

/// One request and its response; returns the round-trip time and the response length.
pub(crate) fn round_trip(p: &Port, a: AgentId, to: MadAddr, m: &[u8]) -> (Duration, usize) {
    let t0 = Instant::now();
    p.send(
        a,
        SendRequest {
            addr: to,
            mad: m,
            timeout_ms: 60_000,
            retries: 0,
        },
    )
    .expect("send");
    match p.recv(Some(Duration::from_secs(120))).expect("response") {
        Event::Recv { mad, .. } => (t0.elapsed(), mad.len()),
        other => panic!("round trip failed: {other:?}"),
    }
}

/// The `p`th percentile of `v` (sorted in place).
pub(crate) fn percentile(v: &mut [Duration], p: usize) -> Duration {
    v.sort();
    v[(v.len() * p / 100).min(v.len() - 1)]
}

/// Microseconds.
pub(crate) fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}
