//! What the RMPP benches share: the SA message they move, the agents and addresses
//! of two engines joined back to back, the pump between them, and the memory-copy
//! floor any design pays for the data.

use std::hint::black_box;

use vmad::engine::{AgentSpec, Engine, RecvMeta};
use vmad::time::Instant;
use vmad::types::{MadAddr, Qp, GSI_QKEY};
use vmad::wire::MAD_SIZE;

/// SA header length: MAD 24 + RMPP 12 + SA 20; 200 data bytes a segment.
pub(crate) const SA_HDR: usize = vmad::wire::sa::DATA_OFFSET;
/// 1 MiB of data: 5,243 SA segments.
pub(crate) const DATA: usize = 1 << 20;

/// An RMPP-active SA message (`method`, `tid`) with `data_len` bytes of a counting pattern.
pub(crate) fn sa_message(method: u8, tid: u64, data_len: usize) -> Vec<u8> {
    let mut m = vec![0u8; SA_HDR + data_len];
    m[..4].copy_from_slice(&[1, 0x03, 2, method]);
    m[8..16].copy_from_slice(&tid.to_be_bytes());
    m[24] = 1; // RMPP version
    m[25] = 1; // DATA
    m[26] = 1; // RMPPFlags.Active
    for (i, b) in m[SA_HDR..].iter_mut().enumerate() {
        *b = i as u8;
    }
    m
}

/// An SA agent (RMPP version 1) serving `methods`.
pub(crate) fn sa_agent(methods: [u64; 2]) -> AgentSpec {
    AgentSpec {
        qp: Qp::Gsi,
        mgmt_class: 0x03.into(),
        class_version: 2,
        rmpp_version: 1,
        method_mask: methods,
        oui: 0,
        user_rmpp: false,
    }
}

/// QP1 at `lid`.
pub(crate) fn addr(lid: u16) -> MadAddr {
    MadAddr {
        qpn: 1,
        qkey: GSI_QKEY,
        lid,
        ..MadAddr::default()
    }
}

/// Move every MAD `from` has to send into `to`, as if from LID `src_lid`.
pub(crate) fn pump(
    from: &mut Engine,
    to: &mut Engine,
    src_lid: u16,
    now: Instant,
    buf: &mut [u8; MAD_SIZE],
) -> bool {
    let mut moved = false;
    while let Some(tx) = from.poll_transmit(now, buf) {
        let meta = RecvMeta {
            qp: Qp::Gsi,
            src: addr(src_lid),
            local_qpn: None,
        };
        to.handle_datagram(now, meta, &buf[..tx.len]);
        moved = true;
    }
    moved
}

/// The floor: `src`'s data copied in 200-byte pieces into a 256-byte transmit slot
/// and out of it into `dst`, as the message.
pub(crate) fn floor(src: &[u8], dst: &mut Vec<u8>) {
    let mut slot = [0u8; MAD_SIZE];
    dst.clear();
    dst.extend_from_slice(&src[..SA_HDR]);
    for piece in src[SA_HDR..].chunks(MAD_SIZE - SA_HDR) {
        slot[SA_HDR..SA_HDR + piece.len()].copy_from_slice(piece);
        black_box(&mut slot);
        dst.extend_from_slice(&slot[SA_HDR..SA_HDR + piece.len()]);
    }
}
