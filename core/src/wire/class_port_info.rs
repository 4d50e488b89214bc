//! ClassPortInfo (IBA 13.4.8.1): 72 bytes describing a class agent, used
//! for GSI redirect (status bit 1) and trap forwarding.
//!
//! ```text
//!  0 BaseVersion   1 ClassVersion   2..4 CapabilityMask
//!  4..8   CapabilityMask2(27) RespTimeValue(5)
//!  8..24  RedirectGID    24..28 RedirectTC(8) RedirectSL(4) RedirectFL(20)
//! 28..30  RedirectLID    30..32 RedirectP_Key   32..36 reserved(8) RedirectQP(24)
//! 36..40  RedirectQ_Key  40..56 TrapGID         56..60 TrapTC(8) TrapSL(4) TrapFL(20)
//! 60..62  TrapLID        62..64 TrapP_Key       64..68 TrapHL(8) TrapQP(24)
//! 68..72  TrapQ_Key
//! ```
//!
//! The view wraps the attribute itself, because its offset in the MAD
//! depends on the class: see [`data_offset`].

use super::{be, mad, Field, Result};

mod field {
    use super::Field;
    pub(super) const BASE_VERSION: usize = 0;
    pub(super) const CLASS_VERSION: usize = 1;
    pub(super) const CAP_MASK: Field = 2..4;
    pub(super) const CAP_MASK2_RESP_TIME: Field = 4..8;
    pub(super) const REDIRECT_GID: Field = 8..24;
    pub(super) const REDIRECT_TC_SL_FL: Field = 24..28;
    pub(super) const REDIRECT_LID: Field = 28..30;
    pub(super) const REDIRECT_PKEY: Field = 30..32;
    pub(super) const REDIRECT_QP: Field = 32..36;
    pub(super) const REDIRECT_QKEY: Field = 36..40;
    pub(super) const TRAP_GID: Field = 40..56;
    pub(super) const TRAP_TC_SL_FL: Field = 56..60;
    pub(super) const TRAP_LID: Field = 60..62;
    pub(super) const TRAP_PKEY: Field = 62..64;
    pub(super) const TRAP_HL_QP: Field = 64..68;
    pub(super) const TRAP_QKEY: Field = 68..72;
}

/// Length of ClassPortInfo.
pub const LEN: usize = field::TRAP_QKEY.end;
/// The ClassPortInfo attribute ID (every class).
pub const ATTR_ID: u16 = 0x0001;
const _: () = assert!(LEN == 72);

/// Where ClassPortInfo starts in a MAD of `class`: after the class header
/// (24 for most classes, 40 for vendor range 2, 56 for SA, 64 for DM/DevAdm/BIS).
pub fn data_offset(class: mad::MgmtClass) -> usize {
    class.data_offset()
}

/// A view over ClassPortInfo attribute data.
#[derive(Debug, Clone)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

fn gid(b: &[u8], f: Field) -> [u8; 16] {
    let mut g = [0u8; 16];
    g.copy_from_slice(&b[f]);
    g
}

/// TC(8) SL(4) FL(20) packed into one word.
fn split_tc_sl_fl(w: u32) -> (u8, u8, u32) {
    ((w >> 24) as u8, ((w >> 20) & 0xf) as u8, w & 0xf_ffff)
}

fn join_tc_sl_fl(tc: u8, sl: u8, fl: u32) -> u32 {
    (u32::from(tc) << 24) | (u32::from(sl & 0xf) << 20) | (fl & 0xf_ffff)
}

