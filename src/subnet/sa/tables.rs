//! The records of what the SM itself set or holds: SMInfoRecord,
//! LinearForwardingTableRecord, MulticastForwardingTableRecord,
//! P_KeyTableRecord, as OpenSM's `osm_sa_sminfo_record.c`,
//! `osm_sa_lft_record.c`, `osm_sa_mft_record.c` and `osm_sa_pkey_record.c`
//! build them. No wire views exist for these four yet, so the layouts
//! (IBA 15.2.5) are written down here, with their ComponentMask tables.

use super::db::{self, end_ports, is_switch};
use super::{Outcome, Query, SA_KEY};
use crate::subnet::subnet_db::SubnetDb;
use crate::wire::mad::{MadStatus, Method};
use crate::wire::sa::comp::{self, Component};
use crate::wire::sa::SaStatus;
use crate::wire::smp::sm_info::SmState;

/// SMInfoRecord: LID, reserved, then SMInfo (GUID, SM_Key, ActCount,
/// Priority/SMState): 28 bytes, padded to 32.
const SMIR_LEN: usize = 32;
const SMIR_COMPONENTS: [Component; 7] = [
    Component::bytes(0, 2),    // LID
    Component::NONE,           // reserved
    Component::bytes(4, 8),    // GUID
    Component::bytes(12, 8),   // SM_Key
    Component::bytes(20, 4),   // ActCount
    Component::bits(24, 0xf0), // Priority
    Component::bits(24, 0x0f), // SMState
];

/// LinearForwardingTableRecord and MulticastForwardingTableRecord:
/// LID, block, reserved, 64 bytes of table: 72 bytes.
const FDB_LEN: usize = 72;
const LFTR_COMPONENTS: [Component; 2] = [Component::bytes(0, 2), Component::bytes(2, 2)];
/// LFT entries per block.
const LFT_BLOCK: usize = 64;

/// P_KeyTableRecord: LID, block, port, reserved, 32 P_Keys: 72 bytes.
const PKTR_LEN: usize = 72;
const PKTR_COMPONENTS: [Component; 3] = [
    Component::bytes(0, 2), // LID
    Component::bytes(2, 2), // BlockNum
    Component::bytes(4, 1), // PortNum
];
/// P_Keys per block.
const PKEY_BLOCK: usize = 32;

fn read_only(q: &Query<'_>) -> Option<Outcome> {
    (!matches!(q.method, Method::Get | Method::GetTable))
        .then_some(Outcome::Error(MadStatus::UNSUPPORTED_METHOD_ATTR))
}

fn collect(
    q: &Query<'_>,
    table: &[Component],
    len: usize,
    recs: impl Iterator<Item = Vec<u8>>,
) -> Outcome {
    let mut data = Vec::new();
    for r in recs {
        if comp::matches(table, q.comp_mask, q.record, &r) {
            data.extend_from_slice(&r);
        }
    }
    Outcome::Records {
        record_len: len,
        data,
    }
}

/// SMInfoRecords: the master SM's own (the embedded fabric has no other
/// SM): its LID and port GUID, SM_Key 0 (OpenSM's answer carries none
/// either), ActCount 0 (OpenSM reports its SMPs sent), priority and MASTER.
pub(super) fn sm_info_records(db: &SubnetDb, q: &Query<'_>, priority: u8) -> Outcome {
    if let Some(o) = read_only(q) {
        return o;
    }
    let mut r = vec![0u8; SMIR_LEN];
    r[..2].copy_from_slice(&db.sm_lid.to_be_bytes());
    r[4..12].copy_from_slice(&db.sm_port_guid.to_be_bytes());
    r[24] = (priority << 4) | u8::from(SmState::Master);
    collect(q, &SMIR_COMPONENTS, SMIR_LEN, core::iter::once(r))
}

/// LinearForwardingTableRecords: every 64-LID block of each switch's LFT up
/// to its top, under the switch's LID (unrouted entries 0xff).
pub(super) fn lft_records(db: &SubnetDb, q: &Query<'_>) -> Outcome {
    if let Some(o) = read_only(q) {
        return o;
    }
    let recs = end_ports(db)
        .filter(|e| is_switch(&db.nodes[e.node]))
        .flat_map(|e| {
            let lft = &db.nodes[e.node].lft;
            let blocks = lft.len().div_ceil(LFT_BLOCK).max(1);
            (0..blocks).map(move |b| {
                let mut r = vec![0xffu8; FDB_LEN];
                r[..2].copy_from_slice(&e.lid.to_be_bytes());
                r[2..4].copy_from_slice(&(b as u16).to_be_bytes());
                r[4..8].fill(0);
                for (i, out) in r[8..].iter_mut().enumerate() {
                    *out = lft.get(b * LFT_BLOCK + i).copied().unwrap_or(0xff);
                }
                r
            })
        });
    collect(q, &LFTR_COMPONENTS, FDB_LEN, recs)
}

/// MulticastForwardingTableRecords: none, as the embedded fabric programs
/// no multicast forwarding (OpenSM lists the blocks its groups use).
pub(super) fn mft_records(q: &Query<'_>) -> Outcome {
    if let Some(o) = read_only(q) {
        return o;
    }
    Outcome::Records {
        record_len: FDB_LEN,
        data: Vec::new(),
    }
}

