//! The records the SA reads straight out of the [`SubnetDb`]: NodeRecord,
//! PortInfoRecord, LinkRecord, SwitchInfoRecord, GUIDInfoRecord. Each
//! candidate record is written through its wire view, then kept if it
//! matches the query under the ComponentMask.

use super::db::{self, end_ports};
use super::{Outcome, Query};
use crate::subnet::subnet_db::SubnetDb;
use crate::wire::class_port_info;
use crate::wire::sa::comp::{self, Component};
use crate::wire::sa::{
    guid_info_record, link_record, node_record, port_info_record, switch_info_record,
};
use crate::wire::smp::{node_desc, node_info};

/// Collects the records that match a query.
struct Collector<'q> {
    table: &'q [Component],
    mask: u64,
    query: &'q [u8],
    record_len: usize,
    data: Vec<u8>,
}

impl<'q> Collector<'q> {
    fn new(q: &Query<'q>, table: &'q [Component], record_len: usize) -> Collector<'q> {
        Collector {
            table,
            mask: q.comp_mask,
            query: q.record,
            record_len,
            data: Vec::new(),
        }
    }

    /// Keep `rec` (exactly `record_len` bytes) if it matches.
    fn offer(&mut self, rec: &[u8]) {
        if comp::matches(self.table, self.mask, self.query, rec) {
            self.data.extend_from_slice(rec);
        }
    }

    fn done(self) -> Outcome {
        Outcome::Records {
            record_len: self.record_len,
            data: self.data,
        }
    }
}

/// NodeRecords: one per end port (a CA with two ports has two), with that
/// port's GUID and number in the NodeInfo, as OpenSM builds them.
pub(super) fn node_records(db: &SubnetDb, q: &Query<'_>) -> Outcome {
    let mut c = Collector::new(q, &node_record::COMPONENTS, node_record::RECORD_LEN);
    let mut rec = [0u8; node_record::RECORD_LEN];
    for e in end_ports(db) {
        let node = &db.nodes[e.node];
        let port = &node.ports[e.port];
        let Ok(mut info) = node_info::Repr::parse(&db::node_info(node)) else {
            continue;
        };
        info.port_guid = port.guid;
        info.local_port_num = port.port_num;
        let desc = node_desc::Repr {
            raw: node.node_desc,
        };
        node_record::Repr {
            lid: e.lid,
            node_info: info,
            node_desc: desc,
        }
        .emit(&mut node_record::Packet::new_unchecked(&mut rec[..]));
        c.offer(&rec);
    }
    c.done()
}

/// PortInfoRecords: every port of every node (a switch's port 0 and its
/// external ports, all under the switch's LID), PortInfo as the SMA said.
/// CapabilityMask matches as OpenSM's `sa_pir_check_physp` matches it:
/// exactly, or with AttributeModifier bit 31 (the "enhanced" mask that
/// ClassPortInfo's IsPortInfoCapMaskMatchSupported offers, which
/// `saquery -s` sets) when every bit set in the query is set in the port.
pub(super) fn port_info_records(db: &SubnetDb, q: &Query<'_>) -> Outcome {
    let want_caps = (q.comp_mask & port_info_record::COMP_CAPABILITY_MASK != 0).then(|| {
        port_info_record::Packet::new_unchecked(q.record)
            .port_info()
            .capability_mask()
    });
    let subset = q.attr_mod & (1 << 31) != 0;
    let q = Query {
        comp_mask: q.comp_mask & !port_info_record::COMP_CAPABILITY_MASK,
        ..*q
    };
    let mut c = Collector::new(
        &q,
        &port_info_record::COMPONENTS,
        port_info_record::RECORD_LEN,
    );
    let mut rec = [0u8; port_info_record::RECORD_LEN];
    for node in &db.nodes {
        for port in &node.ports {
            let mut p = port_info_record::Packet::new_unchecked(&mut rec[..]);
            p.set_endport_lid(db::lid_of(node, port));
            p.set_port_num(port.port_num);
            p.set_options(0);
            p.port_info_mut().copy_from_slice(&port.port_info);
            let caps = db::port_info(port).capability_mask();
            if want_caps.is_none_or(|w| if subset { caps & w == w } else { caps == w }) {
                c.offer(&rec);
            }
        }
    }
    c.done()
}

/// LinkRecords: each direction of each link (OpenSM lists both).
pub(super) fn link_records(db: &SubnetDb, q: &Query<'_>) -> Outcome {
    let mut c = Collector::new(q, &link_record::COMPONENTS, link_record::RECORD_LEN);
    let mut rec = [0u8; link_record::RECORD_LEN];
    for node in &db.nodes {
        for port in &node.ports {
            let Some((peer, peer_port)) = port.peer else {
                continue;
            };
            let far = &db.nodes[peer];
            let Some(far_port) = far.ports.iter().find(|p| p.port_num == peer_port) else {
                continue;
            };
            link_record::Repr {
                from_lid: db::lid_of(node, port),
                from_port: port.port_num,
                to_port: peer_port,
                to_lid: db::lid_of(far, far_port),
            }
            .emit(&mut link_record::Packet::new_unchecked(&mut rec[..]));
            c.offer(&rec);
        }
    }
    c.done()
}

