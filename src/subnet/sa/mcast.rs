//! Multicast groups (IBA 15.2.5.17, as OpenSM's SA keeps them):
//! SubnAdmSet(MCMemberRecord) creates a group or joins one, Delete leaves,
//! Get/GetTable list the members. The groups live here, in the SA; the
//! multicast forwarding tables they would imply are not programmed (the
//! embedded fabric does not forward multicast).
//!
//! As OpenSM does, the IPv4 broadcast group of the default partition
//! (ff12:401b:ffff::ffff:ffff) exists from the start and outlives its
//! members, so IPoIB (and `umad_sa_mcm_rereg_test`) can join it without
//! creating it. A requester may join or leave for any port of the subnet
//! (OpenSM would ask for ProxyJoin or a trusted SM_Key).

use std::collections::BTreeMap;

use super::db::Index;
use super::{Outcome, Query};
use crate::subnet::subnet_db::SubnetDb;
use crate::wire::mad::{MadStatus, Method};
use crate::wire::sa::comp;
use crate::wire::sa::mcmember_record::{self as mcr, comp as c, JOIN_FULL};
use crate::wire::sa::SaStatus;

/// Components a join needs.
const JOIN_MASK: u64 = c::MGID | c::PORT_GID | c::JOIN_STATE;
/// Components a create needs (OpenSM's REQUIRED_MC_CREATE_COMP_MASK, MGID aside).
const CREATE_MASK: u64 =
    c::PORT_GID | c::QKEY | c::TCLASS | c::PKEY | c::SL | c::FLOW_LABEL | c::JOIN_STATE;
/// JoinState SendOnlyFullMember (IBA 1.3, table 221).
const JOIN_SEND_ONLY_FULL: u8 = 1 << 3;
/// The default GID prefix, which a PortGID may use for the subnet's.
const DEFAULT_PREFIX: u64 = 0xfe80_0000_0000_0000;
/// The first multicast LID.
const MLID_BASE: u16 = 0xc000;
/// Selector "exactly".
const EXACTLY: u8 = 2;
/// The IPv4 broadcast group of the default partition.
pub(super) const IPOIB_BROADCAST: [u8; 16] = [
    0xff, 0x12, 0x40, 0x1b, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff,
];

/// What a change to the groups means for InformInfo subscribers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum GroupEvent {
    /// Trap 66: a group was created.
    Created([u8; 16]),
    /// Trap 67: a group was deleted.
    Deleted([u8; 16]),
}

#[derive(Debug, Clone)]
struct Group {
    /// The group's parameters (PortGID and JoinState unused).
    rec: mcr::Repr,
    /// JoinState by member PortGID.
    members: BTreeMap<[u8; 16], u8>,
    /// Created by the SA itself: kept when its last member leaves.
    well_known: bool,
}

/// The SA's multicast groups, by MGID.
#[derive(Debug, Clone)]
pub(super) struct Groups {
    groups: BTreeMap<[u8; 16], Group>,
    next_mlid: u16,
    next_mgid: u32,
}

impl Default for Groups {
    fn default() -> Groups {
        let rec = mcr::Repr {
            mgid: IPOIB_BROADCAST,
            qkey: 0x0b1b,
            mlid: MLID_BASE,
            mtu_selector: EXACTLY,
            mtu: 4,
            pkey: 0xffff,
            rate_selector: EXACTLY,
            rate: 3,
            pkt_life_selector: EXACTLY,
            pkt_life: 0x12,
            scope: 2,
            ..mcr::Repr::default()
        };
        let mut groups = BTreeMap::new();
        groups.insert(
            IPOIB_BROADCAST,
            Group {
                rec,
                members: BTreeMap::new(),
                well_known: true,
            },
        );
        Groups {
            groups,
            next_mlid: MLID_BASE + 1,
            next_mgid: 1,
        }
    }
}

/// Whether `have` satisfies `want` under an MCMemberRecord selector.
fn selected(selector: u8, want: u8, have: u8) -> bool {
    match selector {
        0 => have > want,
        1 => have < want,
        2 => have == want,
        _ => true,
    }
}

