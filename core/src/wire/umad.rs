//! The libibumad `struct ib_user_mad` header: what a C caller hands to
//! `umad_send` and gets back from `umad_recv` (kernel `ib_user_mad_hdr`).
//!
//! Unlike every other view in [`crate::wire`], this is not an IBA wire
//! format but a C ABI: the first five words (agent id, status, timeout,
//! retries, length) and `pkey_index` are in **host** byte order, the
//! address fields (QPN, Q_Key, LID, flow label) in network order, exactly
//! as `umad.h` declares them (`__be32 qpn`, `uint16_t pkey_index`, …).
//!
//! Two header sizes exist. The current one ([`HeaderKind::New64`]) is 64
//! bytes with `pkey_index`; the old ABI ([`HeaderKind::Old56`], a process
//! that never enabled P_Key support) ends after the flow label, so the
//! MAD starts at 56 — where `pkey_index` would be. The view carries which
//! one it reads.

use super::{be, Error, Field, Result};
use crate::types::{GrhAddr, MadAddr};

mod field {
    use super::Field;
    pub(super) const AGENT_ID: Field = 0..4;
    pub(super) const STATUS: Field = 4..8;
    pub(super) const TIMEOUT_MS: Field = 8..12;
    pub(super) const RETRIES: Field = 12..16;
    pub(super) const LENGTH: Field = 16..20;
    pub(super) const QPN: Field = 20..24;
    pub(super) const QKEY: Field = 24..28;
    pub(super) const LID: Field = 28..30;
    pub(super) const SL: usize = 30;
    pub(super) const PATH_BITS: usize = 31;
    pub(super) const GRH_PRESENT: usize = 32;
    pub(super) const GID_INDEX: usize = 33;
    pub(super) const HOP_LIMIT: usize = 34;
    pub(super) const TRAFFIC_CLASS: usize = 35;
    pub(super) const GID: Field = 36..52;
    pub(super) const FLOW_LABEL: Field = 52..56;
    pub(super) const PKEY_INDEX: Field = 56..58;
    pub(super) const RESERVED: Field = 58..64;
}

/// Size of the current `ib_user_mad` header; the MAD data follows it.
pub const HEADER_LEN: usize = field::RESERVED.end;
/// Size of the old-ABI header (no `pkey_index`); the MAD data follows it.
pub const OLD_HEADER_LEN: usize = field::FLOW_LABEL.end;
/// Offset of `struct ib_mad_addr` inside the header.
pub const ADDR_OFFSET: usize = field::QPN.start;
const _: () = assert!(HEADER_LEN == 64 && OLD_HEADER_LEN == 56 && ADDR_OFFSET == 20);
const _: () = assert!(field::PKEY_INDEX.start == OLD_HEADER_LEN);

/// Which of the two `ib_user_mad` header forms a buffer holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum HeaderKind {
    /// The 64-byte header with `pkey_index` (`IB_USER_MAD_ENABLE_PKEY`, ABI 6).
    #[default]
    New64,
    /// The 56-byte old-ABI header; the MAD starts where `pkey_index` would.
    Old56,
}

impl HeaderKind {
    /// Header length in bytes: what `umad_size()` returns.
    pub const fn header_len(self) -> usize {
        match self {
            HeaderKind::New64 => HEADER_LEN,
            HeaderKind::Old56 => OLD_HEADER_LEN,
        }
    }

    /// Whether the header carries `pkey_index`.
    pub const fn has_pkey_index(self) -> bool {
        matches!(self, HeaderKind::New64)
    }
}

/// Host-order readers and writers for the C-ABI words (private).
mod ne {
    use super::Field;

    #[inline]
    pub(super) fn u16(b: &[u8], f: Field) -> u16 {
        let mut a = [0u8; 2];
        a.copy_from_slice(&b[f]);
        u16::from_ne_bytes(a)
    }
    #[inline]
    pub(super) fn u32(b: &[u8], f: Field) -> u32 {
        let mut a = [0u8; 4];
        a.copy_from_slice(&b[f]);
        u32::from_ne_bytes(a)
    }
    #[inline]
    pub(super) fn set_u16(b: &mut [u8], f: Field, v: u16) {
        b[f].copy_from_slice(&v.to_ne_bytes());
    }
    #[inline]
    pub(super) fn set_u32(b: &mut [u8], f: Field, v: u32) {
        b[f].copy_from_slice(&v.to_ne_bytes());
    }
}

