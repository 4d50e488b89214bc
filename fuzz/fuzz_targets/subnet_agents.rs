//! The embedded subnet's agents (every node's SMA and PMA, the built-in SM and SA)
//! fed MADs from a hostile endpoint: a fabric of two CAs and a switch, built fresh
//! (unregistered) for every input on a virtual clock, the built-in SM sweeping it;
//! the port of the second CA injects raw frames (any source LID and QP, Q_Key, P_Key,
//! GRH) on QP0 and QP1 to the SM/SA, switch and CA LIDs, and directed-route SMPs
//! along fuzzed paths; RMPP ACKs answer what the SA sends back; the SM resweeps and
//! time passes. The fabric runs its agents on the injecting thread, so any panic
//! in them is the fuzzer's. Every frame is drained at once (zero timeout).
#![no_main]

use core::time::Duration;

use libfuzzer_sys::fuzz_target;
use vmad::clock::VirtualClock;
use vmad::subnet::Fabric;
use vmad::transport::sim::{RawFrame, SimTransport};
use vmad::transport::Transport;
use vmad::types::{GrhAddr, DEFAULT_PKEY, GSI_QKEY};
use vmad::wire::MAD_SIZE;
use vmad_fuzz::Bytes;

/// The last MAD a port received and the LID it came from.
type Last = Option<([u8; MAD_SIZE], u16)>;

fn drain(port: &mut SimTransport, last: &mut Last) {
    for _ in 0..64 {
        let got = port
            .recv_burst(64, &mut |meta, mad| {
                let mut m = [0u8; MAD_SIZE];
                let n = mad.len().min(MAD_SIZE);
                m[..n].copy_from_slice(&mad[..n]);
                *last = Some((m, meta.src.lid));
            })
            .unwrap_or(0);
        if got == 0 {
            break;
        }
    }
}

/// A request header for `class`, one of the attributes its agent answers (or any).
fn header(b: &mut Bytes<'_>, m: &mut [u8; MAD_SIZE]) -> u8 {
    let (class, version, attrs): (u8, u8, &[u16]) = match b.u8() % 6 {
        // LID-routed and directed-route SMPs: NodeInfo, NodeDesc, SwitchInfo, PortInfo,
        // P_KeyTable, SLtoVL, LFT, MFT, SMInfo, Notice.
        0 => (
            0x01,
            1,
            &[0x11, 0x10, 0x12, 0x15, 0x16, 0x17, 0x19, 0x1b, 0x20, 0x02],
        ),
        1 => (
            0x81,
            1,
            &[0x11, 0x10, 0x12, 0x15, 0x16, 0x17, 0x19, 0x1b, 0x20, 0x02],
        ),
        // SA: ClassPortInfo, Notice, InformInfo, NodeRecord, PortInfoRecord, SwitchInfo,
        // LinkRecord, GUIDInfo, ServiceRecord, P_KeyTable, PathRecord, MCMemberRecord,
        // MultiPathRecord.
        2 => (
            0x03,
            2,
            &[
                0x01, 0x02, 0x03, 0x11, 0x12, 0x14, 0x20, 0x30, 0x31, 0x33, 0x35, 0x38, 0x3a,
            ],
        ),
        // PMA: ClassPortInfo, PortSamplesControl, PortCounters, PortCountersExtended.
        3 => (0x04, 1, &[0x01, 0x10, 0x12, 0x1d, 0x16]),
        4 => (0x09, 1, &[0x10]),
        _ => (b.u8(), b.u8(), &[]),
    };
    let method = match b.u8() {
        x @ 0..=0x7f => {
            [0x01, 0x02, 0x03, 0x05, 0x06, 0x07, 0x12, 0x14, 0x15, 0x81][usize::from(x % 10)]
        }
        x => x,
    };
    let attr = match attrs.get(usize::from(b.u8()) % attrs.len().max(1)) {
        Some(&a) => a,
        None => b.u16(),
    };
    m[..4].copy_from_slice(&[1, class, version, method]);
    m[8..16].copy_from_slice(&u64::from(b.u32()).to_be_bytes());
    m[16..18].copy_from_slice(&attr.to_be_bytes());
    m[20..24].copy_from_slice(&u32::from(b.u16()).to_be_bytes());
    class
}