impl<T: AsRef<[u8]>> Packet<T> {
    crate::wire::view_constructors!(LEN, "the 72 bytes");
    fn word(&self, f: Field) -> u32 {
        be::u32(self.buffer.as_ref(), f)
    }
    /// BaseVersion.
    pub fn base_version(&self) -> u8 {
        self.buffer.as_ref()[field::BASE_VERSION]
    }
    /// ClassVersion.
    pub fn class_version(&self) -> u8 {
        self.buffer.as_ref()[field::CLASS_VERSION]
    }
    /// CapabilityMask.
    pub fn capability_mask(&self) -> u16 {
        be::u16(self.buffer.as_ref(), field::CAP_MASK)
    }
    /// CapabilityMask2 (27 bits).
    pub fn capability_mask2(&self) -> u32 {
        self.word(field::CAP_MASK2_RESP_TIME) >> 5
    }
    /// RespTimeValue (5 bits).
    pub fn resp_time_value(&self) -> u8 {
        (self.word(field::CAP_MASK2_RESP_TIME) & 0x1f) as u8
    }
    /// RedirectGID.
    pub fn redirect_gid(&self) -> [u8; 16] {
        gid(self.buffer.as_ref(), field::REDIRECT_GID)
    }
    /// RedirectTC, RedirectSL, RedirectFL.
    pub fn redirect_tc_sl_fl(&self) -> (u8, u8, u32) {
        split_tc_sl_fl(self.word(field::REDIRECT_TC_SL_FL))
    }
    /// RedirectLID.
    pub fn redirect_lid(&self) -> u16 {
        be::u16(self.buffer.as_ref(), field::REDIRECT_LID)
    }
    /// RedirectP_Key.
    pub fn redirect_pkey(&self) -> u16 {
        be::u16(self.buffer.as_ref(), field::REDIRECT_PKEY)
    }
    /// RedirectQP (24 bits).
    pub fn redirect_qp(&self) -> u32 {
        self.word(field::REDIRECT_QP) & 0xff_ffff
    }
    /// RedirectQ_Key.
    pub fn redirect_qkey(&self) -> u32 {
        self.word(field::REDIRECT_QKEY)
    }
    /// TrapGID.
    pub fn trap_gid(&self) -> [u8; 16] {
        gid(self.buffer.as_ref(), field::TRAP_GID)
    }
    /// TrapTC, TrapSL, TrapFL.
    pub fn trap_tc_sl_fl(&self) -> (u8, u8, u32) {
        split_tc_sl_fl(self.word(field::TRAP_TC_SL_FL))
    }
    /// TrapLID.
    pub fn trap_lid(&self) -> u16 {
        be::u16(self.buffer.as_ref(), field::TRAP_LID)
    }
    /// TrapP_Key.
    pub fn trap_pkey(&self) -> u16 {
        be::u16(self.buffer.as_ref(), field::TRAP_PKEY)
    }
    /// TrapHL.
    pub fn trap_hop_limit(&self) -> u8 {
        (self.word(field::TRAP_HL_QP) >> 24) as u8
    }
    /// TrapQP (24 bits).
    pub fn trap_qp(&self) -> u32 {
        self.word(field::TRAP_HL_QP) & 0xff_ffff
    }
    /// TrapQ_Key.
    pub fn trap_qkey(&self) -> u32 {
        self.word(field::TRAP_QKEY)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    fn set_word(&mut self, f: Field, v: u32) {
        be::set_u32(self.buffer.as_mut(), f, v);
    }
    /// Set BaseVersion.
    pub fn set_base_version(&mut self, v: u8) {
        self.buffer.as_mut()[field::BASE_VERSION] = v;
    }
    /// Set ClassVersion.
    pub fn set_class_version(&mut self, v: u8) {
        self.buffer.as_mut()[field::CLASS_VERSION] = v;
    }
    /// Set CapabilityMask.
    pub fn set_capability_mask(&mut self, v: u16) {
        be::set_u16(self.buffer.as_mut(), field::CAP_MASK, v);
    }
    /// Set CapabilityMask2 (low 27 bits) and RespTimeValue (low 5 bits).
    pub fn set_capability_mask2_resp_time(&mut self, cap2: u32, resp_time: u8) {
        self.set_word(
            field::CAP_MASK2_RESP_TIME,
            (cap2 << 5) | u32::from(resp_time & 0x1f),
        );
    }
    /// Set RedirectGID.
    pub fn set_redirect_gid(&mut self, v: &[u8; 16]) {
        self.buffer.as_mut()[field::REDIRECT_GID].copy_from_slice(v);
    }
    /// Set RedirectTC, RedirectSL (4 bits), RedirectFL (20 bits).
    pub fn set_redirect_tc_sl_fl(&mut self, tc: u8, sl: u8, fl: u32) {
        self.set_word(field::REDIRECT_TC_SL_FL, join_tc_sl_fl(tc, sl, fl));
    }
    /// Set RedirectLID.
    pub fn set_redirect_lid(&mut self, v: u16) {
        be::set_u16(self.buffer.as_mut(), field::REDIRECT_LID, v);
    }
    /// Set RedirectP_Key.
    pub fn set_redirect_pkey(&mut self, v: u16) {
        be::set_u16(self.buffer.as_mut(), field::REDIRECT_PKEY, v);
    }
    /// Set RedirectQP (24 bits; the reserved byte before it becomes 0).
    pub fn set_redirect_qp(&mut self, v: u32) {
        self.set_word(field::REDIRECT_QP, v & 0xff_ffff);
    }
    /// Set RedirectQ_Key.
    pub fn set_redirect_qkey(&mut self, v: u32) {
        self.set_word(field::REDIRECT_QKEY, v);
    }
    /// Set TrapGID.
    pub fn set_trap_gid(&mut self, v: &[u8; 16]) {
        self.buffer.as_mut()[field::TRAP_GID].copy_from_slice(v);
    }
    /// Set TrapTC, TrapSL (4 bits), TrapFL (20 bits).
    pub fn set_trap_tc_sl_fl(&mut self, tc: u8, sl: u8, fl: u32) {
        self.set_word(field::TRAP_TC_SL_FL, join_tc_sl_fl(tc, sl, fl));
    }
    /// Set TrapLID.
    pub fn set_trap_lid(&mut self, v: u16) {
        be::set_u16(self.buffer.as_mut(), field::TRAP_LID, v);
    }
    /// Set TrapP_Key.
    pub fn set_trap_pkey(&mut self, v: u16) {
        be::set_u16(self.buffer.as_mut(), field::TRAP_PKEY, v);
    }
    /// Set TrapHL and TrapQP (24 bits).
    pub fn set_trap_hl_qp(&mut self, hop_limit: u8, qp: u32) {
        self.set_word(
            field::TRAP_HL_QP,
            (u32::from(hop_limit) << 24) | (qp & 0xff_ffff),
        );
    }
    /// Set TrapQ_Key.
    pub fn set_trap_qkey(&mut self, v: u32) {
        self.set_word(field::TRAP_QKEY, v);
    }
}

/// Where a class agent redirects to, or where traps go.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Target {
    /// GID.
    pub gid: [u8; 16],
    /// Traffic class.
    pub tc: u8,
    /// Service level (4 bits).
    pub sl: u8,
    /// Flow label (20 bits).
    pub flow_label: u32,
    /// LID.
    pub lid: u16,
    /// P_Key.
    pub pkey: u16,
    /// QP (24 bits).
    pub qp: u32,
    /// Q_Key.
    pub qkey: u32,
}

