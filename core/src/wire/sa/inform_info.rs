//! InformInfo (IBA 13.4.8.3): a subscription to traps; 36 bytes. An SA
//! subscriber sends it in SubnAdmSet(InformInfo).
//!
//! ```text
//!  0..16 GID     16..18 LIDRangeBegin   18..20 LIDRangeEnd   20..22 reserved
//! 22 IsGeneric   23 Subscribe   24..26 Type   26..28 TrapNumber / DeviceID
//! 28..32 QPN(24) reserved(3) RespTimeValue(5)   32 reserved
//! 33..36 ProducerType / VendorID (24)
//! ```

use crate::wire::{be, Field, Result};

mod field {
    use super::Field;
    pub(super) const GID: Field = 0..16;
    pub(super) const LID_BEGIN: Field = 16..18;
    pub(super) const LID_END: Field = 18..20;
    pub(super) const RESERVED: Field = 20..22;
    pub(super) const IS_GENERIC: usize = 22;
    pub(super) const SUBSCRIBE: usize = 23;
    pub(super) const TYPE: Field = 24..26;
    pub(super) const TRAP_NUM: Field = 26..28;
    pub(super) const QPN_RESP: Field = 28..32;
    pub(super) const PRODUCER: Field = 32..36;
}

/// Bytes of InformInfo.
pub const LEN: usize = field::PRODUCER.end;
/// Bytes of one InformInfo in an SA message (8-byte aligned).
pub const RECORD_LEN: usize = 40;
/// LIDRangeBegin meaning "every LID".
pub const ALL_LIDS: u16 = 0xffff;
/// Type, TrapNumber or DeviceID meaning "any".
pub const ANY: u16 = 0xffff;
/// ProducerType or VendorID meaning "any".
pub const ANY_PRODUCER: u32 = 0x00ff_ffff;
const _: () = assert!(LEN == 36);

/// A view over InformInfo.
#[derive(Debug, Clone)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    crate::wire::view_constructors!(LEN, "the 36 bytes of InformInfo");
    /// GID of the trap issuers of interest (zero: use the LID range).
    pub fn gid(&self) -> [u8; 16] {
        let mut g = [0u8; 16];
        g.copy_from_slice(&self.buffer.as_ref()[field::GID]);
        g
    }
    /// LIDRangeBegin ([`ALL_LIDS`]: every issuer).
    pub fn lid_range_begin(&self) -> u16 {
        be::u16(self.buffer.as_ref(), field::LID_BEGIN)
    }
    /// LIDRangeEnd.
    pub fn lid_range_end(&self) -> u16 {
        be::u16(self.buffer.as_ref(), field::LID_END)
    }
    /// IsGeneric.
    pub fn is_generic(&self) -> bool {
        self.buffer.as_ref()[field::IS_GENERIC] != 0
    }
    /// Subscribe (1) or unsubscribe (0).
    pub fn subscribe(&self) -> bool {
        self.buffer.as_ref()[field::SUBSCRIBE] != 0
    }
    /// Type ([`ANY`]: all).
    pub fn trap_type(&self) -> u16 {
        be::u16(self.buffer.as_ref(), field::TYPE)
    }
    /// TrapNumber (generic) or DeviceID (vendor).
    pub fn trap_number(&self) -> u16 {
        be::u16(self.buffer.as_ref(), field::TRAP_NUM)
    }
    /// The QPN Reports go to (24 bits).
    pub fn qpn(&self) -> u32 {
        be::u32(self.buffer.as_ref(), field::QPN_RESP) >> 8
    }
    /// RespTimeValue (5 bits).
    pub fn resp_time_value(&self) -> u8 {
        self.buffer.as_ref()[field::QPN_RESP.end - 1] & 0x1f
    }
    /// ProducerType (generic) or VendorID (24 bits).
    pub fn producer(&self) -> u32 {
        be::u32(self.buffer.as_ref(), field::PRODUCER) & 0x00ff_ffff
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Set GID.
    pub fn set_gid(&mut self, v: &[u8; 16]) {
        self.buffer.as_mut()[field::GID].copy_from_slice(v);
    }
    /// Set the LID range and zero the reserved bytes after it.
    pub fn set_lid_range(&mut self, begin: u16, end: u16) {
        let b = self.buffer.as_mut();
        be::set_u16(b, field::LID_BEGIN, begin);
        be::set_u16(b, field::LID_END, end);
        b[field::RESERVED].fill(0);
    }
    /// Set IsGeneric and Subscribe.
    pub fn set_flags(&mut self, is_generic: bool, subscribe: bool) {
        let b = self.buffer.as_mut();
        b[field::IS_GENERIC] = u8::from(is_generic);
        b[field::SUBSCRIBE] = u8::from(subscribe);
    }
    /// Set Type.
    pub fn set_trap_type(&mut self, v: u16) {
        be::set_u16(self.buffer.as_mut(), field::TYPE, v);
    }
    /// Set TrapNumber / DeviceID.
    pub fn set_trap_number(&mut self, v: u16) {
        be::set_u16(self.buffer.as_mut(), field::TRAP_NUM, v);
    }
    /// Set QPN (24 bits) and RespTimeValue (5 bits).
    pub fn set_qpn_resp_time(&mut self, qpn: u32, resp_time: u8) {
        let v = ((qpn & 0x00ff_ffff) << 8) | u32::from(resp_time & 0x1f);
        be::set_u32(self.buffer.as_mut(), field::QPN_RESP, v);
    }
    /// Set ProducerType / VendorID (24 bits; the reserved byte before it is zeroed).
    pub fn set_producer(&mut self, v: u32) {
        be::set_u32(self.buffer.as_mut(), field::PRODUCER, v & 0x00ff_ffff);
    }
}

