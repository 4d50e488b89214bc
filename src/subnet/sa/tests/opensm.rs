//! The differences from OpenSM's SA that an outside client (saquery, a
//! service registrar, a multicast joiner) found, each pinned to OpenSM's
//! answer: `osm_sa_path_record.c`, `osm_sa_multipath_record.c`,
//! `osm_sa_service_record.c`, `osm_sa_mcmember_record.c`.

use super::super::multipath::{comp as mp, HEADER_LEN};
use super::{ask, setup};
use crate::subnet::sa::fixture;
use crate::wire::mad::{MadStatus, Method};
use crate::wire::rmpp;
use crate::wire::sa::{
    self as wsa, mcmember_record, path_record, service_record, AttrId, SaStatus,
};

fn pr_of(rec: &[u8]) -> path_record::Repr {
    path_record::Repr::parse(&path_record::Packet::new_checked(rec).unwrap()).unwrap()
}

/// Every PathRecord the SA lists can be asked for again by its SGID and
/// DGID (as `saquery -p --sgid-to-dgid` asks: NumbPath 127 too), and comes
/// back the same; a GID the subnet lacks is an empty answer, not
/// ERR_INVALID_GID (OpenSM drops that status and answers its empty list).
#[test]
fn path_by_sgid_and_dgid_finds_every_listed_path() {
    let db = fixture::fat_tree(2, 2, 1);
    let (mut sa, mut c) = setup();
    let all = ask(
        &mut sa,
        &mut c,
        &db,
        Method::GetTable,
        AttrId::PathRecord,
        0,
        &[0; 64],
    );
    let listed = all.records();
    assert_eq!(listed.len(), 49, "7 end ports, every pair");
    let mask = path_record::comp::SGID | path_record::comp::DGID | path_record::comp::NUMB_PATH;
    for rec in &listed {
        let want = pr_of(rec);
        let mut q = [0u8; 64];
        let mut p = path_record::Packet::new_unchecked(&mut q[..]);
        p.set_sgid(&want.sgid);
        p.set_dgid(&want.dgid);
        p.set_reversible_numb_path(false, 0x7f);
        let r = ask(
            &mut sa,
            &mut c,
            &db,
            Method::GetTable,
            AttrId::PathRecord,
            mask,
            &q,
        );
        assert_eq!(r.hdr.status, MadStatus::OK);
        assert_eq!(r.records(), std::slice::from_ref(rec), "{want:?}");
    }
    let mut q = [0u8; 64];
    let mut p = path_record::Packet::new_unchecked(&mut q[..]);
    p.set_sgid(&pr_of(&listed[0]).sgid);
    let mut stranger = pr_of(&listed[0]).dgid;
    stranger[15] ^= 0x5a;
    p.set_dgid(&stranger);
    let r = ask(
        &mut sa,
        &mut c,
        &db,
        Method::GetTable,
        AttrId::PathRecord,
        mask,
        &q,
    );
    assert_eq!((r.hdr.status, r.records().len()), (MadStatus::OK, 0));
    let r = ask(
        &mut sa,
        &mut c,
        &db,
        Method::Get,
        AttrId::PathRecord,
        mask,
        &q,
    );
    assert_eq!(r.sa_status(), SaStatus::NoRecords);
    // One half of the ServiceID is ERR_INSUFFICIENT_COMPONENTS.
    let r = ask(
        &mut sa,
        &mut c,
        &db,
        Method::GetTable,
        AttrId::PathRecord,
        path_record::comp::SERVICE_ID_MSB,
        &[0; 64],
    );
    assert_eq!(r.sa_status(), SaStatus::InsufficientComponents);
}

/// A MultiPathRecord with the given GIDs (sources first).
fn mpr(sgids: &[[u8; 16]], dgids: &[[u8; 16]], numb_path: u8) -> Vec<u8> {
    let mut m = vec![0u8; HEADER_LEN + 16 * (sgids.len() + dgids.len())];
    m[5] = numb_path;
    m[15] = sgids.len() as u8;
    m[16] = dgids.len() as u8;
    for (i, g) in sgids.iter().chain(dgids).enumerate() {
        m[HEADER_LEN + 16 * i..][..16].copy_from_slice(g);
    }
    m
}

