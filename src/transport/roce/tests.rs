//! Loopback tests: two RoCE ports on ::1 / 127.0.0.1 with test UDP ports.

use std::net::{IpAddr, Ipv6Addr, SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicU16, Ordering};
use std::time::Duration;

use super::codec::{self, Flow, Header};
use super::*;
use crate::Error;

/// Distinct UDP ports per test (tests run in parallel).
fn ports() -> (u16, u16) {
    static NEXT: AtomicU16 = AtomicU16::new(0);
    let base =
        47910 + 2 * NEXT.fetch_add(1, Ordering::Relaxed) + (std::process::id() % 500) as u16 * 8;
    (base, base + 1)
}

fn pair(ip: IpAddr) -> (RoceTransport, RoceTransport) {
    let (pa, pb) = ports();
    let cfg = |me, peer| RoceConfig {
        udp_port: me,
        peer_port: peer,
        ..RoceConfig::new(ip)
    };
    (
        RoceTransport::open(cfg(pa, pb)).expect("bind a"),
        RoceTransport::open(cfg(pb, pa)).expect("bind b"),
    )
}

fn to_qp1(gid: [u8; 16]) -> MadAddr {
    MadAddr {
        qpn: 1,
        qkey: GSI_QKEY,
        grh: Some(GrhAddr {
            gid,
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn get_mad(tid: u8) -> [u8; MAD_SIZE] {
    let mut m = [0u8; MAD_SIZE];
    m[..4].copy_from_slice(&[1, 0x09, 1, 0x01]);
    m[15] = tid;
    for (i, b) in m[24..].iter_mut().enumerate() {
        *b = i as u8;
    }
    m
}

fn send(t: &mut RoceTransport, dest: MadAddr, mad: &[u8; MAD_SIZE]) {
    let sent = t
        .transmit(&mut |slot| {
            slot.copy_from_slice(mad);
            Some(Transmit {
                qp: Qp::Gsi,
                dest,
                len: MAD_SIZE,
                timeout_ms: 0,
            })
        })
        .unwrap();
    assert!(sent);
}

/// Everything `t` hands up within a few waits.
fn drain(t: &mut RoceTransport) -> Vec<(RecvMeta, Vec<u8>)> {
    let mut got = Vec::new();
    for _ in 0..50 {
        t.wait(Some(Duration::from_millis(100))).unwrap();
        let n = t
            .recv_burst(16, &mut |m, b| got.push((m, b.to_vec())))
            .unwrap();
        if n == 0 && !got.is_empty() {
            break;
        }
    }
    got
}

fn round_trip(ip: IpAddr) {
    let (mut a, mut b) = pair(ip);
    assert_eq!(
        b.caps(),
        Caps {
            smi: false,
            gsi: true
        }
    );
    assert_eq!(b.attrs().link_layer, LinkLayer::Ethernet);
    assert_eq!(b.attrs().lid, 0);
    let gid = b.gid();
    let mad = get_mad(7);
    send(&mut a, to_qp1(gid), &mad);
    let got = drain(&mut b);
    assert_eq!(got.len(), 1);
    let (meta, bytes) = &got[0];
    assert_eq!(bytes[..], mad[..]);
    assert_eq!(meta.qp, Qp::Gsi);
    assert_eq!(meta.src.qpn, 1);
    assert_eq!(meta.src.grh.unwrap().gid, a.gid());
    // And back, to the address it came from.
    send(&mut b, meta.src, &mad);
    assert_eq!(drain(&mut a).len(), 1);
    assert_eq!(RoceStats::get(&b.stats().received), 1);
    assert_eq!(RoceStats::get(&a.stats().sent), 1);
}

#[test]
fn round_trip_ipv6() {
    round_trip(IpAddr::V6(Ipv6Addr::LOCALHOST));
}

#[test]
fn round_trip_ipv4_with_a_mapped_gid() {
    round_trip(IpAddr::V4([127, 0, 0, 1].into()));
}

#[test]
fn the_gid_is_the_address() {
    let (a, _) = pair(IpAddr::V4([127, 0, 0, 1].into()));
    let g = a.gid();
    assert_eq!(g[10..], [0xff, 0xff, 127, 0, 0, 1]);
    let at = a.attrs();
    let mut prefix_guid = [0u8; 16];
    prefix_guid[..8].copy_from_slice(&at.gid_prefix.to_be_bytes());
    prefix_guid[8..].copy_from_slice(&at.port_guid.to_be_bytes());
    assert_eq!(prefix_guid, g);
    assert_eq!(at.ca_name, "vmadroce0");
}

#[test]
fn a_taken_port_is_address_in_use() {
    let (a, _) = pair(IpAddr::V6(Ipv6Addr::LOCALHOST));
    let again = RoceTransport::open(RoceConfig {
        udp_port: a.local_addr().port(),
        ..RoceConfig::new(a.local_addr().ip())
    });
    match again {
        Err(e @ Error::AddressInUse(_)) => {
            assert!(e.to_string().contains("RoCE device"), "{e}");
            assert_eq!(e.errno(), crate::error::errno::EADDRINUSE);
        }
        other => panic!("expected EADDRINUSE, got {other:?}"),
    }
}

/// Send a hand-built datagram from a plain socket on `from` to `to`.
fn inject(from: &UdpSocket, to: SocketAddr, h: &Header, mad: &[u8], corrupt: Option<usize>) {
    let flow = Flow {
        src: (
            from.local_addr().unwrap().ip(),
            from.local_addr().unwrap().port(),
        ),
        dst: (to.ip(), to.port()),
    };
    let mut buf = [0u8; 400];
    let n = codec::emit(&mut buf, h, mad, &flow);
    if let Some(at) = corrupt {
        buf[at] ^= 0x10;
    }
    from.send_to(&buf[..n], to).unwrap();
}

#[test]
fn bad_datagrams_are_dropped_and_counted() {
    let (_, mut b) = pair(IpAddr::V6(Ipv6Addr::LOCALHOST));
    let to = b.local_addr();
    let raw = UdpSocket::bind("[::1]:0").unwrap();
    let good = Header {
        pkey: 0xffff,
        dest_qp: 1,
        psn: 0,
        qkey: GSI_QKEY,
        src_qp: 1,
    };
    let mad = get_mad(1);
    // ICRC corrupted (flip a bit of the ICRC itself, and one of the MAD).
    inject(&raw, to, &good, &mad, Some(279));
    inject(&raw, to, &good, &mad, Some(100));
    inject(
        &raw,
        to,
        &Header {
            qkey: 0x1234,
            ..good
        },
        &mad,
        None,
    );
    inject(
        &raw,
        to,
        &Header {
            pkey: 0x8002,
            ..good
        },
        &mad,
        None,
    );
    inject(&raw, to, &Header { dest_qp: 0, ..good }, &mad, None);
    inject(&raw, to, &good, &mad[..100], None);
    raw.send_to(&[0u8; 20], to).unwrap();
    // A limited member of the default partition is accepted (we are full).
    inject(
        &raw,
        to,
        &Header {
            pkey: 0x7fff,
            ..good
        },
        &mad,
        None,
    );
    inject(&raw, to, &good, &mad, None);
    let got = drain(&mut b);
    assert_eq!(got.len(), 2, "only the two good datagrams are handed up");
    let s = b.stats();
    assert_eq!(RoceStats::get(&s.bad_icrc), 2);
    assert_eq!(RoceStats::get(&s.bad_qkey), 1);
    assert_eq!(RoceStats::get(&s.bad_pkey), 1);
    assert_eq!(RoceStats::get(&s.bad_qp), 1);
    assert_eq!(RoceStats::get(&s.runts), 2);
    assert_eq!(RoceStats::get(&s.received), 2);
}

#[test]
fn pkey_matching() {
    assert!(pkey_match(0xffff, 0xffff));
    assert!(pkey_match(0x7fff, 0xffff));
    assert!(!pkey_match(0x7fff, 0x7fff), "two limited members");
    assert!(!pkey_match(0x8002, 0xffff));
    assert!(!pkey_match(0x8000, 0x8000), "the invalid P_Key");
}

#[test]
fn qp0_and_unroutable_sends_are_dropped_and_counted() {
    let (mut a, _) = pair(IpAddr::V6(Ipv6Addr::LOCALHOST));
    let mad = get_mad(2);
    for (qp, dest) in [
        (Qp::Smi, to_qp1(a.gid())),
        (Qp::Gsi, MadAddr::default()),
        (
            Qp::Gsi,
            to_qp1(codec::gid_of(IpAddr::V4([127, 0, 0, 1].into()))),
        ),
    ] {
        let sent = a
            .transmit(&mut |slot| {
                slot.copy_from_slice(&mad);
                Some(Transmit {
                    qp,
                    dest,
                    len: MAD_SIZE,
                    timeout_ms: 0,
                })
            })
            .unwrap();
        assert!(sent, "the slot was used");
    }
    assert_eq!(RoceStats::get(&a.stats().unroutable), 3);
    assert_eq!(RoceStats::get(&a.stats().sent), 0);
}

#[test]
fn a_waker_ends_the_wait_and_is_not_a_mad() {
    let (_, mut b) = pair(IpAddr::V6(Ipv6Addr::LOCALHOST));
    let w = b.waker().expect("a waker");
    w.wake();
    // Without the wake this would block forever.
    b.wait(None).unwrap();
    let n = b
        .recv_burst(8, &mut |_, _| panic!("a wake is no MAD"))
        .unwrap();
    assert_eq!(n, 0);
    assert_eq!(RoceStats::get(&b.stats().runts), 0);
}