/// InformInfo as a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Repr {
    /// GID.
    pub gid: [u8; 16],
    /// LIDRangeBegin.
    pub lid_range_begin: u16,
    /// LIDRangeEnd.
    pub lid_range_end: u16,
    /// IsGeneric.
    pub is_generic: bool,
    /// Subscribe.
    pub subscribe: bool,
    /// Type.
    pub trap_type: u16,
    /// TrapNumber / DeviceID.
    pub trap_number: u16,
    /// QPN.
    pub qpn: u32,
    /// RespTimeValue.
    pub resp_time_value: u8,
    /// ProducerType / VendorID.
    pub producer: u32,
}

impl Repr {
    /// Parse checked InformInfo.
    ///
    /// # Errors
    ///
    /// [`Error::Truncated`](crate::wire::Error::Truncated) if the buffer is shorter than 36 bytes.
    pub fn parse<T: AsRef<[u8]>>(p: &Packet<T>) -> Result<Repr> {
        p.check_len()?;
        Ok(Repr {
            gid: p.gid(),
            lid_range_begin: p.lid_range_begin(),
            lid_range_end: p.lid_range_end(),
            is_generic: p.is_generic(),
            subscribe: p.subscribe(),
            trap_type: p.trap_type(),
            trap_number: p.trap_number(),
            qpn: p.qpn(),
            resp_time_value: p.resp_time_value(),
            producer: p.producer(),
        })
    }
    /// Bytes `emit` writes.
    pub const fn buffer_len(&self) -> usize {
        LEN
    }
    /// Write all 36 bytes (reserved as zero).
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut Packet<T>) {
        p.set_gid(&self.gid);
        p.set_lid_range(self.lid_range_begin, self.lid_range_end);
        p.set_flags(self.is_generic, self.subscribe);
        p.set_trap_type(self.trap_type);
        p.set_trap_number(self.trap_number);
        p.set_qpn_resp_time(self.qpn, self.resp_time_value);
        p.set_producer(self.producer);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::Error;
    use proptest::prelude::*;

    /// Subscribe to generic trap 64 (GID now in service) from every LID,
    /// any type, any producer, Reports to QP 1.
    fn fixture() -> [u8; 36] {
        let mut b = [0u8; 36];
        b[16..36].copy_from_slice(&[
            0xff, 0xff, 0x00, 0x00, 0, 0, 0x01, 0x01, // LID range all, generic, subscribe
            0xff, 0xff, 0x00, 0x40, // any type, trap 64
            0x00, 0x00, 0x01, 0x00, // QPN 1, resp time 0
            0x00, 0xff, 0xff, 0xff, // any producer
        ]);
        b
    }

    fn repr() -> Repr {
        Repr {
            lid_range_begin: ALL_LIDS,
            is_generic: true,
            subscribe: true,
            trap_type: ANY,
            trap_number: 64,
            qpn: 1,
            producer: ANY_PRODUCER,
            ..Repr::default()
        }
    }

    #[test]
    fn test_deconstruct() {
        let b = fixture();
        let p = Packet::new_checked(&b[..]).unwrap();
        assert_eq!(
            (p.lid_range_begin(), p.is_generic(), p.subscribe()),
            (ALL_LIDS, true, true)
        );
        assert_eq!((p.trap_type(), p.trap_number(), p.qpn()), (ANY, 64, 1));
        assert_eq!(p.producer(), ANY_PRODUCER);
    }

    #[test]
    fn test_emit_parse_over_garbage() {
        let mut b = [0xa5u8; 36];
        repr().emit(&mut Packet::new_unchecked(&mut b[..]));
        assert_eq!(b, fixture());
        assert_eq!(
            Repr::parse(&Packet::new_checked(&b[..]).unwrap()).unwrap(),
            repr()
        );
    }

    #[test]
    fn test_truncated() {
        assert_eq!(
            Packet::new_checked(&fixture()[..35]).unwrap_err(),
            Error::Truncated
        );
    }

    proptest! {
        #[test]
        fn roundtrip(bytes in proptest::collection::vec(any::<u8>(), 36)) {
            let r = Repr::parse(&Packet::new_checked(&bytes[..]).unwrap()).unwrap();
            let mut out = [0xa5u8; 36];
            r.emit(&mut Packet::new_unchecked(&mut out[..]));
            prop_assert_eq!(Repr::parse(&Packet::new_checked(&out[..]).unwrap()).unwrap(), r);
        }
    }
}