/// SubnAdmGetMulti(MultiPathRecord), sent with RMPP: a GetMultiResp of
/// PathRecords (that attribute ID), the paths of every source to every
/// destination, at most NumbPath of them; OpenSM's status codes otherwise.
#[test]
fn multipath_get_multi_answers_path_records() {
    let db = fixture::fat_tree(2, 2, 1);
    let (mut sa, mut c) = setup();
    let all = ask(
        &mut sa,
        &mut c,
        &db,
        Method::GetTable,
        AttrId::PathRecord,
        0,
        &[0; 64],
    );
    let listed: Vec<path_record::Repr> = all.records().iter().map(|r| pr_of(r)).collect();
    let (a, b, d) = (listed[0].sgid, listed[1].dgid, listed[3].dgid);
    let counts = mp::SGID_COUNT | mp::DGID_COUNT;
    let get_multi =
        |c: &mut fixture::Client, method: Method, mask: u64, rec: &[u8], active: bool| {
            let mut m = c.request(method, AttrId::MultiPathRecord, mask, rec);
            if active {
                m[rmpp::OFFSET + 2] = rmpp::FLAG_ACTIVE;
            }
            m
        };
    let m = get_multi(
        &mut c,
        Method::GetMulti,
        counts,
        &mpr(&[a], &[b, d], 0),
        true,
    );
    let r = c.ask(&mut sa, &db, &m).expect("an answer");
    assert_eq!(
        (r.hdr.method, r.hdr.status),
        (Method::GetMultiResp, MadStatus::OK)
    );
    assert_eq!(r.hdr.attr_id, u16::from(AttrId::PathRecord));
    let got: Vec<_> = r.records().iter().map(|r| pr_of(r)).collect();
    let want: Vec<_> = listed
        .iter()
        .filter(|p| p.sgid == a && (p.dgid == b || p.dgid == d))
        .copied()
        .collect();
    assert_eq!(got, want);
    // NumbPath bounds the answer.
    let m = get_multi(
        &mut c,
        Method::GetMulti,
        counts | mp::NUMB_PATH,
        &mpr(&[a], &[b, d], 1),
        true,
    );
    assert_eq!(c.ask(&mut sa, &db, &m).unwrap().records().len(), 1);
    // Without RMPP: ERR_REQ_INVALID; not GetMulti: 0x000c; no counts:
    // ERR_INSUFFICIENT_COMPONENTS; an unknown GID: ERR_INVALID_GID.
    let m = get_multi(&mut c, Method::GetMulti, counts, &mpr(&[a], &[b], 0), false);
    assert_eq!(
        c.ask(&mut sa, &db, &m).unwrap().sa_status(),
        SaStatus::ReqInvalid
    );
    let m = get_multi(&mut c, Method::GetTable, counts, &mpr(&[a], &[b], 0), true);
    assert_eq!(
        c.ask(&mut sa, &db, &m).unwrap().hdr.status,
        MadStatus::UNSUPPORTED_METHOD_ATTR
    );
    let m = get_multi(
        &mut c,
        Method::GetMulti,
        mp::SGID_COUNT,
        &mpr(&[a], &[b], 0),
        true,
    );
    assert_eq!(
        c.ask(&mut sa, &db, &m).unwrap().sa_status(),
        SaStatus::InsufficientComponents
    );
    let mut stranger = b;
    stranger[15] ^= 0x5a;
    let m = get_multi(
        &mut c,
        Method::GetMulti,
        counts,
        &mpr(&[a], &[stranger], 0),
        true,
    );
    assert_eq!(
        c.ask(&mut sa, &db, &m).unwrap().sa_status(),
        SaStatus::ReqInvalidGid
    );
}

