//! MultiPathRecord (IBA 15.2.5.20, as OpenSM's `osm_mpr_rcv_process`
//! answers it): a SubnAdmGetMulti, sent with RMPP, naming up to ten source
//! and destination GIDs; the answer is a GetMultiResp of PathRecords (the
//! PathRecord attribute ID), the first NumbPath of the paths between every
//! source and every destination, sources outermost.
//!
//! The record's constraints (P_Key, SL, MTU, Rate, PacketLifeTime with
//! their selectors, ServiceID) are the PathRecord's, so each pair's path is
//! [`path::pair_record`] of the PathRecord this request would be.
//! Not modelled: OpenSM's APM special case (two sources, two destinations,
//! NumbPath 2: it picks the most disjoint pair of paths; here the first two
//! pairs' paths) and LMC (one path per pair).

use super::db::Index;
use super::path::{self, end_by_gid};
use super::{Outcome, Query};
use crate::subnet::subnet_db::SubnetDb;
use crate::wire::mad::{MadStatus, Method};
use crate::wire::sa::path_record::{self, comp as pr};
use crate::wire::sa::SaStatus;

/// MultiPathRecord ComponentMask bits (OpenSM's `IB_MPR_COMPMASK_*`).
pub(crate) mod comp {
    /// RawTraffic.
    pub(crate) const RAW_TRAFFIC: u64 = 1 << 0;
    /// FlowLabel.
    pub(crate) const FLOW_LABEL: u64 = 1 << 2;
    /// HopLimit.
    pub(crate) const HOP_LIMIT: u64 = 1 << 3;
    /// TClass.
    pub(crate) const TCLASS: u64 = 1 << 4;
    /// Reversible.
    pub(crate) const REVERSIBLE: u64 = 1 << 5;
    /// NumbPath.
    pub(crate) const NUMB_PATH: u64 = 1 << 6;
    /// P_Key.
    pub(crate) const PKEY: u64 = 1 << 7;
    /// QoSClass.
    pub(crate) const QOS_CLASS: u64 = 1 << 8;
    /// SL.
    pub(crate) const SL: u64 = 1 << 9;
    /// MTUSelector.
    pub(crate) const MTU_SELECTOR: u64 = 1 << 10;
    /// MTU.
    pub(crate) const MTU: u64 = 1 << 11;
    /// RateSelector.
    pub(crate) const RATE_SELECTOR: u64 = 1 << 12;
    /// Rate.
    pub(crate) const RATE: u64 = 1 << 13;
    /// PacketLifeTimeSelector.
    pub(crate) const PKT_LIFE_SELECTOR: u64 = 1 << 14;
    /// PacketLifeTime.
    pub(crate) const PKT_LIFE: u64 = 1 << 15;
    /// ServiceID, its top 8 bits.
    pub(crate) const SERVICE_ID_MSB: u64 = 1 << 16;
    /// SGIDCount.
    pub(crate) const SGID_COUNT: u64 = 1 << 19;
    /// DGIDCount.
    pub(crate) const DGID_COUNT: u64 = 1 << 20;
    /// ServiceID, its low 56 bits.
    pub(crate) const SERVICE_ID_LSB: u64 = 1 << 21;
}

/// Bytes before the GIDs.
pub(crate) const HEADER_LEN: usize = 24;
/// Most GIDs a record carries (OpenSM's `IB_MULTIPATH_MAX_GIDS`).
pub(crate) const MAX_GIDS: usize = 10;
/// Paths when NumbPath is not given (OpenSM's `OSM_SA_MPR_MAX_NUM_PATH`).
const DEFAULT_PATHS: usize = 127;

/// Field offsets of the record (IBA figure 199; no wire view exists yet).
mod field {
    pub(super) const HOP_FLOW_RAW: core::ops::Range<usize> = 0..4;
    pub(super) const TCLASS: usize = 4;
    pub(super) const NUM_PATH: usize = 5;
    pub(super) const PKEY: core::ops::Range<usize> = 6..8;
    pub(super) const QOS_SL: core::ops::Range<usize> = 8..10;
    pub(super) const MTU: usize = 10;
    pub(super) const RATE: usize = 11;
    pub(super) const PKT_LIFE: usize = 12;
    pub(super) const SERVICE_ID_MSB: usize = 13;
    pub(super) const SGID_COUNT: usize = 15;
    pub(super) const DGID_COUNT: usize = 16;
    pub(super) const SERVICE_ID_LSB: core::ops::Range<usize> = 17..24;
}

