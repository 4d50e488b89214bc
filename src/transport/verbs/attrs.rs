//! What the port reports: GID choice, rate, and the attributes refreshed
//! when an async event says they changed.

use ibverbs_sys as sys;

use crate::transport::PortAttrs;

/// `ibv_port_attr::flags`: every AH on this port needs a GRH
/// (`IBV_QPF_GRH_REQUIRED`, which the bindings do not carry).
pub(super) const QPF_GRH_REQUIRED: u8 = 1;

pub(super) fn is_ipv4_mapped(g: &[u8; 16]) -> bool {
    g[..10].iter().all(|&b| b == 0) && g[10] == 0xff && g[11] == 0xff
}

pub(super) fn is_link_local(g: &[u8; 16]) -> bool {
    g[0] == 0xfe && g[1] & 0xc0 == 0x80
}

/// Rank a RoCE GID for use as the source: lower is better; `None`: unusable.
pub(super) fn gid_rank(gid: &[u8; 16], gid_type: u32) -> Option<u8> {
    if gid.iter().all(|&b| b == 0) {
        return None;
    }
    let v2 = gid_type == sys::IBV_GID_TYPE_ROCE_V2;
    Some(match (v2, is_ipv4_mapped(gid), is_link_local(gid)) {
        (true, false, false) => 0,
        (true, true, _) => 1,
        (true, false, true) => 2,
        (false, ..) => 3,
    })
}

/// Gb/s of an `ibv_port_attr` width and speed, as `umad_get_port` reports `rate`.
/// `speed` is `active_speed_ex` where the library fills it (rdma-core 45 and
/// later, which also knows XDR), else `active_speed`: the same encoding.
pub(super) fn rate_gbps(width: u8, speed: u32) -> u32 {
    let lanes = match width {
        1 => 1,
        2 => 4,
        4 => 8,
        8 => 12,
        16 => 2,
        _ => 0,
    };
    // Per-lane data rate in tenths of Gb/s (SDR, DDR, QDR, FDR10, FDR, EDR, HDR, NDR, XDR).
    let per_lane_tenths = match speed {
        1 => 25,
        2 => 50,
        4 | 8 => 100,
        16 => 140,
        32 => 250,
        64 => 500,
        128 => 1000,
        256 => 2000,
        _ => 0,
    };
    lanes * per_lane_tenths / 10
}

/// The port's speed code: `active_speed_ex` when the library filled it in.
pub(super) fn speed_of(p: &sys::ibv_port_attr) -> u32 {
    match p.active_speed_ex {
        0 => u32::from(p.active_speed),
        ex => ex,
    }
}

/// Copy what a port query says into `attrs` (everything an async event can change
/// but the P_Key table, which the caller reads with `ibv_query_pkey`).
pub(super) fn apply(attrs: &mut PortAttrs, p: &sys::ibv_port_attr) {
    attrs.lid = p.lid;
    attrs.lmc = p.lmc;
    attrs.sm_lid = p.sm_lid;
    attrs.sm_sl = p.sm_sl;
    attrs.state = u8::try_from(p.state).unwrap_or(0);
    attrs.phys_state = p.phys_state;
    attrs.rate = rate_gbps(p.active_width, speed_of(p));
    attrs.capmask = p.port_cap_flags;
}