/// A ServiceRecord registered with a full ServiceKey: the answer (and every
/// later one) shows the key only to a request carrying the SA's SM_Key, as
/// OpenSM's `sr_rcv_respond` does (IBA p. 923); the key itself is kept.
/// Without a lease component the lease is infinite, without a P_Key the
/// answer shows the default one.
#[test]
fn service_key_is_shown_only_to_a_trusted_request() {
    let db = fixture::two_cas_one_switch();
    let (mut sa, mut c) = setup();
    let s = service_record::comp::ID | service_record::comp::GID | service_record::comp::KEY;
    let mut gid = [0u8; 16];
    gid[..8].copy_from_slice(&db.subnet_prefix.to_be_bytes());
    gid[8..].copy_from_slice(&db.nodes[2].ports[0].guid.to_be_bytes());
    let key: [u8; 16] = core::array::from_fn(|i| 0xa0 + i as u8);
    let mut rec = [0u8; service_record::RECORD_LEN];
    service_record::Repr {
        id: 0x77,
        gid,
        pkey: 0,
        lease: 5,
        key,
        name: [0; 64],
        data: [0; 64],
    }
    .emit(&mut service_record::Packet::new_unchecked(&mut rec[..]));
    let sent = |c: &mut fixture::Client, method: Method, mask: u64, sm_key: u64| {
        let mut m = c.request(method, AttrId::ServiceRecord, mask, &rec);
        wsa::Packet::new_unchecked(&mut m[..]).set_sm_key(sm_key);
        m
    };
    let answer = |r: &fixture::Reply| {
        service_record::Repr::parse(&service_record::Packet::new_checked(&r.bytes[56..]).unwrap())
            .unwrap()
    };
    let m = sent(&mut c, Method::Set, s, 0);
    let r = answer(&c.ask(&mut sa, &db, &m).unwrap());
    assert_eq!(
        (r.key, r.lease, r.pkey),
        ([0; 16], service_record::LEASE_INFINITE, 0xffff)
    );
    let m = sent(&mut c, Method::Get, s & !service_record::comp::KEY, 1);
    let r = answer(&c.ask(&mut sa, &db, &m).unwrap());
    assert_eq!(r.key, key, "kept, and shown to a trusted request");
    let m = sent(&mut c, Method::Set, s, 1);
    assert_eq!(answer(&c.ask(&mut sa, &db, &m).unwrap()).key, key);
    // An SM_Key that is neither 0 nor the SA's: ignored, as OpenSM ignores it.
    let m = sent(&mut c, Method::Get, s, 0x99);
    assert!(c.ask(&mut sa, &db, &m).is_none());
}

/// A non-member join of a group that does not exist is ERR_REQ_INVALID
/// (o15.0.1.13; OpenSM checks the JoinState before the create components),
/// and a Set without MGID, PortGID and JoinState is ERR_INSUFFICIENT_COMPONENTS.
#[test]
fn non_member_join_of_a_missing_group_is_req_invalid() {
    use mcmember_record::comp as m;
    let db = fixture::two_cas_one_switch();
    let (mut sa, mut c) = setup();
    let mut rec = mcmember_record::Repr {
        mgid: [
            0xff, 0x12, 0x60, 0x1b, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x42,
        ],
        qkey: 1,
        pkey: 0xffff,
        join_state: mcmember_record::JOIN_NON,
        ..mcmember_record::Repr::default()
    };
    rec.port_gid[..8].copy_from_slice(&db.subnet_prefix.to_be_bytes());
    rec.port_gid[8..].copy_from_slice(&db.nodes[2].ports[0].guid.to_be_bytes());
    let bytes = |r: &mcmember_record::Repr| {
        let mut b = [0u8; mcmember_record::RECORD_LEN];
        r.emit(&mut mcmember_record::Packet::new_unchecked(&mut b[..]));
        b
    };
    let create = m::MGID
        | m::PORT_GID
        | m::JOIN_STATE
        | m::QKEY
        | m::TCLASS
        | m::PKEY
        | m::SL
        | m::FLOW_LABEL;
    for mask in [create, m::MGID | m::PORT_GID | m::JOIN_STATE] {
        let r = ask(
            &mut sa,
            &mut c,
            &db,
            Method::Set,
            AttrId::McMemberRecord,
            mask,
            &bytes(&rec),
        );
        assert_eq!(r.sa_status(), SaStatus::ReqInvalid, "mask {mask:#x}");
    }
    rec.join_state = mcmember_record::JOIN_FULL;
    let r = ask(
        &mut sa,
        &mut c,
        &db,
        Method::Set,
        AttrId::McMemberRecord,
        m::PORT_GID | m::JOIN_STATE,
        &bytes(&rec),
    );
    assert_eq!(r.sa_status(), SaStatus::InsufficientComponents);
    let r = ask(
        &mut sa,
        &mut c,
        &db,
        Method::Set,
        AttrId::McMemberRecord,
        create,
        &bytes(&rec),
    );
    assert_eq!(r.hdr.status, MadStatus::OK, "a full member creates it");
}

