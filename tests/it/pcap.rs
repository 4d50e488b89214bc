//! Captures that tshark must dissect: synthetic MAD sequences (SMP
//! directed-route walk, SA GetTable over RMPP with ACKs, vendor MADs)
//! written through `vmad::pcap::Capture`, then read back by `tshark` and
//! by vmad's own reader.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use vmad::pcap::{decode, Capture, Direction, LinkType, PcapConfig, Reader};
use vmad::transport::{LinkLayer, PortAttrs};
use vmad::types::{GrhAddr, MadAddr, Qp, GSI_QKEY};

pub(crate) fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("vmad-it-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

pub(crate) fn attrs(lid: u16, guid: u64) -> PortAttrs {
    PortAttrs {
        ca_name: "vmadsim0".into(),
        port_num: 1,
        node_type: 1,
        node_guid: guid,
        port_guid: guid,
        gid_prefix: 0xfe80_0000_0000_0000,
        lid,
        lmc: 0,
        sm_lid: 1,
        sm_sl: 0,
        state: 4,
        phys_state: 5,
        rate: 100,
        capmask: 0,
        pkeys: vec![0xffff],
        link_layer: LinkLayer::InfiniBand,
    }
}

/// A MAD: common header, RMPP header (type 0 = inactive) and a recognisable body.
fn mad(class: u8, ver: u8, method: u8, attr: u16, tid: u64) -> [u8; 256] {
    let mut m = [0u8; 256];
    m[..4].copy_from_slice(&[1, class, ver, method]);
    m[8..16].copy_from_slice(&tid.to_be_bytes());
    m[16..18].copy_from_slice(&attr.to_be_bytes());
    for (i, b) in m[64..].iter_mut().enumerate() {
        *b = i as u8;
    }
    m
}

fn rmpp(m: &mut [u8; 256], typ: u8, flags: u8, seg: u32, paylen_newwin: u32) {
    m[24..28].copy_from_slice(&[1, typ, (0x1f << 3) | flags, 0]);
    m[28..32].copy_from_slice(&seg.to_be_bytes());
    m[32..36].copy_from_slice(&paylen_newwin.to_be_bytes());
}

/// What the test expects tshark to see for one packet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Expect {
    pub(crate) class: u8,
    pub(crate) method: u8,
    pub(crate) attr: u16,
    /// RMPP type, for RMPP classes.
    pub(crate) rmpp: Option<u8>,
}

type Packet = (Direction, Qp, MadAddr, [u8; 256], Expect);

fn dr_walk() -> Vec<Packet> {
    // Get NodeInfo at hop 0, 1 and 2 of the path 1,3 (ibnetdiscover's first steps).
    let mut out = Vec::new();
    let peer = MadAddr {
        qpn: 0,
        lid: 0xffff,
        ..MadAddr::default()
    };
    for hops in 0..3u8 {
        let mut req = mad(0x81, 1, 0x01, 0x0011, 0x10 + u64::from(hops));
        req[6] = 0; // hop pointer
        req[7] = hops;
        req[56..60].copy_from_slice(&[0xff, 0xff, 0xff, 0xff]); // DrSLID, DrDLID permissive
        req[128..131].copy_from_slice(&[0, 1, 3]);
        let mut resp = req;
        resp[3] = 0x81;
        resp[4] = 0x80; // D bit
        resp[6] = hops;
        let e = |m| Expect {
            class: 0x81,
            method: m,
            attr: 0x0011,
            rmpp: None,
        };
        out.push((Direction::Sent, Qp::Smi, peer, req, e(0x01)));
        out.push((Direction::Received, Qp::Smi, peer, resp, e(0x81)));
    }
    out
}

