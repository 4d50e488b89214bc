//! The 40-byte Global Route Header (IBA 8.3.1) as it lands in front of
//! every UD receive buffer (`struct ibv_grh`): the HCA writes it there
//! whether or not the packet carried one (`IBV_WC_GRH` says which).
//!
//! ```text
//!  0..4   IPVer(4) TClass(8) FlowLabel(20)
//!  4..6   PayLen     6 NxtHdr     7 HopLmt
//!  8..24  SGID      24..40 DGID
//! ```
//!
//! **RoCE v2 with IPv4-mapped GIDs** (rxe, mlx5): the area does not hold a
//! GRH but an IPv4 header in its *last* 20 bytes (40 − 20 = 20..40); bytes
//! 0..20 are undefined. [`Packet::ip_version`] tells the two apart the way
//! rdma-core's `ibv_init_ah_from_wc` does, and [`Packet::source_gid`] gives
//! the source as an IPv4-mapped GID.

use super::{be, Field, Result};

mod field {
    use super::Field;
    pub(super) const VER_TCLASS_FLOW: Field = 0..4;
    pub(super) const PAYLEN: Field = 4..6;
    pub(super) const NXT_HDR: usize = 6;
    pub(super) const HOP_LMT: usize = 7;
    pub(super) const SGID: Field = 8..24;
    pub(super) const DGID: Field = 24..40;
    /// Where an IPv4 header sits in the area on RoCE v2.
    pub(super) const IPV4: Field = 20..40;
    pub(super) const IPV4_TOS: usize = 21;
    pub(super) const IPV4_TTL: usize = 28;
    pub(super) const IPV4_CSUM: Field = 30..32;
    pub(super) const IPV4_SRC: Field = 32..36;
    pub(super) const IPV4_DST: Field = 36..40;
}

/// Length of the GRH (and of the area before a UD receive's payload).
pub const LEN: usize = field::DGID.end;
/// IPVer of a GRH.
pub const IP_VERSION: u8 = 6;
/// NxtHdr of an IBA transport header following the GRH.
pub const NXT_HDR_IBA: u8 = 0x1b;
const _: () = assert!(LEN == 40 && field::IPV4.end == LEN && field::IPV4.start == 20);

/// What the 40-byte area holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IpVersion {
    /// An IB GRH (or a RoCE v2 IPv6 header, same layout).
    V6,
    /// A RoCE v2 IPv4 header in bytes 20..40.
    V4,
    /// Neither (rdma-core answers EPROTONOSUPPORT).
    Unknown,
}

/// A view over the 40-byte GRH area.
#[derive(Debug, Clone)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

fn gid(b: &[u8], f: Field) -> [u8; 16] {
    let mut g = [0u8; 16];
    g.copy_from_slice(&b[f]);
    g
}

/// An IPv4 address as an IPv4-mapped GID (::ffff:a.b.c.d).
pub fn ipv4_mapped_gid(addr: [u8; 4]) -> [u8; 16] {
    let mut g = [0u8; 16];
    g[10] = 0xff;
    g[11] = 0xff;
    g[12..].copy_from_slice(&addr);
    g
}