/// SMInfoRecord (the master's), LFTRecords (each switch's blocks),
/// MFTRecords (none: no multicast forwarding), P_KeyTableRecords (only to
/// a request with the SA's SM_Key, else ERR_REQ_INVALID, as OpenSM).
#[test]
fn sm_info_lft_mft_and_pkey_table_records() {
    let db = fixture::two_cas_one_switch();
    let (mut sa, mut c) = setup();
    let r = ask(
        &mut sa,
        &mut c,
        &db,
        Method::GetTable,
        AttrId::SmInfoRecord,
        0,
        &[0; 32],
    );
    let recs = r.records();
    assert_eq!(recs.len(), 1);
    assert_eq!(u16::from_be_bytes([recs[0][0], recs[0][1]]), db.sm_lid);
    assert_eq!(recs[0][4..12], db.sm_port_guid.to_be_bytes());
    assert_eq!(recs[0][24], 0x03, "priority 0, MASTER");

    let r = ask(
        &mut sa,
        &mut c,
        &db,
        Method::GetTable,
        AttrId::LinearFdbRecord,
        0,
        &[0; 72],
    );
    let recs = r.records();
    assert_eq!(recs.len(), 1, "one switch, one block");
    let sw = db
        .nodes
        .iter()
        .find(|n| super::super::db::is_switch(n))
        .unwrap();
    let n = sw.lft.len();
    assert_eq!(recs[0][8..8 + n], sw.lft[..]);
    assert!(recs[0][8 + n..].iter().all(|p| *p == 0xff));
    let r = ask(
        &mut sa,
        &mut c,
        &db,
        Method::Delete,
        AttrId::LinearFdbRecord,
        0,
        &[0; 72],
    );
    assert_eq!(r.hdr.status, MadStatus::UNSUPPORTED_METHOD_ATTR);

    let r = ask(
        &mut sa,
        &mut c,
        &db,
        Method::GetTable,
        AttrId::MulticastFdbRecord,
        0,
        &[0; 72],
    );
    assert_eq!((r.hdr.status, r.records().len()), (MadStatus::OK, 0));

    let r = ask(
        &mut sa,
        &mut c,
        &db,
        Method::GetTable,
        AttrId::PKeyTableRecord,
        0,
        &[0; 72],
    );
    assert_eq!(r.sa_status(), SaStatus::ReqInvalid);
    let mut m = c.request(Method::GetTable, AttrId::PKeyTableRecord, 0, &[0; 72]);
    wsa::Packet::new_unchecked(&mut m[..]).set_sm_key(1);
    let r = c.ask(&mut sa, &db, &m).unwrap();
    let recs = r.records();
    // Block 0 of every port whose table the SM read, under its LID.
    let ports = db
        .nodes
        .iter()
        .flat_map(|n| &n.ports)
        .filter(|p| !p.pkeys.is_empty())
        .count();
    let first: Vec<_> = recs.iter().filter(|r| r[2..4] == [0, 0]).collect();
    assert_eq!(first.len(), ports);
    assert!(first.iter().all(|r| r[8..10] == [0xff, 0xff]));
}

/// A PathRecord query with an SL gets paths on that SL (OpenSM without
/// QoS), not none.
#[test]
fn path_by_sl_answers_paths_on_that_sl() {
    let db = fixture::two_cas_one_switch();
    let (mut sa, mut c) = setup();
    let mut q = [0u8; 64];
    path_record::Packet::new_unchecked(&mut q[..]).set_qos_class_sl(0, 5);
    let r = ask(
        &mut sa,
        &mut c,
        &db,
        Method::GetTable,
        AttrId::PathRecord,
        path_record::comp::SL,
        &q,
    );
    let recs = r.records();
    assert_eq!(recs.len(), 9, "3 end ports, every pair");
    assert!(recs.iter().all(|r| pr_of(r).sl == 5));
}