/// A view over an `ib_user_mad` buffer: header, then the MAD.
#[derive(Debug, Clone)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
    kind: HeaderKind,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wrap a buffer holding the 64-byte header form, without checking its length.
    pub const fn new_unchecked(buffer: T) -> Packet<T> {
        Packet {
            buffer,
            kind: HeaderKind::New64,
        }
    }

    /// Wrap a buffer holding the 64-byte header form and check its length.
    pub fn new_checked(buffer: T) -> Result<Packet<T>> {
        Self::new_checked_kind(buffer, HeaderKind::New64)
    }

    /// Wrap a buffer holding the given header form, without checking its length.
    pub const fn new_unchecked_kind(buffer: T, kind: HeaderKind) -> Packet<T> {
        Packet { buffer, kind }
    }

    /// Wrap a buffer holding the given header form and check its length.
    pub fn new_checked_kind(buffer: T, kind: HeaderKind) -> Result<Packet<T>> {
        let packet = Self::new_unchecked_kind(buffer, kind);
        packet.check_len()?;
        Ok(packet)
    }

    /// Check that the buffer holds the whole header of its form.
    pub fn check_len(&self) -> Result<()> {
        if self.buffer.as_ref().len() < self.kind.header_len() {
            Err(Error::Truncated)
        } else {
            Ok(())
        }
    }

    /// The wrapped buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// The header form this view reads.
    pub fn kind(&self) -> HeaderKind {
        self.kind
    }

    /// agent_id (host order): the agent a send goes out on / a receive arrived for.
    pub fn agent_id(&self) -> u32 {
        ne::u32(self.buffer.as_ref(), field::AGENT_ID)
    }
    /// status (host order): 0, or ETIMEDOUT (110) for a send that got no response.
    pub fn status(&self) -> u32 {
        ne::u32(self.buffer.as_ref(), field::STATUS)
    }
    /// timeout_ms (host order).
    pub fn timeout_ms(&self) -> u32 {
        ne::u32(self.buffer.as_ref(), field::TIMEOUT_MS)
    }
    /// retries (host order).
    pub fn retries(&self) -> u32 {
        ne::u32(self.buffer.as_ref(), field::RETRIES)
    }
    /// length (host order): on receive, header size plus MAD length.
    pub fn length(&self) -> u32 {
        ne::u32(self.buffer.as_ref(), field::LENGTH)
    }
    /// addr.qpn (network order in the buffer).
    pub fn qpn(&self) -> u32 {
        be::u32(self.buffer.as_ref(), field::QPN)
    }
    /// addr.qkey (network order in the buffer).
    pub fn qkey(&self) -> u32 {
        be::u32(self.buffer.as_ref(), field::QKEY)
    }
    /// addr.lid (network order in the buffer).
    pub fn lid(&self) -> u16 {
        be::u16(self.buffer.as_ref(), field::LID)
    }
    /// addr.sl.
    pub fn sl(&self) -> u8 {
        self.buffer.as_ref()[field::SL]
    }
    /// addr.path_bits.
    pub fn path_bits(&self) -> u8 {
        self.buffer.as_ref()[field::PATH_BITS]
    }
    /// addr.grh_present, raw.
    pub fn grh_present(&self) -> u8 {
        self.buffer.as_ref()[field::GRH_PRESENT]
    }
    /// addr.gid_index.
    pub fn gid_index(&self) -> u8 {
        self.buffer.as_ref()[field::GID_INDEX]
    }
    /// addr.hop_limit.
    pub fn hop_limit(&self) -> u8 {
        self.buffer.as_ref()[field::HOP_LIMIT]
    }
    /// addr.traffic_class.
    pub fn traffic_class(&self) -> u8 {
        self.buffer.as_ref()[field::TRAFFIC_CLASS]
    }
    /// addr.gid.
    pub fn gid(&self) -> [u8; 16] {
        let mut g = [0u8; 16];
        g.copy_from_slice(&self.buffer.as_ref()[field::GID]);
        g
    }
    /// addr.flow_label (network order in the buffer).
    pub fn flow_label(&self) -> u32 {
        be::u32(self.buffer.as_ref(), field::FLOW_LABEL)
    }
    /// addr.pkey_index (host order); 0 for the old header form, which has
    /// none (as `umad_get_pkey` answers on the old ABI).
    pub fn pkey_index(&self) -> u16 {
        match self.kind {
            HeaderKind::New64 => ne::u16(self.buffer.as_ref(), field::PKEY_INDEX),
            HeaderKind::Old56 => 0,
        }
    }
    /// The address as a value; `grh` is `Some` iff `grh_present != 0`.
    pub fn addr(&self) -> MadAddr {
        let grh = (self.grh_present() != 0).then(|| GrhAddr {
            gid: self.gid(),
            gid_index: self.gid_index(),
            hop_limit: self.hop_limit(),
            traffic_class: self.traffic_class(),
            flow_label: self.flow_label(),
        });
        MadAddr {
            qpn: self.qpn(),
            qkey: self.qkey(),
            lid: self.lid(),
            sl: self.sl(),
            path_bits: self.path_bits(),
            grh,
            pkey_index: self.pkey_index(),
        }
    }
    /// The MAD after the header (empty if the buffer ends with the header).
    pub fn data(&self) -> &[u8] {
        &self.buffer.as_ref()[self.kind.header_len()..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Set agent_id.
    pub fn set_agent_id(&mut self, v: u32) {
        ne::set_u32(self.buffer.as_mut(), field::AGENT_ID, v);
    }
    /// Set status.
    pub fn set_status(&mut self, v: u32) {
        ne::set_u32(self.buffer.as_mut(), field::STATUS, v);
    }
    /// Set timeout_ms.
    pub fn set_timeout_ms(&mut self, v: u32) {
        ne::set_u32(self.buffer.as_mut(), field::TIMEOUT_MS, v);
    }
    /// Set retries.
    pub fn set_retries(&mut self, v: u32) {
        ne::set_u32(self.buffer.as_mut(), field::RETRIES, v);
    }
    /// Set length.
    pub fn set_length(&mut self, v: u32) {
        ne::set_u32(self.buffer.as_mut(), field::LENGTH, v);
    }
    /// Set addr.qpn.
    pub fn set_qpn(&mut self, v: u32) {
        be::set_u32(self.buffer.as_mut(), field::QPN, v);
    }
    /// Set addr.qkey.
    pub fn set_qkey(&mut self, v: u32) {
        be::set_u32(self.buffer.as_mut(), field::QKEY, v);
    }
    /// Set addr.lid.
    pub fn set_lid(&mut self, v: u16) {
        be::set_u16(self.buffer.as_mut(), field::LID, v);
    }
    /// Set addr.sl.
    pub fn set_sl(&mut self, v: u8) {
        self.buffer.as_mut()[field::SL] = v;
    }
    /// Set addr.path_bits.
    pub fn set_path_bits(&mut self, v: u8) {
        self.buffer.as_mut()[field::PATH_BITS] = v;
    }
    /// Set addr.grh_present.
    pub fn set_grh_present(&mut self, v: u8) {
        self.buffer.as_mut()[field::GRH_PRESENT] = v;
    }
    /// Set addr.gid_index.
    pub fn set_gid_index(&mut self, v: u8) {
        self.buffer.as_mut()[field::GID_INDEX] = v;
    }
    /// Set addr.hop_limit.
    pub fn set_hop_limit(&mut self, v: u8) {
        self.buffer.as_mut()[field::HOP_LIMIT] = v;
    }
    /// Set addr.traffic_class.
    pub fn set_traffic_class(&mut self, v: u8) {
        self.buffer.as_mut()[field::TRAFFIC_CLASS] = v;
    }
    /// Set addr.gid.
    pub fn set_gid(&mut self, v: &[u8; 16]) {
        self.buffer.as_mut()[field::GID].copy_from_slice(v);
    }
    /// Set addr.flow_label.
    pub fn set_flow_label(&mut self, v: u32) {
        be::set_u32(self.buffer.as_mut(), field::FLOW_LABEL, v);
    }
    /// Set addr.pkey_index (only its two bytes, as `umad_set_pkey`). Does
    /// nothing for the old header form, whose bytes there are MAD data.
    pub fn set_pkey_index(&mut self, v: u16) {
        if self.kind.has_pkey_index() {
            ne::set_u16(self.buffer.as_mut(), field::PKEY_INDEX, v);
        }
    }
    /// Write the whole address; without a GRH the GRH fields are zeroed, and
    /// so are the reserved bytes after `pkey_index` (new header form).
    pub fn set_addr(&mut self, a: &MadAddr) {
        self.set_qpn(a.qpn);
        self.set_qkey(a.qkey);
        self.set_lid(a.lid);
        self.set_sl(a.sl);
        self.set_path_bits(a.path_bits);
        let g = a.grh.unwrap_or_default();
        self.set_grh_present(u8::from(a.grh.is_some()));
        self.set_gid_index(g.gid_index);
        self.set_hop_limit(g.hop_limit);
        self.set_traffic_class(g.traffic_class);
        self.set_gid(&g.gid);
        self.set_flow_label(g.flow_label);
        self.set_pkey_index(a.pkey_index);
        if self.kind.has_pkey_index() {
            self.buffer.as_mut()[field::RESERVED].fill(0);
        }
    }
    /// The MAD after the header, mutably.
    pub fn data_mut(&mut self) -> &mut [u8] {
        let start = self.kind.header_len();
        &mut self.buffer.as_mut()[start..]
    }
}

/// The `ib_user_mad` header as a value (host-order numbers throughout).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Repr {
    /// agent_id.
    pub agent_id: u32,
    /// status (0 or ETIMEDOUT).
    pub status: u32,
    /// timeout_ms.
    pub timeout_ms: u32,
    /// retries.
    pub retries: u32,
    /// length.
    pub length: u32,
    /// The address; `pkey_index` is 0 when read from the old header form.
    pub addr: MadAddr,
}

