//! RoCE v2 framing of a MAD: IPv4/IPv6 + UDP (port 4791) + BTH + DETH +
//! payload + ICRC, and the native InfiniBand LRH for link-type-247 captures.
//!
//! ```text
//!  IPv6 (40) or IPv4 (20, IHL 5)   addresses = the GIDs (IPv4-mapped GIDs on IPv4)
//!  UDP (8)                          dst port 4791, any src port
//!  BTH (12)                         UD SEND Only (0x64), P_Key, DestQP, AckReq, PSN
//!  DETH (8)                         Q_Key, SrcQP
//!  payload                          the 256-byte MAD (+ PadCnt bytes)
//!  ICRC (4)                         little-endian
//! ```
//!
//! # The ICRC
//!
//! IEEE CRC-32 (zlib's) over the invariant fields, appended little-endian,
//! as Linux rxe computes and checks it (verified against frames rxe sent and
//! accepted):
//!
//! ```text
//! crc32( ff*8                                   the LRH RoCE does not have, masked
//!      + IPv6 header with TClass, FlowLabel, HopLimit = 1s   (or IPv4: TOS, TTL, checksum = 1s;
//!                                                            the IP ID is NOT masked)
//!      + UDP header with checksum = ff ff
//!      + BTH with byte 4 (resv8a) = ff
//!      + DETH + payload + pad )
//! ```
//!
//! [`Frame`] is a view over such an IP packet and [`Repr`] its value; the
//! codecs of the two transport headers are [`bth`] and [`deth`], and
//! [`lrh`] is the 8-byte Local Route Header of a native IB packet.

pub mod bth;
pub mod deth;
mod icrc;
pub mod lrh;

pub use icrc::{crc32, vcrc, Crc32};

use super::{be, Error, Result};

/// The IANA UDP port of RoCE v2.
pub const UDP_PORT: u16 = 4791;
/// Length of the ICRC.
pub const ICRC_LEN: usize = 4;
/// Length of the UDP header.
pub const UDP_HEADER_LEN: usize = 8;
/// Length of an IPv4 header without options (the only form RoCE v2 uses).
pub const IPV4_HEADER_LEN: usize = 20;
/// Length of the IPv6 header.
pub const IPV6_HEADER_LEN: usize = 40;
/// IP protocol number of UDP.
pub const IP_PROTO_UDP: u8 = 17;
/// Bytes around a UD payload after the UDP header: BTH + DETH + ICRC.
pub const UD_OVERHEAD: usize = bth::LEN + deth::LEN + ICRC_LEN;

/// The source and destination addresses of a RoCE v2 packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IpAddrs {
    /// IPv4 (GIDs of the form ::ffff:a.b.c.d).
    V4 {
        /// Source.
        src: [u8; 4],
        /// Destination.
        dst: [u8; 4],
    },
    /// IPv6 (the GIDs themselves).
    V6 {
        /// Source.
        src: [u8; 16],
        /// Destination.
        dst: [u8; 16],
    },
}

/// The IPv4 address of an IPv4-mapped GID (::ffff:a.b.c.d).
pub fn ipv4_of_gid(gid: &[u8; 16]) -> Option<[u8; 4]> {
    if gid[..10].iter().all(|&b| b == 0) && gid[10] == 0xff && gid[11] == 0xff {
        let mut a = [0u8; 4];
        a.copy_from_slice(&gid[12..]);
        Some(a)
    } else {
        None
    }
}

impl IpAddrs {
    /// The addresses RoCE v2 uses for a pair of GIDs: IPv4 when both are
    /// IPv4-mapped, IPv6 otherwise.
    pub fn from_gids(sgid: &[u8; 16], dgid: &[u8; 16]) -> IpAddrs {
        match (ipv4_of_gid(sgid), ipv4_of_gid(dgid)) {
            (Some(src), Some(dst)) => IpAddrs::V4 { src, dst },
            _ => IpAddrs::V6 {
                src: *sgid,
                dst: *dgid,
            },
        }
    }
    /// Length of the IP header these addresses need.
    pub const fn header_len(&self) -> usize {
        match self {
            IpAddrs::V4 { .. } => IPV4_HEADER_LEN,
            IpAddrs::V6 { .. } => IPV6_HEADER_LEN,
        }
    }
}

