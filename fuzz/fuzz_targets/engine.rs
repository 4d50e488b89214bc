//! The engine fed an arbitrary stream of datagrams, sends, timer ticks, agent
//! churn and loopback answers: no panic, no unbounded growth, and every
//! invariant (`Engine::check_invariants`) holds after each step.
#![no_main]

use core::time::Duration;

use libfuzzer_sys::fuzz_target;
use vmad::engine::{Engine, SendRequest};
use vmad::time::Instant;
use vmad::types::Qp;
use vmad::wire::MAD_SIZE;
use vmad_fuzz::*;

/// A MAD to start from, chosen by `kind`, then overwritten by the fuzzer.
fn template(kind: u8, tid: u64) -> [u8; MAD_SIZE] {
    let mut m = [0u8; MAD_SIZE];
    let (class, version, method) = match kind % 8 {
        0 => (0x03, 2, 0x01),
        1 => (0x03, 2, 0x81),
        2 => (0x04, 1, 0x01),
        3 => (0x04, 1, 0x81),
        4 => (0x30, 1, 0x06),
        5 => (0x81, 1, 0x01),
        6 => (0x01, 1, 0x81),
        _ => (0x03, 2, 0x92),
    };
    m[0] = 1;
    m[1] = class;
    m[2] = version;
    m[3] = method;
    m[8..16].copy_from_slice(&tid.to_be_bytes());
    if class == 0x30 {
        m[37..40].copy_from_slice(&[0x00, 0x14, 0x05]);
    }
    if kind & 0x08 != 0 {
        // RMPP DATA, first segment.
        m[24] = 1;
        m[25] = 1;
        m[26] = 0x1f << 3 | 0x03;
        m[31] = 1;
    }
    m
}

fuzz_target!(|data: &[u8]| {
    let mut b = Bytes(data);
    let mut engine = Engine::new(config());
    let mut agents = agents(&mut engine);
    let mut now = Instant::ZERO;
    let mut last_tx: Vec<[u8; MAD_SIZE]> = Vec::new();
    let mut sends = 0usize;
    let mut steps = 0;
    while !b.is_empty() && steps < 2000 {
        steps += 1;
        match b.u8() % 9 {
            // A datagram from the fabric.
            0 | 1 => {
                let kind = b.u8();
                let hi = agents
                    .get(usize::from(b.u8()) % agents.len().max(1))
                    .and_then(|&a| engine.hi_tid(a))
                    .unwrap_or(0);
                let tid = (u64::from(hi) << 32) | u64::from(b.u8());
                let mut mad = template(kind, tid);
                for _ in 0..(b.u8() % 8) {
                    let at = usize::from(b.u8());
                    mad[at] = b.u8();
                }
                let qp = if mad[1] == 0x01 || mad[1] == 0x81 {
                    Qp::Smi
                } else {
                    Qp::Gsi
                };
                let qp = if b.u8() == 0xff { Qp::Smi } else { qp };
                let src = peer(&mut b);
                let len = if b.u8() == 0xfe {
                    usize::from(b.u8())
                } else {
                    MAD_SIZE
                };
                engine.handle_datagram(now, meta(qp, src), &mad[..len]);
            }
            // Time passes.
            2 => {
                now += Duration::from_micros(u64::from(b.u16()) * 50);
                engine.handle_timeout(now);
            }
            // An application send (maybe RMPP, maybe invalid).
            3 => {
                let Some(&agent) = agents.get(usize::from(b.u8()) % agents.len().max(1)) else {
                    continue;
                };
                let kind = b.u8();
                let mut mad = template(kind, u64::from(b.u32())).to_vec();
                let extra = usize::from(b.u16() % 4096);
                mad.resize(
                    if kind & 0x08 != 0 {
                        56 + extra
                    } else {
                        MAD_SIZE
                    },
                    0xab,
                );
                for _ in 0..(b.u8() % 4) {
                    let at = usize::from(b.u8()) % mad.len();
                    mad[at] = b.u8();
                }
                let req = SendRequest {
                    addr: peer(&mut b),
                    mad: &mad,
                    timeout_ms: u32::from(b.u8() % 4) * 10,
                    retries: u32::from(b.u8() % 3),
                };
                if engine.send(now, agent, req).is_ok() {
                    sends += 1;
                }
            }
            // Outputs.
            4 => last_tx = drain(&mut engine, now, usize::from(b.u8())),
            // The peer answers one of the MADs we sent: a GetResp, or an RMPP ACK.
            5 => {
                if last_tx.is_empty() {
                    continue;
                }
                let mut mad = last_tx[usize::from(b.u8()) % last_tx.len()];
                if mad[26] & 1 != 0 && b.u8() & 1 == 0 {
                    mad[25] = 2; // ACK of the segment, window from the fuzzer
                    mad[32..36].copy_from_slice(&u32::from(b.u8() % 16).to_be_bytes());
                } else {
                    mad[3] |= 0x80;
                }
                let qp = if mad[1] == 0x01 || mad[1] == 0x81 {
                    Qp::Smi
                } else {
                    Qp::Gsi
                };
                let src = peer(&mut b);
                engine.handle_datagram(now, meta(qp, src), &mad);
            }
            // Agent churn.
            6 => {
                let i = usize::from(b.u8()) % agents.len().max(1);
                if let Some(&a) = agents.get(i) {
                    engine.unregister(a).expect("registered");
                    agents.remove(i);
                }
            }
            7 => {
                // Register the standard set again; those overlapping live agents fail.
                if agents.len() < 4 {
                    agents.extend(specs().into_iter().filter_map(|s| engine.register(s).ok()));
                }
            }
            _ => {
                now += Duration::from_millis(u64::from(b.u8()));
                engine.handle_timeout(now);
                last_tx = drain(&mut engine, now, usize::MAX);
            }
        }
        check(&engine, sends);
    }
    // Far in the future every request has been sent, retried and timed out, and
    // every session has ended: nothing may be left. (A request still queued gets
    // its timer when handed out, so drain between the ticks.)
    for _ in 0..8 {
        drain(&mut engine, now, usize::MAX);
        now += Duration::from_secs(60);
        engine.handle_timeout(now);
    }
    drain(&mut engine, now, usize::MAX);
    check(&engine, sends);
    let f = engine.footprint();
    assert_eq!((f.txns, f.recv_sessions, f.dedup), (0, 0, 0), "leak {f:?}");
});
