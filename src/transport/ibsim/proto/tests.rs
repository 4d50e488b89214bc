//! Byte fixtures for the ibsim codecs. The fixtures are little-endian (x86,
//! aarch64), the byte order of every host ibsim runs on here; the host-order
//! fields make them meaningless on a big-endian host.

use super::*;

/// CONNECT from id 0x40001234, qp 0, issm, node "H3" (what
/// `struct sim_ctl` + `struct sim_client_info` look like in memory on x86).
#[cfg(target_endian = "little")]
const CONNECT_H3: [u8; 32] = [
    0xef, 0xbe, 0xad, 0xde, // magic
    0x00, 0x00, 0x00, 0x00, // clientid
    0x01, 0x00, 0x00, 0x00, // type CONNECT
    0x2c, 0x00, 0x00, 0x00, // len 44
    0x34, 0x12, 0x00, 0x40, // info.id
    0x00, 0x00, 0x00, 0x00, // info.qp
    0x01, 0x00, 0x00, 0x00, // info.issm
    b'H', b'3', 0x00, 0x00, // info.nodeid
];

#[test]
#[cfg(target_endian = "little")]
fn ctl_connect_emits_fixture() {
    let info = ClientInfo {
        id: 0x4000_1234,
        qp: 0,
        issm: true,
        node_id: "H3".into(),
    };
    let ctl = CtlRepr::request(0, CtlType::Connect, &info.emit());
    let bytes = ctl.emit();
    assert_eq!(bytes.len(), CTL_LEN);
    assert_eq!(&bytes[..32], &CONNECT_H3[..]);
    assert!(bytes[32..].iter().all(|&b| b == 0));
}

#[test]
#[cfg(target_endian = "little")]
fn ctl_reply_parses_slot_and_node() {
    // The server's reply: same type, id replaced by the slot (3), node filled in.
    let mut reply = [0u8; CTL_LEN];
    reply[..32].copy_from_slice(&CONNECT_H3);
    reply[16..20].copy_from_slice(&[3, 0, 0, 0]);
    let ctl = CtlRepr::parse(&reply).unwrap();
    assert_eq!(ctl.ctl_type, CtlType::Connect);
    assert_eq!(ctl.len, 44);
    let info = ClientInfo::parse(&ctl.data).unwrap();
    assert_eq!(
        info,
        ClientInfo {
            id: 3,
            qp: 0,
            issm: true,
            node_id: "H3".into()
        }
    );
}

#[test]
fn ctl_parse_rejects_bad_size_and_magic() {
    let ok = CtlRepr::request(1, CtlType::GetNodeInfo, &[]).emit();
    assert!(CtlRepr::parse(&ok).is_some());
    assert!(CtlRepr::parse(&ok[..79]).is_none());
    let mut long = ok.to_vec();
    long.push(0);
    assert!(CtlRepr::parse(&long).is_none());
    let mut bad = ok;
    bad[0] ^= 1;
    assert!(CtlRepr::parse(&bad).is_none());
}

#[test]
fn ctl_types_round_trip_and_keep_unknown() {
    for v in 0..=10u32 {
        assert_eq!(u32::from(CtlType::from(v)), v);
        assert!(!matches!(CtlType::from(v), CtlType::Unknown(_)));
    }
    assert_eq!(CtlType::from(11), CtlType::Unknown(11));
    assert_eq!(CtlType::from(2), CtlType::Disconnect);
    assert_eq!(CtlType::from(8), CtlType::GetPortInfo);
}

#[test]
fn client_info_cuts_long_node_ids_to_31_bytes() {
    let info = ClientInfo {
        id: 1,
        qp: 0,
        issm: false,
        node_id: "x".repeat(40),
    };
    let b = info.emit();
    assert_eq!(b[12 + 30], b'x');
    assert_eq!(b[12 + 31], 0);
    assert_eq!(ClientInfo::parse(&b).unwrap().node_id.len(), 31);
    assert!(ClientInfo::parse(&b[..43]).is_none());
}

/// The first 32 bytes of a DR SMP request as umad2sim writes it on x86:
/// dlid = slid = 0xffff, dqp 0, sqp 0, status 0, length 256.
#[cfg(target_endian = "little")]
const DR_HEAD: [u8; 32] = [
    0xff, 0xff, 0x00, 0x00, // dlid (htons in a u32)
    0xff, 0xff, 0x00, 0x00, // slid
    0x00, 0x00, 0x00, 0x00, // dqp (BE)
    0x00, 0x00, 0x00, 0x00, // sqp (BE)
    0x00, 0x00, 0x00, 0x00, // status (BE)
    0x00, 0x00, 0x00, 0x00, // padding
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, // length 256 (BE u64)
];

/// A LID-routed GMP to LID 0x0102 QP1 from QP1 (slid 0 = "mine"), length 256.
#[cfg(target_endian = "little")]
const GMP_HEAD: [u8; 32] = [
    0x01, 0x02, 0x00, 0x00, // dlid 0x0102
    0x00, 0x00, 0x00, 0x00, // slid 0
    0x00, 0x00, 0x00, 0x01, // dqp 1
    0x00, 0x00, 0x00, 0x01, // sqp 1
    0x00, 0x00, 0x00, 0x00, // status
    0x00, 0x00, 0x00, 0x00, // padding
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, // length 256
];