fn one(rec: &mcr::Repr) -> Outcome {
    let mut data = vec![0u8; mcr::RECORD_LEN];
    rec.emit(&mut mcr::Packet::new_unchecked(&mut data[..]));
    Outcome::Records {
        record_len: mcr::RECORD_LEN,
        data,
    }
}

impl Groups {
    /// Serve one MCMemberRecord request.
    pub(super) fn handle(&mut self, db: &SubnetDb, q: &Query<'_>) -> (Outcome, Option<GroupEvent>) {
        let Ok(req) = mcr::Repr::parse(&mcr::Packet::new_unchecked(q.record)) else {
            return (Outcome::sa(SaStatus::ReqInvalid), None);
        };
        // OpenSM's `osm_mcmr_rcv_process`: a Set or Delete names the MGID,
        // PortGID and JoinState (else ERR_INSUFFICIENT_COMPONENTS), and any
        // MTU or Rate given with its selector is a valid code.
        if matches!(q.method, Method::Set | Method::Delete) && q.comp_mask & JOIN_MASK != JOIN_MASK
        {
            return (Outcome::sa(SaStatus::InsufficientComponents), None);
        }
        let both = |a: u64, b: u64| q.comp_mask & (a | b) == a | b;
        if both(c::RATE_SELECTOR, c::RATE) && !(2..=22).contains(&req.rate)
            || both(c::MTU_SELECTOR, c::MTU) && !(1..=5).contains(&req.mtu)
        {
            return (Outcome::sa(SaStatus::ReqInvalid), None);
        }
        match q.method {
            Method::Set => self.join(db, q.comp_mask, req),
            Method::Delete => self.leave(q.comp_mask, req),
            Method::Get | Method::GetTable => (self.query(q), None),
            _ => (Outcome::Error(MadStatus::UNSUPPORTED_METHOD_ATTR), None),
        }
    }

    fn port_known(db: &SubnetDb, gid: &[u8; 16]) -> bool {
        let mut half = [0u8; 8];
        half.copy_from_slice(&gid[8..]);
        Index::new(db)
            .by_guid
            .contains_key(&u64::from_be_bytes(half))
    }

    /// A join, with OpenSM's `mcmr_rcv_join_mgrp` checks in its order.
    fn join(
        &mut self,
        db: &SubnetDb,
        mask: u64,
        mut req: mcr::Repr,
    ) -> (Outcome, Option<GroupEvent>) {
        // The PortGID's prefix: the default (fe80::) stands for the
        // subnet's; any other must be the subnet's (ERR_INVALID_GID).
        let mut prefix = [0u8; 8];
        prefix.copy_from_slice(&req.port_gid[..8]);
        match u64::from_be_bytes(prefix) {
            DEFAULT_PREFIX => req.port_gid[..8].copy_from_slice(&db.subnet_prefix.to_be_bytes()),
            p if p == db.subnet_prefix => {}
            _ => return (Outcome::sa(SaStatus::ReqInvalidGid), None),
        }
        if !Self::port_known(db, &req.port_gid) {
            return (Outcome::sa(SaStatus::ReqInvalid), None);
        }
        if mask & c::PKEY != 0 && req.pkey & 0x7fff == 0 {
            return (Outcome::sa(SaStatus::ReqInvalid), None);
        }
        let mut event = None;
        let mgid = match self.groups.get(&req.mgid) {
            Some(_) => req.mgid,
            None => {
                // o15.0.1.9: only a full (or send-only full) member creates
                // a group; anything else is ERR_REQ_INVALID (o15.0.1.13).
                if req.join_state & (JOIN_FULL | JOIN_SEND_ONLY_FULL) == 0 {
                    return (Outcome::sa(SaStatus::ReqInvalid), None);
                }
                if mask & CREATE_MASK != CREATE_MASK {
                    return (Outcome::sa(SaStatus::InsufficientComponents), None);
                }
                match self.create(mask, &req, req.mgid == [0; 16]) {
                    Ok(mgid) => {
                        event = Some(GroupEvent::Created(mgid));
                        mgid
                    }
                    Err(o) => return (o, None),
                }
            }
        };
        if req.join_state == 0 {
            return (Outcome::sa(SaStatus::ReqInvalid), None);
        }
        let group = self.groups.get_mut(&mgid).expect("found or created above");
        if !Self::compatible(mask, &req, &group.rec) {
            return (Outcome::sa(SaStatus::ReqInvalid), None);
        }
        let state = group.members.entry(req.port_gid).or_insert(0);
        *state |= req.join_state;
        let rec = mcr::Repr {
            port_gid: req.port_gid,
            join_state: *state,
            proxy_join: req.proxy_join,
            ..group.rec
        };
        (one(&rec), event)
    }

