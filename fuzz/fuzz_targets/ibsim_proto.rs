//! The ibsim client protocol as the transport receives it: control replies (`sim_ctl`
//! and the structs in its data: ClientInfo, NodeInfo, PortInfo, P_Keys) and data
//! datagrams (`sim_request`) of any length, through the transport's classification
//! (drop echoes to the drop monitor, TID restore of responses and echoes of what it
//! sent, the SMI hop-pointer fix) to the engine. No panic; a parsed control message
//! re-emits to the same bytes' meaning.
#![no_main]

use libfuzzer_sys::fuzz_target;
use vmad::engine::Engine;
use vmad::transport::ibsim::fuzzing::Rx;
use vmad::transport::ibsim::proto::{
    self, ClientInfo, CtlRepr, NodeInfoLite, PortInfoLite, Request, CTL_DATA_LEN, CTL_LEN,
    REQUEST_LEN,
};
use vmad::wire::MAD_SIZE;
use vmad_fuzz::*;

fn control(b: &mut Bytes<'_>) {
    let len = if b.u8() < 0xf0 {
        CTL_LEN
    } else {
        usize::from(b.u8())
    };
    let mut buf = b.take(len).to_vec();
    if buf.len() >= 4 && b.u8() & 1 == 0 {
        buf[..4].copy_from_slice(&proto::SIM_MAGIC.to_ne_bytes());
    }
    let Some(ctl) = CtlRepr::parse(&buf) else {
        return;
    };
    assert_eq!(CtlRepr::parse(&ctl.emit()), Some(ctl));
    if let Some(info) = ClientInfo::parse(&ctl.data) {
        let _ = ClientInfo::parse(&info.emit());
    }
    let _ = PortInfoLite::parse(&ctl.data).rate_gbps();
    let _ = NodeInfoLite::parse(&ctl.data);
    assert!(proto::parse_pkeys(&ctl.data).len() <= CTL_DATA_LEN / 2);
}

fuzz_target!(|data: &[u8]| {
    let mut b = Bytes(data);
    let mut rx = Rx::default();
    let mut engine = Engine::new(config());
    let agents = agents(&mut engine);
    let mut sent: Vec<[u8; MAD_SIZE]> = Vec::new();
    let mut steps = 0;
    while !b.is_empty() && steps < 256 {
        steps += 1;
        match b.u8() % 5 {
            0 => control(&mut b),
            // Something we sent (its TID carries an engine agent's high word).
            1 => {
                let mut m = mad(&mut b);
                let hi = agents
                    .get(usize::from(b.u8()) % agents.len())
                    .and_then(|&a| engine.hi_tid(a))
                    .unwrap_or(0);
                m[8..12].copy_from_slice(&hi.to_be_bytes());
                rx.note_send(&m);
                if sent.len() < 16 {
                    sent.push(m);
                }
            }
            // A datagram from ibsim: fresh, or an answer to / echo of what we sent.
            op => {
                let len = match b.u8() {
                    0..=0xef => REQUEST_LEN,
                    _ => usize::from(b.u16() % 600),
                };
                let mut pkt = vec![0u8; len];
                if len >= REQUEST_LEN {
                    let mut req = Request::new_unchecked(&mut pkt[..REQUEST_LEN]);
                    req.set_dlid(b.u16());
                    req.set_slid(b.u16());
                    req.set_dqp(u32::from(b.u8() % 3));
                    req.set_sqp(u32::from(b.u8() % 3));
                    req.set_status(if op == 4 { 110 } else { 0 });
                    req.set_length(MAD_SIZE as u64);
                    let m = match sent.get(usize::from(b.u8())) {
                        Some(m) if op != 2 => {
                            let mut m = *m;
                            // ibsim's TID: the low 32 bits, the high word zero.
                            m[8..12].fill(0);
                            if op == 3 {
                                m[3] |= 0x80;
                            }
                            m
                        }
                        _ => mad(&mut b),
                    };
                    req.mad_mut().copy_from_slice(&m);
                    for _ in 0..(b.u8() % 4) {
                        let at = usize::from(b.u16()) % REQUEST_LEN;
                        pkt[at] = b.u8();
                    }
                } else {
                    let raw = b.take(len);
                    pkt[..raw.len()].copy_from_slice(raw);
                }
                if let Ok(req) = Request::new_checked(&pkt[..]) {
                    let _ = (req.dlid(), req.slid(), req.dqp(), req.sqp(), req.status());
                    let _ = (req.length(), req.mad().len());
                }
                if let Some((meta, m)) = rx.receive(&mut pkt) {
                    assert!(len == REQUEST_LEN && m.len() == MAD_SIZE);
                    deliver(&mut engine, meta, m);
                }
            }
        }
    }
    for d in rx.take_dropped() {
        let _ = d.tid();
    }
});