/// ClassPortInfo as a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Repr {
    /// BaseVersion.
    pub base_version: u8,
    /// ClassVersion.
    pub class_version: u8,
    /// CapabilityMask.
    pub capability_mask: u16,
    /// CapabilityMask2 (27 bits).
    pub capability_mask2: u32,
    /// RespTimeValue (5 bits).
    pub resp_time_value: u8,
    /// The redirect target (RedirectGID … RedirectQ_Key).
    pub redirect: Target,
    /// The trap target (TrapGID … TrapQ_Key).
    pub trap: Target,
    /// TrapHL.
    pub trap_hop_limit: u8,
}

impl Repr {
    /// Parse checked ClassPortInfo.
    ///
    /// # Errors
    ///
    /// [`Error::Truncated`](crate::wire::Error::Truncated) if the buffer is shorter than 72 bytes.
    pub fn parse<T: AsRef<[u8]>>(p: &Packet<T>) -> Result<Repr> {
        p.check_len()?;
        let (rtc, rsl, rfl) = p.redirect_tc_sl_fl();
        let (ttc, tsl, tfl) = p.trap_tc_sl_fl();
        Ok(Repr {
            base_version: p.base_version(),
            class_version: p.class_version(),
            capability_mask: p.capability_mask(),
            capability_mask2: p.capability_mask2(),
            resp_time_value: p.resp_time_value(),
            redirect: Target {
                gid: p.redirect_gid(),
                tc: rtc,
                sl: rsl,
                flow_label: rfl,
                lid: p.redirect_lid(),
                pkey: p.redirect_pkey(),
                qp: p.redirect_qp(),
                qkey: p.redirect_qkey(),
            },
            trap: Target {
                gid: p.trap_gid(),
                tc: ttc,
                sl: tsl,
                flow_label: tfl,
                lid: p.trap_lid(),
                pkey: p.trap_pkey(),
                qp: p.trap_qp(),
                qkey: p.trap_qkey(),
            },
            trap_hop_limit: p.trap_hop_limit(),
        })
    }
    /// Bytes `emit` writes.
    pub const fn buffer_len(&self) -> usize {
        LEN
    }
    /// Write all 72 bytes (reserved as zero, fields masked to their widths).
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut Packet<T>) {
        let (r, t) = (&self.redirect, &self.trap);
        p.set_base_version(self.base_version);
        p.set_class_version(self.class_version);
        p.set_capability_mask(self.capability_mask);
        p.set_capability_mask2_resp_time(self.capability_mask2, self.resp_time_value);
        p.set_redirect_gid(&r.gid);
        p.set_redirect_tc_sl_fl(r.tc, r.sl, r.flow_label);
        p.set_redirect_lid(r.lid);
        p.set_redirect_pkey(r.pkey);
        p.set_redirect_qp(r.qp);
        p.set_redirect_qkey(r.qkey);
        p.set_trap_gid(&t.gid);
        p.set_trap_tc_sl_fl(t.tc, t.sl, t.flow_label);
        p.set_trap_lid(t.lid);
        p.set_trap_pkey(t.pkey);
        p.set_trap_hl_qp(self.trap_hop_limit, t.qp);
        p.set_trap_qkey(t.qkey);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::Error;
    use proptest::prelude::*;

    /// An SA ClassPortInfo: base 1, class 2, CapabilityMask 0x0602,
    /// CapabilityMask2 0, RespTimeValue 18, redirect to LID 0x0004 QP 1
    /// Q_Key 0x80010000 P_Key 0xffff SL 2, traps to LID 0x0001 QP 1 HL 255.
    fn fixture() -> [u8; 72] {
        let mut b = [0u8; 72];
        b[..8].copy_from_slice(&[0x01, 0x02, 0x06, 0x02, 0x00, 0x00, 0x00, 0x12]);
        b[24..40].copy_from_slice(&[
            0x00, 0x20, 0x00, 0x00, // TC 0, SL 2, FL 0
            0x00, 0x04, 0xff, 0xff, // LID 4, P_Key
            0x00, 0x00, 0x00, 0x01, // QP 1
            0x80, 0x01, 0x00, 0x00, // Q_Key
        ]);
        b[56..72].copy_from_slice(&[
            0x00, 0x00, 0x00, 0x00, // TC, SL, FL
            0x00, 0x01, 0xff, 0xff, // LID 1, P_Key
            0xff, 0x00, 0x00, 0x01, // HL 255, QP 1
            0x80, 0x01, 0x00, 0x00, // Q_Key
        ]);
        b
    }

    fn repr() -> Repr {
        Repr {
            base_version: 1,
            class_version: 2,
            capability_mask: 0x0602,
            resp_time_value: 18,
            redirect: Target {
                sl: 2,
                lid: 4,
                pkey: 0xffff,
                qp: 1,
                qkey: 0x8001_0000,
                ..Target::default()
            },
            trap: Target {
                lid: 1,
                pkey: 0xffff,
                qp: 1,
                qkey: 0x8001_0000,
                ..Target::default()
            },
            trap_hop_limit: 255,
            ..Repr::default()
        }
    }

    #[test]
    fn test_deconstruct() {
        let b = fixture();
        let p = Packet::new_checked(&b[..]).unwrap();
        assert_eq!((p.base_version(), p.class_version()), (1, 2));
        assert_eq!(p.capability_mask(), 0x0602);
        assert_eq!((p.capability_mask2(), p.resp_time_value()), (0, 18));
        assert_eq!(p.redirect_tc_sl_fl(), (0, 2, 0));
        assert_eq!(
            (p.redirect_lid(), p.redirect_qp(), p.redirect_qkey()),
            (4, 1, 0x8001_0000)
        );
        assert_eq!((p.trap_lid(), p.trap_hop_limit(), p.trap_qp()), (1, 255, 1));
    }

    #[test]
    fn test_emit_parse_over_garbage() {
        let mut b = [0xa5u8; 72];
        repr().emit(&mut Packet::new_unchecked(&mut b[..]));
        assert_eq!(b, fixture());
        assert_eq!(
            Repr::parse(&Packet::new_checked(&b[..]).unwrap()).unwrap(),
            repr()
        );
    }

    #[test]
    fn packed_words() {
        let mut b = [0u8; 72];
        let mut p = Packet::new_unchecked(&mut b[..]);
        p.set_capability_mask2_resp_time(0x7ff_ffff, 0x1f);
        p.set_redirect_tc_sl_fl(0xab, 0xc, 0xd_ef01);
        assert_eq!(&b[4..8], &[0xff, 0xff, 0xff, 0xff]);
        assert_eq!(&b[24..28], &[0xab, 0xcd, 0xef, 0x01]);
        let p = Packet::new_checked(&b[..]).unwrap();
        assert_eq!(p.redirect_tc_sl_fl(), (0xab, 0xc, 0xd_ef01));
        assert_eq!(data_offset(mad::MgmtClass::SubnAdm), 56);
    }

    #[test]
    fn test_truncated() {
        let b = fixture();
        assert_eq!(Packet::new_checked(&b[..71]).unwrap_err(), Error::Truncated);
        assert_eq!(
            Repr::parse(&Packet::new_unchecked(&b[..8])).unwrap_err(),
            Error::Truncated
        );
    }

    proptest! {
        #[test]
        fn roundtrip(bytes in proptest::collection::vec(any::<u8>(), 72)) {
            let r = Repr::parse(&Packet::new_checked(&bytes[..]).unwrap()).unwrap();
            let mut out = [0xa5u8; 72];
            r.emit(&mut Packet::new_unchecked(&mut out[..]));
            prop_assert_eq!(Repr::parse(&Packet::new_checked(&out[..]).unwrap()).unwrap(), r);
            // Only the reserved byte before RedirectQP may differ.
            prop_assert_eq!(&out[..32], &bytes[..32]);
            prop_assert_eq!(out[32], 0);
            prop_assert_eq!(&out[33..], &bytes[33..]);
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..100)) {
            if let Ok(p) = Packet::new_checked(&bytes[..]) {
                let _ = Repr::parse(&p);
            }
        }
    }
}
