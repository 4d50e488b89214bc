//! PathRecords (IBA 15.2.5.16) from the SubnetDb: the path from one end
//! port to another follows the switches' linear forwarding tables; its MTU
//! and rate are the smallest of the links it crosses (PortInfo's active
//! MTU and MTUCap, LinkWidthActive × LinkSpeedActive), as OpenSM's
//! `pr_rcv_get_path_parms` computes them.
//!
//! Sources and destinations come from SGID or SLID and DGID or DLID when
//! the ComponentMask has them, else every end port (OpenSM's "world"
//! query, what `saquery -p` asks). MTU, Rate and PacketLifeTime honour
//! their selectors; P_Key must equal when masked, a masked SL is the
//! path's. Not modelled: LMC paths (one path per pair, base LIDs), QoS
//! classes, SL2VL, flow labels, GRH paths to other subnets.

use super::db::{self, end_ports, is_switch, EndPort, Index};
use super::{Outcome, Query};
use crate::subnet::subnet_db::{PortEntry, SubnetDb};
use crate::wire::sa::path_record::{self, comp};
use crate::wire::sa::SaStatus;

/// PacketLifeTime of every path: OpenSM's default `packet_life_time` (0x12).
const PACKET_LIFE: u8 = 0x12;
/// Longest walk through the LFTs before a path is declared looping.
const MAX_HOPS: u8 = 64;
/// Selector "exactly" (IBA 15.2.5.16).
const SEL_EXACTLY: u8 = 2;

/// What a walk through the fabric found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Route {
    /// Links crossed.
    pub(super) hops: u8,
    /// Smallest MTU code on the way.
    pub(super) mtu: u8,
    /// Smallest link rate on the way, in 0.5 Gb/s.
    pub(super) half_gbps: u32,
}

/// IB rate codes (PathRecord Rate, IBA table 219) by data rate in 0.5 Gb/s.
const RATES: [(u32, u8); 21] = [
    (5, 2),
    (10, 5),
    (20, 3),
    (28, 11),
    (40, 6),
    (50, 15),
    (56, 19),
    (60, 4),
    (80, 7),
    (100, 20),
    (112, 12),
    (120, 8),
    (160, 9),
    (200, 16),
    (224, 13),
    (240, 10),
    (336, 14),
    (400, 17),
    (600, 18),
    (800, 21),
    (1200, 22),
];

/// The rate code of a data rate: the largest code not above it.
pub(super) fn rate_code(half_gbps: u32) -> u8 {
    RATES
        .iter()
        .take_while(|(r, _)| *r <= half_gbps)
        .last()
        .map_or(2, |(_, c)| *c)
}

/// The data rate of a code, in 0.5 Gb/s (0 for an unknown code).
fn rate_of(code: u8) -> u32 {
    RATES
        .iter()
        .find(|(_, c)| *c == code)
        .map_or(0, |(r, _)| *r)
}

/// A port's link rate in 0.5 Gb/s, from its active width and speed.
pub(super) fn link_half_gbps(p: &PortEntry) -> u32 {
    let pi = db::port_info(p);
    let lanes = match pi.link_width_active() {
        1 => 1,
        2 => 4,
        4 => 8,
        8 => 12,
        16 => 2,
        _ => 1,
    };
    let lane = match (pi.link_speed_ext_active(), pi.link_speed_active()) {
        (1, _) => 28, // FDR, 14 Gb/s
        (2, _) => 50, // EDR
        (4, _) => 100,
        (8, _) => 200,
        (_, 2) => 10,
        (_, 4) => 20,
        _ => 5,
    };
    lanes * lane
}

/// A port's MTU code: the smaller of its active (neighbor) MTU and MTUCap.
fn port_mtu(p: &PortEntry) -> u8 {
    let pi = db::port_info(p);
    match pi.neighbor_mtu() {
        0 => pi.mtu_cap(),
        n => n.min(pi.mtu_cap()),
    }
}

/// Walk from `src` to the end port `dst` through the LFTs.
pub(super) fn walk(db: &SubnetDb, src: EndPort, dst: EndPort) -> Option<Route> {
    let first = &db.nodes[src.node].ports[src.port];
    if src == dst {
        return Some(Route {
            hops: 0,
            mtu: port_mtu(first),
            half_gbps: link_half_gbps(first),
        });
    }
    let mut route = Route {
        hops: 0,
        mtu: u8::MAX,
        half_gbps: u32::MAX,
    };
    let mut at = src.node;
    while route.hops < MAX_HOPS {
        let node = &db.nodes[at];
        if route.hops > 0 && at == dst.node {
            return Some(route);
        }
        let egress = if is_switch(node) {
            let out = *node.lft.get(usize::from(dst.lid))?;
            node.ports.iter().find(|p| p.port_num == out && out != 0)?
        } else if route.hops == 0 {
            first
        } else {
            return None; // reached a CA that is not the destination
        };
        route.mtu = route.mtu.min(port_mtu(egress));
        route.half_gbps = route.half_gbps.min(link_half_gbps(egress));
        at = egress.peer?.0;
        route.hops += 1;
    }
    None
}