impl Repr {
    /// Parse a checked header.
    ///
    /// # Errors
    ///
    /// [`Error::Truncated`] if the buffer is shorter than its header form.
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Result<Repr> {
        packet.check_len()?;
        Ok(Repr {
            agent_id: packet.agent_id(),
            status: packet.status(),
            timeout_ms: packet.timeout_ms(),
            retries: packet.retries(),
            length: packet.length(),
            addr: packet.addr(),
        })
    }

    /// Bytes `emit` may write: [`HEADER_LEN`], enough for either header form
    /// (the old form needs only [`OLD_HEADER_LEN`], see [`HeaderKind::header_len`]).
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Write every header field of the view's form (reserved bytes as
    /// zero); the MAD data is not touched. The buffer must hold the header.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        packet.set_agent_id(self.agent_id);
        packet.set_status(self.status);
        packet.set_timeout_ms(self.timeout_ms);
        packet.set_retries(self.retries);
        packet.set_length(self.length);
        packet.set_addr(&self.addr);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A received PathRecord GetTableResp header, as the kernel writes it on
    /// a little-endian host: agent 3, status 0, length 64 + 256, from QPN 1
    /// (LID 0x0012, SL 4, path bits 1) with a GRH (GID fe80::2:c903:0:1234,
    /// gid index 2, hop limit 64, TClass 0x20, flow label 0x12345),
    /// P_Key index 5; then the first 4 MAD bytes.
    const RECV_LE: [u8; 68] = [
        0x03, 0x00, 0x00, 0x00, // agent_id 3 (host)
        0x00, 0x00, 0x00, 0x00, // status 0
        0xe8, 0x03, 0x00, 0x00, // timeout_ms 1000
        0x02, 0x00, 0x00, 0x00, // retries 2
        0x40, 0x01, 0x00, 0x00, // length 320
        0x00, 0x00, 0x00, 0x01, // qpn 1 (BE)
        0x80, 0x01, 0x00, 0x00, // qkey 0x80010000 (BE)
        0x00, 0x12, 0x04, 0x01, // lid 0x12 (BE), sl 4, path_bits 1
        0x01, 0x02, 0x40, 0x20, // grh_present, gid_index 2, hop_limit 64, tclass 0x20
        0xfe, 0x80, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, // gid prefix
        0x00, 0x02, 0xc9, 0x03, 0x00, 0x00, 0x12, 0x34, // gid interface id
        0x00, 0x01, 0x23, 0x45, // flow_label (BE)
        0x05, 0x00, // pkey_index 5 (host)
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, // reserved
        0x01, 0x03, 0x02, 0x92, // MAD: base 1, SA, v2, GetTableResp
    ];