/// The masked IP + UDP headers the ICRC covers, up to 48 bytes on the stack.
fn masked_ip_udp(ip_udp: &[u8]) -> Result<([u8; IPV6_HEADER_LEN + UDP_HEADER_LEN], usize)> {
    let mut h = [0u8; IPV6_HEADER_LEN + UDP_HEADER_LEN];
    let ip_len = match ip_udp.first().map(|b| b >> 4) {
        Some(6) => IPV6_HEADER_LEN,
        Some(4) => IPV4_HEADER_LEN,
        Some(_) => return Err(Error::BadVersion),
        None => return Err(Error::Truncated),
    };
    let len = ip_len + UDP_HEADER_LEN;
    if ip_udp.len() < len {
        return Err(Error::Truncated);
    }
    h[..len].copy_from_slice(&ip_udp[..len]);
    if ip_len == IPV6_HEADER_LEN {
        h[0] |= 0x0f;
        h[1..4].fill(0xff);
        h[7] = 0xff;
    } else {
        if h[0] & 0x0f != 5 {
            return Err(Error::Malformed);
        }
        h[1] = 0xff;
        h[8] = 0xff;
        h[10..12].fill(0xff);
    }
    h[ip_len + 6..len].fill(0xff);
    Ok((h, len))
}

/// The ICRC of a RoCE v2 packet.
///
/// `ip_udp` starts with the IP header (IPv6, or IPv4 with IHL 5) followed by
/// the UDP header (longer slices are fine: only the headers are read); `ib`
/// is everything from the BTH up to, not including, the ICRC.
///
/// # Errors
///
/// [`Error::Truncated`] if `ip_udp` is too short or `ib` shorter than a BTH;
/// [`Error::BadVersion`] for an IP version other than 4 or 6;
/// [`Error::Malformed`] for an IPv4 header with options.
pub fn icrc(ip_udp: &[u8], ib: &[u8]) -> Result<u32> {
    if ib.len() < bth::LEN {
        return Err(Error::Truncated);
    }
    let (h, len) = masked_ip_udp(ip_udp)?;
    let mut b = [0u8; bth::LEN];
    b.copy_from_slice(&ib[..bth::LEN]);
    b[bth::RESV8A_OFFSET] = 0xff;
    Ok(Crc32::new()
        .update(&[0xff; 8])
        .update(&h[..len])
        .update(&b)
        .update(&ib[bth::LEN..])
        .finish())
}

/// The ICRC of a native InfiniBand packet: `lrh_grh` is the LRH, followed by
/// the GRH when the LRH's LNH says so; `ib` is BTH..payload (no ICRC/VCRC).
/// The LRH's VL, the GRH's TClass, FlowLabel and HopLmt and the BTH's resv8a
/// are taken as all ones (IBA 7.8.1).
///
/// # Errors
///
/// [`Error::Truncated`] if `lrh_grh` is shorter than the LRH (and GRH its LNH
/// announces) or `ib` shorter than a BTH.
pub fn icrc_ib(lrh_grh: &[u8], ib: &[u8]) -> Result<u32> {
    let l = lrh::Packet::new_checked(lrh_grh)?;
    let grh = l.lnh() == lrh::LNH_IBA_GLOBAL;
    let len = lrh::LEN + if grh { super::grh::LEN } else { 0 };
    if lrh_grh.len() < len || ib.len() < bth::LEN {
        return Err(Error::Truncated);
    }
    let mut h = [0u8; lrh::LEN + super::grh::LEN];
    h[..len].copy_from_slice(&lrh_grh[..len]);
    h[0] |= 0xf0;
    if grh {
        let g = &mut h[lrh::LEN..];
        g[0] |= 0x0f;
        g[1..4].fill(0xff);
        g[7] = 0xff;
    }
    let mut b = [0u8; bth::LEN];
    b.copy_from_slice(&ib[..bth::LEN]);
    b[bth::RESV8A_OFFSET] = 0xff;
    Ok(Crc32::new()
        .update(&h[..len])
        .update(&b)
        .update(&ib[bth::LEN..])
        .finish())
}

