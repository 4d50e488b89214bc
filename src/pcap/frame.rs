//! Framing one MAD as the packet a capture shows: Ethernet + RoCE v2, or
//! a native InfiniBand packet (LRH, GRH, BTH, DETH, MAD, ICRC, VCRC).

use crate::transport::PortAttrs;
use crate::types::{MadAddr, Qp, GSI_QKEY};
use crate::wire::grh;
use crate::wire::roce::{self, bth, deth, lrh, IpAddrs, IpRepr};

/// Ethernet header length.
pub(crate) const ETH_LEN: usize = 14;
/// EtherType of IPv4.
pub(crate) const ETHERTYPE_IPV4: u16 = 0x0800;
/// EtherType of IPv6.
pub(crate) const ETHERTYPE_IPV6: u16 = 0x86dd;
/// Hop limit written into synthesized IP headers and GRHs (rxe's default).
const HOP_LIMIT: u8 = 64;
/// UDP source port: rxe's hash for QP1 (any value is valid).
const UDP_SRC_PORT: u16 = 0xd872;

/// Which way a MAD went, seen from the capturing port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// The port sent it.
    Sent,
    /// The port received it.
    Received,
}

/// The capturing port's own addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Local {
    pub(crate) lid: u16,
    pub(crate) gid: [u8; 16],
}

impl Local {
    pub(crate) fn of(attrs: &PortAttrs) -> Local {
        let mut gid = [0u8; 16];
        gid[..8].copy_from_slice(&attrs.gid_prefix.to_be_bytes());
        gid[8..].copy_from_slice(&attrs.port_guid.to_be_bytes());
        Local {
            lid: attrs.lid,
            gid,
        }
    }
}

/// One MAD with everything the framing needs.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Mad<'a> {
    pub(crate) dir: Direction,
    pub(crate) qp: Qp,
    /// The local QP number (`qp`'s own, or vmad's UD QP standing in for QP1).
    pub(crate) local_qpn: u32,
    /// Destination when sent, source when received.
    pub(crate) peer: &'a MadAddr,
    pub(crate) pkey: u16,
    pub(crate) psn: u32,
    pub(crate) bytes: &'a [u8],
}

/// The IPv4 address standing for a LID when no GRH gives GIDs: 10.0.hi.lo,
/// so a capture reads "10.0.0.1 > 10.0.0.3" for LID 1 to LID 3.
pub fn lid_ipv4(lid: u16) -> [u8; 4] {
    let [hi, lo] = lid.to_be_bytes();
    [10, 0, hi, lo]
}

fn mac_of(tail: [u8; 3]) -> [u8; 6] {
    [0x02, 0, 0, tail[0], tail[1], tail[2]]
}

fn mac_of_ip(addrs_side: &[u8]) -> [u8; 6] {
    let n = addrs_side.len();
    mac_of([addrs_side[n - 3], addrs_side[n - 2], addrs_side[n - 1]])
}

/// One end of a packet: its LID, and its GID when the MAD has a GRH.
type End = (u16, Option<[u8; 16]>);

/// Source and destination ends of a MAD.
fn ends(local: &Local, m: &Mad<'_>) -> (End, End) {
    let peer_gid = m.peer.grh.map(|g| g.gid);
    let me = (local.lid, peer_gid.map(|_| local.gid));
    let them = (m.peer.lid, peer_gid);
    match m.dir {
        Direction::Sent => (me, them),
        Direction::Received => (them, me),
    }
}

fn qps(m: &Mad<'_>) -> (u32, u32, u32) {
    let local_qpn = m.local_qpn;
    let qkey = match m.qp {
        Qp::Smi => 0,
        Qp::Gsi => GSI_QKEY,
    };
    match m.dir {
        // Sent: DETH carries the Q_Key the sender used.
        Direction::Sent => (
            m.peer.qpn,
            local_qpn,
            if m.peer.qkey != 0 { m.peer.qkey } else { qkey },
        ),
        // Received: the kernel reports Q_Key 0; the packet carried the QP's well-known key.
        Direction::Received => (local_qpn, m.peer.qpn, qkey),
    }
}