    /// The fixture in this host's byte order: host-order words swapped on big-endian.
    fn recv_fixture() -> [u8; 68] {
        let mut b = RECV_LE;
        if cfg!(target_endian = "big") {
            for w in (0..20).step_by(4) {
                b[w..w + 4].reverse();
            }
            b[56..58].reverse();
        }
        b
    }

    const GID: [u8; 16] = [
        0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x00, 0x02, 0xc9, 0x03, 0x00, 0x00, 0x12, 0x34,
    ];

    fn recv_repr() -> Repr {
        Repr {
            agent_id: 3,
            status: 0,
            timeout_ms: 1000,
            retries: 2,
            length: 320,
            addr: MadAddr {
                qpn: 1,
                qkey: 0x8001_0000,
                lid: 0x12,
                sl: 4,
                path_bits: 1,
                grh: Some(GrhAddr {
                    gid: GID,
                    gid_index: 2,
                    hop_limit: 64,
                    traffic_class: 0x20,
                    flow_label: 0x12345,
                }),
                pkey_index: 5,
            },
        }
    }

    #[test]
    fn test_deconstruct() {
        let b = recv_fixture();
        let p = Packet::new_checked(&b[..]).unwrap();
        assert_eq!(p.agent_id(), 3);
        assert_eq!(p.timeout_ms(), 1000);
        assert_eq!(p.retries(), 2);
        assert_eq!(p.length(), 320);
        assert_eq!((p.qpn(), p.qkey(), p.lid()), (1, 0x8001_0000, 0x12));
        assert_eq!((p.sl(), p.path_bits(), p.grh_present()), (4, 1, 1));
        assert_eq!(
            (p.gid_index(), p.hop_limit(), p.traffic_class()),
            (2, 64, 0x20)
        );
        assert_eq!(p.gid(), GID);
        assert_eq!(p.flow_label(), 0x12345);
        assert_eq!(p.pkey_index(), 5);
        assert_eq!(p.data(), &[0x01, 0x03, 0x02, 0x92]);
    }

