//! The RMPP receiver, through the engine: arbitrary DATA segments (any segment
//! number, flags, PayloadLength, TID, peer), ACK/STOP/ABORT and timer ticks for
//! an SA agent running RMPP. No panic, every invariant holds after each step,
//! memory stays under the configured limits, and every reassembled message is
//! a whole number of segments within `max_message`.
#![no_main]

use core::time::Duration;

use libfuzzer_sys::fuzz_target;
use vmad::engine::{Engine, Event};
use vmad::time::Instant;
use vmad::types::Qp;
use vmad::wire::MAD_SIZE;
use vmad_fuzz::*;

const SA_HDR: usize = 56;

fuzz_target!(|data: &[u8]| {
    let mut b = Bytes(data);
    let mut engine = Engine::new(config());
    let agents = agents(&mut engine);
    let client_hi = engine.hi_tid(agents[1]).unwrap_or(0);
    let mut now = Instant::ZERO;
    let mut steps = 0;
    while !b.is_empty() && steps < 4000 {
        steps += 1;
        let op = b.u8();
        if op < 0x20 {
            now += Duration::from_millis(u64::from(op) * 4);
            engine.handle_timeout(now);
        } else {
            let mut m = [0u8; MAD_SIZE];
            m[0] = 1;
            m[1] = 0x03;
            m[2] = 2;
            // Requests to the SA server, or responses to the client's TID space.
            let response = op & 0x01 != 0;
            m[3] = if response { 0x92 } else { 0x14 };
            let tid_lo = u64::from(b.u8() % 4);
            let tid = if response {
                (u64::from(client_hi) << 32) | tid_lo
            } else {
                tid_lo
            };
            m[8..16].copy_from_slice(&tid.to_be_bytes());
            m[24] = if op & 0x40 != 0 { b.u8() } else { 1 };
            m[25] = match (op >> 1) & 0x7 {
                0..=4 => 1,
                5 => 2,
                6 => 3,
                _ => 4,
            };
            m[26] = b.u8() | 0x01;
            m[27] = if m[25] == 1 { 0 } else { b.u8() };
            let seg = match b.u8() {
                x @ 0..=0xef => u32::from(x % 48),
                _ => b.u32(),
            };
            m[28..32].copy_from_slice(&seg.to_be_bytes());
            let paylen = match b.u8() {
                0..=0x7f => 0,
                0x80..=0xef => u32::from(b.u16()),
                _ => b.u32(),
            };
            m[32..36].copy_from_slice(&paylen.to_be_bytes());
            let fill = b.u8();
            m[SA_HDR..].fill(fill);
            let src = peer(&mut b);
            engine.handle_datagram(now, meta(Qp::Gsi, src), &m);
        }
        let mut slot = [0u8; MAD_SIZE];
        while engine.poll_transmit(now, &mut slot).is_some() {
            // What the receiver sends is an RMPP ACK, STOP or ABORT (or the
            // engine's 0x000c to an unclaimed Get/Set).
            assert!(slot[26] & 1 == 1 || slot[3] & 0x80 != 0, "{slot:?}");
        }
        while let Some(event) = engine.poll_event() {
            if let Event::Recv { mad, .. } = event {
                let max = engine.config().rmpp.max_message;
                assert!(mad.len() <= max.max(MAD_SIZE), "{} > {max}", mad.len());
                if mad[26] & 1 != 0 {
                    assert!(mad.len() >= SA_HDR, "{}", mad.len());
                }
            }
        }
        check(&engine, 0);
    }
    now += Duration::from_secs(60);
    engine.handle_timeout(now);
    while engine.poll_event().is_some() {}
    check(&engine, 0);
    let f = engine.footprint();
    assert_eq!((f.recv_sessions, f.reassembly_bytes), (0, 0), "leak {f:?}");
});
