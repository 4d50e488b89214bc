//! The RoCE v2 UD datagram as the UDP socket sees it: BTH + DETH + MAD + ICRC.
//!
//! Public for tests that must forge datagrams (a corrupted ICRC towards the
//! kernel). It goes once `wire::roce`, the shared codec, lands on main.
//!
//! ```text
//!  BTH (12)   opcode 0x64 (UD SEND Only), SE/M/PadCnt/TVer, P_Key, resv8a, DestQP, AckReq+PSN
//!  DETH (8)   Q_Key, SrcQP
//!  MAD (256)
//!  ICRC (4)   IEEE CRC-32, little-endian (rxe_icrc.c)
//! ```
//!
//! The ICRC covers headers a UDP socket never sees (IP and UDP); they are
//! rebuilt from the addresses, ports and length, with the variant fields
//! masked to ones, exactly as rxe masks them.

use std::net::IpAddr;

/// BTH length.
pub const BTH_LEN: usize = 12;
/// DETH length.
pub const DETH_LEN: usize = 8;
/// ICRC length.
pub const ICRC_LEN: usize = 4;
/// BTH + DETH + ICRC: what a UD datagram adds to its payload.
pub const UD_OVERHEAD: usize = BTH_LEN + DETH_LEN + ICRC_LEN;
/// Opcode of UD SEND Only.
pub const OP_UD_SEND_ONLY: u8 = 0x64;

const UDP_HEADER_LEN: usize = 8;
const IP_PROTO_UDP: u8 = 17;

/// The IP and UDP facts of one datagram the ICRC covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Flow {
    /// Source address and UDP port.
    pub src: (IpAddr, u16),
    /// Destination address and UDP port.
    pub dst: (IpAddr, u16),
}

/// Why a datagram was not handed up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reject {
    /// Shorter than BTH + DETH + a MAD header + ICRC, or with a bad pad count.
    Runt,
    /// Not UD SEND Only, or a BTH transport version other than 0.
    Opcode,
    /// The ICRC does not match.
    Icrc,
}

/// A parsed UD datagram; the payload is `datagram[payload]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ud {
    /// P_Key.
    pub pkey: u16,
    /// Destination QP.
    pub dest_qp: u32,
    /// PSN.
    pub psn: u32,
    /// Q_Key.
    pub qkey: u32,
    /// Source QP.
    pub src_qp: u32,
    /// The payload's byte range (pad excluded).
    pub payload: core::ops::Range<usize>,
}

fn be24(b: &[u8]) -> u32 {
    u32::from_be_bytes([0, b[0], b[1], b[2]])
}

/// Parse a datagram; `flow` is `None` when the ICRC cannot be checked
/// (IPv4: the IP ID it covers is invisible to a UDP socket).
pub fn parse(d: &[u8], flow: Option<&Flow>) -> Result<Ud, Reject> {
    if d.len() < UD_OVERHEAD + 24 {
        return Err(Reject::Runt);
    }
    if d[0] != OP_UD_SEND_ONLY || d[1] & 0x0f != 0 {
        return Err(Reject::Opcode);
    }
    let pad = usize::from((d[1] >> 4) & 3);
    let end = d.len() - ICRC_LEN;
    if end - BTH_LEN - DETH_LEN < pad + 24 {
        return Err(Reject::Runt);
    }
    if let Some(flow) = flow {
        let got = u32::from_le_bytes([d[end], d[end + 1], d[end + 2], d[end + 3]]);
        if icrc(flow, &d[..end]) != got {
            return Err(Reject::Icrc);
        }
    }
    Ok(Ud {
        pkey: u16::from_be_bytes([d[2], d[3]]),
        dest_qp: be24(&d[5..8]),
        psn: be24(&d[9..12]),
        qkey: u32::from_be_bytes([d[12], d[13], d[14], d[15]]),
        src_qp: be24(&d[17..20]),
        payload: BTH_LEN + DETH_LEN..end - pad,
    })
}

/// What [`emit`] writes around a payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// P_Key.
    pub pkey: u16,
    /// Destination QP (24 bits).
    pub dest_qp: u32,
    /// PSN (24 bits).
    pub psn: u32,
    /// Q_Key.
    pub qkey: u32,
    /// Source QP (24 bits).
    pub src_qp: u32,
}

