//! The SA's own state through a real client engine: multicast groups,
//! service records, InformInfo subscriptions and Reports.

use super::super::fixture::{self, Reply};
use super::{ask, setup};
use crate::engine::{AgentId, AgentSpec, Event, SendRequest};
use crate::subnet::subnet_db::SubnetDb;
use crate::types::{MadAddr, Qp, GSI_QKEY};
use crate::wire::mad::MgmtClass;
use crate::wire::mad::{self, MadStatus, Method};
use crate::wire::sa::{
    self as wsa, inform_info, inform_info_record, mcmember_record, notice, service_record, AttrId,
    SaStatus,
};

fn port_gid(db: &SubnetDb, node: usize) -> [u8; 16] {
    let mut g = [0u8; 16];
    g[..8].copy_from_slice(&db.subnet_prefix.to_be_bytes());
    g[8..].copy_from_slice(&db.nodes[node].ports[0].guid.to_be_bytes());
    g
}

fn mcm(f: impl FnOnce(&mut mcmember_record::Repr)) -> [u8; 56] {
    let mut r = mcmember_record::Repr::default();
    f(&mut r);
    let mut b = [0u8; 56];
    r.emit(&mut mcmember_record::Packet::new_unchecked(&mut b[..]));
    b
}

fn mcm_of(r: &Reply) -> mcmember_record::Repr {
    mcmember_record::Repr::parse(&mcmember_record::Packet::new_checked(&r.bytes[56..108]).unwrap())
        .unwrap()
}

#[test]
fn mcmember_rereg_leave_then_join_the_ipoib_broadcast_group() {
    use mcmember_record::comp as m;
    let db = fixture::two_cas_one_switch();
    let (mut sa, mut c) = setup();
    let join = m::MGID | m::PORT_GID | m::JOIN_STATE;
    let host = port_gid(&db, 2);
    let q = mcm(|r| {
        r.mgid = super::super::mcast::IPOIB_BROADCAST;
        r.port_gid = host;
        r.join_state = mcmember_record::JOIN_FULL;
    });
    let r = ask(
        &mut sa,
        &mut c,
        &db,
        Method::Set,
        AttrId::McMemberRecord,
        join,
        &q,
    );
    assert_eq!(
        (r.hdr.method, r.hdr.status),
        (Method::GetResp, MadStatus::OK)
    );
    let got = mcm_of(&r);
    assert_eq!(
        (got.mlid, got.qkey, got.pkey, got.mtu),
        (0xc000, 0x0b1b, 0xffff, 4)
    );
    assert_eq!(
        (got.port_gid, got.join_state),
        (host, mcmember_record::JOIN_FULL)
    );

    let all = ask(
        &mut sa,
        &mut c,
        &db,
        Method::GetTable,
        AttrId::McMemberRecord,
        0,
        &[0; 56],
    );
    assert_eq!(all.records().len(), 1);

    // Leave: DeleteResp; the well-known group stays, with no members.
    let r = ask(
        &mut sa,
        &mut c,
        &db,
        Method::Delete,
        AttrId::McMemberRecord,
        join,
        &q,
    );
    assert_eq!(
        (r.hdr.method, r.hdr.status),
        (Method::DeleteResp, MadStatus::OK)
    );
    let all = ask(
        &mut sa,
        &mut c,
        &db,
        Method::GetTable,
        AttrId::McMemberRecord,
        0,
        &[0; 56],
    );
    // No member left; an untrusted query still lists the group (OpenSM
    // answers one record per group, PortGID zero).
    let recs = all.records();
    assert_eq!(recs.len(), 1);
    assert_eq!(
        mcmember_record::Packet::new_checked(&recs[0][..])
            .unwrap()
            .port_gid(),
        [0; 16]
    );
    // Leaving twice: not a member any more.
    let r = ask(
        &mut sa,
        &mut c,
        &db,
        Method::Delete,
        AttrId::McMemberRecord,
        join,
        &q,
    );
    assert_eq!(r.sa_status(), SaStatus::ReqInvalid);
    let r = ask(
        &mut sa,
        &mut c,
        &db,
        Method::Set,
        AttrId::McMemberRecord,
        join,
        &q,
    );
    assert_eq!(r.hdr.status, MadStatus::OK, "re-join after the leave");
}