fn sa_gettable_rmpp() -> Vec<Packet> {
    let sa = MadAddr {
        qpn: 1,
        qkey: GSI_QKEY,
        lid: 1,
        ..MadAddr::default()
    };
    let tid = 0x0000_0001_2345_6789;
    let e = |m, r| Expect {
        class: 0x03,
        method: m,
        attr: 0x0011,
        rmpp: Some(r),
    };
    let mut out = Vec::new();
    let mut req = mad(0x03, 2, 0x12, 0x0011, tid);
    rmpp(&mut req, 0, 0, 0, 0);
    req[24] = 1; // RMPPVersion 1, inactive (a plain request from an RMPP agent)
    out.push((Direction::Sent, Qp::Gsi, sa, req, e(0x12, 0)));
    // A 3-segment response (3 x 200 - 8 = 592 bytes of data), ACK after each segment.
    for seg in 1..=3u32 {
        let mut d = mad(0x03, 2, 0x92, 0x0011, tid);
        let flags = 0x01 | if seg == 1 { 0x02 } else { 0 } | if seg == 3 { 0x04 } else { 0 };
        let paylen = match seg {
            1 => 3 * 200 + 20 - 8,
            3 => 200 + 20 - 8,
            _ => 0,
        };
        rmpp(&mut d, 1, flags, seg, paylen);
        d[44..46].copy_from_slice(&8u16.to_be_bytes()); // attr offset: 64-byte NodeRecords
        out.push((Direction::Received, Qp::Gsi, sa, d, e(0x92, 1)));
        let mut ack = mad(0x03, 2, 0x92, 0x0011, tid);
        rmpp(&mut ack, 2, 0x01, seg, seg + 64);
        out.push((Direction::Sent, Qp::Gsi, sa, ack, e(0x92, 2)));
    }
    out
}

fn vendor() -> Vec<Packet> {
    let peer = MadAddr {
        qpn: 1,
        qkey: GSI_QKEY,
        lid: 3,
        grh: Some(GrhAddr {
            gid: [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0x02, 0xc9, 0, 0, 0, 0, 3],
            hop_limit: 255,
            ..GrhAddr::default()
        }),
        ..MadAddr::default()
    };
    let e = |c: u8, m: u8| Expect {
        class: c,
        method: m,
        attr: 0x0000,
        // tshark 4.0 dissects RMPP only for the SA class, not for vendor range 2.
        rmpp: None,
    };
    let ping = mad(0x09, 1, 0x01, 0x0000, 0x77);
    let mut pong = ping;
    pong[3] = 0x81;
    let mut v2 = mad(0x30, 1, 0x01, 0x0000, 0x78);
    v2[37..40].copy_from_slice(&[0x00, 0x14, 0x05]);
    let mut v2r = v2;
    v2r[3] = 0x81;
    vec![
        (Direction::Sent, Qp::Gsi, peer, ping, e(0x09, 0x01)),
        (Direction::Received, Qp::Gsi, peer, pong, e(0x09, 0x81)),
        (Direction::Sent, Qp::Gsi, peer, v2, e(0x30, 0x01)),
        (Direction::Received, Qp::Gsi, peer, v2r, e(0x30, 0x81)),
    ]
}

fn write_capture(path: &Path, link: LinkType, packets: &[Packet]) {
    let mut cfg = PcapConfig::new(path);
    cfg.link = link;
    let mut cap = Capture::open(&cfg, &attrs(2, 0x0002_c900_0000_0002)).unwrap();
    for (i, (dir, qp, peer, m, _)) in packets.iter().enumerate() {
        let ts = UNIX_EPOCH + Duration::from_secs(1_700_000_000) + Duration::from_millis(i as u64);
        cap.record(ts, *dir, *qp, peer, m);
    }
    assert_eq!(cap.stats().packets, packets.len() as u64);
    assert_eq!(cap.stats().errors, 0);
}