    #[test]
    fn test_construct_over_garbage() {
        let mut b = [0xa5u8; 68];
        let mut p = Packet::new_unchecked(&mut b[..]);
        recv_repr().emit(&mut p);
        p.data_mut().copy_from_slice(&[0x01, 0x03, 0x02, 0x92]);
        assert_eq!(b, recv_fixture());
    }

    #[test]
    fn test_parse() {
        let b = recv_fixture();
        let p = Packet::new_checked(&b[..]).unwrap();
        assert_eq!(Repr::parse(&p).unwrap(), recv_repr());
    }

    #[test]
    fn no_grh_zeroes_grh_fields_and_parses_as_none() {
        let mut r = recv_repr();
        r.addr.grh = None;
        let mut b = [0xa5u8; 64];
        r.emit(&mut Packet::new_unchecked(&mut b[..]));
        assert_eq!(&b[32..56], &[0u8; 24]);
        let got = Repr::parse(&Packet::new_checked(&b[..]).unwrap()).unwrap();
        assert_eq!(got, r);
        // grh_present is any non-zero byte.
        b[32] = 0x80;
        let p = Packet::new_checked(&b[..]).unwrap();
        assert!(p.addr().grh.is_some());
    }

    #[test]
    fn old_header_form() {
        let b = recv_fixture();
        // The same bytes read as an old 56-byte header: the MAD starts at 56.
        let p = Packet::new_checked_kind(&b[..], HeaderKind::Old56).unwrap();
        assert_eq!(p.pkey_index(), 0);
        assert_eq!(p.data().len(), 12);
        assert_eq!(&p.data()[..2], &b[56..58]);

        let mut out = [0xa5u8; 60];
        let mut r = recv_repr();
        let mut p = Packet::new_unchecked_kind(&mut out[..], HeaderKind::Old56);
        r.emit(&mut p);
        p.data_mut().fill(0x77);
        assert_eq!(&out[..56], &recv_fixture()[..56]);
        assert_eq!(
            &out[56..],
            &[0x77; 4],
            "pkey_index is not written on the old form"
        );
        r.addr.pkey_index = 0;
        let p = Packet::new_checked_kind(&out[..], HeaderKind::Old56).unwrap();
        assert_eq!(Repr::parse(&p).unwrap(), r);
        assert_eq!(HeaderKind::Old56.header_len(), OLD_HEADER_LEN);
        assert_eq!(HeaderKind::default().header_len(), HEADER_LEN);
    }