/// SwitchInfoRecords: one per switch, SwitchInfo as its SMA answered it.
pub(super) fn switch_info_records(db: &SubnetDb, q: &Query<'_>) -> Outcome {
    let mut c = Collector::new(
        q,
        &switch_info_record::COMPONENTS,
        switch_info_record::RECORD_LEN,
    );
    let mut rec = [0u8; switch_info_record::RECORD_LEN];
    for e in end_ports(db) {
        let Some(info) = db.nodes[e.node].switch_info else {
            continue;
        };
        switch_info_record::Repr {
            lid: e.lid,
            switch_info: info,
        }
        .emit(&mut switch_info_record::Packet::new_unchecked(&mut rec[..]));
        c.offer(&rec);
    }
    c.done()
}

/// GUIDInfoRecords: for each end port, the blocks its PortInfo GUIDCap
/// allows (8 GUIDs a block; OpenSM's `sa_gir_create_gir`), block 0 holding
/// the port GUID (the embedded fabric assigns no alias GUIDs).
pub(super) fn guid_info_records(db: &SubnetDb, q: &Query<'_>) -> Outcome {
    let mut c = Collector::new(
        q,
        &guid_info_record::COMPONENTS,
        guid_info_record::RECORD_LEN,
    );
    let mut rec = [0u8; guid_info_record::RECORD_LEN];
    for e in end_ports(db) {
        let port = &db.nodes[e.node].ports[e.port];
        let cap = usize::from(db::port_info(port).guid_cap());
        let blocks = cap.div_ceil(guid_info_record::GUIDS_PER_BLOCK).max(1);
        for block in 0..blocks {
            let mut guids = [0u64; guid_info_record::GUIDS_PER_BLOCK];
            if block == 0 {
                guids[0] = e.guid;
            }
            guid_info_record::Repr {
                lid: e.lid,
                block_num: block as u8,
                guids,
            }
            .emit(&mut guid_info_record::Packet::new_unchecked(&mut rec[..]));
            c.offer(&rec);
        }
    }
    c.done()
}

/// The SA's ClassPortInfo as OpenSM's `cpi_rcv_respond` fills it: class
/// version 2, RespTimeValue for OpenSM's default 200 ms transaction
/// timeout, RedirectQP 1 and the well-known Q_Keys (no redirection), and
/// the CapabilityMask bits for what this SA serves: Get/Set(Notice) (it
/// forwards traps), UD multicast (MCMemberRecord), MultiPathRecord,
/// PortInfo CapabilityMask matching. CapabilityMask2 is 0: none of its
/// features (QoS, alias GUIDs, ...) is served.
pub(super) fn class_port_info(q: &Query<'_>) -> Outcome {
    if q.method != crate::wire::mad::Method::Get {
        return Outcome::Error(crate::wire::mad::MadStatus::UNSUPPORTED_METHOD_ATTR);
    }
    let mut data = vec![0u8; CPI_RECORD_LEN];
    let mut p = class_port_info::Packet::new_unchecked(&mut data[..]);
    p.set_base_version(crate::wire::mad::BASE_VERSION);
    p.set_class_version(crate::wire::sa::CLASS_VERSION);
    p.set_capability_mask(CPI_CAPS);
    p.set_capability_mask2_resp_time(0, CPI_RESP_TIME_VALUE);
    p.set_redirect_qp(1);
    p.set_redirect_qkey(crate::types::GSI_QKEY);
    p.set_trap_qkey(crate::types::GSI_QKEY);
    Outcome::Records {
        record_len: CPI_RECORD_LEN,
        data,
    }
}

/// ClassPortInfo is 72 bytes, already 8-byte aligned.
const CPI_RECORD_LEN: usize = class_port_info::LEN;
/// OpenSM's `OSM_CAP_IS_UD_MCAST_SUP` (bit 1), `..._SUBN_GET_SET_NOTICE_SUP`
/// (9), `..._MULTIPATH_SUP` (10), `..._PORT_INFO_CAPMASK_MATCH_SUPPORTED` (13).
const CPI_CAPS: u16 = (1 << 1) | (1 << 9) | (1 << 10) | (1 << 13);
/// RespTimeValue: 4.096 µs × 2^16 ≈ 268 ms, what OpenSM advertises for its
/// default 200 ms transaction timeout.
const CPI_RESP_TIME_VALUE: u8 = 16;
