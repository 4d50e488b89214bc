//! PathRecord (IBA 15.2.5.16): 64 bytes.
//!
//! ```text
//!  0..8   ServiceID           8..24  DGID             24..40 SGID
//! 40..42  DLID               42..44  SLID
//! 44..48  RawTraffic(1) reserved(3) FlowLabel(20) HopLimit(8)
//! 48      TClass             49      Reversible(1) NumbPath(7)
//! 50..52  P_Key              52..54  QoSClass(12) SL(4)
//! 54      MTUSelector(2) MTU(6)      55  RateSelector(2) Rate(6)
//! 56      PacketLifeTimeSelector(2) PacketLifeTime(6)
//! 57      Preference         58..64  reserved
//! ```
//!
//! The view wraps one record (offset 0 = ServiceID).

use crate::wire::{be, Field, Result};

mod field {
    use super::Field;
    pub(super) const SERVICE_ID: Field = 0..8;
    pub(super) const DGID: Field = 8..24;
    pub(super) const SGID: Field = 24..40;
    pub(super) const DLID: Field = 40..42;
    pub(super) const SLID: Field = 42..44;
    pub(super) const HOP_FLOW_RAW: Field = 44..48;
    pub(super) const TCLASS: usize = 48;
    pub(super) const REVERSIBLE_NUMB_PATH: usize = 49;
    pub(super) const PKEY: Field = 50..52;
    pub(super) const QOS_CLASS_SL: Field = 52..54;
    pub(super) const MTU: usize = 54;
    pub(super) const RATE: usize = 55;
    pub(super) const PKT_LIFE: usize = 56;
    pub(super) const PREFERENCE: usize = 57;
    pub(super) const RESERVED: Field = 58..64;
}

/// Length of a PathRecord.
pub const LEN: usize = field::RESERVED.end;
const _: () = assert!(LEN == 64);

/// ComponentMask bits of PathRecord queries (IBA 15.2.5.16).
pub mod comp {
    /// ServiceID, high 8 bits.
    pub const SERVICE_ID_MSB: u64 = 1 << 0;
    /// ServiceID, low 56 bits.
    pub const SERVICE_ID_LSB: u64 = 1 << 1;
    /// DGID.
    pub const DGID: u64 = 1 << 2;
    /// SGID.
    pub const SGID: u64 = 1 << 3;
    /// DLID.
    pub const DLID: u64 = 1 << 4;
    /// SLID.
    pub const SLID: u64 = 1 << 5;
    /// RawTraffic.
    pub const RAW_TRAFFIC: u64 = 1 << 6;
    /// FlowLabel.
    pub const FLOW_LABEL: u64 = 1 << 8;
    /// HopLimit.
    pub const HOP_LIMIT: u64 = 1 << 9;
    /// TClass.
    pub const TCLASS: u64 = 1 << 10;
    /// Reversible.
    pub const REVERSIBLE: u64 = 1 << 11;
    /// NumbPath.
    pub const NUMB_PATH: u64 = 1 << 12;
    /// P_Key.
    pub const PKEY: u64 = 1 << 13;
    /// QoSClass.
    pub const QOS_CLASS: u64 = 1 << 14;
    /// SL.
    pub const SL: u64 = 1 << 15;
    /// MTUSelector.
    pub const MTU_SELECTOR: u64 = 1 << 16;
    /// MTU.
    pub const MTU: u64 = 1 << 17;
    /// RateSelector.
    pub const RATE_SELECTOR: u64 = 1 << 18;
    /// Rate.
    pub const RATE: u64 = 1 << 19;
    /// PacketLifeTimeSelector.
    pub const PKT_LIFE_SELECTOR: u64 = 1 << 20;
    /// PacketLifeTime.
    pub const PKT_LIFE: u64 = 1 << 21;
    /// Preference.
    pub const PREFERENCE: u64 = 1 << 22;
}

/// A view over one PathRecord.
#[derive(Debug, Clone)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

fn gid(b: &[u8], f: Field) -> [u8; 16] {
    let mut g = [0u8; 16];
    g.copy_from_slice(&b[f]);
    g
}