fuzz_target!(|data: &[u8]| {
    let mut b = Bytes(data);
    let clock = VirtualClock::new();
    let fabric = Fabric::builder()
        .ca("fz0")
        .switch("fzsw", 4)
        .ca("fz1")
        .link("fz0", 1, "fzsw", 1)
        .link("fzsw", 2, "fz1", 1)
        .clock(clock.clone())
        .build_private()
        .expect("fabric");
    // LIDs: fz0 (the SM and SA) 1, the switch 2, fz1 3.
    let mut owner = fabric.open("fz0", 1).expect("fz0");
    let mut me = fabric.open("fz1", 1).expect("fz1");
    let mut last: Last = None;
    let mut steps = 0;
    while !b.is_empty() && steps < 64 {
        steps += 1;
        let op = b.u8();
        match op % 8 {
            // A frame to a LID, on QP0 or QP1.
            0..=3 => {
                let mut m = [0u8; MAD_SIZE];
                let class = header(&mut b, &mut m);
                // Component mask, M_Key / SA key, then a run of payload from the fuzzer.
                if b.u8() & 1 != 0 {
                    m[40..48].copy_from_slice(&u64::from(b.u32()).to_be_bytes());
                }
                let at = 24 + usize::from(b.u8()) % (MAD_SIZE - 24);
                let n = usize::from(b.u8() % 64);
                let raw = b.take(n);
                let n = raw.len().min(MAD_SIZE - at);
                m[at..at + n].copy_from_slice(&raw[..n]);
                let dest_lid = match b.u8() % 6 {
                    0 | 1 => 1,
                    2 => 2,
                    3 => 3,
                    4 => 0xffff,
                    _ => b.u16(),
                };
                let smp = class == 0x01 || class == 0x81;
                let mut f = RawFrame::gsi(m, dest_lid);
                let sel = b.u8();
                if smp != (sel & 1 != 0) {
                    f.dest_qpn = 0;
                    f.src_qpn = 0;
                    f.qkey = 0;
                }
                if sel & 0x02 != 0 {
                    f.src_lid = Some(b.u16());
                }
                if sel & 0x04 != 0 {
                    f.qkey = b.u32();
                }
                if sel & 0x08 != 0 {
                    f.pkey = b.u16();
                }
                if sel & 0x10 != 0 {
                    f.len = usize::from(b.u8());
                }
                if sel & 0x20 != 0 {
                    f.grh = Some(GrhAddr {
                        gid: [b.u8(); 16],
                        hop_limit: b.u8(),
                        ..GrhAddr::default()
                    });
                }
                if sel & 0x40 != 0 {
                    f.dest_qpn = b.u32();
                }
                me.inject(&f);
            }
            // A directed-route SMP along a fuzzed path (the DR fields the fuzzer's too).
            4 | 5 => {
                let mut m = [0u8; MAD_SIZE];
                header(&mut b, &mut m);
                m[1] = 0x81;
                let hops = b.u8() % 8;
                m[4] = b.u8() & 0x80; // D bit
                m[6] = if op & 0x10 != 0 { b.u8() } else { 0 };
                m[7] = if op & 0x20 != 0 { b.u8() } else { hops };
                let dr = if op & 0x40 != 0 { b.u32() } else { u32::MAX };
                m[32..36].copy_from_slice(&dr.to_be_bytes());
                for i in 0..usize::from(hops) {
                    m[129 + i] = b.u8() % 5;
                }
                let n = usize::from(b.u8() % 32);
                let raw = b.take(n);
                m[64..64 + raw.len()].copy_from_slice(raw);
                let mut f = RawFrame::gsi(m, if op & 0x80 != 0 { b.u16() } else { 0xffff });
                f.dest_qpn = 0;
                f.src_qpn = 0;
                f.qkey = 0;
                f.pkey = DEFAULT_PKEY;
                me.inject(&f);
            }
            // ACK (or STOP/ABORT) the last RMPP segment the SA sent us.
            6 => {
                let Some((mut m, src)) = last else {
                    continue;
                };
                if m[26] & 1 == 0 {
                    continue;
                }
                m[3] &= 0x7f;
                m[3] = if b.u8() & 1 == 0 { m[3] | 0x80 } else { m[3] };
                m[25] = 2 + b.u8() % 3;
                let seg = u32::from_be_bytes(m[28..32].try_into().unwrap());
                let win = seg.saturating_add(u32::from(b.u8() % 8));
                m[32..36].copy_from_slice(&win.to_be_bytes());
                let mut f = RawFrame::gsi(m, src);
                f.qkey = GSI_QKEY;
                me.inject(&f);
            }
            // The SM sweeps again; time passes (leases, T2L, held frames).
            _ => {
                if op & 0x80 != 0 {
                    let _ = fabric.sweep();
                } else {
                    clock.advance(Duration::from_millis(u64::from(b.u16())));
                }
            }
        }
        drain(&mut me, &mut last);
        drain(&mut owner, &mut None);
    }
});
