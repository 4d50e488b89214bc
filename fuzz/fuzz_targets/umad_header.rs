//! The kernel transport's receive path: the bytes one `read()` of a umad device returns
//! (the 64-byte `ib_user_mad` header with P_Key index, then the MAD; any length), as
//! the transport takes them: send-completion statuses (which end tracked sends),
//! MADs for unknown kernel agents, response TIDs given back the engine agent's high
//! word, then the engine (with user RMPP, multi-segment messages are reassembled
//! there). Also `vmad::umad`'s header getters and the header view on the same bytes.
//! No panic; only known agents' MADs go up; tracked sends only ever shrink on receive.
#![no_main]

use libfuzzer_sys::fuzz_target;
use vmad::engine::Engine;
use vmad::transport::kernel::fuzzing::Rx;
use vmad::types::Qp;
use vmad::wire::umad::{Packet as UmadHdr, HEADER_LEN};
use vmad::wire::MAD_SIZE;
use vmad_fuzz::*;

fuzz_target!(|data: &[u8]| {
    let mut b = Bytes(data);
    let mut engine = Engine::new(config());
    let ids = agents(&mut engine);
    let kernel: Vec<(u32, u32, Qp, u8)> = specs()
        .iter()
        .zip(&ids)
        .enumerate()
        .map(|(i, (s, &a))| {
            let hi = engine.hi_tid(a).unwrap_or(0);
            (i as u32, hi, s.qp, u8::from(s.mgmt_class))
        })
        .collect();
    let mut rx = Rx::new(&kernel);
    let mut steps = 0;
    while !b.is_empty() && steps < 256 {
        steps += 1;
        if b.u8() & 0x80 != 0 {
            rx.note_outstanding((u32::from(b.u8() % 8), b.u8(), u32::from(b.u8() % 4)));
            continue;
        }
        // A header from the fuzzer over a MAD from a template (or all raw bytes).
        let len = match b.u8() {
            0..=0xdf => HEADER_LEN + MAD_SIZE,
            _ => usize::from(b.u16() % 400),
        };
        let mut buf = vec![0u8; len];
        let hdr = b.take(HEADER_LEN.min(len)).to_vec();
        buf[..hdr.len()].copy_from_slice(&hdr);
        if len > HEADER_LEN {
            let m = mad(&mut b);
            let n = (len - HEADER_LEN).min(MAD_SIZE);
            buf[HEADER_LEN..HEADER_LEN + n].copy_from_slice(&m[..n]);
        }
        if len >= HEADER_LEN {
            let h = &buf[..HEADER_LEN];
            let _ = (vmad::umad::status(h), vmad::umad::get_pkey(h));
            let v = UmadHdr::new_unchecked(h);
            let _ = (
                v.agent_id(),
                v.status(),
                v.timeout_ms(),
                v.length(),
                v.addr(),
            );
        }
        let before = rx.outstanding();
        let got = rx.read(&buf).map(|(meta, m)| (meta, m.to_vec()));
        assert!(rx.outstanding() <= before);
        if let Some((meta, m)) = got {
            assert!(len >= HEADER_LEN + 24);
            let id = u32::from_ne_bytes(buf[..4].try_into().unwrap());
            assert!(kernel.iter().any(|k| k.0 == id && k.2 == meta.qp));
            deliver(&mut engine, meta, &m);
        }
    }
});