/// tshark's per-packet fields, and how many packets it flags as malformed or
/// with expert errors. Panics if tshark is missing, unless
/// VMAD_SKIP_TSHARK=1 says to skip (then returns None).
pub(crate) fn tshark_fields(path: &Path) -> Option<Vec<Vec<String>>> {
    let fields = [
        "infiniband.mad.mgmtclass",
        "infiniband.mad.method",
        "infiniband.mad.attributeid",
        "infiniband.rmpp.rmpptype",
        "infiniband.bth.opcode",
        "infiniband.deth.q_key",
        "_ws.malformed",
        "_ws.expert.severity",
    ];
    let mut cmd = Command::new("tshark");
    cmd.arg("-n")
        .arg("-r")
        .arg(path)
        .args(["-T", "fields", "-E", "separator=|"]);
    for f in fields {
        cmd.args(["-e", f]);
    }
    let out = match cmd.output() {
        Ok(o) => o,
        Err(e) if std::env::var_os("VMAD_SKIP_TSHARK").is_some() => {
            eprintln!("tshark not run ({e}); VMAD_SKIP_TSHARK is set");
            return None;
        }
        Err(e) => panic!("tshark: {e}: run scripts/install-deps (or set VMAD_SKIP_TSHARK=1)"),
    };
    assert!(
        out.status.success(),
        "tshark failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    Some(
        text.lines()
            .map(|l| l.split('|').map(str::to_owned).collect())
            .collect(),
    )
}

fn num(s: &str) -> u64 {
    let s = s.trim();
    match s.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16).unwrap(),
        None => s.parse().unwrap_or_else(|_| panic!("not a number: {s:?}")),
    }
}

/// Check tshark's view of a capture against the expectations, packet by packet.
pub(crate) fn check_with_tshark(path: &Path, want: &[Expect]) {
    let Some(rows) = tshark_fields(path) else {
        return;
    };
    assert_eq!(rows.len(), want.len(), "packet count: {rows:?}");
    for (i, (row, e)) in rows.iter().zip(want).enumerate() {
        let n = i + 1;
        assert_eq!(row[6], "", "packet {n} is malformed: {row:?}");
        assert!(
            !row[7]
                .split(',')
                .any(|s| !s.is_empty() && num(s) >= 0x0080_0000),
            "packet {n} has an expert error: {row:?}"
        );
        assert_eq!(num(&row[4]), 0x64, "packet {n}: BTH opcode UD SEND Only");
        assert_eq!(
            num(&row[0]),
            u64::from(e.class),
            "packet {n} class: {row:?}"
        );
        assert_eq!(
            num(&row[1]),
            u64::from(e.method),
            "packet {n} method: {row:?}"
        );
        assert_eq!(
            num(&row[2]),
            u64::from(e.attr),
            "packet {n} attribute: {row:?}"
        );
        match e.rmpp {
            Some(t) => assert_eq!(num(&row[3]), u64::from(t), "packet {n} RMPP type: {row:?}"),
            None => assert_eq!(row[3], "", "packet {n} has no RMPP header: {row:?}"),
        }
    }
}

fn all_packets() -> Vec<Packet> {
    let mut v = dr_walk();
    v.extend(sa_gettable_rmpp());
    v.extend(vendor());
    v
}

#[test]
fn tshark_dissects_synthetic_roce_capture() {
    let dir = scratch("synthetic-roce");
    let path = dir.join("cap.pcap");
    let packets = all_packets();
    write_capture(&path, LinkType::Ethernet, &packets);
    let want: Vec<Expect> = packets.iter().map(|p| p.4.clone()).collect();
    check_with_tshark(&path, &want);
}

#[test]
fn own_reader_decodes_both_link_types() {
    for link in [LinkType::Ethernet, LinkType::InfiniBand] {
        let dir = scratch(&format!("reader-{}", link.number()));
        let path = dir.join("cap.pcap");
        let packets = all_packets();
        write_capture(&path, link, &packets);
        let mut r = Reader::new(std::fs::File::open(&path).unwrap()).unwrap();
        assert_eq!(r.link_number(), link.number());
        let mut n = 0;
        while let Some(rec) = r.next_record().unwrap() {
            let (dir, qp, peer, m, _) = &packets[n];
            let d = decode(link, &rec.data).expect("decodes");
            assert!(d.icrc_ok, "{link:?} packet {n}: ICRC");
            assert_eq!(d.mad, &m[..], "{link:?} packet {n}: MAD bytes");
            let (dqp, sqp) = match dir {
                Direction::Sent => (peer.qpn, qp.qpn()),
                Direction::Received => (qp.qpn(), peer.qpn),
            };
            assert_eq!((d.dest_qp, d.src_qp), (dqp, sqp), "{link:?} packet {n}");
            n += 1;
        }
        assert_eq!(n, packets.len());
    }
}

