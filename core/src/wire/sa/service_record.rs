//! ServiceRecord (IBA 15.2.5.14): 176 bytes (AttributeOffset 22).
//!
//! ```text
//!   0..8   ServiceID        8..24  ServiceGID     24..26 ServiceP_Key
//!  26..28  reserved        28..32  ServiceLease   32..48 ServiceKey
//!  48..112 ServiceName    112..128 ServiceData8[16]
//! 128..144 ServiceData16[8] 144..160 ServiceData32[4] 160..176 ServiceData64[2]
//! ```

use super::comp::Component;
use crate::wire::{be, Field, Result};

mod field {
    use super::Field;
    pub(super) const ID: Field = 0..8;
    pub(super) const GID: Field = 8..24;
    pub(super) const PKEY: Field = 24..26;
    pub(super) const RESERVED: Field = 26..28;
    pub(super) const LEASE: Field = 28..32;
    pub(super) const KEY: Field = 32..48;
    pub(super) const NAME: Field = 48..112;
    pub(super) const DATA: Field = 112..176;
}

/// Bytes of a ServiceRecord (already 8-byte aligned).
pub const LEN: usize = field::DATA.end;
/// Bytes of one ServiceRecord in a response.
pub const RECORD_LEN: usize = LEN;
/// Bytes of ServiceName.
pub const NAME_LEN: usize = 64;
/// Bytes of the ServiceData fields together.
pub const DATA_LEN: usize = 64;
/// ServiceLease meaning "never expires".
pub const LEASE_INFINITE: u32 = 0xffff_ffff;
const _: () = assert!(LEN == 176);

/// ComponentMask bits of the record's identity and name.
pub mod comp {
    /// ServiceID.
    pub const ID: u64 = 1 << 0;
    /// ServiceGID.
    pub const GID: u64 = 1 << 1;
    /// ServiceP_Key.
    pub const PKEY: u64 = 1 << 2;
    /// ServiceLease.
    pub const LEASE: u64 = 1 << 4;
    /// ServiceKey.
    pub const KEY: u64 = 1 << 5;
    /// ServiceName.
    pub const NAME: u64 = 1 << 6;
}

const fn data8(i: u8) -> Component {
    Component::bytes(112 + i, 1)
}
const fn data16(i: u8) -> Component {
    Component::bytes(128 + 2 * i, 2)
}
const fn data32(i: u8) -> Component {
    Component::bytes(144 + 4 * i, 4)
}
const fn data64(i: u8) -> Component {
    Component::bytes(160 + 8 * i, 8)
}

/// The ComponentMask layout, by bit: ID, GID, P_Key, reserved, lease, key,
/// name, then each ServiceData element (8-bit ×16, 16-bit ×8, 32-bit ×4,
/// 64-bit ×2).
pub const COMPONENTS: [Component; 37] = [
    Component::bytes(0, 8),
    Component::bytes(8, 16),
    Component::bytes(24, 2),
    Component::NONE,
    Component::bytes(28, 4),
    Component::bytes(32, 16),
    Component::bytes(48, 64),
    data8(0),
    data8(1),
    data8(2),
    data8(3),
    data8(4),
    data8(5),
    data8(6),
    data8(7),
    data8(8),
    data8(9),
    data8(10),
    data8(11),
    data8(12),
    data8(13),
    data8(14),
    data8(15),
    data16(0),
    data16(1),
    data16(2),
    data16(3),
    data16(4),
    data16(5),
    data16(6),
    data16(7),
    data32(0),
    data32(1),
    data32(2),
    data32(3),
    data64(0),
    data64(1),
];

/// A view over one ServiceRecord.
#[derive(Debug, Clone)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    crate::wire::view_constructors!(LEN, "the 176 bytes of a ServiceRecord");
    /// ServiceID.
    pub fn id(&self) -> u64 {
        be::u64(self.buffer.as_ref(), field::ID)
    }
    /// ServiceGID.
    pub fn gid(&self) -> [u8; 16] {
        let mut g = [0u8; 16];
        g.copy_from_slice(&self.buffer.as_ref()[field::GID]);
        g
    }
    /// ServiceP_Key.
    pub fn pkey(&self) -> u16 {
        be::u16(self.buffer.as_ref(), field::PKEY)
    }
    /// ServiceLease, in seconds ([`LEASE_INFINITE`]: never expires).
    pub fn lease(&self) -> u32 {
        be::u32(self.buffer.as_ref(), field::LEASE)
    }
    /// ServiceKey.
    pub fn key(&self) -> &[u8] {
        &self.buffer.as_ref()[field::KEY]
    }
    /// ServiceName, all 64 bytes.
    pub fn name(&self) -> &[u8] {
        &self.buffer.as_ref()[field::NAME]
    }
    /// ServiceData (8-, 16-, 32- and 64-bit elements, big-endian), raw.
    pub fn data(&self) -> &[u8] {
        &self.buffer.as_ref()[field::DATA]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Set ServiceID.
    pub fn set_id(&mut self, v: u64) {
        be::set_u64(self.buffer.as_mut(), field::ID, v);
    }
    /// Set ServiceGID.
    pub fn set_gid(&mut self, v: &[u8; 16]) {
        self.buffer.as_mut()[field::GID].copy_from_slice(v);
    }
    /// Set ServiceP_Key and zero the reserved bytes after it.
    pub fn set_pkey(&mut self, v: u16) {
        let b = self.buffer.as_mut();
        be::set_u16(b, field::PKEY, v);
        b[field::RESERVED].fill(0);
    }
    /// Set ServiceLease.
    pub fn set_lease(&mut self, v: u32) {
        be::set_u32(self.buffer.as_mut(), field::LEASE, v);
    }
    /// Set ServiceKey.
    pub fn set_key(&mut self, v: &[u8; 16]) {
        self.buffer.as_mut()[field::KEY].copy_from_slice(v);
    }
    /// Set ServiceName (all 64 bytes).
    pub fn set_name(&mut self, v: &[u8; NAME_LEN]) {
        self.buffer.as_mut()[field::NAME].copy_from_slice(v);
    }
    /// Set ServiceData (all 64 bytes).
    pub fn set_data(&mut self, v: &[u8; DATA_LEN]) {
        self.buffer.as_mut()[field::DATA].copy_from_slice(v);
    }
}

