//! The SA through a real client engine: queries, RMPP GetTables, status codes.

use super::fixture::{self, Client, Reply};
use super::SaService;
use crate::engine::EngineConfig;
use crate::subnet::subnet_db::SubnetDb;
use crate::wire::mad::{MadStatus, Method};
use crate::wire::sa::{
    self as wsa, guid_info_record, link_record, node_record, path_record, port_info_record,
    switch_info_record, AttrId, SaStatus,
};

mod opensm;
mod state;

pub(super) fn setup() -> (SaService, Client) {
    (
        SaService::new(EngineConfig::default()),
        Client::new(3, 16 << 20),
    )
}

pub(super) fn ask(
    sa: &mut SaService,
    c: &mut Client,
    db: &SubnetDb,
    method: Method,
    attr: AttrId,
    mask: u64,
    rec: &[u8],
) -> Reply {
    let m = c.request(method, attr, mask, rec);
    c.ask(sa, db, &m).expect("the SA answers")
}

/// Links the path from `slid` to `dlid` crosses through the LFTs.
fn links(db: &SubnetDb, slid: u16, dlid: u16) -> Option<u8> {
    let ix = super::db::Index::new(db);
    let (s, d) = (*ix.by_lid.get(&slid)?, *ix.by_lid.get(&dlid)?);
    super::path::walk(db, s, d).map(|r| r.hops)
}

fn node_rec_lid(lid: u16) -> Vec<u8> {
    let mut r = vec![0u8; node_record::RECORD_LEN];
    r[..2].copy_from_slice(&lid.to_be_bytes());
    r
}

#[test]
fn node_record_gettable_lists_every_end_port() {
    let db = fixture::two_cas_one_switch();
    let (mut sa, mut c) = setup();
    let r = ask(
        &mut sa,
        &mut c,
        &db,
        Method::GetTable,
        AttrId::NodeRecord,
        0,
        &node_rec_lid(0),
    );
    assert_eq!(r.hdr.method, Method::GetTableResp);
    assert_eq!(r.hdr.status, MadStatus::OK);
    assert_eq!(r.sa.attr_offset, 14);
    let recs = r.records();
    let got: Vec<(u16, Vec<u8>)> = recs
        .iter()
        .map(|b| {
            let p = node_record::Packet::new_checked(&b[..]).unwrap();
            (p.lid(), p.node_desc().text().to_vec())
        })
        .collect();
    assert_eq!(
        got,
        [
            (1, b"sm".to_vec()),
            (2, b"sw".to_vec()),
            (3, b"host".to_vec())
        ]
    );
}

#[test]
fn get_answers_one_record_or_the_opensm_status() {
    let db = fixture::two_cas_one_switch();
    let (mut sa, mut c) = setup();
    let lid = node_record::COMP_LID;
    let one = ask(
        &mut sa,
        &mut c,
        &db,
        Method::Get,
        AttrId::NodeRecord,
        lid,
        &node_rec_lid(3),
    );
    assert_eq!(
        (one.hdr.method, one.hdr.status),
        (Method::GetResp, MadStatus::OK)
    );
    let rec = &one.bytes[wsa::DATA_OFFSET..wsa::DATA_OFFSET + node_record::LEN];
    assert_eq!(
        node_record::Packet::new_checked(rec)
            .unwrap()
            .node_desc()
            .text(),
        b"host"
    );

    let none = ask(
        &mut sa,
        &mut c,
        &db,
        Method::Get,
        AttrId::NodeRecord,
        lid,
        &node_rec_lid(9),
    );
    assert_eq!(none.sa_status(), SaStatus::NoRecords);
    assert_eq!(none.hdr.method, Method::GetResp);
    assert_eq!(
        &none.bytes[56..58],
        &[0, 9],
        "the error echoes the query's record"
    );

    let many = ask(
        &mut sa,
        &mut c,
        &db,
        Method::Get,
        AttrId::NodeRecord,
        0,
        &node_rec_lid(0),
    );
    assert_eq!(many.sa_status(), SaStatus::TooManyRecords);

    // A GetTable that matches nothing is not an error: an empty table.
    let empty = ask(
        &mut sa,
        &mut c,
        &db,
        Method::GetTable,
        AttrId::NodeRecord,
        lid,
        &node_rec_lid(9),
    );
    assert_eq!((empty.hdr.status, empty.sa.attr_offset), (MadStatus::OK, 0));
    assert!(empty.records().is_empty());
}