/// MCMemberRecord queries: a member's record by MGID and PortGID shows its
/// PortGID and JoinState only to a trusted request (p. 923, as OpenSM);
/// leaving the full membership as the group's last full member takes the
/// port out altogether, though it had joined as a non-member too.
#[test]
fn member_records_hide_the_member_from_untrusted_requests() {
    use mcmember_record::comp as m;
    let db = fixture::two_cas_one_switch();
    let (mut sa, mut c) = setup();
    let mut rec = mcmember_record::Repr {
        mgid: super::super::mcast::IPOIB_BROADCAST,
        qkey: 0x0b1b,
        join_state: mcmember_record::JOIN_NON | mcmember_record::JOIN_FULL,
        ..mcmember_record::Repr::default()
    };
    rec.port_gid[..8].copy_from_slice(&db.subnet_prefix.to_be_bytes());
    rec.port_gid[8..].copy_from_slice(&db.nodes[2].ports[0].guid.to_be_bytes());
    let bytes = |r: &mcmember_record::Repr| {
        let mut b = [0u8; mcmember_record::RECORD_LEN];
        r.emit(&mut mcmember_record::Packet::new_unchecked(&mut b[..]));
        b
    };
    let join = m::MGID | m::PORT_GID | m::JOIN_STATE;
    let r = ask(
        &mut sa,
        &mut c,
        &db,
        Method::Set,
        AttrId::McMemberRecord,
        join,
        &bytes(&rec),
    );
    assert_eq!(r.hdr.status, MadStatus::OK);
    let member = |r: &fixture::Reply| {
        let p = mcmember_record::Packet::new_checked(&r.bytes[56..]).unwrap();
        (
            p.port_gid(),
            mcmember_record::Repr::parse(&p).unwrap().join_state,
        )
    };
    let by = m::MGID | m::PORT_GID;
    let r = ask(
        &mut sa,
        &mut c,
        &db,
        Method::Get,
        AttrId::McMemberRecord,
        by,
        &bytes(&rec),
    );
    assert_eq!(member(&r), ([0; 16], 0), "hidden");
    let mut q = c.request(Method::Get, AttrId::McMemberRecord, by, &bytes(&rec));
    wsa::Packet::new_unchecked(&mut q[..]).set_sm_key(1);
    let r = c.ask(&mut sa, &db, &q).unwrap();
    assert_eq!(member(&r), (rec.port_gid, 3), "shown to a trusted request");

    rec.join_state = mcmember_record::JOIN_FULL;
    let r = ask(
        &mut sa,
        &mut c,
        &db,
        Method::Delete,
        AttrId::McMemberRecord,
        join,
        &bytes(&rec),
    );
    assert_eq!(member(&r).1, 0, "out altogether");
    let r = ask(
        &mut sa,
        &mut c,
        &db,
        Method::Delete,
        AttrId::McMemberRecord,
        join,
        &bytes(&rec),
    );
    assert_eq!(r.sa_status(), SaStatus::ReqInvalid, "no longer a member");
}

/// SL2VLTableRecords as OpenSM lists them: one per CA port (in and out 0),
/// one per (out, in) pair of a switch's ports, port masks applied to
/// switches only, every table zeros (OpenSM, QoS off, reads none).
#[test]
fn sl_to_vl_records_per_port_pair() {
    let db = fixture::two_cas_one_switch();
    let (mut sa, mut c) = setup();
    let sw = db
        .nodes
        .iter()
        .find(|n| super::super::db::is_switch(n))
        .unwrap();
    let sw_ports = sw.ports.len();
    let r = ask(
        &mut sa,
        &mut c,
        &db,
        Method::GetTable,
        AttrId::SlToVlRecord,
        0,
        &[0; 16],
    );
    let recs = r.records();
    assert_eq!(recs.len(), 2 + sw_ports * sw_ports);
    assert!(recs.iter().all(|rec| rec[4..16] == [0; 12]));
    let zero_zero = recs.iter().filter(|rec| rec[2..4] == [0, 0]).count();
    assert_eq!(zero_zero, 3, "each CA, and the switch's 0-0 pair");

    // OutputPortNum 2 (mask bit 2): the switch's pairs with out 2, and both
    // CAs' records, which OpenSM does not filter by port.
    let mut q = [0u8; 16];
    q[3] = 2;
    let r = ask(
        &mut sa,
        &mut c,
        &db,
        Method::GetTable,
        AttrId::SlToVlRecord,
        1 << 2,
        &q,
    );
    assert_eq!(r.records().len(), 2 + sw_ports);
    let r = ask(
        &mut sa,
        &mut c,
        &db,
        Method::Delete,
        AttrId::SlToVlRecord,
        0,
        &[0; 16],
    );
    assert_eq!(r.hdr.status, MadStatus::UNSUPPORTED_METHOD_ATTR);
}

/// VLArbitrationTableRecords: blocks 1-4 of each CA port and of every
/// switch port, zero tables; BlockNum and OutputPortNum masks select.
#[test]
fn vl_arb_records_four_blocks_per_port() {
    let db = fixture::two_cas_one_switch();
    let (mut sa, mut c) = setup();
    let sw_ports = db
        .nodes
        .iter()
        .find(|n| super::super::db::is_switch(n))
        .unwrap()
        .ports
        .len();
    let r = ask(
        &mut sa,
        &mut c,
        &db,
        Method::GetTable,
        AttrId::VlArbRecord,
        0,
        &[0; 72],
    );
    let recs = r.records();
    assert_eq!(recs.len(), 4 * (2 + sw_ports));
    assert!(recs
        .iter()
        .all(|rec| (1..=4).contains(&rec[3]) && rec[4..] == [0; 68]));
    let mut q = [0u8; 72];
    (q[2], q[3]) = (1, 3);
    let r = ask(
        &mut sa,
        &mut c,
        &db,
        Method::GetTable,
        AttrId::VlArbRecord,
        0b110,
        &q,
    );
    assert_eq!(
        r.records().len(),
        3,
        "port 1, block 3: both CAs and the switch"
    );
}
