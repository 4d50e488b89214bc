//! PortInfoRecord (IBA 15.2.5.3): EndportLID, PortNum, Options, PortInfo;
//! 68 bytes of fields, 72 on the wire (AttributeOffset 9).
//!
//! The view wraps one record (offset 0 = EndportLID).

use super::comp::Component;
use crate::wire::smp::port_info;
use crate::wire::{be, Field, Result};

mod field {
    use super::Field;
    pub(super) const ENDPORT_LID: Field = 0..2;
    pub(super) const PORT_NUM: usize = 2;
    pub(super) const OPTIONS: usize = 3;
    pub(super) const PORT_INFO: Field = 4..68;
    pub(super) const PAD: Field = 68..72;
}

/// Bytes of PortInfoRecord fields.
pub const LEN: usize = field::PORT_INFO.end;
/// Bytes of one PortInfoRecord in a response (8-byte aligned).
pub const RECORD_LEN: usize = field::PAD.end;
const _: () = assert!(LEN == 68 && RECORD_LEN == 72);
const _: () = assert!(field::PORT_INFO.end - field::PORT_INFO.start == port_info::LEN);

/// ComponentMask bit of EndportLID.
pub const COMP_LID: u64 = 1 << 0;
/// ComponentMask bit of PortNum.
pub const COMP_PORT_NUM: u64 = 1 << 1;
/// ComponentMask bit of PortInfo:CapabilityMask.
pub const COMP_CAPABILITY_MASK: u64 = 1 << 7;

/// The ComponentMask layout (IBA table 211), by bit: the record keys, then
/// PortInfo's fields in order. Bits from 32 on (VLStallCount onwards) are
/// not matched.
pub const COMPONENTS: [Component; 32] = [
    Component::bytes(0, 2),    // EndportLID
    Component::bytes(2, 1),    // PortNum
    Component::bytes(3, 1),    // Options
    Component::bytes(4, 8),    // M_Key
    Component::bytes(12, 8),   // GidPrefix
    Component::bytes(20, 2),   // LID
    Component::bytes(22, 2),   // MasterSMLID
    Component::bytes(24, 4),   // CapabilityMask
    Component::bytes(28, 2),   // DiagCode
    Component::bytes(30, 2),   // M_KeyLeasePeriod
    Component::bytes(32, 1),   // LocalPortNum
    Component::bytes(33, 1),   // LinkWidthEnabled
    Component::bytes(34, 1),   // LinkWidthSupported
    Component::bytes(35, 1),   // LinkWidthActive
    Component::bits(36, 0xf0), // LinkSpeedSupported
    Component::bits(36, 0x0f), // PortState
    Component::bits(37, 0xf0), // PortPhysicalState
    Component::bits(37, 0x0f), // LinkDownDefaultState
    Component::bits(38, 0xc0), // M_KeyProtectBits
    Component::NONE,           // reserved
    Component::bits(38, 0x07), // LMC
    Component::bits(39, 0xf0), // LinkSpeedActive
    Component::bits(39, 0x0f), // LinkSpeedEnabled
    Component::bits(40, 0xf0), // NeighborMTU
    Component::bits(40, 0x0f), // MasterSMSL
    Component::bits(41, 0xf0), // VLCap
    Component::bits(41, 0x0f), // InitType
    Component::bytes(42, 1),   // VLHighLimit
    Component::bytes(43, 1),   // VLArbitrationHighCap
    Component::bytes(44, 1),   // VLArbitrationLowCap
    Component::bits(45, 0xf0), // InitTypeReply
    Component::bits(45, 0x0f), // MTUCap
];

/// A view over one PortInfoRecord.
#[derive(Debug, Clone)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    crate::wire::view_constructors!(LEN, "the 68 bytes of fields (the pad may be absent)");
    /// EndportLID: the LID of the port, or of a switch's port 0.
    pub fn endport_lid(&self) -> u16 {
        be::u16(self.buffer.as_ref(), field::ENDPORT_LID)
    }
    /// PortNum.
    pub fn port_num(&self) -> u8 {
        self.buffer.as_ref()[field::PORT_NUM]
    }
    /// Options.
    pub fn options(&self) -> u8 {
        self.buffer.as_ref()[field::OPTIONS]
    }
    /// The PortInfo inside the record.
    pub fn port_info(&self) -> port_info::Packet<&[u8]> {
        port_info::Packet::new_unchecked(&self.buffer.as_ref()[field::PORT_INFO])
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Set EndportLID.
    pub fn set_endport_lid(&mut self, v: u16) {
        be::set_u16(self.buffer.as_mut(), field::ENDPORT_LID, v);
    }
    /// Set PortNum.
    pub fn set_port_num(&mut self, v: u8) {
        self.buffer.as_mut()[field::PORT_NUM] = v;
    }
    /// Set Options.
    pub fn set_options(&mut self, v: u8) {
        self.buffer.as_mut()[field::OPTIONS] = v;
    }
    /// The PortInfo bytes inside the record, mutably (raw: the SA copies
    /// what the SMA answered).
    pub fn port_info_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::PORT_INFO]
    }
}