impl<T: AsRef<[u8]>> Packet<T> {
    crate::wire::view_constructors!(LEN, "the 64 bytes of a PathRecord");
    fn byte(&self, i: usize) -> u8 {
        self.buffer.as_ref()[i]
    }
    /// ServiceID.
    pub fn service_id(&self) -> u64 {
        be::u64(self.buffer.as_ref(), field::SERVICE_ID)
    }
    /// DGID.
    pub fn dgid(&self) -> [u8; 16] {
        gid(self.buffer.as_ref(), field::DGID)
    }
    /// SGID.
    pub fn sgid(&self) -> [u8; 16] {
        gid(self.buffer.as_ref(), field::SGID)
    }
    /// DLID.
    pub fn dlid(&self) -> u16 {
        be::u16(self.buffer.as_ref(), field::DLID)
    }
    /// SLID.
    pub fn slid(&self) -> u16 {
        be::u16(self.buffer.as_ref(), field::SLID)
    }
    /// RawTraffic.
    pub fn raw_traffic(&self) -> bool {
        be::u32(self.buffer.as_ref(), field::HOP_FLOW_RAW) & 0x8000_0000 != 0
    }
    /// FlowLabel (20 bits).
    pub fn flow_label(&self) -> u32 {
        (be::u32(self.buffer.as_ref(), field::HOP_FLOW_RAW) >> 8) & 0xf_ffff
    }
    /// HopLimit.
    pub fn hop_limit(&self) -> u8 {
        self.byte(field::HOP_FLOW_RAW.end - 1)
    }
    /// TClass.
    pub fn tclass(&self) -> u8 {
        self.byte(field::TCLASS)
    }
    /// Reversible.
    pub fn reversible(&self) -> bool {
        self.byte(field::REVERSIBLE_NUMB_PATH) & 0x80 != 0
    }
    /// NumbPath (7 bits).
    pub fn numb_path(&self) -> u8 {
        self.byte(field::REVERSIBLE_NUMB_PATH) & 0x7f
    }
    /// P_Key.
    pub fn pkey(&self) -> u16 {
        be::u16(self.buffer.as_ref(), field::PKEY)
    }
    /// QoSClass (12 bits).
    pub fn qos_class(&self) -> u16 {
        be::u16(self.buffer.as_ref(), field::QOS_CLASS_SL) >> 4
    }
    /// SL (4 bits).
    pub fn sl(&self) -> u8 {
        self.byte(field::QOS_CLASS_SL.end - 1) & 0x0f
    }
    /// MTUSelector (2 bits).
    pub fn mtu_selector(&self) -> u8 {
        self.byte(field::MTU) >> 6
    }
    /// MTU (6 bits; 1 = 256 … 5 = 4096).
    pub fn mtu(&self) -> u8 {
        self.byte(field::MTU) & 0x3f
    }
    /// RateSelector (2 bits).
    pub fn rate_selector(&self) -> u8 {
        self.byte(field::RATE) >> 6
    }
    /// Rate (6 bits).
    pub fn rate(&self) -> u8 {
        self.byte(field::RATE) & 0x3f
    }
    /// PacketLifeTimeSelector (2 bits).
    pub fn pkt_life_selector(&self) -> u8 {
        self.byte(field::PKT_LIFE) >> 6
    }
    /// PacketLifeTime (6 bits).
    pub fn pkt_life(&self) -> u8 {
        self.byte(field::PKT_LIFE) & 0x3f
    }
    /// Preference.
    pub fn preference(&self) -> u8 {
        self.byte(field::PREFERENCE)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Set ServiceID.
    pub fn set_service_id(&mut self, v: u64) {
        be::set_u64(self.buffer.as_mut(), field::SERVICE_ID, v);
    }
    /// Set DGID.
    pub fn set_dgid(&mut self, v: &[u8; 16]) {
        self.buffer.as_mut()[field::DGID].copy_from_slice(v);
    }
    /// Set SGID.
    pub fn set_sgid(&mut self, v: &[u8; 16]) {
        self.buffer.as_mut()[field::SGID].copy_from_slice(v);
    }
    /// Set DLID.
    pub fn set_dlid(&mut self, v: u16) {
        be::set_u16(self.buffer.as_mut(), field::DLID, v);
    }
    /// Set SLID.
    pub fn set_slid(&mut self, v: u16) {
        be::set_u16(self.buffer.as_mut(), field::SLID, v);
    }
    /// Set RawTraffic, FlowLabel (low 20 bits) and HopLimit; the 3 reserved bits become 0.
    pub fn set_hop_flow_raw(&mut self, raw_traffic: bool, flow_label: u32, hop_limit: u8) {
        let v =
            (u32::from(raw_traffic) << 31) | ((flow_label & 0xf_ffff) << 8) | u32::from(hop_limit);
        be::set_u32(self.buffer.as_mut(), field::HOP_FLOW_RAW, v);
    }
    /// Set TClass.
    pub fn set_tclass(&mut self, v: u8) {
        self.buffer.as_mut()[field::TCLASS] = v;
    }
    /// Set Reversible and NumbPath (low 7 bits).
    pub fn set_reversible_numb_path(&mut self, reversible: bool, numb_path: u8) {
        self.buffer.as_mut()[field::REVERSIBLE_NUMB_PATH] =
            (u8::from(reversible) << 7) | (numb_path & 0x7f);
    }
    /// Set P_Key.
    pub fn set_pkey(&mut self, v: u16) {
        be::set_u16(self.buffer.as_mut(), field::PKEY, v);
    }
    /// Set QoSClass (low 12 bits) and SL (low 4 bits).
    pub fn set_qos_class_sl(&mut self, qos_class: u16, sl: u8) {
        be::set_u16(
            self.buffer.as_mut(),
            field::QOS_CLASS_SL,
            (qos_class << 4) | u16::from(sl & 0x0f),
        );
    }
    /// Set MTUSelector (2 bits) and MTU (6 bits).
    pub fn set_mtu(&mut self, selector: u8, mtu: u8) {
        self.buffer.as_mut()[field::MTU] = (selector << 6) | (mtu & 0x3f);
    }
    /// Set RateSelector (2 bits) and Rate (6 bits).
    pub fn set_rate(&mut self, selector: u8, rate: u8) {
        self.buffer.as_mut()[field::RATE] = (selector << 6) | (rate & 0x3f);
    }
    /// Set PacketLifeTimeSelector (2 bits) and PacketLifeTime (6 bits).
    pub fn set_pkt_life(&mut self, selector: u8, life: u8) {
        self.buffer.as_mut()[field::PKT_LIFE] = (selector << 6) | (life & 0x3f);
    }
    /// Set Preference.
    pub fn set_preference(&mut self, v: u8) {
        self.buffer.as_mut()[field::PREFERENCE] = v;
    }
    /// Zero the reserved bytes.
    pub fn clear_reserved(&mut self) {
        self.buffer.as_mut()[field::RESERVED].fill(0);
    }
}

/// PathRecord as a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Repr {
    /// ServiceID.
    pub service_id: u64,
    /// DGID.
    pub dgid: [u8; 16],
    /// SGID.
    pub sgid: [u8; 16],
    /// DLID.
    pub dlid: u16,
    /// SLID.
    pub slid: u16,
    /// RawTraffic.
    pub raw_traffic: bool,
    /// FlowLabel (20 bits).
    pub flow_label: u32,
    /// HopLimit.
    pub hop_limit: u8,
    /// TClass.
    pub tclass: u8,
    /// Reversible.
    pub reversible: bool,
    /// NumbPath (7 bits).
    pub numb_path: u8,
    /// P_Key.
    pub pkey: u16,
    /// QoSClass (12 bits).
    pub qos_class: u16,
    /// SL (4 bits).
    pub sl: u8,
    /// MTUSelector (2 bits).
    pub mtu_selector: u8,
    /// MTU code (6 bits).
    pub mtu: u8,
    /// RateSelector (2 bits).
    pub rate_selector: u8,
    /// Rate code (6 bits).
    pub rate: u8,
    /// PacketLifeTimeSelector (2 bits).
    pub pkt_life_selector: u8,
    /// PacketLifeTime (6 bits).
    pub pkt_life: u8,
    /// Preference.
    pub preference: u8,
}