    /// Make a group from a request; its MGID is the request's or, for a
    /// zero MGID, one the SA assigns (`ff1<scope>:a01b:<P_Key>::<n>`, as
    /// OpenSM's SA-assigned MGIDs).
    fn create(&mut self, mask: u64, req: &mcr::Repr, assign: bool) -> Result<[u8; 16], Outcome> {
        let mlid = self.next_mlid;
        if mlid == 0xfffe {
            return Err(Outcome::sa(SaStatus::NoResources));
        }
        let mgid = if assign {
            let scope = if mask & c::SCOPE != 0 { req.scope } else { 2 };
            let mut g = [0u8; 16];
            g[..4].copy_from_slice(&[0xff, 0x10 | scope, 0xa0, 0x1b]);
            g[4..6].copy_from_slice(&req.pkey.to_be_bytes());
            g[12..].copy_from_slice(&self.next_mgid.to_be_bytes());
            self.next_mgid += 1;
            g
        } else {
            if req.mgid[0] != 0xff {
                return Err(Outcome::sa(SaStatus::ReqInvalid)); // not a multicast GID
            }
            req.mgid
        };
        self.next_mlid += 1;
        let pick = |sel_bit: u64, val_bit: u64, sel: u8, val: u8, default: u8| {
            if mask & val_bit == 0 {
                default
            } else if mask & sel_bit == 0 || sel == EXACTLY {
                val
            } else {
                default
            }
        };
        let rec = mcr::Repr {
            mgid,
            port_gid: [0; 16],
            mlid,
            mtu_selector: EXACTLY,
            mtu: pick(c::MTU_SELECTOR, c::MTU, req.mtu_selector, req.mtu, 4),
            rate_selector: EXACTLY,
            rate: pick(c::RATE_SELECTOR, c::RATE, req.rate_selector, req.rate, 3),
            pkt_life_selector: EXACTLY,
            // OpenSM keeps the request's PacketLifeTime, given or not.
            pkt_life: req.pkt_life,
            scope: mgid[1] & 0x0f,
            join_state: 0,
            proxy_join: false,
            ..*req
        };
        self.groups.insert(
            mgid,
            Group {
                rec,
                members: BTreeMap::new(),
                well_known: false,
            },
        );
        Ok(mgid)
    }

    /// Whether a join's masked parameters agree with the group's.
    fn compatible(mask: u64, req: &mcr::Repr, g: &mcr::Repr) -> bool {
        let mut a = [0u8; mcr::LEN];
        let mut b = [0u8; mcr::LEN];
        req.emit(&mut mcr::Packet::new_unchecked(&mut a[..]));
        g.emit(&mut mcr::Packet::new_unchecked(&mut b[..]));
        let exact = c::QKEY | c::MLID | c::TCLASS | c::PKEY | c::SL | c::FLOW_LABEL;
        let sel = |s_bit: u64, v_bit: u64, s: u8, want: u8, have: u8| {
            mask & v_bit == 0 || selected(if mask & s_bit != 0 { s } else { EXACTLY }, want, have)
        };
        comp::matches(&mcr::COMPONENTS, mask & exact, &a, &b)
            && sel(c::MTU_SELECTOR, c::MTU, req.mtu_selector, req.mtu, g.mtu)
            && sel(
                c::RATE_SELECTOR,
                c::RATE,
                req.rate_selector,
                req.rate,
                g.rate,
            )
    }

