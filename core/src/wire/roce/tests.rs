//! Byte fixtures for whole RoCE v2 frames. The expected ICRCs were computed
//! independently with Python's `zlib.crc32` and the recipe in the `wire::roce`
//! module docs, on packets shaped
//! like what rxe0 sent as QP1.

use super::*;
use proptest::prelude::*;

const SRC6: [u8; 16] = [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
const DST6: [u8; 16] = [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2];

/// A class 0x09 Get (umad_pingpong's request), TID 0x100000002a.
fn ping_mad() -> [u8; 256] {
    let mut m = [0u8; 256];
    m[..4].copy_from_slice(&[1, 9, 1, 1]);
    m[8..16].copy_from_slice(&0x0000_0001_0000_002au64.to_be_bytes());
    m
}

/// rxe's QP1 packet as roce-udp.md describes it: `60000000 0120 11 40`, UDP
/// source port 55410, UDP checksum 0, BTH 0x64 / P_Key ffff / dest QP 1 /
/// AckReq / PSN 0, DETH Q_Key 0x80010000 source QP 1, the MAD, the ICRC.
fn rxe_qp1_v6() -> Vec<u8> {
    let mut p = vec![0x60, 0, 0, 0, 0x01, 0x20, 0x11, 0x40];
    p.extend_from_slice(&SRC6);
    p.extend_from_slice(&DST6);
    p.extend_from_slice(&[0xd8, 0x72, 0x12, 0xb7, 0x01, 0x20, 0x00, 0x00]);
    p.extend_from_slice(&[0x64, 0, 0xff, 0xff, 0, 0, 0, 1, 0x80, 0, 0, 0]);
    p.extend_from_slice(&[0x80, 0x01, 0, 0, 0, 0, 0, 1]);
    p.extend_from_slice(&ping_mad());
    p.extend_from_slice(&[0x53, 0xde, 0x6b, 0x6e]);
    p
}

/// The same datagram over IPv4 192.0.2.1 -> 192.0.2.2 with the
/// pseudo-random IP ID rxe picks (0xe596), checksum left 0 (masked anyway).
fn rxe_qp1_v4() -> Vec<u8> {
    let mut p = vec![
        0x45, 0, 0x01, 0x34, 0xe5, 0x96, 0x40, 0, 0x40, 0x11, 0, 0, 192, 0, 2, 1, 192, 0, 2, 2,
    ];
    p.extend_from_slice(&rxe_qp1_v6()[40..]);
    let n = p.len();
    p[n - 4..].copy_from_slice(&[0xea, 0xf7, 0xfb, 0xef]);
    p
}

fn rxe_repr_v6() -> Repr {
    Repr {
        ip: IpRepr {
            addrs: IpAddrs::V6 {
                src: SRC6,
                dst: DST6,
            },
            tclass: 0,
            flow_label: 0,
            hop_limit: 64,
            ip_id: 0,
            src_port: 55410,
        },
        bth: bth::Repr {
            ack_req: true,
            ..bth::Repr::ud_send(0xffff, 1, 0)
        },
        deth: deth::Repr {
            qkey: crate::types::GSI_QKEY,
            src_qp: 1,
        },
    }
}

#[test]
fn rxe_v6_fixture_deconstructs_and_icrc_matches() {
    let b = rxe_qp1_v6();
    assert_eq!(b.len(), 40 + 288);
    let f = Frame::new_checked(&b[..]).unwrap();
    assert_eq!(
        f.addrs(),
        IpAddrs::V6 {
            src: SRC6,
            dst: DST6
        }
    );
    assert_eq!(
        (f.hop_limit(), f.src_port(), f.udp_checksum()),
        (64, 55410, 0)
    );
    assert_eq!((f.bth().dest_qp(), f.deth().src_qp()), (1, 1));
    assert_eq!(f.payload(), &ping_mad()[..]);
    assert_eq!(f.icrc(), 0x6e6b_de53);
    assert!(f.icrc_ok());
    let (r, payload) = Repr::parse(&f).unwrap();
    assert_eq!(r, rxe_repr_v6());
    assert_eq!(payload, &ping_mad()[..]);
}

#[test]
fn rxe_v4_fixture_icrc_covers_the_ip_id() {
    let b = rxe_qp1_v4();
    let f = Frame::new_checked(&b[..]).unwrap();
    assert_eq!(f.ip_id(), 0xe596);
    assert!(f.icrc_ok());
    // TTL, TOS and the checksum are masked ...
    let mut c = b.clone();
    c[1] = 0x20;
    c[8] = 1;
    c[10] = 0x12;
    assert!(Frame::new_checked(&c[..]).unwrap().icrc_ok());
    // ... the IP ID is not.
    let mut c = b;
    c[5] ^= 1;
    assert!(!Frame::new_checked(&c[..]).unwrap().icrc_ok());
}

#[test]
fn emit_reproduces_the_fixture_but_with_a_udp_checksum() {
    let r = rxe_repr_v6();
    let mut buf = vec![0xa5u8; r.buffer_len(256)];
    assert_eq!(r.emit(&mut buf, &ping_mad()), Ok(40 + 288));
    let want = rxe_qp1_v6();
    assert_eq!(&buf[..46], &want[..46]);
    assert_eq!(
        &buf[48..],
        &want[48..],
        "same ICRC: the UDP checksum is masked"
    );
    let f = Frame::new_checked(&buf[..]).unwrap();
    assert_ne!(f.udp_checksum(), 0);
    assert_eq!(udp_sum_v6(&buf), 0xffff, "the UDP checksum verifies");
}

#[test]
fn emit_v4_has_valid_header_checksum() {
    let mut r = rxe_repr_v6();
    r.ip.addrs = IpAddrs::V4 {
        src: [192, 0, 2, 1],
        dst: [192, 0, 2, 2],
    };
    r.ip.ip_id = 0xe596;
    let mut buf = vec![0u8; r.buffer_len(256)];
    r.emit(&mut buf, &ping_mad()).unwrap();
    assert_eq!(ones_sum(0, &buf[..20]), 0xffff);
    let want = rxe_qp1_v4();
    assert_eq!(&buf[buf.len() - 4..], &want[want.len() - 4..]);
    assert_eq!(
        Repr::parse(&Frame::new_checked(&buf[..]).unwrap())
            .unwrap()
            .0,
        r
    );
}

/// The folded ones' complement sum over the UDP pseudo-header and datagram (0xffff when valid).
fn udp_sum_v6(p: &[u8]) -> u32 {
    let mut s = ones_sum(0, &p[8..40]);
    s = ones_sum(s, &[0, 17]);
    s = ones_sum(s + u32::from(u16::from_be_bytes([p[4], p[5]])), &p[40..]);
    s
}

#[test]
fn any_flipped_bit_changes_the_icrc() {
    let base = rxe_qp1_v6();
    let masked_v6 = |i: usize| i < 4 || i == 7 || i == 46 || i == 47 || i == 48 + 4;
    for i in 0..base.len() - ICRC_LEN {
        for bit in 0..8 {
            let mut b = base.clone();
            b[i] ^= 1 << bit;
            let Ok(f) = Frame::new_checked(&b[..]) else {
                continue; // a length or port field became invalid
            };
            if masked_v6(i) || (i == 0 && bit >= 4) {
                continue;
            }
            assert!(!f.icrc_ok(), "byte {i} bit {bit} left the ICRC unchanged");
        }
    }
    // The masked fields really are masked.
    let mut b = base;
    b[1] = 0x5a;
    b[7] = 1;
    b[46] = 0x12;
    b[52] = 0x77;
    assert!(Frame::new_checked(&b[..]).unwrap().icrc_ok());
}

#[test]
fn parse_rejects_bad_icrc_opcode_port_and_lengths() {
    let b = rxe_qp1_v6();
    let mut c = b.clone();
    let n = c.len();
    c[n - 1] ^= 0x80;
    assert_eq!(
        Repr::parse(&Frame::new_checked(&c[..]).unwrap()).unwrap_err(),
        Error::Malformed
    );
    let mut c = b.clone();
    c[48] = 0x04; // UC SEND Only
    assert_eq!(
        Repr::parse(&Frame::new_unchecked(&c[..])).unwrap_err(),
        Error::Malformed
    );
    let mut c = b.clone();
    c[43] = 0xb8; // port 4792
    assert_eq!(Frame::new_checked(&c[..]).unwrap_err(), Error::Malformed);
    assert_eq!(
        Frame::new_checked(&b[..b.len() - 1]).unwrap_err(),
        Error::Truncated
    );
    let mut c = b.clone();
    c[45] ^= 1; // UDP length disagrees
    assert_eq!(Frame::new_checked(&c[..]).unwrap_err(), Error::BadLength);
    let mut c = b;
    c[0] = 0x50;
    assert_eq!(Frame::new_checked(&c[..]).unwrap_err(), Error::BadVersion);
    assert_eq!(Frame::new_checked(&[][..]).unwrap_err(), Error::Truncated);
}

#[test]
fn padding_and_trailing_bytes() {
    let r = rxe_repr_v6();
    let payload = [7u8; 13];
    let mut buf = vec![0u8; r.buffer_len(13) + 6];
    let n = r.emit(&mut buf, &payload).unwrap();
    assert_eq!(n, 40 + 8 + 24 + 13 + 3);
    let f = Frame::new_checked(&buf[..]).unwrap();
    assert_eq!(f.bth().pad_count(), 3);
    assert_eq!(f.payload(), &payload);
    assert!(f.icrc_ok());
    assert_eq!(Repr::parse(&f).unwrap().1, &payload);
}

#[test]
fn ipv4_mapped_gids_select_ipv4() {
    let v4 = crate::wire::grh::ipv4_mapped_gid([192, 0, 2, 9]);
    assert_eq!(ipv4_of_gid(&v4), Some([192, 0, 2, 9]));
    assert_eq!(ipv4_of_gid(&SRC6), None);
    assert!(matches!(IpAddrs::from_gids(&v4, &v4), IpAddrs::V4 { .. }));
    assert!(matches!(IpAddrs::from_gids(&v4, &SRC6), IpAddrs::V6 { .. }));
}

#[test]
fn native_ib_icrc_masks_vl_and_grh_variants() {
    let ib = &rxe_qp1_v6()[48..48 + 12 + 8 + 256];
    let lrh = [0x00u8, 0x02, 0, 2, 0, 72, 0, 1];
    let base = icrc_ib(&lrh, ib).unwrap();
    let mut l = lrh;
    l[0] = 0xf0; // VL 15
    assert_eq!(icrc_ib(&l, ib).unwrap(), base);
    l[2] = 9; // DLID changes it
    assert_ne!(icrc_ib(&l, ib).unwrap(), base);
    // With a GRH: TClass/flow/hop limit masked, SGID covered.
    let mut lg = vec![0x00u8, 0x03, 0, 2, 0, 82, 0, 1];
    lg.extend_from_slice(&rxe_qp1_v6()[..40]);
    lg[8 + 6] = 0x1b;
    let g = icrc_ib(&lg, ib).unwrap();
    lg[8 + 1] = 0x55;
    lg[8 + 7] = 1;
    assert_eq!(icrc_ib(&lg, ib).unwrap(), g);
    lg[8 + 9] ^= 1;
    assert_ne!(icrc_ib(&lg, ib).unwrap(), g);
    assert_eq!(icrc_ib(&lg[..20], ib).unwrap_err(), Error::Truncated);
}

proptest! {
    #[test]
    fn roundtrip(v6 in any::<bool>(), s in any::<[u8; 16]>(), d in any::<[u8; 16]>(),
                 tc in any::<u8>(), fl in 0u32..(1 << 20), hl in any::<u8>(), id in any::<u16>(),
                 sport in any::<u16>(), pkey in any::<u16>(), dqp in 0u32..(1 << 24),
                 ack in any::<bool>(), psn in 0u32..(1 << 24), qkey in any::<u32>(),
                 sqp in 0u32..(1 << 24), payload in proptest::collection::vec(any::<u8>(), 0..300)) {
        let addrs = if v6 {
            IpAddrs::V6 { src: s, dst: d }
        } else {
            IpAddrs::V4 { src: [s[0], s[1], s[2], s[3]], dst: [d[0], d[1], d[2], d[3]] }
        };
        let r = Repr {
            ip: IpRepr { addrs, tclass: tc, flow_label: if v6 { fl } else { 0 }, hop_limit: hl,
                         ip_id: if v6 { 0 } else { id }, src_port: sport },
            bth: bth::Repr { ack_req: ack, ..bth::Repr::ud_send(pkey, dqp, psn) },
            deth: deth::Repr { qkey, src_qp: sqp },
        };
        let mut buf = vec![0xa5u8; r.buffer_len(payload.len())];
        let n = r.emit(&mut buf, &payload).unwrap();
        prop_assert_eq!(n, buf.len());
        let f = Frame::new_checked(&buf[..]).unwrap();
        let (back, p) = Repr::parse(&f).unwrap();
        let mut want = r;
        want.bth.pad_count = Repr::pad_for(payload.len()) as u8;
        prop_assert_eq!(back, want);
        prop_assert_eq!(p, &payload[..]);
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
        if let Ok(f) = Frame::new_checked(&bytes[..]) {
            let _ = (Repr::parse(&f), f.icrc_ok(), f.payload(), f.addrs(), f.tclass(),
                     f.flow_label(), f.bth().psn(), f.deth().qkey());
        }
        let _ = icrc(&bytes, &bytes);
        let _ = icrc_ib(&bytes, &bytes);
    }

    #[test]
    fn mutated_fixture_never_panics(i in 0usize..328, v in any::<u8>()) {
        let mut b = rxe_qp1_v6();
        b[i] = v;
        if let Ok(f) = Frame::new_checked(&b[..]) {
            let _ = (Repr::parse(&f), f.payload());
        }
    }
}