#[test]
fn unknown_attributes_methods_and_versions_are_refused() {
    let db = fixture::two_cas_one_switch();
    let (mut sa, mut c) = setup();
    let r = ask(
        &mut sa,
        &mut c,
        &db,
        Method::GetTable,
        AttrId::TraceRecord,
        0,
        &[0; 8],
    );
    assert_eq!(r.hdr.status, MadStatus::UNSUPPORTED_METHOD_ATTR);
    assert_eq!((r.hdr.method, r.sa.attr_offset), (Method::GetTableResp, 0));

    // NodeRecord cannot be Set: the error answer is a GetResp (OpenSM turns
    // Set into Get) and keeps the request's AttributeOffset.
    let r = ask(
        &mut sa,
        &mut c,
        &db,
        Method::Set,
        AttrId::NodeRecord,
        1,
        &node_rec_lid(1),
    );
    assert_eq!(
        (r.hdr.method, r.hdr.status),
        (Method::GetResp, MadStatus::UNSUPPORTED_METHOD_ATTR)
    );
    assert_eq!(r.sa.attr_offset, 14);

    // GetMulti and GetTraceTable reach the SA and are refused, not dropped.
    let r = ask(
        &mut sa,
        &mut c,
        &db,
        Method::GetTraceTable,
        AttrId::PathRecord,
        0,
        &[0; 64],
    );
    assert_eq!(
        (r.hdr.method, r.hdr.status),
        (Method::Unknown(0x93), MadStatus::UNSUPPORTED_METHOD_ATTR)
    );

    let mut m = c.request(Method::Get, AttrId::NodeRecord, 1, &node_rec_lid(1));
    m[2] = 1; // class version 1
              // The engine routes by class version: a version-1 request reaches no agent
              // and Get is answered by the engine itself with 0x000c.
    let r = c.ask(&mut sa, &db, &m).expect("answered");
    assert_eq!(r.hdr.status, MadStatus::UNSUPPORTED_METHOD_ATTR);
    assert_eq!(sa.stats().answered, 3);
}

#[test]
fn port_info_records_by_lid_and_port() {
    let db = fixture::two_cas_one_switch();
    let (mut sa, mut c) = setup();
    let all = ask(
        &mut sa,
        &mut c,
        &db,
        Method::GetTable,
        AttrId::PortInfoRecord,
        0,
        &[0; 72],
    );
    assert_eq!(all.sa.attr_offset, 9);
    assert_eq!(
        all.records().len(),
        1 + 9 + 1,
        "sm, switch ports 0..=8, host"
    );

    let mut q = [0u8; 72];
    q[..2].copy_from_slice(&2u16.to_be_bytes());
    let sw = ask(
        &mut sa,
        &mut c,
        &db,
        Method::GetTable,
        AttrId::PortInfoRecord,
        port_info_record::COMP_LID,
        &q,
    );
    let ports: Vec<u8> = sw
        .records()
        .iter()
        .map(|r| {
            port_info_record::Packet::new_checked(&r[..])
                .unwrap()
                .port_num()
        })
        .collect();
    assert_eq!(ports, (0..=8).collect::<Vec<u8>>());

    q[2] = 2;
    let mask = port_info_record::COMP_LID | port_info_record::COMP_PORT_NUM;
    let one = ask(
        &mut sa,
        &mut c,
        &db,
        Method::Get,
        AttrId::PortInfoRecord,
        mask,
        &q,
    );
    let rec = port_info_record::Repr::parse(
        &port_info_record::Packet::new_checked(&one.bytes[56..56 + 68]).unwrap(),
    )
    .unwrap();
    assert_eq!((rec.endport_lid, rec.port_num), (2, 2));
    assert_eq!(rec.port_info.local_port_num, 2);

    // PortState Down (bit 15) matches the switch's six unlinked ports.
    let mut q = [0u8; 72];
    q[4 + 32] = 1;
    let down = ask(
        &mut sa,
        &mut c,
        &db,
        Method::GetTable,
        AttrId::PortInfoRecord,
        1 << 15,
        &q,
    );
    assert_eq!(down.records().len(), 6);
}

