//! NodeRecord (IBA 15.2.5.2): LID, reserved, NodeInfo, NodeDescription;
//! 108 bytes of fields, 112 on the wire (AttributeOffset 14).
//!
//! The view wraps one record (offset 0 = LID).

use super::comp::Component;
use crate::wire::smp::{node_desc, node_info};
use crate::wire::{be, Field, Result};

mod field {
    use super::Field;
    pub(super) const LID: Field = 0..2;
    pub(super) const RESERVED: Field = 2..4;
    pub(super) const NODE_INFO: Field = 4..44;
    pub(super) const NODE_DESC: Field = 44..108;
    pub(super) const PAD: Field = 108..112;
}

/// Bytes of NodeRecord fields.
pub const LEN: usize = field::NODE_DESC.end;
/// Bytes of one NodeRecord in a GetTable response (8-byte aligned).
pub const RECORD_LEN: usize = field::PAD.end;
/// ComponentMask bit of the LID (the record's key).
pub const COMP_LID: u64 = 1 << 0;
const _: () = assert!(LEN == 108 && RECORD_LEN == 112);

/// The ComponentMask layout (IBA table 210), by bit: LID, reserved, then
/// NodeInfo's fields in order, then NodeDescription.
pub const COMPONENTS: [Component; 15] = [
    Component::bytes(0, 2),   // LID
    Component::NONE,          // reserved
    Component::bytes(4, 1),   // BaseVersion
    Component::bytes(5, 1),   // ClassVersion
    Component::bytes(6, 1),   // NodeType
    Component::bytes(7, 1),   // NumPorts
    Component::bytes(8, 8),   // SystemImageGUID
    Component::bytes(16, 8),  // NodeGUID
    Component::bytes(24, 8),  // PortGUID
    Component::bytes(32, 2),  // PartitionCap
    Component::bytes(34, 2),  // DeviceID
    Component::bytes(36, 4),  // Revision
    Component::bytes(40, 1),  // LocalPortNum
    Component::bytes(41, 3),  // VendorID
    Component::bytes(44, 64), // NodeDescription
];
const _: () = assert!(field::NODE_INFO.end - field::NODE_INFO.start == node_info::LEN);
const _: () = assert!(field::NODE_DESC.end - field::NODE_DESC.start == node_desc::LEN);

/// A view over one NodeRecord.
#[derive(Debug, Clone)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    crate::wire::view_constructors!(LEN, "the 108 bytes of fields (the pad may be absent)");
    /// LID.
    pub fn lid(&self) -> u16 {
        be::u16(self.buffer.as_ref(), field::LID)
    }
    /// The NodeInfo inside the record.
    pub fn node_info(&self) -> node_info::Packet<&[u8]> {
        node_info::Packet::new_unchecked(&self.buffer.as_ref()[field::NODE_INFO])
    }
    /// The NodeDescription inside the record.
    pub fn node_desc(&self) -> node_desc::Packet<&[u8]> {
        node_desc::Packet::new_unchecked(&self.buffer.as_ref()[field::NODE_DESC])
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Set LID and zero the reserved bytes after it.
    pub fn set_lid(&mut self, v: u16) {
        let b = self.buffer.as_mut();
        be::set_u16(b, field::LID, v);
        b[field::RESERVED].fill(0);
    }
    /// The NodeInfo inside the record, mutably.
    pub fn node_info_mut(&mut self) -> node_info::Packet<&mut [u8]> {
        node_info::Packet::new_unchecked(&mut self.buffer.as_mut()[field::NODE_INFO])
    }
    /// The NodeDescription inside the record, mutably.
    pub fn node_desc_mut(&mut self) -> node_desc::Packet<&mut [u8]> {
        node_desc::Packet::new_unchecked(&mut self.buffer.as_mut()[field::NODE_DESC])
    }
}

/// NodeRecord as a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// LID.
    pub lid: u16,
    /// NodeInfo.
    pub node_info: node_info::Repr,
    /// NodeDescription.
    pub node_desc: node_desc::Repr,
}

impl Repr {
    /// Parse a checked NodeRecord.
    ///
    /// # Errors
    ///
    /// [`Error::Truncated`](crate::wire::Error::Truncated) if the buffer is shorter than 108 bytes.
    pub fn parse<T: AsRef<[u8]>>(p: &Packet<T>) -> Result<Repr> {
        p.check_len()?;
        Ok(Repr {
            lid: p.lid(),
            node_info: node_info::Repr::parse(&p.node_info())?,
            node_desc: node_desc::Repr::parse(&p.node_desc())?,
        })
    }
    /// Bytes `emit` writes: the fields, not the pad.
    pub const fn buffer_len(&self) -> usize {
        LEN
    }
    /// Write the 108 bytes of fields (reserved as zero).
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut Packet<T>) {
        p.set_lid(self.lid);
        self.node_info.emit(&mut p.node_info_mut());
        self.node_desc.emit(&mut p.node_desc_mut());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::smp::node_info::tests::{ca_repr, CA_NODE_INFO};
    use crate::wire::Error;
    use proptest::prelude::*;

    fn fixture() -> [u8; 108] {
        let mut b = [0u8; 108];
        b[..4].copy_from_slice(&[0x00, 0x12, 0x00, 0x00]); // LID 0x12, reserved
        b[4..44].copy_from_slice(&CA_NODE_INFO);
        b[44..56].copy_from_slice(b"node1 HCA-1\0");
        b
    }

    fn repr() -> Repr {
        Repr {
            lid: 0x12,
            node_info: ca_repr(),
            node_desc: node_desc::Repr::from_text(b"node1 HCA-1"),
        }
    }

    #[test]
    fn test_deconstruct() {
        let b = fixture();
        let p = Packet::new_checked(&b[..]).unwrap();
        assert_eq!(p.lid(), 0x12);
        assert_eq!(p.node_info().node_guid(), 0x0002_c903_0000_1234);
        assert_eq!(p.node_desc().text(), b"node1 HCA-1");
    }

    #[test]
    fn test_emit_parse_over_garbage() {
        let mut b = [0xa5u8; 108];
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
        assert_eq!(
            Packet::new_checked(&b[..107]).unwrap_err(),
            Error::Truncated
        );
        assert_eq!(
            Repr::parse(&Packet::new_unchecked(&b[..50])).unwrap_err(),
            Error::Truncated
        );
    }

    proptest! {
        #[test]
        fn roundtrip(bytes in proptest::collection::vec(any::<u8>(), 108)) {
            let r = Repr::parse(&Packet::new_checked(&bytes[..]).unwrap()).unwrap();
            let mut out = [0xa5u8; 108];
            r.emit(&mut Packet::new_unchecked(&mut out[..]));
            prop_assert_eq!(Repr::parse(&Packet::new_checked(&out[..]).unwrap()).unwrap(), r);
            prop_assert_eq!(&out[4..], &bytes[4..]);
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..120)) {
            if let Ok(p) = Packet::new_checked(&bytes[..]) {
                let _ = Repr::parse(&p);
            }
        }
    }
}