#[test]
fn mcmember_create_join_and_delete_a_group() {
    use mcmember_record::comp as m;
    let db = fixture::two_cas_one_switch();
    let (mut sa, mut c) = setup();
    let create = m::MGID
        | m::PORT_GID
        | m::QKEY
        | m::TCLASS
        | m::PKEY
        | m::SL
        | m::FLOW_LABEL
        | m::JOIN_STATE;
    let join = m::MGID | m::PORT_GID | m::JOIN_STATE;
    let (sm, host) = (port_gid(&db, 0), port_gid(&db, 2));
    // A null MGID asks the SA to assign one.
    let q = mcm(|r| {
        r.port_gid = sm;
        r.qkey = 0x1234;
        r.pkey = 0xffff;
        r.join_state = mcmember_record::JOIN_FULL;
    });
    let r = ask(
        &mut sa,
        &mut c,
        &db,
        Method::Set,
        AttrId::McMemberRecord,
        create,
        &q,
    );
    assert_eq!(r.hdr.status, MadStatus::OK);
    let g = mcm_of(&r);
    assert_eq!(&g.mgid[..4], &[0xff, 0x12, 0xa0, 0x1b]);
    assert_eq!((g.mlid, g.qkey), (0xc001, 0x1234));

    // The host joins as a send-only non-member, naming a wrong Q_Key first.
    let q2 = |qkey: u32| {
        mcm(|r| {
            r.mgid = g.mgid;
            r.port_gid = host;
            r.qkey = qkey;
            r.join_state = mcmember_record::JOIN_SEND_ONLY;
        })
    };
    let r = ask(
        &mut sa,
        &mut c,
        &db,
        Method::Set,
        AttrId::McMemberRecord,
        join | m::QKEY,
        &q2(0x9),
    );
    assert_eq!(r.sa_status(), SaStatus::ReqInvalid);
    let r = ask(
        &mut sa,
        &mut c,
        &db,
        Method::Set,
        AttrId::McMemberRecord,
        join | m::QKEY,
        &q2(0x1234),
    );
    assert_eq!(mcm_of(&r).join_state, mcmember_record::JOIN_SEND_ONLY);

    // The members, to a trusted request (OpenSM lists them only to one
    // with the SM_Key; to others, one record of the group).
    let by_group = mcm(|r| r.mgid = g.mgid);
    let mut req = c.request(Method::GetTable, AttrId::McMemberRecord, m::MGID, &by_group);
    wsa::Packet::new_unchecked(&mut req[..]).set_sm_key(1);
    let members = c.ask(&mut sa, &db, &req).unwrap();
    assert_eq!(members.records().len(), 2);
    let group = ask(
        &mut sa,
        &mut c,
        &db,
        Method::GetTable,
        AttrId::McMemberRecord,
        m::MGID,
        &by_group,
    );
    assert_eq!(group.records().len(), 1);

    // The full member leaves: the last one, so the group goes with its
    // send-only member (OpenSM's `osm_mgrp_remove_port`), whose own leave
    // then finds no group; and a plain join cannot recreate it.
    for (gid, js, status) in [
        (sm, mcmember_record::JOIN_FULL, MadStatus::OK),
        (
            host,
            mcmember_record::JOIN_SEND_ONLY,
            SaStatus::ReqInvalid.to_mad_status(),
        ),
    ] {
        let q = mcm(|r| {
            r.mgid = g.mgid;
            r.port_gid = gid;
            r.join_state = js;
        });
        let r = ask(
            &mut sa,
            &mut c,
            &db,
            Method::Delete,
            AttrId::McMemberRecord,
            join,
            &q,
        );
        assert_eq!(r.hdr.status, status);
    }
    let q = mcm(|r| {
        r.mgid = g.mgid;
        r.port_gid = host;
        r.join_state = mcmember_record::JOIN_FULL;
    });
    let r = ask(
        &mut sa,
        &mut c,
        &db,
        Method::Set,
        AttrId::McMemberRecord,
        join,
        &q,
    );
    assert_eq!(r.sa_status(), SaStatus::InsufficientComponents);

    // A PortGID of another subnet (OpenSM: ERR_INVALID_GID), a port the
    // subnet does not have (ERR_REQ_INVALID), and a join without JoinState.
    let q = mcm(|r| {
        r.mgid = super::super::mcast::IPOIB_BROADCAST;
        r.port_gid = [0x11; 16];
        r.join_state = mcmember_record::JOIN_FULL;
    });
    let r = ask(
        &mut sa,
        &mut c,
        &db,
        Method::Set,
        AttrId::McMemberRecord,
        join,
        &q,
    );
    assert_eq!(r.sa_status(), SaStatus::ReqInvalidGid);
    let q = mcm(|r| {
        r.mgid = super::super::mcast::IPOIB_BROADCAST;
        r.port_gid[..8].copy_from_slice(&fixture::PREFIX.to_be_bytes());
        r.port_gid[8..].copy_from_slice(&0x1111u64.to_be_bytes());
        r.join_state = mcmember_record::JOIN_FULL;
    });
    let r = ask(
        &mut sa,
        &mut c,
        &db,
        Method::Set,
        AttrId::McMemberRecord,
        join,
        &q,
    );
    assert_eq!(r.sa_status(), SaStatus::ReqInvalid);
    let r = ask(
        &mut sa,
        &mut c,
        &db,
        Method::Set,
        AttrId::McMemberRecord,
        m::MGID | m::PORT_GID,
        &q,
    );
    assert_eq!(r.sa_status(), SaStatus::InsufficientComponents);
}