#[test]
fn a_large_gettable_goes_over_rmpp() {
    // 16 leaves × 8 hosts + 4 spines: 148 end ports, 148 × 112 bytes = 83 segments.
    let db = fixture::fat_tree(16, 8, 4);
    let (mut sa, mut c) = setup();
    let r = ask(
        &mut sa,
        &mut c,
        &db,
        Method::GetTable,
        AttrId::NodeRecord,
        0,
        &node_rec_lid(0),
    );
    let recs = r.records();
    assert_eq!(recs.len(), 16 * 8 + 16 + 4);
    let lids: Vec<u16> = recs
        .iter()
        .map(|b| u16::from_be_bytes([b[0], b[1]]))
        .collect();
    assert_eq!(lids, (1..=148).collect::<Vec<u16>>());
}

fn path_query(f: impl FnOnce(&mut path_record::Packet<&mut [u8]>)) -> [u8; 64] {
    let mut q = [0u8; 64];
    f(&mut path_record::Packet::new_unchecked(&mut q[..]));
    q
}

#[test]
fn path_records_follow_the_lfts() {
    let db = fixture::fat_tree(2, 2, 1);
    // CAs 1..=4 (h0-0, h0-1 on leaf0; h1-0, h1-1 on leaf1), leaves 5, 6, spine 7.
    let (mut sa, mut c) = setup();
    let mask = path_record::comp::SLID | path_record::comp::DLID;
    let q = path_query(|p| {
        p.set_slid(1);
        p.set_dlid(4);
    });
    let r = ask(
        &mut sa,
        &mut c,
        &db,
        Method::Get,
        AttrId::PathRecord,
        mask,
        &q,
    );
    assert_eq!(r.hdr.status, MadStatus::OK);
    let pr =
        path_record::Repr::parse(&path_record::Packet::new_checked(&r.bytes[56..120]).unwrap())
            .unwrap();
    assert_eq!((pr.slid, pr.dlid), (1, 4));
    // HopLimit is 0 inside a subnet (as OpenSM answers); the walk behind
    // the record crossed CA, leaf, spine, leaf, CA: four links.
    assert_eq!(pr.hop_limit, 0);
    assert_eq!(links(&db, 1, 4), Some(4));
    assert_eq!(
        (pr.mtu, pr.rate, pr.pkey),
        (4, 7, 0xffff),
        "2048, 40 Gb/s, default P_Key"
    );
    assert_eq!(&pr.sgid[8..], &(0x0002_c903_0000_0101u64).to_be_bytes());

    let q = path_query(|p| {
        p.set_slid(1);
        p.set_dlid(2);
    });
    let r = ask(
        &mut sa,
        &mut c,
        &db,
        Method::Get,
        AttrId::PathRecord,
        mask,
        &q,
    );
    assert_eq!(r.hdr.status, MadStatus::OK);
    assert_eq!(links(&db, 1, 2), Some(2));

    // World: every end port to every end port (7 × 7), what saquery -p asks.
    let r = ask(
        &mut sa,
        &mut c,
        &db,
        Method::GetTable,
        AttrId::PathRecord,
        0,
        &[0; 64],
    );
    assert_eq!(r.sa.attr_offset, 8);
    assert_eq!(r.records().len(), 49);

    // An MTU selector "greater than 2048" finds nothing.
    let sel = path_record::comp::MTU_SELECTOR | path_record::comp::MTU;
    let q = path_query(|p| p.set_mtu(0, 4));
    let r = ask(
        &mut sa,
        &mut c,
        &db,
        Method::GetTable,
        AttrId::PathRecord,
        sel,
        &q,
    );
    assert!(r.records().is_empty());
    let q = path_query(|p| p.set_mtu(1, 5));
    let r = ask(
        &mut sa,
        &mut c,
        &db,
        Method::GetTable,
        AttrId::PathRecord,
        sel,
        &q,
    );
    assert_eq!(r.records().len(), 49, "less than 4096: all");

    // A GID outside the subnet: OpenSM finds ERR_REQ_INVALID_GID but
    // answers the (empty) list all the same.
    let q = path_query(|p| p.set_dgid(&[0x11; 16]));
    let r = ask(
        &mut sa,
        &mut c,
        &db,
        Method::GetTable,
        AttrId::PathRecord,
        path_record::comp::DGID,
        &q,
    );
    assert_eq!(r.hdr.status, MadStatus::OK);
    assert!(r.records().is_empty());
}