/// Write BTH + DETH + `payload` + pad + ICRC into `buf`; returns the length.
/// `buf` must hold `payload.len() + 3 + UD_OVERHEAD` bytes.
pub fn emit(buf: &mut [u8], h: &Header, payload: &[u8], flow: &Flow) -> usize {
    let pad = (4 - payload.len() % 4) % 4;
    let end = BTH_LEN + DETH_LEN + payload.len() + pad;
    let b = &mut buf[..end + ICRC_LEN];
    b[0] = OP_UD_SEND_ONLY;
    b[1] = (pad as u8) << 4; // SE 0, MigReq 0, TVer 0
    b[2..4].copy_from_slice(&h.pkey.to_be_bytes());
    b[4..8].copy_from_slice(&(h.dest_qp & 0xff_ffff).to_be_bytes()); // resv8a = 0
    b[8..12].copy_from_slice(&((1 << 31) | (h.psn & 0xff_ffff)).to_be_bytes()); // AckReq
    b[12..16].copy_from_slice(&h.qkey.to_be_bytes());
    b[16..20].copy_from_slice(&(h.src_qp & 0xff_ffff).to_be_bytes());
    b[20..20 + payload.len()].copy_from_slice(payload);
    b[20 + payload.len()..end].fill(0);
    let crc = icrc(flow, &b[..end]);
    b[end..].copy_from_slice(&crc.to_le_bytes());
    end + ICRC_LEN
}

/// The ICRC of `ib` (BTH up to, not including, the ICRC) sent along `flow`.
pub fn icrc(flow: &Flow, ib: &[u8]) -> u32 {
    let udp_len = (UDP_HEADER_LEN + ib.len() + ICRC_LEN) as u16;
    let mut h = [0xffu8; 8 + 40 + UDP_HEADER_LEN];
    // The first 8 bytes stay ones: the LRH RoCE v2 does not have.
    let ip_len = match (flow.src.0, flow.dst.0) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            let ip = &mut h[8..28];
            ip[0] = 0x45;
            // TOS (1), TTL (8) and the checksum (10..12) stay ones.
            ip[2..4].copy_from_slice(&(20 + udp_len).to_be_bytes());
            // Linux sends ID 0 with DF set on an unconnected socket with PMTU discovery "do".
            ip[4..8].copy_from_slice(&[0, 0, 0x40, 0]);
            ip[9] = IP_PROTO_UDP;
            ip[12..16].copy_from_slice(&s.octets());
            ip[16..20].copy_from_slice(&d.octets());
            20
        }
        (s, d) => {
            let ip = &mut h[8..48];
            ip[0] = 0x6f; // version 6; TClass and FlowLabel stay ones
            ip[4..6].copy_from_slice(&udp_len.to_be_bytes());
            ip[6] = IP_PROTO_UDP; // hop limit (7) stays ones
            ip[8..24].copy_from_slice(&gid_of(s));
            ip[24..40].copy_from_slice(&gid_of(d));
            40
        }
    };
    let u = 8 + ip_len;
    h[u..u + 2].copy_from_slice(&flow.src.1.to_be_bytes());
    h[u + 2..u + 4].copy_from_slice(&flow.dst.1.to_be_bytes());
    h[u + 4..u + 6].copy_from_slice(&udp_len.to_be_bytes());
    // The UDP checksum (u + 6..u + 8) stays ones.
    let mut bth = [0u8; BTH_LEN];
    bth.copy_from_slice(&ib[..BTH_LEN]);
    bth[4] = 0xff;
    let crc = crc32_update(!0, &h[..u + UDP_HEADER_LEN]);
    let crc = crc32_update(crc, &bth);
    !crc32_update(crc, &ib[BTH_LEN..])
}

/// The GID of an address: IPv6 as is, IPv4 as `::ffff:a.b.c.d`.
pub fn gid_of(a: IpAddr) -> [u8; 16] {
    match a {
        IpAddr::V4(v4) => v4.to_ipv6_mapped().octets(),
        IpAddr::V6(v6) => v6.octets(),
    }
}

