//! Helpers shared by the integration tests (public API only).

use std::time::{Duration, Instant};

use vmad::engine::{RecvMeta, Transmit};
use vmad::transport::Transport;
use vmad::types::{MadAddr, Qp};

/// Generous bound for anything that should happen "at once": tests never assert on timing,
/// this only keeps a broken build from hanging.
pub(crate) const PATIENCE: Duration = Duration::from_secs(10);

/// Send one 256-byte MAD from `t` on `qp` to `dest`.
pub(crate) fn send(t: &mut dyn Transport, qp: Qp, dest: MadAddr, mad: &[u8; 256]) {
    let sent = t
        .transmit(&mut |slot| {
            slot.copy_from_slice(mad);
            Some(Transmit { qp, dest, len: 256 })
        })
        .unwrap();
    assert!(sent);
}

/// Wait for the next MAD on `t` (panics after [`PATIENCE`]).
pub(crate) fn recv(t: &mut dyn Transport) -> (RecvMeta, Vec<u8>) {
    try_recv_for(t, PATIENCE).expect("no MAD arrived")
}

/// The next MAD on `t` within `limit`, if any.
pub(crate) fn try_recv_for(t: &mut dyn Transport, limit: Duration) -> Option<(RecvMeta, Vec<u8>)> {
    let start = Instant::now();
    loop {
        let mut got = None;
        t.recv_burst(1, &mut |meta, bytes| got = Some((meta, bytes.to_vec())))
            .unwrap();
        if got.is_some() {
            return got;
        }
        let left = limit.checked_sub(start.elapsed())?;
        t.wait(Some(left)).unwrap();
    }
}

/// A DR SMP SubnGet(attr) along `path` (`path[0]` is the first hop's out port), as it
/// leaves the sending port: the sender's SMI has set the hop pointer to 1 (IBA C14-9:1).
pub(crate) fn dr_get(tid: u64, attr: u16, attr_mod: u32, path: &[u8]) -> [u8; 256] {
    let mut m = [0u8; 256];
    m[0] = 1;
    m[1] = 0x81;
    m[2] = 1;
    m[3] = 0x01;
    m[6] = 1;
    m[7] = path.len() as u8;
    m[8..16].copy_from_slice(&tid.to_be_bytes());
    m[16..18].copy_from_slice(&attr.to_be_bytes());
    m[20..24].copy_from_slice(&attr_mod.to_be_bytes());
    m[32..34].copy_from_slice(&0xffffu16.to_be_bytes());
    m[34..36].copy_from_slice(&0xffffu16.to_be_bytes());
    for (i, p) in path.iter().enumerate() {
        m[128 + 1 + i] = *p;
    }
    m
}

/// A LID-routed SMP SubnGet(attr).
pub(crate) fn lid_get(tid: u64, attr: u16, attr_mod: u32) -> [u8; 256] {
    let mut m = [0u8; 256];
    m[0] = 1;
    m[1] = 0x01;
    m[2] = 1;
    m[3] = 0x01;
    m[8..16].copy_from_slice(&tid.to_be_bytes());
    m[16..18].copy_from_slice(&attr.to_be_bytes());
    m[20..24].copy_from_slice(&attr_mod.to_be_bytes());
    m
}

/// Big-endian u64 at `at`.
pub(crate) fn be64(b: &[u8], at: usize) -> u64 {
    u64::from_be_bytes(b[at..at + 8].try_into().unwrap())
}

/// Big-endian u16 at `at`.
pub(crate) fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes(b[at..at + 2].try_into().unwrap())
}

/// Address of QP0 behind `lid` (permissive for DR).
pub(crate) fn smi(lid: u16) -> MadAddr {
    MadAddr {
        qpn: 0,
        lid,
        ..MadAddr::default()
    }
}

/// Address of QP1 behind `lid`.
pub(crate) fn gsi(lid: u16) -> MadAddr {
    MadAddr {
        qpn: 1,
        qkey: vmad::types::GSI_QKEY,
        lid,
        ..MadAddr::default()
    }
}