/// The ones' complement sum of `bytes` as 16-bit big-endian words, folded.
fn ones_sum(mut sum: u32, bytes: &[u8]) -> u32 {
    let mut chunks = bytes.chunks_exact(2);
    for w in &mut chunks {
        sum += u32::from(u16::from_be_bytes([w[0], w[1]]));
    }
    if let [last] = chunks.remainder() {
        sum += u32::from(*last) << 8;
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum
}

/// A view over an IP packet carrying a RoCE v2 UD datagram (IP header to ICRC).
#[derive(Debug, Clone)]
pub struct Frame<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Frame<T> {
    /// Wrap a buffer without checking it.
    pub const fn new_unchecked(buffer: T) -> Frame<T> {
        Frame { buffer }
    }

    /// Wrap a buffer and check its structure (see [`Frame::check`]).
    ///
    /// # Errors
    ///
    /// As [`Frame::check`].
    pub fn new_checked(buffer: T) -> Result<Frame<T>> {
        let f = Self::new_unchecked(buffer);
        f.check()?;
        Ok(f)
    }

    /// Check the structure: IP version 4 (IHL 5) or 6, protocol UDP, UDP
    /// destination port 4791, IP and UDP lengths within the buffer and
    /// consistent, room for BTH + DETH + ICRC, PadCnt within the payload.
    /// Once it passes, no accessor panics. The ICRC is not checked here:
    /// see [`Frame::icrc_ok`].
    ///
    /// # Errors
    ///
    /// [`Error::Truncated`], [`Error::BadVersion`], [`Error::BadLength`] or
    /// [`Error::Malformed`] (options, not UDP, not port 4791).
    pub fn check(&self) -> Result<()> {
        let b = self.buffer.as_ref();
        let (ip_len, total) = match b.first().map(|v| v >> 4) {
            None => return Err(Error::Truncated),
            Some(6) => {
                if b.len() < IPV6_HEADER_LEN {
                    return Err(Error::Truncated);
                }
                if b[6] != IP_PROTO_UDP {
                    return Err(Error::Malformed);
                }
                (
                    IPV6_HEADER_LEN,
                    IPV6_HEADER_LEN + usize::from(be::u16(b, 4..6)),
                )
            }
            Some(4) => {
                if b.len() < IPV4_HEADER_LEN {
                    return Err(Error::Truncated);
                }
                if b[0] & 0x0f != 5 || b[9] != IP_PROTO_UDP {
                    return Err(Error::Malformed);
                }
                (IPV4_HEADER_LEN, usize::from(be::u16(b, 2..4)))
            }
            Some(_) => return Err(Error::BadVersion),
        };
        if total > b.len() {
            return Err(Error::Truncated);
        }
        if total < ip_len + UDP_HEADER_LEN + UD_OVERHEAD {
            return Err(Error::BadLength);
        }
        if be::u16(b, ip_len + 2..ip_len + 4) != UDP_PORT {
            return Err(Error::Malformed);
        }
        if usize::from(be::u16(b, ip_len + 4..ip_len + 6)) != total - ip_len {
            return Err(Error::BadLength);
        }
        let pad = usize::from((b[ip_len + UDP_HEADER_LEN + 1] >> 4) & 0x3);
        if pad > total - ip_len - UDP_HEADER_LEN - UD_OVERHEAD {
            return Err(Error::BadLength);
        }
        Ok(())
    }

    /// The wrapped buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    fn ip_len(&self) -> usize {
        if self.buffer.as_ref()[0] >> 4 == 6 {
            IPV6_HEADER_LEN
        } else {
            IPV4_HEADER_LEN
        }
    }

    /// Bytes of the packet per its IP header (a buffer may carry trailing padding).
    pub fn total_len(&self) -> usize {
        let b = self.buffer.as_ref();
        if b[0] >> 4 == 6 {
            IPV6_HEADER_LEN + usize::from(be::u16(b, 4..6))
        } else {
            usize::from(be::u16(b, 2..4))
        }
    }

    /// The addresses.
    pub fn addrs(&self) -> IpAddrs {
        let b = self.buffer.as_ref();
        if self.ip_len() == IPV6_HEADER_LEN {
            let (mut src, mut dst) = ([0u8; 16], [0u8; 16]);
            src.copy_from_slice(&b[8..24]);
            dst.copy_from_slice(&b[24..40]);
            IpAddrs::V6 { src, dst }
        } else {
            let (mut src, mut dst) = ([0u8; 4], [0u8; 4]);
            src.copy_from_slice(&b[12..16]);
            dst.copy_from_slice(&b[16..20]);
            IpAddrs::V4 { src, dst }
        }
    }

    /// IPv6 traffic class, or IPv4 TOS.
    pub fn tclass(&self) -> u8 {
        let b = self.buffer.as_ref();
        if self.ip_len() == IPV6_HEADER_LEN {
            (be::u16(b, 0..2) >> 4) as u8
        } else {
            b[1]
        }
    }

    /// IPv6 flow label (0 on IPv4).
    pub fn flow_label(&self) -> u32 {
        if self.ip_len() == IPV6_HEADER_LEN {
            be::u32(self.buffer.as_ref(), 0..4) & 0xf_ffff
        } else {
            0
        }
    }

    /// IPv6 hop limit, or IPv4 TTL.
    pub fn hop_limit(&self) -> u8 {
        let b = self.buffer.as_ref();
        if self.ip_len() == IPV6_HEADER_LEN {
            b[7]
        } else {
            b[8]
        }
    }

    /// IPv4 identification (0 on IPv6). The ICRC covers it.
    pub fn ip_id(&self) -> u16 {
        if self.ip_len() == IPV6_HEADER_LEN {
            0
        } else {
            be::u16(self.buffer.as_ref(), 4..6)
        }
    }

    /// UDP source port.
    pub fn src_port(&self) -> u16 {
        let o = self.ip_len();
        be::u16(self.buffer.as_ref(), o..o + 2)
    }

    /// UDP checksum as sent (0: none).
    pub fn udp_checksum(&self) -> u16 {
        let o = self.ip_len() + 6;
        be::u16(self.buffer.as_ref(), o..o + 2)
    }

    fn ib_range(&self) -> core::ops::Range<usize> {
        self.ip_len() + UDP_HEADER_LEN..self.total_len()
    }

    /// The BTH.
    pub fn bth(&self) -> bth::Packet<&[u8]> {
        let r = self.ib_range();
        bth::Packet::new_unchecked(&self.buffer.as_ref()[r.start..r.start + bth::LEN])
    }

    /// The DETH (present on UD opcodes; [`Repr::parse`] insists on one).
    pub fn deth(&self) -> deth::Packet<&[u8]> {
        let s = self.ib_range().start + bth::LEN;
        deth::Packet::new_unchecked(&self.buffer.as_ref()[s..s + deth::LEN])
    }

    /// Where [`Frame::payload`] lies in the buffer.
    pub fn payload_range(&self) -> core::ops::Range<usize> {
        let r = self.ib_range();
        let pad = usize::from(self.bth().pad_count());
        r.start + bth::LEN + deth::LEN..r.end - ICRC_LEN - pad
    }

    /// The payload after the DETH, without pad bytes and ICRC.
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[self.payload_range()]
    }

    /// The ICRC as carried.
    pub fn icrc(&self) -> u32 {
        let e = self.total_len();
        let mut a = [0u8; 4];
        a.copy_from_slice(&self.buffer.as_ref()[e - ICRC_LEN..e]);
        u32::from_le_bytes(a)
    }

    /// The ICRC the packet should carry.
    pub fn compute_icrc(&self) -> u32 {
        let b = self.buffer.as_ref();
        let r = self.ib_range();
        // check() guaranteed both slices; icrc() cannot fail on them.
        icrc(b, &b[r.start..r.end - ICRC_LEN]).unwrap_or(0)
    }

    /// Whether the carried ICRC is right (what rxe checks before it accepts a packet).
    pub fn icrc_ok(&self) -> bool {
        self.icrc() == self.compute_icrc()
    }
}