const CRC_TABLE: [u32; 256] = {
    let mut t = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 {
                0xedb8_8320 ^ (c >> 1)
            } else {
                c >> 1
            };
            k += 1;
        }
        t[i] = c;
        i += 1;
    }
    t
};

/// IEEE CRC-32 (zlib's) without the initial and final inversion.
fn crc32_update(mut crc: u32, bytes: &[u8]) -> u32 {
    for &b in bytes {
        crc = CRC_TABLE[((crc ^ u32::from(b)) & 0xff) as usize] ^ (crc >> 8);
    }
    crc
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv6Addr;

    #[test]
    fn crc32_is_zlibs() {
        // zlib.crc32(b"123456789") == 0xcbf43926
        assert_eq!(!crc32_update(!0, b"123456789"), 0xcbf4_3926);
    }

    fn flow6(src: u16) -> Flow {
        Flow {
            src: (IpAddr::V6("2001:db8::1".parse::<Ipv6Addr>().unwrap()), src),
            dst: (IpAddr::V6("2001:db8::2".parse::<Ipv6Addr>().unwrap()), 4791),
        }
    }

    /// The expected ICRCs come from the research probe's Python model of
    /// rxe_icrc.c (shared/research/roce-udp-probe/roceudp.py, checked there
    /// against ~210 frames rxe sent and accepted), over the same bytes.
    #[test]
    fn header_fields_and_round_trip() {
        let mut mad = [0u8; 256];
        mad[..4].copy_from_slice(&[1, 0x09, 1, 1]);
        mad[15] = 1;
        let h = Header {
            pkey: 0xffff,
            dest_qp: 1,
            psn: 7,
            qkey: 0x8001_0000,
            src_qp: 1,
        };
        let mut buf = [0u8; 300];
        let n = emit(&mut buf, &h, &mad, &flow6(55410));
        assert_eq!(n, 280);
        assert_eq!(buf[276..280], [0x77, 0x09, 0xd4, 0xa2]);
        let v4 = Flow {
            src: (IpAddr::V4([192, 0, 2, 2].into()), 4791),
            dst: (IpAddr::V4([192, 0, 2, 1].into()), 4791),
        };
        assert_eq!(
            icrc(&v4, &buf[..276]).to_le_bytes(),
            [0x4c, 0x09, 0xac, 0x73]
        );
        assert_eq!(
            buf[..20],
            [0x64, 0, 0xff, 0xff, 0, 0, 0, 1, 0x80, 0, 0, 7, 0x80, 1, 0, 0, 0, 0, 0, 1]
        );
        let ud = parse(&buf[..n], Some(&flow6(55410))).unwrap();
        assert_eq!((ud.pkey, ud.dest_qp, ud.psn), (0xffff, 1, 7));
        assert_eq!((ud.qkey, ud.src_qp), (0x8001_0000, 1));
        assert_eq!(&buf[ud.payload.clone()], &mad[..]);
        // Another source port is another ICRC: the UDP header is covered.
        assert_eq!(parse(&buf[..n], Some(&flow6(4791))), Err(Reject::Icrc));
        // Every bit of the datagram is covered except resv8a (byte 4).
        for bit in [0usize, 7, 8 * 4, 8 * 12 + 3, 8 * 100, 8 * 279 + 7] {
            let mut bad = buf;
            bad[bit / 8] ^= 1 << (bit % 8);
            let r = parse(&bad[..n], Some(&flow6(55410)));
            if bit / 8 == 4 {
                assert!(r.is_ok());
            } else {
                assert!(r.is_err(), "bit {bit}");
            }
        }
        // IPv4 cannot be verified: parse without a flow accepts any ICRC.
        let mut bad = buf;
        bad[n - 1] ^= 1;
        assert!(parse(&bad[..n], None).is_ok());
    }

    #[test]
    fn rejects_runts_and_other_opcodes() {
        let mut buf = [0u8; 280];
        assert_eq!(parse(&buf[..40], None), Err(Reject::Runt));
        assert_eq!(parse(&buf, None), Err(Reject::Opcode));
        buf[0] = OP_UD_SEND_ONLY;
        buf[1] = 1; // TVer 1
        assert_eq!(parse(&buf, None), Err(Reject::Opcode));
        buf[1] = 0;
        assert!(parse(&buf, None).is_ok());
    }
}
