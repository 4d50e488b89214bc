//! Notice (IBA 13.4.8.2): a trap's content, in a Trap SMP (its first 64
//! bytes, the SMP data) and in the SA's Report (all 80 bytes).
//!
//! ```text
//!  0 IsGeneric(1) Type(7)   1..4 ProducerType / VendorID   4..6 TrapNumber / DeviceID
//!  6..8 IssuerLID   8..10 NoticeToggle(1) NoticeCount(15)   10..64 DataDetails
//! 64..80 IssuerGID
//! ```

use crate::wire::{be, Field, Result};

mod field {
    use super::Field;
    pub(super) const GENERIC_TYPE_PRODUCER: Field = 0..4;
    pub(super) const TRAP_NUM: Field = 4..6;
    pub(super) const ISSUER_LID: Field = 6..8;
    pub(super) const TOGGLE_COUNT: Field = 8..10;
    pub(super) const DETAILS: Field = 10..64;
    pub(super) const ISSUER_GID: Field = 64..80;
}

/// Bytes of a Notice.
pub const LEN: usize = field::ISSUER_GID.end;
/// Bytes of a Notice that fit a Trap SMP (no IssuerGID).
pub const SMP_LEN: usize = field::DETAILS.end;
/// Bytes of DataDetails.
pub const DETAILS_LEN: usize = 54;
const _: () = assert!(LEN == 80 && SMP_LEN == 64);

/// A view over a Notice. `check_len` asks for the 64 bytes a Trap SMP
/// carries; [`Packet::issuer_gid`] reads zero when the buffer ends there.
#[derive(Debug, Clone)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    crate::wire::view_constructors!(SMP_LEN, "the first 64 bytes of a Notice");
    fn head(&self) -> u32 {
        be::u32(self.buffer.as_ref(), field::GENERIC_TYPE_PRODUCER)
    }
    /// IsGeneric.
    pub fn is_generic(&self) -> bool {
        self.head() & 0x8000_0000 != 0
    }
    /// Type (7 bits: 0 fatal, 1 urgent, 2 security, 3 subnet management, 4 info).
    pub fn notice_type(&self) -> u8 {
        ((self.head() >> 24) & 0x7f) as u8
    }
    /// ProducerType (generic) or VendorID (24 bits).
    pub fn producer(&self) -> u32 {
        self.head() & 0x00ff_ffff
    }
    /// TrapNumber (generic) or DeviceID.
    pub fn trap_number(&self) -> u16 {
        be::u16(self.buffer.as_ref(), field::TRAP_NUM)
    }
    /// IssuerLID.
    pub fn issuer_lid(&self) -> u16 {
        be::u16(self.buffer.as_ref(), field::ISSUER_LID)
    }
    /// NoticeToggle.
    pub fn toggle(&self) -> bool {
        be::u16(self.buffer.as_ref(), field::TOGGLE_COUNT) & 0x8000 != 0
    }
    /// NoticeCount (15 bits).
    pub fn count(&self) -> u16 {
        be::u16(self.buffer.as_ref(), field::TOGGLE_COUNT) & 0x7fff
    }
    /// DataDetails.
    pub fn details(&self) -> &[u8] {
        &self.buffer.as_ref()[field::DETAILS]
    }
    /// IssuerGID (zero if the buffer holds only the SMP part).
    pub fn issuer_gid(&self) -> [u8; 16] {
        let mut g = [0u8; 16];
        if let Some(b) = self.buffer.as_ref().get(field::ISSUER_GID) {
            g.copy_from_slice(b);
        }
        g
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Set IsGeneric, Type (7 bits) and ProducerType / VendorID (24 bits).
    pub fn set_head(&mut self, is_generic: bool, notice_type: u8, producer: u32) {
        let v = (u32::from(is_generic) << 31)
            | (u32::from(notice_type & 0x7f) << 24)
            | (producer & 0x00ff_ffff);
        be::set_u32(self.buffer.as_mut(), field::GENERIC_TYPE_PRODUCER, v);
    }
    /// Set TrapNumber / DeviceID.
    pub fn set_trap_number(&mut self, v: u16) {
        be::set_u16(self.buffer.as_mut(), field::TRAP_NUM, v);
    }
    /// Set IssuerLID.
    pub fn set_issuer_lid(&mut self, v: u16) {
        be::set_u16(self.buffer.as_mut(), field::ISSUER_LID, v);
    }
    /// Set NoticeToggle and NoticeCount (15 bits).
    pub fn set_toggle_count(&mut self, toggle: bool, count: u16) {
        be::set_u16(
            self.buffer.as_mut(),
            field::TOGGLE_COUNT,
            (u16::from(toggle) << 15) | (count & 0x7fff),
        );
    }
    /// DataDetails, mutably.
    pub fn details_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::DETAILS]
    }
    /// Set IssuerGID (the buffer must hold all 80 bytes).
    pub fn set_issuer_gid(&mut self, v: &[u8; 16]) {
        self.buffer.as_mut()[field::ISSUER_GID].copy_from_slice(v);
    }
}