/// Whether `have` satisfies `want` under a PathRecord selector.
fn selected(selector: u8, want: u32, have: u32) -> bool {
    match selector {
        0 => have > want,
        1 => have < want,
        2 => have == want,
        _ => true, // "largest available": the one path there is
    }
}

/// The P_Key two ports share: the first of `src`'s table (by membership-free
/// value) that `dst` also has; `want` (masked) must be one of them.
fn common_pkey(src: &PortEntry, dst: &PortEntry, want: Option<u16>) -> Option<u16> {
    let base = |k: u16| k & 0x7fff;
    if src.pkeys.is_empty() && dst.pkeys.is_empty() {
        return Some(want.unwrap_or(0xffff));
    }
    src.pkeys
        .iter()
        .copied()
        .filter(|k| base(*k) != 0)
        .filter(|k| want.is_none_or(|w| base(w) == base(*k)))
        .find(|k| dst.pkeys.iter().any(|d| base(*d) == base(*k)))
}

/// Whether a GID's prefix is link-local (fe80::/10), which OpenSM accepts
/// whatever the subnet's prefix (`ib_gid_is_link_local`).
fn link_local(prefix: u64) -> bool {
    prefix & 0xffc0_0000_0000_0000 == 0xfe80_0000_0000_0000
}

/// The end port a GID names: a link-local or this subnet's prefix, and a
/// port GUID the SM found.
pub(super) fn end_by_gid(db: &SubnetDb, ix: &Index, gid: &[u8; 16]) -> Option<EndPort> {
    let mut half = [0u8; 8];
    half.copy_from_slice(&gid[..8]);
    let prefix = u64::from_be_bytes(half);
    if !link_local(prefix) && prefix != db.subnet_prefix {
        return None;
    }
    half.copy_from_slice(&gid[8..]);
    ix.by_guid.get(&u64::from_be_bytes(half)).copied()
}

/// The end ports a query names through a GID (`gid_bit`) and/or LID
/// (`lid_bit`), or all of them. A GID or LID that names no port gives no
/// ports: OpenSM's `pr_rcv_get_end_points` finds ERR_INVALID_GID or
/// NO_RECORDS there, but `osm_pr_rcv_process` drops that status and answers
/// the empty list (Get: NO_RECORDS; GetTable: no records). A GID and a LID
/// of different ports are ERR_REQ_INVALID, as there.
fn ends(
    db: &SubnetDb,
    ix: &Index,
    mask: u64,
    (gid_bit, gid): (u64, [u8; 16]),
    (lid_bit, lid): (u64, u16),
) -> Result<Vec<EndPort>, Outcome> {
    let by_gid = (mask & gid_bit != 0).then(|| end_by_gid(db, ix, &gid));
    let by_lid = (mask & lid_bit != 0).then(|| ix.by_lid.get(&lid).copied());
    match (by_gid, by_lid) {
        (Some(Some(g)), Some(Some(l))) if g != l => Err(Outcome::sa(SaStatus::ReqInvalid)),
        (Some(e), _) | (None, Some(e)) => Ok(e.into_iter().collect()),
        (None, None) => Ok(end_ports(db).collect()),
    }
}

fn gid(prefix: u64, guid: u64) -> [u8; 16] {
    let mut g = [0u8; 16];
    g[..8].copy_from_slice(&prefix.to_be_bytes());
    g[8..].copy_from_slice(&guid.to_be_bytes());
    g
}

/// The checks OpenSM's `osm_pr_rcv_process` makes before it looks for
/// paths: a Rate or MTU given with its selector must be a valid code
/// (ERR_REQ_INVALID), and ServiceID comes in both halves or not at all
/// (ERR_INSUFFICIENT_COMPONENTS).
pub(super) fn check(mask: u64, want: &path_record::Packet<&[u8]>) -> Option<Outcome> {
    let both = |a: u64, b: u64| mask & (a | b) == a | b;
    if both(comp::RATE_SELECTOR, comp::RATE) && !(2..=22).contains(&want.rate()) {
        return Some(Outcome::sa(SaStatus::ReqInvalid));
    }
    if both(comp::MTU_SELECTOR, comp::MTU) && !(1..=5).contains(&want.mtu()) {
        return Some(Outcome::sa(SaStatus::ReqInvalid));
    }
    let sid = comp::SERVICE_ID_MSB | comp::SERVICE_ID_LSB;
    if mask & sid != 0 && mask & sid != sid {
        return Some(Outcome::sa(SaStatus::InsufficientComponents));
    }
    None
}