impl Repr {
    /// Parse a checked PathRecord.
    ///
    /// # Errors
    ///
    /// [`Error::Truncated`](crate::wire::Error::Truncated) if the buffer is shorter than 64 bytes.
    pub fn parse<T: AsRef<[u8]>>(p: &Packet<T>) -> Result<Repr> {
        p.check_len()?;
        Ok(Repr {
            service_id: p.service_id(),
            dgid: p.dgid(),
            sgid: p.sgid(),
            dlid: p.dlid(),
            slid: p.slid(),
            raw_traffic: p.raw_traffic(),
            flow_label: p.flow_label(),
            hop_limit: p.hop_limit(),
            tclass: p.tclass(),
            reversible: p.reversible(),
            numb_path: p.numb_path(),
            pkey: p.pkey(),
            qos_class: p.qos_class(),
            sl: p.sl(),
            mtu_selector: p.mtu_selector(),
            mtu: p.mtu(),
            rate_selector: p.rate_selector(),
            rate: p.rate(),
            pkt_life_selector: p.pkt_life_selector(),
            pkt_life: p.pkt_life(),
            preference: p.preference(),
        })
    }
    /// Bytes `emit` writes.
    pub const fn buffer_len(&self) -> usize {
        LEN
    }
    /// Write all 64 bytes (reserved as zero, each field masked to its width).
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut Packet<T>) {
        p.set_service_id(self.service_id);
        p.set_dgid(&self.dgid);
        p.set_sgid(&self.sgid);
        p.set_dlid(self.dlid);
        p.set_slid(self.slid);
        p.set_hop_flow_raw(self.raw_traffic, self.flow_label, self.hop_limit);
        p.set_tclass(self.tclass);
        p.set_reversible_numb_path(self.reversible, self.numb_path);
        p.set_pkey(self.pkey);
        p.set_qos_class_sl(self.qos_class, self.sl);
        p.set_mtu(self.mtu_selector, self.mtu);
        p.set_rate(self.rate_selector, self.rate);
        p.set_pkt_life(self.pkt_life_selector, self.pkt_life);
        p.set_preference(self.preference);
        p.clear_reserved();
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

    /// LID 0x12 → LID 0x34, reversible, 1 path, P_Key 0xffff, SL 3, MTU = 2048
    /// (4, selector exactly 2), rate 40 Gb/s (7, exactly), packet life 18
    /// (exactly), hop limit 0, flow label 0x12345, TClass 0.
    fn fixture() -> [u8; 64] {
        let mut b = [0u8; 64];
        b[8..24].copy_from_slice(&DGID);
        b[24..40].copy_from_slice(&SGID);
        b[40..64].copy_from_slice(&[
            0x00, 0x34, 0x00, 0x12, // DLID, SLID
            0x01, 0x23, 0x45, 0x00, // raw 0, flow label 0x12345, hop limit 0
            0x00, 0x81, 0xff, 0xff, // TClass 0, reversible + 1 path, P_Key
            0x00, 0x03, 0x84, 0x87, // QoS 0 / SL 3, MTU sel 2 / 4, rate sel 2 / 7
            0x92, 0x00, 0, 0, 0, 0, 0, 0, // life sel 2 / 18, preference 0, reserved
        ]);
        b
    }

    fn repr() -> Repr {
        Repr {
            dgid: DGID,
            sgid: SGID,
            dlid: 0x34,
            slid: 0x12,
            flow_label: 0x12345,
            reversible: true,
            numb_path: 1,
            pkey: 0xffff,
            sl: 3,
            mtu_selector: 2,
            mtu: 4,
            rate_selector: 2,
            rate: 7,
            pkt_life_selector: 2,
            pkt_life: 18,
            ..Repr::default()
        }
    }

    #[test]
    fn test_deconstruct() {
        let b = fixture();
        let p = Packet::new_checked(&b[..]).unwrap();
        assert_eq!((p.dgid(), p.sgid()), (DGID, SGID));
        assert_eq!((p.dlid(), p.slid()), (0x34, 0x12));
        assert_eq!(
            (p.flow_label(), p.hop_limit(), p.raw_traffic()),
            (0x12345, 0, false)
        );
        assert!(p.reversible());
        assert_eq!(
            (p.numb_path(), p.pkey(), p.sl(), p.qos_class()),
            (1, 0xffff, 3, 0)
        );
        assert_eq!(
            (p.mtu_selector(), p.mtu(), p.rate_selector(), p.rate()),
            (2, 4, 2, 7)
        );
        assert_eq!((p.pkt_life_selector(), p.pkt_life()), (2, 18));
    }

    #[test]
    fn test_emit_parse_over_garbage() {
        let mut b = [0xa5u8; 64];
        repr().emit(&mut Packet::new_unchecked(&mut b[..]));
        assert_eq!(b, fixture());
        assert_eq!(
            Repr::parse(&Packet::new_checked(&b[..]).unwrap()).unwrap(),
            repr()
        );
    }

    #[test]
    fn test_truncated() {
        let b = fixture();
        assert_eq!(Packet::new_checked(&b[..63]).unwrap_err(), Error::Truncated);
        assert_eq!(
            Repr::parse(&Packet::new_unchecked(&b[..8])).unwrap_err(),
            Error::Truncated
        );
    }

    proptest! {
        #[test]
        fn roundtrip(bytes in proptest::collection::vec(any::<u8>(), 64)) {
            let r = Repr::parse(&Packet::new_checked(&bytes[..]).unwrap()).unwrap();
            let mut out = [0xa5u8; 64];
            r.emit(&mut Packet::new_unchecked(&mut out[..]));
            prop_assert_eq!(Repr::parse(&Packet::new_checked(&out[..]).unwrap()).unwrap(), r);
            // Only the reserved bits (44: 0x70, 58..64) may differ.
            prop_assert_eq!(&out[..44], &bytes[..44]);
            prop_assert_eq!(out[44], bytes[44] & 0x8f);
            prop_assert_eq!(&out[45..58], &bytes[45..58]);
            prop_assert_eq!(&out[58..], &[0u8; 6]);
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..80)) {
            if let Ok(p) = Packet::new_checked(&bytes[..]) {
                let _ = Repr::parse(&p);
            }
        }
    }
}
