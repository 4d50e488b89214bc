//! GUIDInfoRecord (IBA 15.2.5.18): LID, BlockNum, reserved, a block of
//! eight GUIDs; 72 bytes (AttributeOffset 9).
//!
//! ```text
//! 0..2 LID   2 BlockNum   3..8 reserved   8..72 GUID[0..8]
//! ```

use super::comp::Component;
use crate::wire::{be, Field, Result};

mod field {
    use super::Field;
    pub(super) const LID: Field = 0..2;
    pub(super) const BLOCK_NUM: usize = 2;
    pub(super) const RESERVED: Field = 3..8;
    pub(super) const GUIDS: usize = 8;
}

/// GUIDs in one block.
pub const GUIDS_PER_BLOCK: usize = 8;
/// Bytes of a GUIDInfoRecord (already 8-byte aligned).
pub const LEN: usize = field::GUIDS + GUIDS_PER_BLOCK * 8;
/// Bytes of one GUIDInfoRecord in a response.
pub const RECORD_LEN: usize = LEN;
const _: () = assert!(LEN == 72);

/// ComponentMask bits.
pub mod comp {
    /// LID.
    pub const LID: u64 = 1 << 0;
    /// BlockNum.
    pub const BLOCK_NUM: u64 = 1 << 1;
}

/// The ComponentMask layout: LID, BlockNum, two reserved bits, GUID 0..7.
pub const COMPONENTS: [Component; 12] = [
    Component::bytes(0, 2),
    Component::bytes(2, 1),
    Component::NONE,
    Component::NONE,
    Component::bytes(8, 8),
    Component::bytes(16, 8),
    Component::bytes(24, 8),
    Component::bytes(32, 8),
    Component::bytes(40, 8),
    Component::bytes(48, 8),
    Component::bytes(56, 8),
    Component::bytes(64, 8),
];

/// A view over one GUIDInfoRecord.
#[derive(Debug, Clone)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

fn guid_field(i: usize) -> Field {
    field::GUIDS + i * 8..field::GUIDS + i * 8 + 8
}

impl<T: AsRef<[u8]>> Packet<T> {
    crate::wire::view_constructors!(LEN, "the 72 bytes of a GUIDInfoRecord");
    /// LID.
    pub fn lid(&self) -> u16 {
        be::u16(self.buffer.as_ref(), field::LID)
    }
    /// BlockNum.
    pub fn block_num(&self) -> u8 {
        self.buffer.as_ref()[field::BLOCK_NUM]
    }
    /// GUID `i` of the block (`i < 8`).
    pub fn guid(&self, i: usize) -> u64 {
        be::u64(self.buffer.as_ref(), guid_field(i))
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Set LID.
    pub fn set_lid(&mut self, v: u16) {
        be::set_u16(self.buffer.as_mut(), field::LID, v);
    }
    /// Set BlockNum and zero the reserved bytes.
    pub fn set_block_num(&mut self, v: u8) {
        let b = self.buffer.as_mut();
        b[field::BLOCK_NUM] = v;
        b[field::RESERVED].fill(0);
    }
    /// Set GUID `i` of the block (`i < 8`).
    pub fn set_guid(&mut self, i: usize, v: u64) {
        be::set_u64(self.buffer.as_mut(), guid_field(i), v);
    }
}

/// GUIDInfoRecord as a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Repr {
    /// LID.
    pub lid: u16,
    /// BlockNum.
    pub block_num: u8,
    /// The block's GUIDs (0: unassigned).
    pub guids: [u64; GUIDS_PER_BLOCK],
}

impl Repr {
    /// Parse a checked GUIDInfoRecord.
    ///
    /// # Errors
    ///
    /// [`Error::Truncated`](crate::wire::Error::Truncated) if the buffer is shorter than 72 bytes.
    pub fn parse<T: AsRef<[u8]>>(p: &Packet<T>) -> Result<Repr> {
        p.check_len()?;
        Ok(Repr {
            lid: p.lid(),
            block_num: p.block_num(),
            guids: core::array::from_fn(|i| p.guid(i)),
        })
    }
    /// Bytes `emit` writes.
    pub const fn buffer_len(&self) -> usize {
        LEN
    }
    /// Write all 72 bytes (reserved as zero).
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut Packet<T>) {
        p.set_lid(self.lid);
        p.set_block_num(self.block_num);
        for (i, g) in self.guids.iter().enumerate() {
            p.set_guid(i, *g);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::Error;
    use proptest::prelude::*;

    /// LID 3, block 0, GUID 0 = 0x0002c90300000301 (the port GUID), rest 0.
    fn fixture() -> [u8; 72] {
        let mut b = [0u8; 72];
        b[..3].copy_from_slice(&[0x00, 0x03, 0x00]);
        b[8..16].copy_from_slice(&[0x00, 0x02, 0xc9, 0x03, 0, 0, 0x03, 0x01]);
        b
    }

    #[test]
    fn test_deconstruct() {
        let b = fixture();
        let p = Packet::new_checked(&b[..]).unwrap();
        assert_eq!((p.lid(), p.block_num()), (3, 0));
        assert_eq!((p.guid(0), p.guid(7)), (0x0002_c903_0000_0301, 0));
    }

    #[test]
    fn test_emit_parse_over_garbage() {
        let mut guids = [0u64; 8];
        guids[0] = 0x0002_c903_0000_0301;
        let r = Repr {
            lid: 3,
            block_num: 0,
            guids,
        };
        let mut out = [0xa5u8; 72];
        r.emit(&mut Packet::new_unchecked(&mut out[..]));
        assert_eq!(out, fixture());
        assert_eq!(
            Repr::parse(&Packet::new_checked(&out[..]).unwrap()).unwrap(),
            r
        );
    }

    #[test]
    fn test_truncated() {
        assert_eq!(
            Packet::new_checked(&fixture()[..71]).unwrap_err(),
            Error::Truncated
        );
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