fn service(id: u64, gid: [u8; 16], lease: u32, name: &[u8]) -> [u8; 176] {
    let mut n = [0u8; 64];
    n[..name.len()].copy_from_slice(name);
    let mut b = [0u8; 176];
    service_record::Repr {
        id,
        gid,
        pkey: 0xffff,
        lease,
        key: [0; 16],
        name: n,
        data: [0; 64],
    }
    .emit(&mut service_record::Packet::new_unchecked(&mut b[..]));
    b
}

#[test]
fn service_records_set_get_delete_and_lease() {
    use service_record::comp as s;
    let db = fixture::two_cas_one_switch();
    let (mut sa, mut c) = setup();
    let gid = port_gid(&db, 2);
    let rid = s::ID | s::GID;
    let forever = service(0x1000, gid, service_record::LEASE_INFINITE, b"forever");
    let r = ask(
        &mut sa,
        &mut c,
        &db,
        Method::Set,
        AttrId::ServiceRecord,
        rid | s::NAME,
        &forever,
    );
    assert_eq!(
        (r.hdr.method, r.hdr.status, r.sa.attr_offset),
        (Method::GetResp, MadStatus::OK, 22)
    );
    // A lease counts only when its component is given (OpenSM: else infinite).
    let brief = service(0x2000, gid, 30, b"brief");
    let r = ask(
        &mut sa,
        &mut c,
        &db,
        Method::Set,
        AttrId::ServiceRecord,
        rid | s::LEASE,
        &brief,
    );
    assert_eq!(r.hdr.status, MadStatus::OK);
    // Setting the same record ID again replaces it.
    let renamed = service(0x2000, gid, 30, b"brief2");
    ask(
        &mut sa,
        &mut c,
        &db,
        Method::Set,
        AttrId::ServiceRecord,
        rid | s::LEASE,
        &renamed,
    );

    let all = ask(
        &mut sa,
        &mut c,
        &db,
        Method::GetTable,
        AttrId::ServiceRecord,
        0,
        &[0; 176],
    );
    let names: Vec<Vec<u8>> = all
        .records()
        .iter()
        .map(|r| {
            let p = service_record::Packet::new_checked(&r[..]).unwrap();
            p.name().iter().copied().take_while(|b| *b != 0).collect()
        })
        .collect();
    assert_eq!(names, [b"forever".to_vec(), b"brief2".to_vec()]);
    let by_name = service(0, [0; 16], 0, b"forever");
    let r = ask(
        &mut sa,
        &mut c,
        &db,
        Method::Get,
        AttrId::ServiceRecord,
        s::NAME,
        &by_name,
    );
    assert_eq!(
        service_record::Packet::new_checked(&r.bytes[56..])
            .unwrap()
            .id(),
        0x1000
    );

    // Thirty-one seconds later the brief lease has run out.
    c.now += core::time::Duration::from_secs(31);
    let all = ask(
        &mut sa,
        &mut c,
        &db,
        Method::GetTable,
        AttrId::ServiceRecord,
        0,
        &[0; 176],
    );
    assert_eq!(all.records().len(), 1);

    let r = ask(
        &mut sa,
        &mut c,
        &db,
        Method::Delete,
        AttrId::ServiceRecord,
        rid,
        &forever,
    );
    assert_eq!(
        (r.hdr.method, r.hdr.status),
        (Method::DeleteResp, MadStatus::OK)
    );
    let r = ask(
        &mut sa,
        &mut c,
        &db,
        Method::Delete,
        AttrId::ServiceRecord,
        rid,
        &forever,
    );
    assert_eq!(r.sa_status(), SaStatus::NoRecords);
    let r = ask(
        &mut sa,
        &mut c,
        &db,
        Method::Set,
        AttrId::ServiceRecord,
        s::ID,
        &forever,
    );
    // OpenSM: a Set without ServiceID and ServiceGID is ERR_REQ_INVALID.
    assert_eq!(r.sa_status(), SaStatus::ReqInvalid);
}