/// A MAD recorded with the QP number it went through (vmad's UD QP standing in for
/// QP1) carries it as the local end's QP: the destination QP of one received, the
/// source QP of one sent; without one, the QP's own number (1).
#[test]
fn a_mad_through_vmads_own_qp_shows_that_qp() {
    for link in [LinkType::Ethernet, LinkType::InfiniBand] {
        let dir = scratch(&format!("via-{}", link.number()));
        let path = dir.join("cap.pcap");
        let mut cfg = PcapConfig::new(&path);
        cfg.link = link;
        let mut cap = Capture::open(&cfg, &attrs(2, 0x0002_c900_0000_0002)).unwrap();
        let peer = MadAddr {
            qpn: 1,
            lid: 5,
            ..MadAddr::default()
        };
        let m = mad(0x09, 1, 0x01, 0xff10, 0x42);
        let ts = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        cap.record_via(ts, Direction::Sent, Qp::Gsi, Some(0x11), &peer, &m);
        cap.record_via(ts, Direction::Received, Qp::Gsi, Some(0x11), &peer, &m);
        cap.record_via(ts, Direction::Sent, Qp::Gsi, None, &peer, &m);
        cap.record(ts, Direction::Received, Qp::Gsi, &peer, &m);
        drop(cap);
        let mut r = Reader::new(std::fs::File::open(&path).unwrap()).unwrap();
        let mut qps = Vec::new();
        while let Some(rec) = r.next_record().unwrap() {
            let d = decode(link, &rec.data).expect("decodes");
            assert!(d.icrc_ok, "{link:?}: ICRC");
            qps.push((d.dest_qp, d.src_qp));
        }
        assert_eq!(qps, [(1, 0x11), (0x11, 1), (1, 1), (1, 1)], "{link:?}");
    }
}

#[test]
fn addresses_follow_lids_or_gids() {
    let dir = scratch("addrs");
    let path = dir.join("cap.pcap");
    write_capture(&path, LinkType::Ethernet, &all_packets());
    let mut r = Reader::new(std::fs::File::open(&path).unwrap()).unwrap();
    let first = r.next_record().unwrap().unwrap();
    let d = decode(LinkType::Ethernet, &first.data).unwrap();
    assert_eq!(
        (d.src.as_str(), d.dst.as_str()),
        ("10.0.0.2", "10.0.255.255")
    );
    let mut last = None;
    while let Some(rec) = r.next_record().unwrap() {
        last = Some(rec);
    }
    let last = last.unwrap();
    let d = decode(LinkType::Ethernet, &last.data).unwrap();
    assert_eq!(
        (d.src.as_str(), d.dst.as_str()),
        ("fe80::2:c900:0:3", "fe80::2:c900:0:2"),
        "a received MAD with a GRH: IPv6 from the peer's GID to the port's GID"
    );
    let _ = SystemTime::now();
}

#[test]
fn the_tshark_check_catches_a_malformed_packet() {
    // A frame cut inside the MAD, IP lengths still claiming the whole packet.
    let dir = scratch("malformed");
    let good = dir.join("good.pcap");
    write_capture(&good, LinkType::Ethernet, &vendor()[..1]);
    let mut r = Reader::new(std::fs::File::open(&good).unwrap()).unwrap();
    let rec = r.next_record().unwrap().unwrap();
    let bad = dir.join("bad.pcap");
    let mut w = vmad::pcap::Writer::create(&bad, LinkType::Ethernet, 1 << 20, 0).unwrap();
    w.write(SystemTime::now(), &rec.data[..120]).unwrap();
    drop(w);
    let Some(rows) = tshark_fields(&bad) else {
        return;
    };
    assert_eq!(rows.len(), 1);
    assert!(
        !rows[0][6].is_empty(),
        "tshark flags it malformed: {rows:?}"
    );
}