/// ServiceRecord as a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// ServiceID.
    pub id: u64,
    /// ServiceGID.
    pub gid: [u8; 16],
    /// ServiceP_Key.
    pub pkey: u16,
    /// ServiceLease (seconds).
    pub lease: u32,
    /// ServiceKey.
    pub key: [u8; 16],
    /// ServiceName.
    pub name: [u8; NAME_LEN],
    /// ServiceData, raw.
    pub data: [u8; DATA_LEN],
}

impl Repr {
    /// Parse a checked ServiceRecord.
    ///
    /// # Errors
    ///
    /// [`Error::Truncated`](crate::wire::Error::Truncated) if the buffer is shorter than 176 bytes.
    pub fn parse<T: AsRef<[u8]>>(p: &Packet<T>) -> Result<Repr> {
        p.check_len()?;
        let mut key = [0u8; 16];
        key.copy_from_slice(p.key());
        let mut name = [0u8; NAME_LEN];
        name.copy_from_slice(p.name());
        let mut data = [0u8; DATA_LEN];
        data.copy_from_slice(p.data());
        Ok(Repr {
            id: p.id(),
            gid: p.gid(),
            pkey: p.pkey(),
            lease: p.lease(),
            key,
            name,
            data,
        })
    }
    /// Bytes `emit` writes.
    pub const fn buffer_len(&self) -> usize {
        LEN
    }
    /// Write all 176 bytes (reserved as zero).
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut Packet<T>) {
        p.set_id(self.id);
        p.set_gid(&self.gid);
        p.set_pkey(self.pkey);
        p.set_lease(self.lease);
        p.set_key(&self.key);
        p.set_name(&self.name);
        p.set_data(&self.data);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::sa::comp as mask;
    use crate::wire::Error;
    use proptest::prelude::*;

    /// Service 0x1000 on fe80::2:c903:0:301, P_Key 0xffff, lease 60 s,
    /// name "vmad-test", ServiceData8[0] = 7, ServiceData64[1] = 9.
    fn fixture() -> [u8; 176] {
        let mut b = [0u8; 176];
        b[..8].copy_from_slice(&0x1000u64.to_be_bytes());
        b[8..24].copy_from_slice(&[
            0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0x02, 0xc9, 0x03, 0, 0, 0x03, 0x01,
        ]);
        b[24..32].copy_from_slice(&[0xff, 0xff, 0, 0, 0, 0, 0, 60]);
        b[48..57].copy_from_slice(b"vmad-test");
        b[112] = 7;
        b[175] = 9;
        b
    }

    #[test]
    fn test_deconstruct() {
        let b = fixture();
        let p = Packet::new_checked(&b[..]).unwrap();
        assert_eq!((p.id(), p.pkey(), p.lease()), (0x1000, 0xffff, 60));
        assert_eq!(&p.name()[..9], b"vmad-test");
        assert_eq!((p.data()[0], p.data()[63]), (7, 9));
    }

    #[test]
    fn test_emit_parse_over_garbage() {
        let b = fixture();
        let r = Repr::parse(&Packet::new_checked(&b[..]).unwrap()).unwrap();
        let mut out = [0xa5u8; 176];
        r.emit(&mut Packet::new_unchecked(&mut out[..]));
        assert_eq!(out, b);
    }

    #[test]
    fn test_truncated() {
        assert_eq!(
            Packet::new_checked(&fixture()[..175]).unwrap_err(),
            Error::Truncated
        );
    }

    #[test]
    fn data_components_name_single_elements() {
        let a = fixture();
        let mut b = a;
        b[175] = 10; // ServiceData64[1]
        assert!(!mask::matches(&COMPONENTS, 1 << 36, &a, &b));
        assert!(mask::matches(
            &COMPONENTS,
            (1 << 35) | (1 << 7) | comp::NAME,
            &a,
            &b
        ));
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            if let Ok(p) = Packet::new_checked(&bytes[..]) {
                let _ = Repr::parse(&p);
            }
        }
    }
}