/// P_KeyTableRecords, only to a trusted request (p. 922; OpenSM answers
/// any other ERR_REQ_INVALID): every block of every port the SM read a
/// table of (a CA's ports, a switch's port 0), as many blocks as the
/// node's PartitionCap allows, under the port's LID.
pub(super) fn pkey_table_records(db: &SubnetDb, q: &Query<'_>) -> Outcome {
    if let Some(o) = read_only(q) {
        return o;
    }
    if q.sm_key != SA_KEY {
        return Outcome::sa(SaStatus::ReqInvalid);
    }
    let recs = db.nodes.iter().flat_map(|n| {
        let cap = usize::from(db::node_info(n).partition_cap());
        let blocks = cap.div_ceil(PKEY_BLOCK).max(1);
        n.ports
            .iter()
            .filter(|p| !p.pkeys.is_empty())
            .flat_map(move |p| {
                let lid = db::lid_of(n, p);
                (0..blocks).map(move |b| {
                    let mut r = vec![0u8; PKTR_LEN];
                    r[..2].copy_from_slice(&lid.to_be_bytes());
                    r[2..4].copy_from_slice(&(b as u16).to_be_bytes());
                    r[4] = p.port_num;
                    for (i, k) in p
                        .pkeys
                        .iter()
                        .skip(b * PKEY_BLOCK)
                        .take(PKEY_BLOCK)
                        .enumerate()
                    {
                        r[8 + 2 * i..10 + 2 * i].copy_from_slice(&k.to_be_bytes());
                    }
                    r
                })
            })
    });
    collect(q, &PKTR_COMPONENTS, PKTR_LEN, recs)
}

/// SLtoVLMappingTableRecord: LID, InputPortNum, OutputPortNum, reserved,
/// the 8-byte table: 16 bytes.
const SLVL_LEN: usize = 16;
const SLVL_COMPONENTS: [Component; 3] = [
    Component::bytes(0, 2), // LID
    Component::bytes(2, 1), // InputPortNum
    Component::bytes(3, 1), // OutputPortNum
];

/// SLtoVLMappingTableRecords as OpenSM's `osm_sa_slvl_record.c` lists
/// them: a CA port one record (input and output port 0), a switch one for
/// every (output, input) pair of its ports, 0 included, under the switch's
/// LID; the port masks apply to switches only. The table is all zeros, as
/// OpenSM (QoS off, its default) answers: it never reads the SMAs' tables,
/// and neither does the built-in SM (the SMAs' own: [`crate::subnet::sma::SL_TO_VL`]).
pub(super) fn sl_to_vl_records(db: &SubnetDb, q: &Query<'_>) -> Outcome {
    if let Some(o) = read_only(q) {
        return o;
    }
    let record = |lid: u16, inp: u8, out: u8| {
        let mut r = vec![0u8; SLVL_LEN];
        r[..2].copy_from_slice(&lid.to_be_bytes());
        r[2] = inp;
        r[3] = out;
        r
    };
    let lid_mask = q.comp_mask & 1;
    let mut data = Vec::new();
    for e in end_ports(db) {
        let n = &db.nodes[e.node];
        let recs: Vec<Vec<u8>> = if is_switch(n) {
            let nums: Vec<u8> = n.ports.iter().map(|p| p.port_num).collect();
            nums.iter()
                .flat_map(|&out| nums.iter().map(move |&inp| (inp, out)))
                .map(|(inp, out)| record(e.lid, inp, out))
                .collect()
        } else {
            vec![record(e.lid, 0, 0)]
        };
        for r in recs {
            let mask = if is_switch(n) { q.comp_mask } else { lid_mask };
            if comp::matches(&SLVL_COMPONENTS, mask, q.record, &r) {
                data.extend_from_slice(&r);
            }
        }
    }
    Outcome::Records {
        record_len: SLVL_LEN,
        data,
    }
}

/// VLArbitrationTableRecord: LID, OutputPortNum, BlockNum, reserved, 32
/// two-byte entries: 72 bytes.
const VLARB_LEN: usize = 72;
const VLARB_COMPONENTS: [Component; 3] = [
    Component::bytes(0, 2), // LID
    Component::bytes(2, 1), // OutputPortNum
    Component::bytes(3, 1), // BlockNum
];

/// VLArbitrationTableRecords as OpenSM's `osm_sa_vlarb_record.c` lists
/// them: blocks 1-4 of a CA's port and of each of a switch's ports, under
/// the end port's LID, tables all zero as OpenSM (QoS off) answers.
pub(super) fn vl_arb_records(db: &SubnetDb, q: &Query<'_>) -> Outcome {
    if let Some(o) = read_only(q) {
        return o;
    }
    let recs = end_ports(db).flat_map(|e| {
        let n = &db.nodes[e.node];
        let ports: Vec<u8> = if is_switch(n) {
            n.ports.iter().map(|p| p.port_num).collect()
        } else {
            vec![n.ports[e.port].port_num]
        };
        ports.into_iter().flat_map(move |port| {
            (1..=4u8).map(move |block| {
                let mut r = vec![0u8; VLARB_LEN];
                r[..2].copy_from_slice(&e.lid.to_be_bytes());
                r[2] = port;
                r[3] = block;
                r
            })
        })
    });
    collect(q, &VLARB_COMPONENTS, VLARB_LEN, recs)
}