#[test]
#[cfg(target_endian = "little")]
fn request_emits_dr_and_gmp_fixtures() {
    for (head, dlid, slid, qp) in [(DR_HEAD, 0xffff, 0xffff, 0), (GMP_HEAD, 0x0102, 0, 1)] {
        let mut buf = [0xa5u8; REQUEST_LEN];
        let mut r = Request::new_checked(&mut buf[..]).unwrap();
        r.set_dlid(dlid);
        r.set_slid(slid);
        r.set_dqp(qp);
        r.set_sqp(qp);
        r.set_status(0);
        r.clear_padding();
        r.set_length(256);
        r.mad_mut().fill(0x11);
        assert_eq!(&buf[..32], &head[..]);
        assert!(buf[32..].iter().all(|&b| b == 0x11));
    }
}

#[test]
#[cfg(target_endian = "little")]
fn request_parses_a_dropped_echo() {
    // A DR request returned by ibsim with status 110 (ETIMEDOUT, big-endian).
    let mut buf = [0u8; REQUEST_LEN];
    buf[..32].copy_from_slice(&DR_HEAD);
    buf[16..20].copy_from_slice(&[0, 0, 0, 110]);
    buf[32] = 1; // BaseVersion
    buf[33] = 0x81; // DR SMP class
    let r = Request::new_checked(&buf[..]).unwrap();
    assert_eq!(r.dlid(), PERMISSIVE_LID);
    assert_eq!(r.slid(), PERMISSIVE_LID);
    assert_eq!(r.dqp(), 0);
    assert_eq!(r.status(), STATUS_DROPPED);
    assert_eq!(r.length(), 256);
    assert_eq!(&r.mad()[..2], &[1, 0x81]);
    assert_eq!(r.mad().len(), MAD_SIZE);
}

#[test]
fn request_lids_round_trip() {
    for lid in [0u16, 1, 0x00ff, 0x0100, 0xbeef, 0xffff] {
        let mut buf = [0u8; REQUEST_LEN];
        let mut r = Request::new_checked(&mut buf[..]).unwrap();
        r.set_dlid(lid);
        r.set_slid(lid.rotate_left(8));
        assert_eq!(r.dlid(), lid);
        assert_eq!(r.slid(), lid.rotate_left(8));
    }
}

/// PortInfo of an ibsim CA port after OpenSM: LID 2, SM LID 1, 4x SDR,
/// Active/LinkUp, CapMask 0x0250c048 (bytes from GET_PORTINFO, IBA layout).
const PORTINFO: [u8; 40] = [
    0, 0, 0, 0, 0, 0, 0, 0, // M_Key
    0xfe, 0x80, 0, 0, 0, 0, 0, 0, // GidPrefix
    0x00, 0x02, // LID
    0x00, 0x01, // MasterSMLID
    0x02, 0x50, 0xc0, 0x48, // CapabilityMask
    0, 0, 0, 0,    // DiagCode, M_KeyLeasePeriod
    1,    // LocalPortNum
    3,    // LinkWidthEnabled
    3,    // LinkWidthSupported
    2,    // LinkWidthActive (4x)
    0x14, // LinkSpeedSupported 1 | PortState 4
    0x52, // PhysState 5 | LinkDownDefault 2
    0x02, // M_KeyProtect 0 | LMC 2
    0x11, // LinkSpeedActive 1 | Enabled 1
    0x43, // NeighborMTU 4 | MasterSMSL 3
    0, 0, 0,
];

#[test]
fn portinfo_lite_parses_fixture() {
    let mut d = [0u8; CTL_DATA_LEN];
    d[..40].copy_from_slice(&PORTINFO);
    let p = PortInfoLite::parse(&d);
    assert_eq!(
        p,
        PortInfoLite {
            gid_prefix: 0xfe80_0000_0000_0000,
            lid: 2,
            sm_lid: 1,
            capmask: 0x0250_c048,
            local_port: 1,
            width_active: 2,
            state: 4,
            phys_state: 5,
            lmc: 2,
            speed_active: 1,
            sm_sl: 3,
        }
    );
    assert_eq!(p.rate_gbps(), 10);
}

#[test]
fn nodeinfo_lite_parses_fixture() {
    let mut d = [0u8; CTL_DATA_LEN];
    d[..4].copy_from_slice(&[1, 1, 2, 8]); // base ver, class ver, switch, 8 ports
    d[4..12].copy_from_slice(&0x20_0000u64.to_be_bytes());
    d[12..20].copy_from_slice(&0x20_0001u64.to_be_bytes());
    d[20..28].copy_from_slice(&0x20_0001u64.to_be_bytes());
    d[36] = 0;
    let n = NodeInfoLite::parse(&d);
    assert_eq!(
        n,
        NodeInfoLite {
            node_type: 2,
            num_ports: 8,
            sys_guid: 0x20_0000,
            node_guid: 0x20_0001,
            local_port: 0,
        }
    );
}

#[test]
fn pkeys_parse_big_endian() {
    let mut d = [0u8; CTL_DATA_LEN];
    d[..4].copy_from_slice(&[0xff, 0xff, 0x80, 0x01]);
    let k = parse_pkeys(&d);
    assert_eq!(k.len(), 32);
    assert_eq!(&k[..3], &[0xffff, 0x8001, 0]);
}

#[test]
fn request_checks_exact_length() {
    let buf = [0u8; REQUEST_LEN + 1];
    assert!(Request::new_checked(&buf[..REQUEST_LEN]).is_ok());
    assert_eq!(
        Request::new_checked(&buf[..REQUEST_LEN - 1]).unwrap_err(),
        crate::wire::Error::Truncated
    );
    assert_eq!(
        Request::new_checked(&buf[..]).err(),
        Some(crate::wire::Error::BadLength)
    );
}