/// PathRecords for a Get or GetTable.
pub(super) fn path_records(db: &SubnetDb, q: &Query<'_>) -> Outcome {
    let want = path_record::Packet::new_unchecked(q.record);
    let mask = q.comp_mask;
    if let Some(o) = check(mask, &want) {
        return o;
    }
    let ix = Index::new(db);
    let srcs = match ends(
        db,
        &ix,
        mask,
        (comp::SGID, want.sgid()),
        (comp::SLID, want.slid()),
    ) {
        Ok(v) => v,
        Err(o) => return o,
    };
    let dsts = match ends(
        db,
        &ix,
        mask,
        (comp::DGID, want.dgid()),
        (comp::DLID, want.dlid()),
    ) {
        Ok(v) => v,
        Err(o) => return o,
    };
    let mut data = Vec::with_capacity(srcs.len() * dsts.len() * path_record::LEN);
    for s in &srcs {
        for d in &dsts {
            if let Some(rec) = pair_record(db, mask, &want, *s, *d) {
                data.extend_from_slice(&rec);
            }
        }
    }
    Outcome::Records {
        record_len: path_record::LEN,
        data,
    }
}

/// The PathRecord from `s` to `d` if one satisfies the query (`want` under
/// `mask`, PathRecord ComponentMask bits).
pub(super) fn pair_record(
    db: &SubnetDb,
    mask: u64,
    want: &path_record::Packet<&[u8]>,
    s: EndPort,
    d: EndPort,
) -> Option<[u8; path_record::LEN]> {
    let want_pkey = (mask & comp::PKEY != 0).then(|| want.pkey());
    let sel = |sel_bit: u64, selector: u8| {
        if mask & sel_bit != 0 {
            selector
        } else {
            SEL_EXACTLY
        }
    };
    let mtu_sel = sel(comp::MTU_SELECTOR, want.mtu_selector());
    let rate_sel = sel(comp::RATE_SELECTOR, want.rate_selector());
    let life_sel = sel(comp::PKT_LIFE_SELECTOR, want.pkt_life_selector());
    // A requested SL is the path's (OpenSM without QoS: any SL its SL2VL
    // tables do not drop; the embedded fabric models no SL2VL), else SL 0.
    let sl = if mask & comp::SL != 0 { want.sl() } else { 0 };
    let sp = &db.nodes[s.node].ports[s.port];
    let route = walk(db, s, d)?;
    let dp = &db.nodes[d.node].ports[d.port];
    let pkey = common_pkey(sp, dp, want_pkey)?;
    let rate = rate_code(route.half_gbps);
    if mask & comp::MTU != 0 && !selected(mtu_sel, want.mtu().into(), route.mtu.into()) {
        return None;
    }
    if mask & comp::RATE != 0 && !selected(rate_sel, rate_of(want.rate()), rate_of(rate)) {
        return None;
    }
    // IBA table 205: a loopback path's PacketLifeTime is zero (OpenSM too).
    let life = if s == d { 0 } else { PACKET_LIFE };
    if mask & comp::PKT_LIFE != 0 && !selected(life_sel, want.pkt_life().into(), life.into()) {
        return None;
    }
    let mut rec = [0u8; path_record::LEN];
    path_record::Repr {
        // OpenSM's `pr_rcv_build_pr` leaves ServiceID 0 in the answer,
        // whatever the query asked.
        service_id: 0,
        dgid: gid(db.subnet_prefix, d.guid),
        sgid: gid(db.subnet_prefix, s.guid),
        dlid: d.lid,
        slid: s.lid,
        // HopLimit only counts for a path through a router (OpenSM leaves
        // it 0 inside the subnet, and so does IBA 15.2.5.16's use of it).
        hop_limit: 0,
        reversible: true,
        pkey,
        mtu_selector: SEL_EXACTLY,
        mtu: route.mtu,
        rate_selector: SEL_EXACTLY,
        rate,
        pkt_life_selector: SEL_EXACTLY,
        pkt_life: life,
        sl,
        ..path_record::Repr::default()
    }
    .emit(&mut path_record::Packet::new_unchecked(&mut rec[..]));
    Some(rec)
}
