//! Vendor-specific MADs (IBA 13.4.9). Range 1 (classes 0x09–0x0F) has no
//! extra header and no RMPP. Range 2 (0x30–0x4F) carries a 24-bit OUI after
//! the RMPP header, at MAD offset 37..40, and its data starts at 40 in every
//! MAD and every RMPP segment.
//!
//! The view wraps the whole MAD, like every header view here.

use super::{enum_with_unknown, Field, Result};

mod field {
    use super::Field;
    pub(super) const RESERVED: usize = 36;
    pub(super) const OUI: Field = 37..40;
}

/// Offset of the vendor data in a range-2 MAD.
pub const DATA_OFFSET: usize = field::OUI.end;
/// Bytes of vendor data in one MAD (`UMAD_LEN_VENDOR_DATA`).
pub const DATA_LEN: usize = super::MAD_SIZE - DATA_OFFSET;
/// The OpenIB OUI (`UMAD_OPENIB_OUI`), libibumad's default.
pub const OPENIB_OUI: u32 = 0x00_14_05;
const _: () = assert!(field::RESERVED == super::rmpp::END && DATA_OFFSET == 40 && DATA_LEN == 216);

/// Whether a management class is in vendor range 1 (0x09–0x0F).
pub const fn is_vendor_range1(class: u8) -> bool {
    matches!(class, 0x09..=0x0f)
}

/// Whether a management class is in vendor range 2 (0x30–0x4F): it has an
/// OUI and may use RMPP.
pub const fn is_vendor_range2(class: u8) -> bool {
    matches!(class, 0x30..=0x4f)
}

enum_with_unknown! {
    /// A few well-known OUIs, for display.
    pub enum Oui(u32) {
        /// OpenIB (0x001405).
        OpenIb = 0x00_14_05,
        /// Mellanox (0x0002C9).
        Mellanox = 0x00_02_c9,
        /// Intel / QLogic (0x001175).
        Intel = 0x00_11_75,
    }
}

/// A view over the vendor range-2 header of a MAD.
#[derive(Debug, Clone)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    crate::wire::view_constructors!(
        DATA_OFFSET,
        "the vendor header, to the end of the OUI (byte 40)"
    );

    /// OUI (24 bits).
    pub fn oui(&self) -> u32 {
        let b = &self.buffer.as_ref()[field::OUI];
        u32::from_be_bytes([0, b[0], b[1], b[2]])
    }
    /// The vendor data after the OUI.
    pub fn data(&self) -> &[u8] {
        &self.buffer.as_ref()[DATA_OFFSET..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Set the OUI (low 24 bits) and zero the reserved byte before it.
    pub fn set_oui(&mut self, v: u32) {
        let b = self.buffer.as_mut();
        b[field::RESERVED] = 0;
        b[field::OUI].copy_from_slice(&v.to_be_bytes()[1..]);
    }
    /// The vendor data, mutably.
    pub fn data_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[DATA_OFFSET..]
    }
}

/// The vendor range-2 header as a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Repr {
    /// OUI (24 bits).
    pub oui: u32,
}

impl Repr {
    /// Parse a checked vendor header.
    ///
    /// # Errors
    ///
    /// [`Error::Truncated`](crate::wire::Error::Truncated) if the buffer ends before byte 40.
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Result<Repr> {
        packet.check_len()?;
        Ok(Repr { oui: packet.oui() })
    }

    /// Bytes of the MAD buffer `emit` needs (the headers before it included).
    pub const fn buffer_len(&self) -> usize {
        DATA_OFFSET
    }

    /// Write bytes 36..40: reserved zero, the OUI's low 24 bits.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        packet.set_oui(self.oui);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::Error;
    use proptest::prelude::*;

    /// Bytes 36..40 of an OpenIB vendor MAD.
    const OPENIB_HDR: [u8; 4] = [0x00, 0x00, 0x14, 0x05];

    #[test]
    fn test_deconstruct_emit_parse() {
        let mut b = [0u8; 44];
        b[36..40].copy_from_slice(&OPENIB_HDR);
        b[40] = 0x42;
        let p = Packet::new_checked(&b[..]).unwrap();
        assert_eq!(p.oui(), OPENIB_OUI);
        assert_eq!(Oui::from(p.oui()), Oui::OpenIb);
        assert_eq!(p.data(), &[0x42, 0, 0, 0]);

        let mut g = [0xa5u8; 40];
        Repr { oui: OPENIB_OUI }.emit(&mut Packet::new_unchecked(&mut g[..]));
        assert_eq!(&g[36..], &OPENIB_HDR);
        assert_eq!(&g[..36], &[0xa5u8; 36]);
        assert_eq!(
            Repr::parse(&Packet::new_checked(&g[..]).unwrap()).unwrap(),
            Repr { oui: OPENIB_OUI }
        );
    }

    #[test]
    fn test_truncated() {
        let b = [0u8; 39];
        assert_eq!(Packet::new_checked(&b[..]).unwrap_err(), Error::Truncated);
        assert_eq!(
            Repr::parse(&Packet::new_unchecked(&b[..])).unwrap_err(),
            Error::Truncated
        );
    }

    #[test]
    fn ranges() {
        assert!(is_vendor_range2(0x30) && is_vendor_range2(0x4f));
        assert!(!is_vendor_range2(0x2f) && !is_vendor_range2(0x50));
        assert!(is_vendor_range1(0x09) && is_vendor_range1(0x0f) && !is_vendor_range1(0x10));
        for c in 0..=255u8 {
            assert_eq!(
                is_vendor_range2(c),
                crate::wire::mad::MgmtClass::from(c).is_vendor_range2()
            );
        }
    }

    proptest! {
        #[test]
        fn roundtrip(oui in 0u32..(1 << 24)) {
            let r = Repr { oui };
            let mut buf = vec![0xa5u8; r.buffer_len()];
            r.emit(&mut Packet::new_unchecked(&mut buf[..]));
            prop_assert_eq!(Repr::parse(&Packet::new_checked(&buf[..]).unwrap()).unwrap(), r);
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            if let Ok(p) = Packet::new_checked(&bytes[..]) {
                let _ = (Repr::parse(&p), p.data().len());
            }
        }
    }
}