    #[test]
    fn test_truncated() {
        let b = recv_fixture();
        assert_eq!(Packet::new_checked(&b[..63]).unwrap_err(), Error::Truncated);
        assert!(Packet::new_checked(&b[..64]).unwrap().data().is_empty());
        assert!(Packet::new_checked_kind(&b[..56], HeaderKind::Old56).is_ok());
        assert_eq!(
            Packet::new_checked_kind(&b[..55], HeaderKind::Old56).unwrap_err(),
            Error::Truncated
        );
        let p = Packet::new_unchecked(&b[..10]);
        assert_eq!(Repr::parse(&p).unwrap_err(), Error::Truncated);
    }

    prop_compose! {
        fn arb_addr()(qpn in any::<u32>(), qkey in any::<u32>(), lid in any::<u16>(), sl in any::<u8>(),
                      pb in any::<u8>(), has_grh in any::<bool>(), gid in any::<[u8; 16]>(),
                      gi in any::<u8>(), hl in any::<u8>(), tc in any::<u8>(), fl in any::<u32>(),
                      pk in any::<u16>()) -> MadAddr {
            let grh = has_grh.then_some(GrhAddr { gid, gid_index: gi, hop_limit: hl,
                                                  traffic_class: tc, flow_label: fl });
            MadAddr { qpn, qkey, lid, sl, path_bits: pb, grh, pkey_index: pk }
        }
    }

    prop_compose! {
        fn arb_repr()(a in any::<u32>(), s in any::<u32>(), t in any::<u32>(), r in any::<u32>(),
                      l in any::<u32>(), addr in arb_addr()) -> Repr {
            Repr { agent_id: a, status: s, timeout_ms: t, retries: r, length: l, addr }
        }
    }

    proptest! {
        #[test]
        fn roundtrip(r in arb_repr()) {
            let mut buf = vec![0xa5u8; r.buffer_len()];
            r.emit(&mut Packet::new_unchecked(&mut buf[..]));
            prop_assert_eq!(Repr::parse(&Packet::new_checked(&buf[..]).unwrap()).unwrap(), r);
        }

        #[test]
        fn roundtrip_old(mut r in arb_repr()) {
            r.addr.pkey_index = 0;
            let mut buf = [0xa5u8; OLD_HEADER_LEN];
            r.emit(&mut Packet::new_unchecked_kind(&mut buf[..], HeaderKind::Old56));
            let p = Packet::new_checked_kind(&buf[..], HeaderKind::Old56).unwrap();
            prop_assert_eq!(Repr::parse(&p).unwrap(), r);
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..80)) {
            for kind in [HeaderKind::New64, HeaderKind::Old56] {
                if let Ok(p) = Packet::new_checked_kind(&bytes[..], kind) {
                    let _ = Repr::parse(&p);
                    let _ = p.data().len();
                }
            }
        }
    }
}