/// A listener for Reports on the client's port, and a subscription of it
/// to generic trap `trap` from any issuer.
fn subscribe(
    sa: &mut super::super::SaService,
    c: &mut fixture::Client,
    db: &SubnetDb,
    trap: u16,
    on: bool,
) -> Reply {
    let info = inform_info::Repr {
        lid_range_begin: inform_info::ALL_LIDS,
        is_generic: true,
        subscribe: on,
        trap_type: inform_info::ANY,
        trap_number: trap,
        qpn: 1,
        producer: inform_info::ANY_PRODUCER,
        ..inform_info::Repr::default()
    };
    let mut b = [0u8; inform_info::RECORD_LEN];
    info.emit(&mut inform_info::Packet::new_unchecked(&mut b[..]));
    ask(sa, c, db, Method::Set, AttrId::InformInfo, 0, &b)
}

fn listen(c: &mut fixture::Client) -> AgentId {
    c.engine
        .register(AgentSpec {
            qp: Qp::Gsi,
            mgmt_class: MgmtClass::from(0x03),
            class_version: 2,
            rmpp_version: 1,
            method_mask: [1 << 6, 0], // Report
            oui: 0,
            user_rmpp: false,
        })
        .unwrap()
}

/// The Reports `agent` received (removed from the client's events).
fn reports(c: &mut fixture::Client, agent: AgentId) -> Vec<(MadAddr, Vec<u8>)> {
    let (mine, rest) = core::mem::take(&mut c.events)
        .into_iter()
        .partition(|e| matches!(e, Event::Recv { agent: a, .. } if *a == agent));
    c.events = rest;
    mine.into_iter()
        .filter_map(|e| match e {
            Event::Recv { addr, mad, .. } => Some((addr, mad)),
            _ => None,
        })
        .collect()
}

fn trap(number: u16, issuer: u16) -> [u8; notice::SMP_LEN] {
    let mut b = [0u8; notice::SMP_LEN];
    let mut p = notice::Packet::new_unchecked(&mut b[..]);
    p.set_head(true, 1, 2); // urgent, from a switch
    p.set_trap_number(number);
    p.set_issuer_lid(issuer);
    b
}

