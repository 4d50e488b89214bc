//! Who a MAD is from or for, as the engine's tables key it: response
//! matching (kernel `rcv_has_same_gid`), RMPP send sessions, the duplicate
//! filter and the answer address.

use super::AgentId;
use crate::types::{MadAddr, Qp, GSI_QKEY};

/// A peer: LID and GID (for the per-peer reassembly limit), or the GID alone
/// with LID 0 when keyed as response matching sees it ([`match_key`]).
pub(crate) type PeerKey = (u16, Option<[u8; 16]>);

/// What identifies a send session: agent, TID and the peer, as the kernel's
/// `ib_find_send_mad` finds the send an ACK, STOP or ABORT belongs to (TID,
/// then `rcv_has_same_gid`: the GID when there is a GRH, else the LID). Two
/// requesters may well use the same TID; their responses are two sessions.
pub(crate) type SendKey = (u32, u64, PeerKey);

/// The peer as response matching sees it: the GID with a GRH, else the LID;
/// equal for two addresses exactly when [`same_peer`] holds.
pub(crate) fn match_key(peer: &MadAddr) -> PeerKey {
    match &peer.grh {
        Some(g) => (0, Some(g.gid)),
        None => (peer.lid, None),
    }
}

/// The [`SendKey`] of `agent`'s send with `tid` to (or an RMPP MAD from) `peer`.
pub(crate) fn send_key(agent: AgentId, tid: u64, peer: &MadAddr) -> SendKey {
    (agent.0, tid, match_key(peer))
}

/// Whether a response from `src` can answer a request sent to `dest` (kernel
/// `rcv_has_same_gid`): same GID when both carry a GRH, same LID when neither does.
pub(crate) fn same_peer(dest: &MadAddr, src: &MadAddr) -> bool {
    match (&dest.grh, &src.grh) {
        (Some(d), Some(s)) => d.gid == s.gid,
        (None, None) => dest.lid == src.lid,
        _ => false,
    }
}

/// The address to answer a MAD from `src` on `qp`.
pub(crate) fn reply_addr(qp: Qp, src: &MadAddr) -> MadAddr {
    MadAddr {
        qkey: if qp == Qp::Gsi { GSI_QKEY } else { 0 },
        ..*src
    }
}