/// What vmad's own reader finds in a capture, as tshark should see it.
#[cfg(feature = "cli")]
fn expectations(path: &Path) -> Vec<Expect> {
    let mut r = Reader::new(std::fs::File::open(path).unwrap()).unwrap();
    let mut v = Vec::new();
    while let Some(rec) = r.next_record().unwrap() {
        let d = decode(LinkType::Ethernet, &rec.data).expect("vmad decodes its own capture");
        assert!(d.icrc_ok);
        let m = d.mad;
        v.push(Expect {
            class: m[1],
            method: m[3],
            attr: u16::from_be_bytes([m[16], m[17]]),
            rmpp: (m[1] == 0x03).then_some(m[25]),
        });
    }
    v
}

#[cfg(feature = "cli")]
#[test]
fn tshark_dissects_captures_from_real_ports() {
    let dir = scratch("real-ports");
    // A directed-route sweep: SubnGet/GetResp pairs of NodeInfo, NodeDesc, PortInfo.
    let walk = crate::cli::capture(&dir, "discover.pcap", &["discover", "--dr-only"]);
    let e = expectations(&walk);
    assert!(e.len() >= 20 && e.len() % 2 == 0, "{} packets", e.len());
    // The sweep keeps a window of SMPs in flight, so Gets and GetResps interleave as
    // the answers come: every answer follows a Get, and every Get is answered.
    let mut outstanding = 0usize;
    for x in &e {
        assert_eq!(x.class, 0x81);
        assert!([0x0010, 0x0011, 0x0015].contains(&x.attr));
        match x.method {
            0x01 => outstanding += 1,
            0x81 => {
                assert!(outstanding > 0, "a GetResp before its Get");
                outstanding -= 1;
            }
            m => panic!("method {m:#04x} in a directed-route sweep"),
        }
    }
    assert_eq!(outstanding, 0, "Gets left unanswered");
    check_with_tshark(&walk, &e);
    // SA GetTable over RMPP, with the requester's ACKs.
    let sa = crate::cli::capture(&dir, "sa.pcap", &["sa-query"]);
    let e = expectations(&sa);
    let shape: Vec<(u8, Option<u8>)> = e.iter().map(|x| (x.method, x.rmpp)).collect();
    assert_eq!(
        shape,
        [
            (0x12, Some(0)),
            (0x92, Some(1)),
            (0x12, Some(2)),
            (0x92, Some(1)),
            (0x12, Some(2))
        ]
    );
    check_with_tshark(&sa, &e);
    // PathRecord GetTable too.
    let pr = crate::cli::capture(&dir, "pr.pcap", &["sa-query", "path"]);
    let e = expectations(&pr);
    assert!(e.iter().all(|x| x.attr == 0x0035 && x.class == 0x03));
    check_with_tshark(&pr, &e);
    // Vendor MADs: ibping's class 0x32 and an RMPP transfer on class 0x33.
    let ping = crate::cli::capture(&dir, "ping.pcap", &["ping", "-c", "2"]);
    let e = expectations(&ping);
    let shape: Vec<(u8, u8)> = e.iter().map(|x| (x.class, x.method)).collect();
    assert_eq!(
        shape,
        [(0x32, 0x01), (0x32, 0x81), (0x32, 0x01), (0x32, 0x81)]
    );
    check_with_tshark(&ping, &e);
    let bulk = crate::cli::capture(
        &dir,
        "bulk.pcap",
        &[
            "bench",
            "--mode",
            "rmpp",
            "--size",
            "3000",
            "--transfers",
            "1",
        ],
    );
    let e = expectations(&bulk);
    assert!(e.len() > 14, "request, 14 segments and ACKs: {}", e.len());
    check_with_tshark(&bulk, &e);
}
