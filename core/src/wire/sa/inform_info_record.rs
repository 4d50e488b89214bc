//! InformInfoRecord (IBA 15.2.5.12): a subscription as the SA lists it;
//! 60 bytes of fields, 64 on the wire (AttributeOffset 8).
//!
//! ```text
//! 0..16 SubscriberGID   16..18 Enum   18..24 reserved   24..60 InformInfo   60..64 pad
//! ```

use super::comp::Component;
use super::inform_info;
use crate::wire::{be, Field, Result};

mod field {
    use super::Field;
    pub(super) const GID: Field = 0..16;
    pub(super) const ENUM: Field = 16..18;
    pub(super) const RESERVED: Field = 18..24;
    pub(super) const INFO: Field = 24..60;
    pub(super) const PAD: Field = 60..64;
}

/// Bytes of InformInfoRecord fields.
pub const LEN: usize = field::INFO.end;
/// Bytes of one InformInfoRecord in a response.
pub const RECORD_LEN: usize = field::PAD.end;
const _: () = assert!(LEN == 60 && RECORD_LEN == 64);
const _: () = assert!(field::INFO.end - field::INFO.start == inform_info::LEN);

/// ComponentMask bits.
pub mod comp {
    /// SubscriberGID.
    pub const SUBSCRIBER_GID: u64 = 1 << 0;
    /// Enum.
    pub const ENUM: u64 = 1 << 1;
}

/// The ComponentMask layout: SubscriberGID, Enum (the InformInfo inside is not matched).
pub const COMPONENTS: [Component; 2] = [Component::bytes(0, 16), Component::bytes(16, 2)];

/// A view over one InformInfoRecord.
#[derive(Debug, Clone)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    crate::wire::view_constructors!(LEN, "the 60 bytes of fields");
    /// SubscriberGID.
    pub fn subscriber_gid(&self) -> [u8; 16] {
        let mut g = [0u8; 16];
        g.copy_from_slice(&self.buffer.as_ref()[field::GID]);
        g
    }
    /// Enum: tells apart one subscriber's subscriptions.
    pub fn subscriber_enum(&self) -> u16 {
        be::u16(self.buffer.as_ref(), field::ENUM)
    }
    /// The InformInfo inside.
    pub fn inform_info(&self) -> inform_info::Packet<&[u8]> {
        inform_info::Packet::new_unchecked(&self.buffer.as_ref()[field::INFO])
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Set SubscriberGID.
    pub fn set_subscriber_gid(&mut self, v: &[u8; 16]) {
        self.buffer.as_mut()[field::GID].copy_from_slice(v);
    }
    /// Set Enum and zero the reserved bytes after it.
    pub fn set_subscriber_enum(&mut self, v: u16) {
        let b = self.buffer.as_mut();
        be::set_u16(b, field::ENUM, v);
        b[field::RESERVED].fill(0);
    }
    /// The InformInfo inside, mutably.
    pub fn inform_info_mut(&mut self) -> inform_info::Packet<&mut [u8]> {
        inform_info::Packet::new_unchecked(&mut self.buffer.as_mut()[field::INFO])
    }
}

/// InformInfoRecord as a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Repr {
    /// SubscriberGID.
    pub subscriber_gid: [u8; 16],
    /// Enum.
    pub subscriber_enum: u16,
    /// InformInfo.
    pub inform_info: inform_info::Repr,
}

impl Repr {
    /// Parse a checked InformInfoRecord.
    ///
    /// # Errors
    ///
    /// [`Error::Truncated`](crate::wire::Error::Truncated) if the buffer is shorter than 60 bytes.
    pub fn parse<T: AsRef<[u8]>>(p: &Packet<T>) -> Result<Repr> {
        p.check_len()?;
        Ok(Repr {
            subscriber_gid: p.subscriber_gid(),
            subscriber_enum: p.subscriber_enum(),
            inform_info: inform_info::Repr::parse(&p.inform_info())?,
        })
    }
    /// Bytes `emit` writes: the fields, not the pad.
    pub const fn buffer_len(&self) -> usize {
        LEN
    }
    /// Write the 60 bytes of fields (reserved as zero).
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut Packet<T>) {
        p.set_subscriber_gid(&self.subscriber_gid);
        p.set_subscriber_enum(self.subscriber_enum);
        self.inform_info.emit(&mut p.inform_info_mut());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::Error;
    use proptest::prelude::*;

    /// Subscriber fe80::2:c903:0:301, enum 1, subscribed to generic trap
    /// 64 from all LIDs, any type and producer, Reports to QP 1.
    fn fixture() -> [u8; 60] {
        let mut b = [0u8; 60];
        b[..16].copy_from_slice(&[
            0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0x02, 0xc9, 0x03, 0, 0, 0x03, 0x01,
        ]);
        b[16..18].copy_from_slice(&[0x00, 0x01]);
        b[24 + 16..60].copy_from_slice(&[
            0xff, 0xff, 0x00, 0x00, 0, 0, 0x01, 0x01, 0xff, 0xff, 0x00, 0x40, 0x00, 0x00, 0x01,
            0x00, 0x00, 0xff, 0xff, 0xff,
        ]);
        b
    }

    #[test]
    fn test_deconstruct() {
        let b = fixture();
        let p = Packet::new_checked(&b[..]).unwrap();
        assert_eq!((p.subscriber_enum(), p.subscriber_gid()[15]), (1, 0x01));
        assert_eq!(
            (p.inform_info().trap_number(), p.inform_info().qpn()),
            (64, 1)
        );
    }

    #[test]
    fn test_emit_parse_over_garbage() {
        let b = fixture();
        let r = Repr::parse(&Packet::new_checked(&b[..]).unwrap()).unwrap();
        let mut out = [0xa5u8; 60];
        r.emit(&mut Packet::new_unchecked(&mut out[..]));
        assert_eq!(out, b);
    }

    #[test]
    fn test_truncated() {
        assert_eq!(
            Packet::new_checked(&fixture()[..59]).unwrap_err(),
            Error::Truncated
        );
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..70)) {
            if let Ok(p) = Packet::new_checked(&bytes[..]) {
                let _ = Repr::parse(&p);
            }
        }
    }
}