/// The ones' complement checksum of an IPv4 header with its checksum field zeroed.
fn ipv4_checksum(hdr: &[u8]) -> u16 {
    let mut sum: u32 = 0;
    for (i, w) in hdr.chunks_exact(2).enumerate() {
        if i != 5 {
            sum += u32::from(u16::from_be_bytes([w[0], w[1]]));
        }
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

impl<T: AsRef<[u8]>> Packet<T> {
    crate::wire::view_constructors!(LEN, "the 40-byte area");
    fn word0(&self) -> u32 {
        be::u32(self.buffer.as_ref(), field::VER_TCLASS_FLOW)
    }
    /// IPVer (4 bits; 6 for a GRH).
    pub fn ip_ver(&self) -> u8 {
        (self.word0() >> 28) as u8
    }
    /// TClass.
    pub fn tclass(&self) -> u8 {
        (self.word0() >> 20) as u8
    }
    /// FlowLabel (20 bits).
    pub fn flow_label(&self) -> u32 {
        self.word0() & 0xf_ffff
    }
    /// PayLen.
    pub fn paylen(&self) -> u16 {
        be::u16(self.buffer.as_ref(), field::PAYLEN)
    }
    /// NxtHdr.
    pub fn nxt_hdr(&self) -> u8 {
        self.buffer.as_ref()[field::NXT_HDR]
    }
    /// HopLmt.
    pub fn hop_limit(&self) -> u8 {
        self.buffer.as_ref()[field::HOP_LMT]
    }
    /// SGID.
    pub fn sgid(&self) -> [u8; 16] {
        gid(self.buffer.as_ref(), field::SGID)
    }
    /// DGID.
    pub fn dgid(&self) -> [u8; 16] {
        gid(self.buffer.as_ref(), field::DGID)
    }

    /// Whether the area holds a GRH/IPv6 header or a RoCE v2 IPv4 header.
    ///
    /// As rdma-core decides: IPVer ≠ 6 means IPv4 if byte 20 says version
    /// 4; IPVer = 6 may still be an IPv4 header whose undefined first bytes
    /// happen to start with 6, so then an IPv4 header of IHL 5 with a valid
    /// checksum wins.
    pub fn ip_version(&self) -> IpVersion {
        let b = self.buffer.as_ref();
        let v4 = &b[field::IPV4];
        if self.ip_ver() != IP_VERSION {
            return if v4[0] >> 4 == 4 {
                IpVersion::V4
            } else {
                IpVersion::Unknown
            };
        }
        if v4[0] != 0x45 {
            return IpVersion::V6;
        }
        if be::u16(b, field::IPV4_CSUM) == ipv4_checksum(v4) {
            IpVersion::V4
        } else {
            IpVersion::V6
        }
    }
    /// The IPv4 header's TOS (RoCE v2 IPv4 only).
    pub fn ipv4_tos(&self) -> u8 {
        self.buffer.as_ref()[field::IPV4_TOS]
    }
    /// The IPv4 header's TTL (RoCE v2 IPv4 only).
    pub fn ipv4_ttl(&self) -> u8 {
        self.buffer.as_ref()[field::IPV4_TTL]
    }
    /// The IPv4 source address (RoCE v2 IPv4 only).
    pub fn ipv4_src(&self) -> [u8; 4] {
        let mut a = [0u8; 4];
        a.copy_from_slice(&self.buffer.as_ref()[field::IPV4_SRC]);
        a
    }
    /// The IPv4 destination address (RoCE v2 IPv4 only).
    pub fn ipv4_dst(&self) -> [u8; 4] {
        let mut a = [0u8; 4];
        a.copy_from_slice(&self.buffer.as_ref()[field::IPV4_DST]);
        a
    }
    /// The source GID whatever the area holds: the SGID of a GRH, the
    /// IPv4-mapped source of an IPv4 header; `None` if it holds neither.
    pub fn source_gid(&self) -> Option<[u8; 16]> {
        match self.ip_version() {
            IpVersion::V6 => Some(self.sgid()),
            IpVersion::V4 => Some(ipv4_mapped_gid(self.ipv4_src())),
            IpVersion::Unknown => None,
        }
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Set IPVer (4 bits), TClass and FlowLabel (20 bits).
    pub fn set_ver_tclass_flow(&mut self, ver: u8, tclass: u8, flow_label: u32) {
        let w = (u32::from(ver & 0xf) << 28) | (u32::from(tclass) << 20) | (flow_label & 0xf_ffff);
        be::set_u32(self.buffer.as_mut(), field::VER_TCLASS_FLOW, w);
    }
    /// Set PayLen.
    pub fn set_paylen(&mut self, v: u16) {
        be::set_u16(self.buffer.as_mut(), field::PAYLEN, v);
    }
    /// Set NxtHdr.
    pub fn set_nxt_hdr(&mut self, v: u8) {
        self.buffer.as_mut()[field::NXT_HDR] = v;
    }
    /// Set HopLmt.
    pub fn set_hop_limit(&mut self, v: u8) {
        self.buffer.as_mut()[field::HOP_LMT] = v;
    }
    /// Set SGID.
    pub fn set_sgid(&mut self, v: &[u8; 16]) {
        self.buffer.as_mut()[field::SGID].copy_from_slice(v);
    }
    /// Set DGID.
    pub fn set_dgid(&mut self, v: &[u8; 16]) {
        self.buffer.as_mut()[field::DGID].copy_from_slice(v);
    }
}

/// A GRH as a value (the IB/IPv6 form).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Repr {
    /// IPVer (4 bits).
    pub ip_ver: u8,
    /// TClass.
    pub tclass: u8,
    /// FlowLabel (20 bits).
    pub flow_label: u32,
    /// PayLen.
    pub paylen: u16,
    /// NxtHdr.
    pub nxt_hdr: u8,
    /// HopLmt.
    pub hop_limit: u8,
    /// SGID.
    pub sgid: [u8; 16],
    /// DGID.
    pub dgid: [u8; 16],
}

impl Repr {
    /// Parse a checked GRH. The version is not judged: see [`Packet::ip_version`].
    ///
    /// # Errors
    ///
    /// [`Error::Truncated`](crate::wire::Error::Truncated) if the buffer is shorter than 40 bytes.
    pub fn parse<T: AsRef<[u8]>>(p: &Packet<T>) -> Result<Repr> {
        p.check_len()?;
        Ok(Repr {
            ip_ver: p.ip_ver(),
            tclass: p.tclass(),
            flow_label: p.flow_label(),
            paylen: p.paylen(),
            nxt_hdr: p.nxt_hdr(),
            hop_limit: p.hop_limit(),
            sgid: p.sgid(),
            dgid: p.dgid(),
        })
    }
    /// Bytes `emit` writes.
    pub const fn buffer_len(&self) -> usize {
        LEN
    }
    /// Write all 40 bytes.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut Packet<T>) {
        p.set_ver_tclass_flow(self.ip_ver, self.tclass, self.flow_label);
        p.set_paylen(self.paylen);
        p.set_nxt_hdr(self.nxt_hdr);
        p.set_hop_limit(self.hop_limit);
        p.set_sgid(&self.sgid);
        p.set_dgid(&self.dgid);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::Error;
    use proptest::prelude::*;

    const SGID: [u8; 16] = [
        0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x00, 0x02, 0xc9, 0x03, 0, 0, 0x12, 0x35,
    ];
    const DGID: [u8; 16] = [
        0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x00, 0x02, 0xc9, 0x03, 0, 0, 0x56, 0x79,
    ];

    /// A GRH in front of a 256-byte MAD (PayLen = 8 BTH + 8 DETH + 256 + 4 ICRC = 276),
    /// TClass 0x20, flow label 0x12345, hop limit 255.
    fn ib_grh() -> [u8; 40] {
        let mut b = [0u8; 40];
        b[..8].copy_from_slice(&[0x62, 0x01, 0x23, 0x45, 0x01, 0x14, 0x1b, 0xff]);
        b[8..24].copy_from_slice(&SGID);
        b[24..40].copy_from_slice(&DGID);
        b
    }

    fn ib_repr() -> Repr {
        Repr {
            ip_ver: 6,
            tclass: 0x20,
            flow_label: 0x12345,
            paylen: 276,
            nxt_hdr: NXT_HDR_IBA,
            hop_limit: 255,
            sgid: SGID,
            dgid: DGID,
        }
    }

    /// An IPv4/UDP RoCE v2 header 192.168.1.10 → 192.168.1.20, TTL 64, TOS 0,
    /// total length 304, DF, checksum 0xb64e — preceded by
    /// 20 undefined bytes.
    fn roce_v4(garbage: u8) -> [u8; 40] {
        let mut b = [garbage; 40];
        b[20..40].copy_from_slice(&[
            0x45, 0x00, 0x01, 0x30, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0xb6, 0x4e, 192, 168, 1,
            10, 192, 168, 1, 20,
        ]);
        b
    }

    #[test]
    fn test_deconstruct() {
        let b = ib_grh();
        let p = Packet::new_checked(&b[..]).unwrap();
        assert_eq!((p.ip_ver(), p.tclass(), p.flow_label()), (6, 0x20, 0x12345));
        assert_eq!((p.paylen(), p.nxt_hdr(), p.hop_limit()), (276, 0x1b, 255));
        assert_eq!((p.sgid(), p.dgid()), (SGID, DGID));
        assert_eq!(p.ip_version(), IpVersion::V6);
        assert_eq!(p.source_gid(), Some(SGID));
    }

    #[test]
    fn test_emit_parse_over_garbage() {
        let mut b = [0xa5u8; 40];
        ib_repr().emit(&mut Packet::new_unchecked(&mut b[..]));
        assert_eq!(b, ib_grh());
        assert_eq!(
            Repr::parse(&Packet::new_checked(&b[..]).unwrap()).unwrap(),
            ib_repr()
        );
    }

    #[test]
    fn roce_v2_ipv4_area() {
        let b = roce_v4(0);
        let p = Packet::new_checked(&b[..]).unwrap();
        assert_eq!(p.ip_version(), IpVersion::V4);
        assert_eq!(p.ipv4_src(), [192, 168, 1, 10]);
        assert_eq!(p.ipv4_dst(), [192, 168, 1, 20]);
        assert_eq!((p.ipv4_ttl(), p.ipv4_tos()), (64, 0));
        let mut want = [0u8; 16];
        want[10..].copy_from_slice(&[0xff, 0xff, 192, 168, 1, 10]);
        assert_eq!(p.source_gid(), Some(want));
        // Undefined leading bytes that look like version 6: the checksum decides.
        let b = roce_v4(0x60);
        assert_eq!(
            Packet::new_checked(&b[..]).unwrap().ip_version(),
            IpVersion::V4
        );
        let mut b = roce_v4(0x60);
        b[31] ^= 1;
        assert_eq!(
            Packet::new_checked(&b[..]).unwrap().ip_version(),
            IpVersion::V6
        );
        // Neither.
        let b = [0u8; 40];
        let p = Packet::new_checked(&b[..]).unwrap();
        assert_eq!(p.ip_version(), IpVersion::Unknown);
        assert_eq!(p.source_gid(), None);
    }

    #[test]
    fn test_truncated() {
        let b = ib_grh();
        assert_eq!(Packet::new_checked(&b[..39]).unwrap_err(), Error::Truncated);
        assert_eq!(
            Repr::parse(&Packet::new_unchecked(&b[..4])).unwrap_err(),
            Error::Truncated
        );
    }

    proptest! {
        #[test]
        fn roundtrip(v in 0u8..16, tc in any::<u8>(), fl in 0u32..(1 << 20), pl in any::<u16>(),
                     nh in any::<u8>(), hl in any::<u8>(), s in any::<[u8; 16]>(), d in any::<[u8; 16]>()) {
            let r = Repr { ip_ver: v, tclass: tc, flow_label: fl, paylen: pl, nxt_hdr: nh,
                           hop_limit: hl, sgid: s, dgid: d };
            let mut buf = vec![0xa5u8; r.buffer_len()];
            r.emit(&mut Packet::new_unchecked(&mut buf[..]));
            prop_assert_eq!(Repr::parse(&Packet::new_checked(&buf[..]).unwrap()).unwrap(), r);
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            if let Ok(p) = Packet::new_checked(&bytes[..]) {
                let _ = (Repr::parse(&p), p.ip_version(), p.source_gid());
            }
        }
    }
}