/// The IP/UDP part of a RoCE v2 packet, as a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct IpRepr {
    /// Addresses (and so the IP version).
    pub addrs: IpAddrs,
    /// IPv6 traffic class or IPv4 TOS.
    pub tclass: u8,
    /// IPv6 flow label (20 bits; ignored on IPv4).
    pub flow_label: u32,
    /// Hop limit / TTL.
    pub hop_limit: u8,
    /// IPv4 identification (ignored on IPv6). Linux sends 0 with DF set.
    pub ip_id: u16,
    /// UDP source port (rxe uses a per-QP hash; any value works).
    pub src_port: u16,
}

/// A RoCE v2 UD datagram (a MAD on QP0/QP1) as a value; the payload travels beside it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// IP and UDP.
    pub ip: IpRepr,
    /// BTH (opcode UD SEND Only; `pad_count` is derived from the payload on emit).
    pub bth: bth::Repr,
    /// DETH.
    pub deth: deth::Repr,
}

impl Repr {
    /// Parse a frame, payload returned beside the value.
    ///
    /// # Errors
    ///
    /// As [`Frame::check`]; [`Error::Malformed`] if the opcode is not UD
    /// SEND Only or the ICRC is wrong (rxe drops such packets silently);
    /// [`Error::BadVersion`] if the BTH's TVer is not 0.
    pub fn parse<T: AsRef<[u8]>>(f: &Frame<T>) -> Result<(Repr, &[u8])> {
        f.check()?;
        let bth = bth::Repr::parse(&f.bth())?;
        if bth.opcode != bth::Opcode::UdSendOnly || !f.icrc_ok() {
            return Err(Error::Malformed);
        }
        let deth = deth::Repr::parse(&f.deth())?;
        let ip = IpRepr {
            addrs: f.addrs(),
            tclass: f.tclass(),
            flow_label: f.flow_label(),
            hop_limit: f.hop_limit(),
            ip_id: f.ip_id(),
            src_port: f.src_port(),
        };
        Ok((Repr { ip, bth, deth }, f.payload()))
    }