#[test]
fn link_switch_info_and_guid_info_records() {
    let db = fixture::two_cas_one_switch();
    let (mut sa, mut c) = setup();
    let links = ask(
        &mut sa,
        &mut c,
        &db,
        Method::GetTable,
        AttrId::LinkRecord,
        0,
        &[0; 8],
    );
    assert_eq!(links.sa.attr_offset, 1);
    let mut got: Vec<(u16, u8, u8, u16)> = links
        .records()
        .iter()
        .map(|r| {
            let p = link_record::Packet::new_checked(&r[..]).unwrap();
            (p.from_lid(), p.from_port(), p.to_port(), p.to_lid())
        })
        .collect();
    got.sort_unstable();
    assert_eq!(
        got,
        [(1, 1, 1, 2), (2, 1, 1, 1), (2, 2, 1, 3), (3, 1, 2, 2)]
    );

    let mut q = [0u8; 8];
    q[..2].copy_from_slice(&2u16.to_be_bytes());
    q[2] = 2;
    let mask = link_record::comp::FROM_LID | link_record::comp::FROM_PORT;
    let one = ask(
        &mut sa,
        &mut c,
        &db,
        Method::Get,
        AttrId::LinkRecord,
        mask,
        &q,
    );
    assert_eq!(
        link_record::Packet::new_checked(&one.bytes[56..62])
            .unwrap()
            .to_lid(),
        3
    );

    let sw = ask(
        &mut sa,
        &mut c,
        &db,
        Method::GetTable,
        AttrId::SwitchInfoRecord,
        0,
        &[0; 24],
    );
    let recs = sw.records();
    assert_eq!((sw.sa.attr_offset, recs.len()), (3, 1));
    assert_eq!(
        switch_info_record::Packet::new_checked(&recs[0][..])
            .unwrap()
            .lid(),
        2
    );

    let mut q = [0u8; 72];
    q[..2].copy_from_slice(&3u16.to_be_bytes());
    let g = ask(
        &mut sa,
        &mut c,
        &db,
        Method::Get,
        AttrId::GuidInfoRecord,
        guid_info_record::comp::LID,
        &q,
    );
    let p = guid_info_record::Packet::new_checked(&g.bytes[56..128]).unwrap();
    assert_eq!((p.lid(), p.guid(0)), (3, db.nodes[2].ports[0].guid));
}

#[test]
fn class_port_info_and_capability_mask_match() {
    let mut db = fixture::two_cas_one_switch();
    let (mut sa, mut c) = setup();
    let r = ask(
        &mut sa,
        &mut c,
        &db,
        Method::Get,
        AttrId::ClassPortInfo,
        0,
        &[],
    );
    assert_eq!(
        (r.hdr.method, r.hdr.status),
        (Method::GetResp, MadStatus::OK)
    );
    let cpi = crate::wire::class_port_info::Packet::new_checked(&r.bytes[56..]).unwrap();
    assert_eq!(
        (cpi.base_version(), cpi.class_version(), cpi.redirect_lid()),
        (1, 2, 0)
    );
    assert_ne!(cpi.capability_mask() & (1 << 13), 0);

    // The SM's port has IsSM; a query for IsSM with the enhanced mask
    // finds it and only it (saquery -s), although it has other bits too.
    {
        let sm = &mut db.nodes[0].ports[0].port_info;
        let mut p = crate::wire::smp::port_info::Packet::new_unchecked(&mut sm[..]);
        p.set_capability_mask(crate::wire::smp::port_info::CAP_IS_SM | 0x0848);
    }
    let mut q = [0u8; 72];
    port_info_record::Packet::new_unchecked(&mut q[..]).port_info_mut()[20..24]
        .copy_from_slice(&crate::wire::smp::port_info::CAP_IS_SM.to_be_bytes());
    let mask = port_info_record::COMP_CAPABILITY_MASK;
    // Without AttributeModifier bit 31 the mask matches exactly (OpenSM):
    // no port has IsSM alone.
    let r = ask(
        &mut sa,
        &mut c,
        &db,
        Method::GetTable,
        AttrId::PortInfoRecord,
        mask,
        &q,
    );
    assert!(r.records().is_empty());
    // With it (as saquery -s asks), every bit asked for must be set.
    let mut m = c.request(Method::GetTable, AttrId::PortInfoRecord, mask, &q);
    m[20..24].copy_from_slice(&(1u32 << 31).to_be_bytes());
    let r = c.ask(&mut sa, &db, &m).unwrap();
    let lids: Vec<u16> = r
        .records()
        .iter()
        .map(|r| u16::from_be_bytes([r[0], r[1]]))
        .collect();
    assert_eq!(lids, [1]);
}

