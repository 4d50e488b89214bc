//! Every wire parser on arbitrary bytes: `new_checked` and `Repr::parse` never
//! panic; what parses emits and parses back to the same value; getters never
//! panic once `check_len` passed; the one-line display never panics.
#![no_main]

use libfuzzer_sys::fuzz_target;
use vmad::wire::{self, MAD_SIZE};

/// Parse `data` with module `$m`; if it parses, emit it over a copy of the input
/// and parse again: the value must survive.
macro_rules! round_trip {
    ($m:path, $data:expr) => {{
        use $m as m;
        let data: &[u8] = $data;
        if let Ok(p) = m::Packet::new_checked(data) {
            if let Ok(r) = m::Repr::parse(&p) {
                let mut buf = data.to_vec();
                let need = r.buffer_len();
                if buf.len() < need {
                    buf.resize(need, 0);
                }
                r.emit(&mut m::Packet::new_unchecked(&mut buf[..]));
                let p2 = m::Packet::new_checked(&buf[..]).expect("emitted bytes check");
                let r2 = m::Repr::parse(&p2).expect("emitted bytes parse");
                assert_eq!(r, r2, concat!(stringify!($m), ": round trip"));
            }
        }
    }};
}

/// As `round_trip!`, for views whose `Repr` has no `buffer_len` (the RoCE headers):
/// emit over a copy of the input, which `new_checked` already proved long enough.
macro_rules! round_trip_fixed {
    ($m:path, $data:expr) => {{
        use $m as m;
        let data: &[u8] = $data;
        if let Ok(p) = m::Packet::new_checked(data) {
            if let Ok(r) = m::Repr::parse(&p) {
                let mut buf = data.to_vec();
                r.emit(&mut m::Packet::new_unchecked(&mut buf[..]));
                let p2 = m::Packet::new_checked(&buf[..]).expect("emitted bytes check");
                let r2 = m::Repr::parse(&p2).expect("emitted bytes parse");
                assert_eq!(r, r2, concat!(stringify!($m), ": round trip"));
            }
        }
    }};
}

/// A RoCE v2 frame (IP, UDP, BTH, DETH, payload, ICRC): every getter of a checked
/// frame, and a parsed frame re-emitted parses to the same value and payload.
fn roce(data: &[u8]) {
    use wire::roce;
    round_trip_fixed!(wire::roce::bth, data);
    round_trip_fixed!(wire::roce::deth, data);
    round_trip_fixed!(wire::roce::lrh, data);
    let Ok(f) = roce::Frame::new_checked(data) else {
        return;
    };
    let _ = (
        f.total_len(),
        f.addrs(),
        f.tclass(),
        f.flow_label(),
        f.hop_limit(),
    );
    let _ = (f.ip_id(), f.src_port(), f.udp_checksum(), f.payload_range());
    let _ = (f.payload().len(), f.icrc(), f.compute_icrc(), f.icrc_ok());
    let _ = (
        roce::bth::Repr::parse(&f.bth()),
        roce::deth::Repr::parse(&f.deth()),
    );
    let Ok((r, payload)) = roce::Repr::parse(&f) else {
        return;
    };
    let mut buf = vec![0u8; r.buffer_len(payload.len())];
    let Ok(n) = r.emit(&mut buf, payload) else {
        return;
    };
    let f2 = roce::Frame::new_checked(&buf[..n]).expect("emitted frame checks");
    let (r2, payload2) = roce::Repr::parse(&f2).expect("emitted frame parses");
    assert_eq!(r.ip, r2.ip, "roce: IP round trip");
    assert_eq!(r.deth, r2.deth, "roce: DETH round trip");
    assert_eq!(payload2, payload, "roce: payload round trip");
}

fuzz_target!(|data: &[u8]| {
    roce(data);
    // The MAD-level views all read the same (whole-MAD) buffer.
    round_trip!(wire::mad, data);
    round_trip!(wire::rmpp, data);
    round_trip!(wire::smp, data);
    round_trip!(wire::sa, data);
    round_trip!(wire::vendor, data);
    round_trip!(wire::umad, data);
    round_trip!(wire::grh, data);
    // Attribute and record views wrap the attribute's own bytes; try them at
    // the offsets where they sit in a MAD too.
    for off in [0usize, 56, 64] {
        let Some(attr) = data.get(off..) else { break };
        round_trip!(wire::smp::node_info, attr);
        round_trip!(wire::smp::node_desc, attr);
        round_trip!(wire::smp::port_info, attr);
        round_trip!(wire::sa::node_record, attr);
        round_trip!(wire::sa::path_record, attr);
        round_trip!(wire::class_port_info, attr);
    }
    if let Ok(p) = wire::umad::Packet::new_checked_kind(data, wire::umad::HeaderKind::Old56) {
        let _ = wire::umad::Repr::parse(&p);
    }
    // SA record iteration over whatever the header claims.
    if let Ok(p) = wire::sa::Packet::new_checked(data) {
        if let Ok(records) = p.records() {
            let n = records.len();
            assert_eq!(records.count(), n);
        }
    }
    // The display of any bytes, short or long.
    let shown = wire::pretty(data).to_string();
    assert!(!shown.is_empty() || data.is_empty());
    let _ = wire::pretty(&data[..data.len().min(MAD_SIZE)]).to_string();
});