    fn leave(&mut self, mask: u64, req: mcr::Repr) -> (Outcome, Option<GroupEvent>) {
        if mask & JOIN_MASK != JOIN_MASK {
            return (Outcome::sa(SaStatus::InsufficientComponents), None);
        }
        let Some(group) = self.groups.get_mut(&req.mgid) else {
            return (Outcome::sa(SaStatus::ReqInvalid), None);
        };
        let Some(&state) = group.members.get(&req.port_gid) else {
            return (Outcome::sa(SaStatus::ReqInvalid), None);
        };
        // OpenSM's `osm_mgrp_remove_port`: the port keeps what it did not
        // leave only while that includes FullMember, or other full members
        // remain; else it leaves the group altogether. The group's last
        // (send-only) full member leaving takes every member with it, and
        // the group too unless the SA made it.
        let full = JOIN_FULL | JOIN_SEND_ONLY_FULL;
        let full_members = group.members.values().filter(|s| *s & full != 0).count();
        let new = state & !req.join_state;
        let keep =
            new & JOIN_FULL != 0 || (new != 0 && full_members > usize::from(state & JOIN_FULL));
        if keep {
            group.members.insert(req.port_gid, new);
        } else {
            group.members.remove(&req.port_gid);
        }
        // OpenSM answers the request's record, its selectors "exactly",
        // its JoinState what the port keeps.
        let rec = mcr::Repr {
            join_state: if keep { new } else { 0 },
            scope: group.rec.scope,
            mtu_selector: EXACTLY,
            rate_selector: EXACTLY,
            pkt_life_selector: EXACTLY,
            ..req
        };
        let mut event = None;
        if state & full != 0 && new & full == 0 && full_members == 1 {
            group.members.clear();
            if !group.well_known {
                self.groups.remove(&req.mgid);
                event = Some(GroupEvent::Deleted(req.mgid));
            }
        }
        (one(&rec), event)
    }

    /// One record per member of every group, matched under the mask.
    /// Get/GetTable as OpenSM's `mcmr_by_comp_mask` answers them: with a
    /// PortGID, that member's record; without one, a trusted request (an
    /// SM_Key) gets every member's record, any other one record per group
    /// (the group's parameters), so a group without members is listed too.
    /// An untrusted request sees no PortGID, JoinState or ProxyJoin.
    fn query(&self, q: &Query<'_>) -> Outcome {
        let mut data = Vec::new();
        let mut rec = [0u8; mcr::RECORD_LEN];
        let trusted = q.sm_key != 0;
        let mut offer = |r: mcr::Repr, data: &mut Vec<u8>| {
            r.emit(&mut mcr::Packet::new_unchecked(&mut rec[..]));
            if comp::matches(&mcr::COMPONENTS, q.comp_mask, q.record, &rec) {
                // p. 923: PortGID, JoinState and ProxyJoin only to a
                // trusted request (OpenSM's `mcmr_query_mgrp`).
                let shown = if trusted {
                    r
                } else {
                    mcr::Repr {
                        port_gid: [0; 16],
                        join_state: 0,
                        proxy_join: false,
                        ..r
                    }
                };
                shown.emit(&mut mcr::Packet::new_unchecked(&mut rec[..]));
                data.extend_from_slice(&rec);
            }
        };
        for g in self.groups.values() {
            if q.comp_mask & c::PORT_GID != 0 || trusted {
                for (gid, state) in &g.members {
                    offer(
                        mcr::Repr {
                            port_gid: *gid,
                            join_state: *state,
                            ..g.rec
                        },
                        &mut data,
                    );
                }
            } else {
                offer(
                    mcr::Repr {
                        port_gid: [0; 16],
                        join_state: 0,
                        ..g.rec
                    },
                    &mut data,
                );
            }
        }
        Outcome::Records {
            record_len: mcr::RECORD_LEN,
            data,
        }
    }
}
