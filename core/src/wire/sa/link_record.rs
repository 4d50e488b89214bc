//! LinkRecord (IBA 15.2.5.13): one direction of a link; 6 bytes of fields,
//! 8 on the wire (AttributeOffset 1).
//!
//! ```text
//! 0..2 FromLID   2 FromPort   3 ToPort   4..6 ToLID   6..8 pad
//! ```

use super::comp::Component;
use crate::wire::{be, Field, Result};

mod field {
    use super::Field;
    pub(super) const FROM_LID: Field = 0..2;
    pub(super) const FROM_PORT: usize = 2;
    pub(super) const TO_PORT: usize = 3;
    pub(super) const TO_LID: Field = 4..6;
    pub(super) const PAD: Field = 6..8;
}

/// Bytes of LinkRecord fields.
pub const LEN: usize = field::TO_LID.end;
/// Bytes of one LinkRecord in a response.
pub const RECORD_LEN: usize = field::PAD.end;
const _: () = assert!(LEN == 6 && RECORD_LEN == 8);

/// ComponentMask bits.
pub mod comp {
    /// FromLID.
    pub const FROM_LID: u64 = 1 << 0;
    /// FromPort.
    pub const FROM_PORT: u64 = 1 << 1;
    /// ToPort.
    pub const TO_PORT: u64 = 1 << 2;
    /// ToLID.
    pub const TO_LID: u64 = 1 << 3;
}

/// The ComponentMask layout, by bit.
pub const COMPONENTS: [Component; 4] = [
    Component::bytes(0, 2),
    Component::bytes(2, 1),
    Component::bytes(3, 1),
    Component::bytes(4, 2),
];

/// A view over one LinkRecord.
#[derive(Debug, Clone)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    crate::wire::view_constructors!(LEN, "the 6 bytes of fields");
    /// FromLID.
    pub fn from_lid(&self) -> u16 {
        be::u16(self.buffer.as_ref(), field::FROM_LID)
    }
    /// FromPort.
    pub fn from_port(&self) -> u8 {
        self.buffer.as_ref()[field::FROM_PORT]
    }
    /// ToPort.
    pub fn to_port(&self) -> u8 {
        self.buffer.as_ref()[field::TO_PORT]
    }
    /// ToLID.
    pub fn to_lid(&self) -> u16 {
        be::u16(self.buffer.as_ref(), field::TO_LID)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Set FromLID.
    pub fn set_from_lid(&mut self, v: u16) {
        be::set_u16(self.buffer.as_mut(), field::FROM_LID, v);
    }
    /// Set FromPort.
    pub fn set_from_port(&mut self, v: u8) {
        self.buffer.as_mut()[field::FROM_PORT] = v;
    }
    /// Set ToPort.
    pub fn set_to_port(&mut self, v: u8) {
        self.buffer.as_mut()[field::TO_PORT] = v;
    }
    /// Set ToLID.
    pub fn set_to_lid(&mut self, v: u16) {
        be::set_u16(self.buffer.as_mut(), field::TO_LID, v);
    }
}

/// LinkRecord as a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Repr {
    /// FromLID.
    pub from_lid: u16,
    /// FromPort.
    pub from_port: u8,
    /// ToPort.
    pub to_port: u8,
    /// ToLID.
    pub to_lid: u16,
}

impl Repr {
    /// Parse a checked LinkRecord.
    ///
    /// # Errors
    ///
    /// [`Error::Truncated`](crate::wire::Error::Truncated) if the buffer is shorter than 6 bytes.
    pub fn parse<T: AsRef<[u8]>>(p: &Packet<T>) -> Result<Repr> {
        p.check_len()?;
        Ok(Repr {
            from_lid: p.from_lid(),
            from_port: p.from_port(),
            to_port: p.to_port(),
            to_lid: p.to_lid(),
        })
    }
    /// Bytes `emit` writes.
    pub const fn buffer_len(&self) -> usize {
        LEN
    }
    /// Write the 6 bytes of fields.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut Packet<T>) {
        p.set_from_lid(self.from_lid);
        p.set_from_port(self.from_port);
        p.set_to_port(self.to_port);
        p.set_to_lid(self.to_lid);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::Error;
    use proptest::prelude::*;

    /// Switch LID 2 port 5 to CA LID 0x0103 port 1.
    const FIXTURE: [u8; 6] = [0x00, 0x02, 0x05, 0x01, 0x01, 0x03];

    fn repr() -> Repr {
        Repr {
            from_lid: 2,
            from_port: 5,
            to_port: 1,
            to_lid: 0x103,
        }
    }

    #[test]
    fn test_deconstruct() {
        let p = Packet::new_checked(&FIXTURE[..]).unwrap();
        assert_eq!(
            (p.from_lid(), p.from_port(), p.to_port(), p.to_lid()),
            (2, 5, 1, 0x103)
        );
    }

    #[test]
    fn test_emit_parse_over_garbage() {
        let mut b = [0xa5u8; 6];
        repr().emit(&mut Packet::new_unchecked(&mut b[..]));
        assert_eq!(b, FIXTURE);
        assert_eq!(
            Repr::parse(&Packet::new_checked(&b[..]).unwrap()).unwrap(),
            repr()
        );
    }

    #[test]
    fn test_truncated() {
        assert_eq!(
            Packet::new_checked(&FIXTURE[..5]).unwrap_err(),
            Error::Truncated
        );
    }

    proptest! {
        #[test]
        fn roundtrip(bytes in proptest::collection::vec(any::<u8>(), 6)) {
            let r = Repr::parse(&Packet::new_checked(&bytes[..]).unwrap()).unwrap();
            let mut out = [0u8; 6];
            r.emit(&mut Packet::new_unchecked(&mut out[..]));
            prop_assert_eq!(&out[..], &bytes[..]);
        }
    }
}