/// Ethernet + RoCE v2 frame of a MAD.
pub(crate) fn roce_frame(local: &Local, m: &Mad<'_>, out: &mut Vec<u8>) {
    let ((slid, sgid), (dlid, dgid)) = ends(local, m);
    let addrs = match (sgid, dgid) {
        (Some(s), Some(d)) => IpAddrs::from_gids(&s, &d),
        _ => IpAddrs::V4 {
            src: lid_ipv4(slid),
            dst: lid_ipv4(dlid),
        },
    };
    let (tclass, flow_label, hop_limit) = match m.peer.grh {
        Some(g) if g.hop_limit != 0 => (g.traffic_class, g.flow_label, g.hop_limit),
        Some(g) => (g.traffic_class, g.flow_label, HOP_LIMIT),
        None => (0, 0, HOP_LIMIT),
    };
    let (dest_qp, src_qp, qkey) = qps(m);
    let repr = roce::Repr {
        ip: IpRepr {
            addrs,
            tclass,
            flow_label: if matches!(addrs, IpAddrs::V6 { .. }) {
                flow_label
            } else {
                0
            },
            hop_limit,
            ip_id: 0,
            src_port: UDP_SRC_PORT,
        },
        bth: bth::Repr {
            ack_req: true,
            ..bth::Repr::ud_send(m.pkey, dest_qp, m.psn)
        },
        deth: deth::Repr { qkey, src_qp },
    };
    let (src_mac, dst_mac, ethertype) = match addrs {
        IpAddrs::V4 { src, dst } => (mac_of_ip(&src), mac_of_ip(&dst), ETHERTYPE_IPV4),
        IpAddrs::V6 { src, dst } => (mac_of_ip(&src), mac_of_ip(&dst), ETHERTYPE_IPV6),
    };
    let start = out.len();
    out.extend_from_slice(&dst_mac);
    out.extend_from_slice(&src_mac);
    out.extend_from_slice(&ethertype.to_be_bytes());
    let ip_start = out.len();
    out.resize(ip_start + repr.buffer_len(m.bytes.len()), 0);
    // The buffer is exactly buffer_len and a MAD is far below 64 KiB.
    if repr.emit(&mut out[ip_start..], m.bytes).is_err() {
        out.truncate(start);
    }
}

/// Native InfiniBand packet of a MAD (link type 247), VCRC included.
pub(crate) fn ib_packet(local: &Local, m: &Mad<'_>, out: &mut Vec<u8>) {
    let ((slid, sgid), (dlid, dgid)) = ends(local, m);
    let global = sgid.is_some() && dgid.is_some();
    let pad = roce::Repr::pad_for(m.bytes.len());
    let ib_len = bth::LEN + deth::LEN + m.bytes.len() + pad;
    let grh_len = if global { grh::LEN } else { 0 };
    let words = (lrh::LEN + grh_len + ib_len + roce::ICRC_LEN) / 4;
    let start = out.len();
    out.resize(start + lrh::LEN + grh_len + ib_len + roce::ICRC_LEN + 2, 0);
    let p = &mut out[start..];
    lrh::Repr {
        vl: if m.qp == Qp::Smi { lrh::VL15 } else { 0 },
        sl: m.peer.sl & 0xf,
        lnh: if global {
            lrh::LNH_IBA_GLOBAL
        } else {
            lrh::LNH_IBA_LOCAL
        },
        dlid,
        pkt_len: u16::try_from(words).unwrap_or(0x7ff),
        slid,
    }
    .emit(&mut lrh::Packet::new_unchecked(&mut p[..lrh::LEN]));
    let mut o = lrh::LEN;
    if let (Some(s), Some(d), Some(g)) = (sgid, dgid, m.peer.grh) {
        grh::Repr {
            ip_ver: grh::IP_VERSION,
            tclass: g.traffic_class,
            flow_label: g.flow_label,
            paylen: u16::try_from(ib_len + roce::ICRC_LEN).unwrap_or(u16::MAX),
            nxt_hdr: grh::NXT_HDR_IBA,
            hop_limit: if g.hop_limit != 0 {
                g.hop_limit
            } else {
                HOP_LIMIT
            },
            sgid: s,
            dgid: d,
        }
        .emit(&mut grh::Packet::new_unchecked(&mut p[o..o + grh::LEN]));
        o += grh::LEN;
    }
    let (dest_qp, src_qp, qkey) = qps(m);
    bth::Repr {
        pad_count: pad as u8,
        ..bth::Repr::ud_send(m.pkey, dest_qp, m.psn)
    }
    .emit(&mut bth::Packet::new_unchecked(&mut p[o..o + bth::LEN]));
    deth::Repr { qkey, src_qp }.emit(&mut deth::Packet::new_unchecked(
        &mut p[o + bth::LEN..o + bth::LEN + deth::LEN],
    ));
    let d = o + bth::LEN + deth::LEN;
    p[d..d + m.bytes.len()].copy_from_slice(m.bytes);
    let end = o + ib_len;
    let icrc = roce::icrc_ib(&p[..o], &p[o..end]).unwrap_or(0);
    p[end..end + 4].copy_from_slice(&icrc.to_le_bytes());
    let vcrc = roce::vcrc(&p[..end + 4]);
    p[end + 4..end + 6].copy_from_slice(&vcrc.to_le_bytes());
}