    /// Pad bytes needed after a payload of `payload_len` bytes.
    pub const fn pad_for(payload_len: usize) -> usize {
        (4 - payload_len % 4) % 4
    }

    /// Bytes `emit` writes for a payload of `payload_len` bytes.
    pub const fn buffer_len(&self, payload_len: usize) -> usize {
        self.ip.addrs.header_len()
            + UDP_HEADER_LEN
            + UD_OVERHEAD
            + payload_len
            + Self::pad_for(payload_len)
    }

    /// Write the whole packet, IP header to ICRC, with a correct IPv4 header
    /// checksum, UDP checksum and ICRC; returns the bytes written.
    ///
    /// # Errors
    ///
    /// [`Error::Truncated`] if `buf` is shorter than [`Repr::buffer_len`];
    /// [`Error::BadLength`] if the packet would exceed 65535 bytes.
    pub fn emit(&self, buf: &mut [u8], payload: &[u8]) -> Result<usize> {
        let total = self.buffer_len(payload.len());
        if buf.len() < total {
            return Err(Error::Truncated);
        }
        let ip_len = self.ip.addrs.header_len();
        let udp_len = u16::try_from(total - ip_len).map_err(|_| Error::BadLength)?;
        let b = &mut buf[..total];
        let pseudo = match self.ip.addrs {
            IpAddrs::V6 { src, dst } => {
                let w0 = (6u32 << 28)
                    | (u32::from(self.ip.tclass) << 20)
                    | (self.ip.flow_label & 0xf_ffff);
                be::set_u32(b, 0..4, w0);
                be::set_u16(b, 4..6, udp_len);
                b[6] = IP_PROTO_UDP;
                b[7] = self.ip.hop_limit;
                b[8..24].copy_from_slice(&src);
                b[24..40].copy_from_slice(&dst);
                ones_sum(ones_sum(0, &src), &dst)
            }
            IpAddrs::V4 { src, dst } => {
                let total16 = u16::try_from(total).map_err(|_| Error::BadLength)?;
                b[0] = 0x45;
                b[1] = self.ip.tclass;
                be::set_u16(b, 2..4, total16);
                be::set_u16(b, 4..6, self.ip.ip_id);
                be::set_u16(b, 6..8, 0x4000);
                b[8] = self.ip.hop_limit;
                b[9] = IP_PROTO_UDP;
                be::set_u16(b, 10..12, 0);
                b[12..16].copy_from_slice(&src);
                b[16..20].copy_from_slice(&dst);
                let csum = !(ones_sum(0, &b[..IPV4_HEADER_LEN]) as u16);
                be::set_u16(b, 10..12, csum);
                ones_sum(ones_sum(0, &src), &dst)
            }
        };
        let u = ip_len;
        be::set_u16(b, u..u + 2, self.ip.src_port);
        be::set_u16(b, u + 2..u + 4, UDP_PORT);
        be::set_u16(b, u + 4..u + 6, udp_len);
        be::set_u16(b, u + 6..u + 8, 0);
        let o = u + UDP_HEADER_LEN;
        let pad = Self::pad_for(payload.len());
        let bth = bth::Repr {
            pad_count: pad as u8,
            ..self.bth
        };
        bth.emit(&mut bth::Packet::new_unchecked(&mut b[o..o + bth::LEN]));
        let o = o + bth::LEN;
        self.deth
            .emit(&mut deth::Packet::new_unchecked(&mut b[o..o + deth::LEN]));
        let o = o + deth::LEN;
        b[o..o + payload.len()].copy_from_slice(payload);
        b[o + payload.len()..total - ICRC_LEN].fill(0);
        let crc = icrc(b, &b[ip_len + UDP_HEADER_LEN..total - ICRC_LEN])?;
        b[total - ICRC_LEN..].copy_from_slice(&crc.to_le_bytes());
        // UDP checksum last: it covers the ICRC. 0 means "none", so 0 is sent as ffff.
        let sum = ones_sum(
            ones_sum(pseudo, &[0, IP_PROTO_UDP]) + u32::from(udp_len),
            &b[u..],
        );
        let csum = match !(sum as u16) {
            0 => 0xffff,
            c => c,
        };
        be::set_u16(b, u + 6..u + 8, csum);
        Ok(total)
    }
}

#[cfg(test)]
mod tests;