#[test]
fn every_node_record_of_234_and_1612_node_fabrics() {
    // 12 leaves × 18 CAs + 6 spines = 234 nodes; 40 × 39 + 12 = 1,612.
    for (leaves, hosts, spines, nodes) in [(12, 18, 6, 234), (40, 39, 12, 1612)] {
        let db = fixture::fat_tree(leaves, hosts, spines);
        assert_eq!(db.nodes.len(), nodes);
        let (mut sa, mut c) = setup();
        let r = ask(
            &mut sa,
            &mut c,
            &db,
            Method::GetTable,
            AttrId::NodeRecord,
            0,
            &node_rec_lid(0),
        );
        let recs = r.records();
        assert_eq!(recs.len(), nodes);
        let mut guids: Vec<u64> = recs
            .iter()
            .map(|b| {
                node_record::Packet::new_checked(&b[..])
                    .unwrap()
                    .node_info()
                    .node_guid()
            })
            .collect();
        guids.sort_unstable();
        guids.dedup();
        assert_eq!(guids.len(), nodes, "each node once");
    }
}

#[test]
fn all_path_records_of_a_234_node_fabric() {
    let db = fixture::fat_tree(12, 18, 6);
    let (mut sa, mut c) = setup();
    let r = ask(
        &mut sa,
        &mut c,
        &db,
        Method::GetTable,
        AttrId::PathRecord,
        0,
        &[0; 64],
    );
    let recs = r.records();
    assert_eq!(recs.len(), 234 * 234);
    // CA to CA on different leaves: CA, leaf, spine, leaf, CA; on the same leaf: 2.
    let listed = |slid: u16, dlid: u16| {
        recs.iter()
            .map(|b| path_record::Packet::new_checked(&b[..]).unwrap())
            .any(|p| p.slid() == slid && p.dlid() == dlid && p.hop_limit() == 0)
    };
    assert!(listed(1, 2) && listed(1, 19) && listed(5, 5));
    assert_eq!(links(&db, 1, 2), Some(2));
    assert_eq!(links(&db, 1, 19), Some(4));
    assert_eq!(links(&db, 5, 5), Some(0));
}

#[test]
fn a_port_without_a_lid_has_no_records() {
    // A two-port CA with only port 1 cabled: one NodeRecord (port 1's), no
    // path to port 2, but both PortInfoRecords.
    let mut b = fixture::Builder::default();
    let a = b.ca("a", 2);
    let sw = b.switch("sw", 4);
    let z = b.ca("z", 1);
    b.link(a, 1, sw, 1);
    b.link(z, 1, sw, 2);
    let db = b.finish();
    let (mut sa, mut c) = setup();
    let r = ask(
        &mut sa,
        &mut c,
        &db,
        Method::GetTable,
        AttrId::NodeRecord,
        0,
        &node_rec_lid(0),
    );
    let ports: Vec<(u16, u8)> = r
        .records()
        .iter()
        .map(|b| {
            let p = node_record::Packet::new_checked(&b[..]).unwrap();
            (p.lid(), p.node_info().local_port_num())
        })
        .collect();
    assert_eq!(ports, [(1, 1), (2, 0), (3, 1)]);
    let r = ask(
        &mut sa,
        &mut c,
        &db,
        Method::GetTable,
        AttrId::PathRecord,
        0,
        &[0; 64],
    );
    assert_eq!(r.records().len(), 9);
    // PortInfoRecords list every port, the uncabled one too (under LID 0).
    let r = ask(
        &mut sa,
        &mut c,
        &db,
        Method::GetTable,
        AttrId::PortInfoRecord,
        0,
        &[0; 72],
    );
    let a_ports: Vec<(u16, u8)> = r
        .records()
        .iter()
        .map(|b| port_info_record::Packet::new_checked(&b[..]).unwrap())
        .take(2)
        .map(|p| (p.endport_lid(), p.port_num()))
        .collect();
    assert_eq!(a_ports, [(1, 1), (0, 2)]);
    assert_eq!(r.records().len(), 2 + 5 + 1);
}
