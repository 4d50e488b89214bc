//! SwitchInfoRecord (IBA 15.2.5.4): LID, reserved, SwitchInfo; 24 bytes
//! (AttributeOffset 3). The SwitchInfo is carried as the switch's SMA
//! answered it (vmad has no SwitchInfo view; the fields used here are named
//! below).
//!
//! ```text
//! 0..2 LID   2..4 reserved   4..24 SwitchInfo (LinearFDBCap at 4..6,
//! RandomFDBCap 6..8, MulticastFDBCap 8..10, LinearFDBTop 10..12, ...)
//! ```

use super::comp::Component;
use crate::wire::{be, Field, Result};

mod field {
    use super::Field;
    pub(super) const LID: Field = 0..2;
    pub(super) const RESERVED: Field = 2..4;
    pub(super) const SWITCH_INFO: Field = 4..24;
    pub(super) const LINEAR_FDB_CAP: Field = 4..6;
    pub(super) const LINEAR_FDB_TOP: Field = 10..12;
}

/// Bytes of SwitchInfo.
pub const SWITCH_INFO_LEN: usize = 20;
/// Bytes of a SwitchInfoRecord (already 8-byte aligned).
pub const LEN: usize = field::SWITCH_INFO.end;
/// Bytes of one SwitchInfoRecord in a response.
pub const RECORD_LEN: usize = LEN;
const _: () = assert!(LEN == 24);
const _: () = assert!(field::SWITCH_INFO.end - field::SWITCH_INFO.start == SWITCH_INFO_LEN);

/// ComponentMask bit of the LID.
pub const COMP_LID: u64 = 1 << 0;

/// The ComponentMask layout: the LID only (SwitchInfo fields are not matched).
pub const COMPONENTS: [Component; 1] = [Component::bytes(0, 2)];

/// A view over one SwitchInfoRecord.
#[derive(Debug, Clone)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    crate::wire::view_constructors!(LEN, "the 24 bytes of a SwitchInfoRecord");
    /// LID of the switch.
    pub fn lid(&self) -> u16 {
        be::u16(self.buffer.as_ref(), field::LID)
    }
    /// The SwitchInfo bytes.
    pub fn switch_info(&self) -> &[u8] {
        &self.buffer.as_ref()[field::SWITCH_INFO]
    }
    /// SwitchInfo:LinearFDBCap.
    pub fn linear_fdb_cap(&self) -> u16 {
        be::u16(self.buffer.as_ref(), field::LINEAR_FDB_CAP)
    }
    /// SwitchInfo:LinearFDBTop.
    pub fn linear_fdb_top(&self) -> u16 {
        be::u16(self.buffer.as_ref(), field::LINEAR_FDB_TOP)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Set the LID and zero the reserved bytes.
    pub fn set_lid(&mut self, v: u16) {
        let b = self.buffer.as_mut();
        be::set_u16(b, field::LID, v);
        b[field::RESERVED].fill(0);
    }
    /// The SwitchInfo bytes, mutably.
    pub fn switch_info_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::SWITCH_INFO]
    }
}

/// SwitchInfoRecord as a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// LID.
    pub lid: u16,
    /// SwitchInfo, raw.
    pub switch_info: [u8; SWITCH_INFO_LEN],
}

impl Repr {
    /// Parse a checked SwitchInfoRecord.
    ///
    /// # Errors
    ///
    /// [`Error::Truncated`](crate::wire::Error::Truncated) if the buffer is shorter than 24 bytes.
    pub fn parse<T: AsRef<[u8]>>(p: &Packet<T>) -> Result<Repr> {
        p.check_len()?;
        let mut switch_info = [0u8; SWITCH_INFO_LEN];
        switch_info.copy_from_slice(p.switch_info());
        Ok(Repr {
            lid: p.lid(),
            switch_info,
        })
    }
    /// Bytes `emit` writes.
    pub const fn buffer_len(&self) -> usize {
        LEN
    }
    /// Write all 24 bytes (reserved as zero).
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut Packet<T>) {
        p.set_lid(self.lid);
        p.switch_info_mut().copy_from_slice(&self.switch_info);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::Error;
    use proptest::prelude::*;

    /// Switch LID 7: LinearFDBCap 0xc000, LinearFDBTop 0x0040.
    fn fixture() -> [u8; 24] {
        let mut b = [0u8; 24];
        b[..2].copy_from_slice(&[0x00, 0x07]);
        b[4..6].copy_from_slice(&[0xc0, 0x00]);
        b[10..12].copy_from_slice(&[0x00, 0x40]);
        b
    }

    #[test]
    fn test_deconstruct() {
        let b = fixture();
        let p = Packet::new_checked(&b[..]).unwrap();
        assert_eq!(
            (p.lid(), p.linear_fdb_cap(), p.linear_fdb_top()),
            (7, 0xc000, 0x40)
        );
    }

    #[test]
    fn test_emit_parse_over_garbage() {
        let b = fixture();
        let r = Repr::parse(&Packet::new_checked(&b[..]).unwrap()).unwrap();
        let mut out = [0xa5u8; 24];
        r.emit(&mut Packet::new_unchecked(&mut out[..]));
        assert_eq!(out, b);
    }

    #[test]
    fn test_truncated() {
        assert_eq!(
            Packet::new_checked(&fixture()[..23]).unwrap_err(),
            Error::Truncated
        );
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..30)) {
            if let Ok(p) = Packet::new_checked(&bytes[..]) {
                let _ = Repr::parse(&p);
            }
        }
    }
}