#[test]
fn inform_info_subscribers_get_traps_as_reports() {
    let db = fixture::two_cas_one_switch();
    let (mut sa, mut c) = setup();
    let listener = listen(&mut c);
    let r = subscribe(&mut sa, &mut c, &db, 128, true);
    assert_eq!(
        (r.hdr.method, r.hdr.status),
        (Method::GetResp, MadStatus::OK)
    );
    let echoed = inform_info::Packet::new_checked(&r.bytes[56..]).unwrap();
    assert_eq!((echoed.trap_number(), echoed.subscribe()), (128, true));
    assert_eq!(sa.subscriptions(), 1);

    // Trap 128 from the switch: one Report, which the listener answers
    // before the SA's 200 ms timer runs out.
    sa.handle_trap(c.now, &trap(128, 2));
    c.pump(&mut sa, &db);
    let got = reports(&mut c, listener);
    assert_eq!(got.len(), 1);
    let (from, m) = &got[0];
    let hdr = mad::Repr::parse(&mad::Packet::new_checked(&m[..]).unwrap()).unwrap();
    assert_eq!((hdr.method, hdr.attr_id), (Method::Report, 0x0002));
    let n = notice::Packet::new_checked(&m[56..]).unwrap();
    assert_eq!(
        (n.trap_number(), n.issuer_lid(), n.is_generic()),
        (128, 2, true)
    );
    let mut resp = m.clone();
    resp[3] = 0x86; // ReportResp, same TID
    let req = SendRequest {
        addr: MadAddr {
            qkey: GSI_QKEY,
            ..*from
        },
        mad: &resp[..256],
        timeout_ms: 0,
        retries: 0,
    };
    c.engine.send(c.now, listener, req).unwrap();
    c.drive(&mut sa, &db);
    let st = sa.stats();
    assert_eq!(
        (st.reports_sent, st.reports_acked, st.reports_timed_out),
        (1, 1, 0)
    );

    // Trap 129 was not asked for.
    sa.handle_trap(c.now, &trap(129, 2));
    c.drive(&mut sa, &db);
    assert!(reports(&mut c, listener).is_empty());

    // The SA lists the subscription as an InformInfoRecord of the client's port.
    let r = ask(
        &mut sa,
        &mut c,
        &db,
        Method::GetTable,
        AttrId::InformInfoRecord,
        0,
        &[0; 64],
    );
    let recs = r.records();
    assert_eq!((r.sa.attr_offset, recs.len()), (8, 1));
    let rec = inform_info_record::Packet::new_checked(&recs[0][..]).unwrap();
    assert_eq!(
        (rec.subscriber_gid(), rec.subscriber_enum()),
        (port_gid(&db, 2), 0)
    );
    assert_eq!(rec.inform_info().trap_number(), 128);

    // Unsubscribe; a second time there is nothing to remove.
    assert_eq!(
        subscribe(&mut sa, &mut c, &db, 128, false).hdr.status,
        MadStatus::OK
    );
    assert_eq!(sa.subscriptions(), 0);
    let r = subscribe(&mut sa, &mut c, &db, 128, false);
    assert_eq!(r.sa_status(), SaStatus::ReqInvalid);
}

#[test]
fn an_unanswered_report_is_resent_then_given_up() {
    let db = fixture::two_cas_one_switch();
    let (mut sa, mut c) = setup();
    let listener = listen(&mut c);
    subscribe(&mut sa, &mut c, &db, 128, true);
    let t0 = c.now;
    sa.handle_trap(c.now, &trap(128, 2));
    c.drive(&mut sa, &db);
    // The listener's engine drops the resends of a request it already
    // delivered: it sees one Report; the SA gives up after 4 × 200 ms.
    assert_eq!(reports(&mut c, listener).len(), 1);
    assert_eq!(sa.stats().reports_timed_out, 1);
    assert!(c.now - t0 >= core::time::Duration::from_millis(800));
}

#[test]
fn creating_and_deleting_a_group_raises_traps_66_and_67() {
    use mcmember_record::comp as m;
    let db = fixture::two_cas_one_switch();
    let (mut sa, mut c) = setup();
    let listener = listen(&mut c);
    subscribe(&mut sa, &mut c, &db, inform_info::ANY, true);
    let create = m::MGID
        | m::PORT_GID
        | m::QKEY
        | m::TCLASS
        | m::PKEY
        | m::SL
        | m::FLOW_LABEL
        | m::JOIN_STATE;
    let q = mcm(|r| {
        r.port_gid = port_gid(&db, 2);
        r.pkey = 0xffff;
        r.join_state = mcmember_record::JOIN_FULL;
    });
    let r = ask(
        &mut sa,
        &mut c,
        &db,
        Method::Set,
        AttrId::McMemberRecord,
        create,
        &q,
    );
    let g = mcm_of(&r);
    let leave = mcm(|r| {
        r.mgid = g.mgid;
        r.port_gid = port_gid(&db, 2);
        r.join_state = mcmember_record::JOIN_FULL;
    });
    let join = m::MGID | m::PORT_GID | m::JOIN_STATE;
    ask(
        &mut sa,
        &mut c,
        &db,
        Method::Delete,
        AttrId::McMemberRecord,
        join,
        &leave,
    );
    let traps: Vec<(u16, Vec<u8>)> = reports(&mut c, listener)
        .iter()
        .map(|(_, m)| {
            let n = notice::Packet::new_checked(&m[56..]).unwrap();
            (n.trap_number(), n.details()[6..22].to_vec())
        })
        .collect();
    assert_eq!(traps, [(66, g.mgid.to_vec()), (67, g.mgid.to_vec())]);
}