/// Notice as a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// IsGeneric.
    pub is_generic: bool,
    /// Type.
    pub notice_type: u8,
    /// ProducerType / VendorID.
    pub producer: u32,
    /// TrapNumber / DeviceID.
    pub trap_number: u16,
    /// IssuerLID.
    pub issuer_lid: u16,
    /// NoticeToggle.
    pub toggle: bool,
    /// NoticeCount.
    pub count: u16,
    /// DataDetails.
    pub details: [u8; DETAILS_LEN],
    /// IssuerGID.
    pub issuer_gid: [u8; 16],
}

impl Repr {
    /// Parse a checked Notice (64 or 80 bytes).
    ///
    /// # Errors
    ///
    /// [`Error::Truncated`](crate::wire::Error::Truncated) if the buffer is shorter than 64 bytes.
    pub fn parse<T: AsRef<[u8]>>(p: &Packet<T>) -> Result<Repr> {
        p.check_len()?;
        let mut details = [0u8; DETAILS_LEN];
        details.copy_from_slice(p.details());
        Ok(Repr {
            is_generic: p.is_generic(),
            notice_type: p.notice_type(),
            producer: p.producer(),
            trap_number: p.trap_number(),
            issuer_lid: p.issuer_lid(),
            toggle: p.toggle(),
            count: p.count(),
            details,
            issuer_gid: p.issuer_gid(),
        })
    }
    /// Bytes `emit` writes.
    pub const fn buffer_len(&self) -> usize {
        LEN
    }
    /// Write all 80 bytes.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut Packet<T>) {
        p.set_head(self.is_generic, self.notice_type, self.producer);
        p.set_trap_number(self.trap_number);
        p.set_issuer_lid(self.issuer_lid);
        p.set_toggle_count(self.toggle, self.count);
        p.details_mut().copy_from_slice(&self.details);
        p.set_issuer_gid(&self.issuer_gid);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::Error;
    use proptest::prelude::*;

    /// Generic trap 128 (link state change), type 1 (urgent), producer 2
    /// (switch), issued by LID 2; details: LID 2 at offset 2.
    fn fixture() -> [u8; 80] {
        let mut b = [0u8; 80];
        b[..10].copy_from_slice(&[0x81, 0x00, 0x00, 0x02, 0x00, 0x80, 0x00, 0x02, 0x00, 0x00]);
        b[12..14].copy_from_slice(&[0x00, 0x02]);
        b
    }

    #[test]
    fn test_deconstruct() {
        let b = fixture();
        let p = Packet::new_checked(&b[..]).unwrap();
        assert!(p.is_generic());
        assert_eq!(
            (p.notice_type(), p.producer(), p.trap_number()),
            (1, 2, 128)
        );
        assert_eq!(
            (p.issuer_lid(), p.count(), p.details()[2..4].to_vec()),
            (2, 0, vec![0, 2])
        );
        // The SMP part alone parses, with no IssuerGID.
        let smp = Packet::new_checked(&b[..64]).unwrap();
        assert_eq!(smp.issuer_gid(), [0; 16]);
    }

    #[test]
    fn test_emit_parse_over_garbage() {
        let b = fixture();
        let r = Repr::parse(&Packet::new_checked(&b[..]).unwrap()).unwrap();
        let mut out = [0xa5u8; 80];
        r.emit(&mut Packet::new_unchecked(&mut out[..]));
        assert_eq!(out, b);
    }

    #[test]
    fn test_truncated() {
        assert_eq!(
            Packet::new_checked(&fixture()[..63]).unwrap_err(),
            Error::Truncated
        );
    }

    proptest! {
        #[test]
        fn roundtrip(bytes in proptest::collection::vec(any::<u8>(), 80)) {
            let r = Repr::parse(&Packet::new_checked(&bytes[..]).unwrap()).unwrap();
            let mut out = [0xa5u8; 80];
            r.emit(&mut Packet::new_unchecked(&mut out[..]));
            prop_assert_eq!(&out[..], &bytes[..]);
        }
    }
}