/// PortInfoRecord as a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// EndportLID.
    pub endport_lid: u16,
    /// PortNum.
    pub port_num: u8,
    /// Options.
    pub options: u8,
    /// PortInfo.
    pub port_info: port_info::Repr,
}

impl Repr {
    /// Parse a checked PortInfoRecord.
    ///
    /// # Errors
    ///
    /// [`Error::Truncated`](crate::wire::Error::Truncated) if the buffer is shorter than 68 bytes.
    pub fn parse<T: AsRef<[u8]>>(p: &Packet<T>) -> Result<Repr> {
        p.check_len()?;
        Ok(Repr {
            endport_lid: p.endport_lid(),
            port_num: p.port_num(),
            options: p.options(),
            port_info: port_info::Repr::parse(&p.port_info())?,
        })
    }
    /// Bytes `emit` writes: the fields, not the pad.
    pub const fn buffer_len(&self) -> usize {
        LEN
    }
    /// Write the 68 bytes of fields.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut Packet<T>) {
        p.set_endport_lid(self.endport_lid);
        p.set_port_num(self.port_num);
        p.set_options(self.options);
        self.port_info
            .emit(&mut port_info::Packet::new_unchecked(p.port_info_mut()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::sa::comp;
    use crate::wire::Error;
    use proptest::prelude::*;

    /// LID 0x0005, port 1, options 0, PortInfo: LID 5, SM LID 1, state Active (4),
    /// physical state LinkUp (5), width 4x active, MTUCap 4096 (5), the rest zero.
    fn fixture() -> [u8; 68] {
        let mut b = [0u8; 68];
        b[..4].copy_from_slice(&[0x00, 0x05, 0x01, 0x00]);
        b[4 + 16..4 + 20].copy_from_slice(&[0x00, 0x05, 0x00, 0x01]);
        b[4 + 31] = 0x02; // LinkWidthActive 4x
        b[4 + 32] = 0x04; // PortState Active
        b[4 + 33] = 0x50; // PortPhysicalState LinkUp
        b[4 + 41] = 0x05; // MTUCap 4096
        b
    }

    #[test]
    fn test_deconstruct() {
        let b = fixture();
        let p = Packet::new_checked(&b[..]).unwrap();
        assert_eq!((p.endport_lid(), p.port_num(), p.options()), (5, 1, 0));
        let pi = p.port_info();
        assert_eq!((pi.lid(), pi.master_sm_lid()), (5, 1));
        assert_eq!((pi.port_state_raw(), pi.phys_state_raw()), (4, 5));
        assert_eq!((pi.link_width_active(), pi.mtu_cap()), (2, 5));
    }

    #[test]
    fn test_emit_parse_over_garbage() {
        let b = fixture();
        let r = Repr::parse(&Packet::new_checked(&b[..]).unwrap()).unwrap();
        let mut out = [0xa5u8; 68];
        r.emit(&mut Packet::new_unchecked(&mut out[..]));
        assert_eq!(out, b);
    }

    #[test]
    fn test_truncated() {
        let b = fixture();
        assert_eq!(Packet::new_checked(&b[..67]).unwrap_err(), Error::Truncated);
    }

    #[test]
    fn components_name_the_fields() {
        let a = fixture();
        let mut b = a;
        b[4 + 32] = 0x01; // PortState Down, LinkSpeedSupported unchanged
        assert!(!comp::matches(&COMPONENTS, 1 << 15, &a, &b));
        assert!(comp::matches(&COMPONENTS, 1 << 14, &a, &b));
        assert!(comp::matches(&COMPONENTS, COMP_LID | COMP_PORT_NUM, &a, &b));
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..80)) {
            if let Ok(p) = Packet::new_checked(&bytes[..]) {
                let _ = Repr::parse(&p);
            }
        }
    }
}