/// (MultiPathRecord bit, PathRecord bit) for the constraints both share.
const MASK_MAP: [(u64, u64); 17] = [
    (comp::RAW_TRAFFIC, pr::RAW_TRAFFIC),
    (comp::FLOW_LABEL, pr::FLOW_LABEL),
    (comp::HOP_LIMIT, pr::HOP_LIMIT),
    (comp::TCLASS, pr::TCLASS),
    (comp::REVERSIBLE, pr::REVERSIBLE),
    (comp::NUMB_PATH, pr::NUMB_PATH),
    (comp::PKEY, pr::PKEY),
    (comp::QOS_CLASS, pr::QOS_CLASS),
    (comp::SL, pr::SL),
    (comp::MTU_SELECTOR, pr::MTU_SELECTOR),
    (comp::MTU, pr::MTU),
    (comp::RATE_SELECTOR, pr::RATE_SELECTOR),
    (comp::RATE, pr::RATE),
    (comp::PKT_LIFE_SELECTOR, pr::PKT_LIFE_SELECTOR),
    (comp::PKT_LIFE, pr::PKT_LIFE),
    (comp::SERVICE_ID_MSB, pr::SERVICE_ID_MSB),
    (comp::SERVICE_ID_LSB, pr::SERVICE_ID_LSB),
];

/// The PathRecord (bytes and ComponentMask) with a MultiPathRecord's constraints.
fn as_path_query(mask: u64, m: &[u8]) -> ([u8; path_record::LEN], u64) {
    let mut p = [0u8; path_record::LEN];
    p[0] = m[field::SERVICE_ID_MSB];
    p[1..8].copy_from_slice(&m[field::SERVICE_ID_LSB]);
    p[44..48].copy_from_slice(&m[field::HOP_FLOW_RAW]);
    p[48] = m[field::TCLASS];
    p[49] = m[field::NUM_PATH];
    p[50..52].copy_from_slice(&m[field::PKEY]);
    p[52..54].copy_from_slice(&m[field::QOS_SL]);
    p[54] = m[field::MTU];
    p[55] = m[field::RATE];
    p[56] = m[field::PKT_LIFE];
    let pmask = MASK_MAP
        .iter()
        .filter(|(from, _)| mask & from != 0)
        .fold(0, |acc, (_, to)| acc | to);
    (p, pmask)
}

/// Answer one MultiPathRecord request; `rmpp_active`: whether it came with
/// RMPPFlags.Active, which OpenSM requires.
pub(super) fn multipath_records(db: &SubnetDb, q: &Query<'_>) -> Outcome {
    if !q.rmpp_active {
        return Outcome::sa(SaStatus::ReqInvalid);
    }
    if q.method != Method::GetMulti {
        return Outcome::Error(MadStatus::UNSUPPORTED_METHOD_ATTR);
    }
    let mask = q.comp_mask;
    if mask & (comp::SGID_COUNT | comp::DGID_COUNT) != comp::SGID_COUNT | comp::DGID_COUNT {
        return Outcome::sa(SaStatus::InsufficientComponents);
    }
    let m = q.record;
    let (query, pmask) = as_path_query(mask, m);
    let want = path_record::Packet::new_unchecked(&query[..]);
    if let Some(o) = path::check(pmask, &want) {
        return o;
    }
    let nsrc = usize::from(m[field::SGID_COUNT]).min(MAX_GIDS);
    let ndst = usize::from(m[field::DGID_COUNT]).min(MAX_GIDS - nsrc);
    let ix = Index::new(db);
    let mut ends = Vec::with_capacity(nsrc + ndst);
    for i in 0..nsrc + ndst {
        let at = HEADER_LEN + 16 * i;
        let mut gid = [0u8; 16];
        gid.copy_from_slice(&m[at..at + 16]);
        // A multicast SGID is refused too (its prefix is never link-local).
        match end_by_gid(db, &ix, &gid) {
            Some(e) => ends.push(e),
            None => return Outcome::sa(SaStatus::ReqInvalidGid),
        }
    }
    if nsrc == 0 || ndst == 0 {
        return Outcome::sa(SaStatus::ReqInvalid);
    }
    let max = if mask & comp::NUMB_PATH != 0 {
        usize::from(m[field::NUM_PATH] & 0x7f)
    } else {
        DEFAULT_PATHS
    };
    let (srcs, dsts) = ends.split_at(nsrc);
    let data: Vec<u8> = srcs
        .iter()
        .flat_map(|s| dsts.iter().map(move |d| (*s, *d)))
        .filter_map(|(s, d)| path::pair_record(db, pmask, &want, s, d))
        .take(max)
        .flatten()
        .collect();
    Outcome::Records {
        record_len: path_record::LEN,
        data,
    }
}
