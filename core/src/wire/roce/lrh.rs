//! The 8-byte Local Route Header (IBA 7.7) that starts every native
//! InfiniBand packet (and every packet of a link-type-247 capture).
//!
//! ```text
//!  0      VL(4) LVer(4)
//!  1      SL(4) resv(2) LNH(2)
//!  2..4   DLID
//!  4..6   resv(5) PktLen(11): 4-byte words from the LRH through the ICRC
//!  6..8   SLID
//! ```

use crate::wire::{be, Error, Field, Result};

mod field {
    use super::Field;
    pub(super) const VL_LVER: usize = 0;
    pub(super) const SL_LNH: usize = 1;
    pub(super) const DLID: Field = 2..4;
    pub(super) const PKTLEN: Field = 4..6;
    pub(super) const SLID: Field = 6..8;
}

/// Length of the LRH.
pub const LEN: usize = field::SLID.end;
/// LNH: an IBA transport header (BTH) follows the LRH.
pub const LNH_IBA_LOCAL: u8 = 0x2;
/// LNH: a GRH, then a BTH, follow the LRH.
pub const LNH_IBA_GLOBAL: u8 = 0x3;
/// The VL subnet management packets travel on.
pub const VL15: u8 = 15;
const _: () = assert!(LEN == 8);

/// A view over an LRH.
#[derive(Debug, Clone)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    crate::wire::view_constructors!(LEN, "the LRH");
    /// VL.
    pub fn vl(&self) -> u8 {
        self.buffer.as_ref()[field::VL_LVER] >> 4
    }
    /// LVer.
    pub fn lver(&self) -> u8 {
        self.buffer.as_ref()[field::VL_LVER] & 0xf
    }
    /// SL.
    pub fn sl(&self) -> u8 {
        self.buffer.as_ref()[field::SL_LNH] >> 4
    }
    /// LNH (link next header).
    pub fn lnh(&self) -> u8 {
        self.buffer.as_ref()[field::SL_LNH] & 0x3
    }
    /// DLID.
    pub fn dlid(&self) -> u16 {
        be::u16(self.buffer.as_ref(), field::DLID)
    }
    /// PktLen in 4-byte words (11 bits).
    pub fn pkt_len(&self) -> u16 {
        be::u16(self.buffer.as_ref(), field::PKTLEN) & 0x7ff
    }
    /// SLID.
    pub fn slid(&self) -> u16 {
        be::u16(self.buffer.as_ref(), field::SLID)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Set VL and LVer (4 bits each).
    pub fn set_vl_lver(&mut self, vl: u8, lver: u8) {
        self.buffer.as_mut()[field::VL_LVER] = (vl << 4) | (lver & 0xf);
    }
    /// Set SL (4 bits) and LNH (2 bits); the reserved bits are cleared.
    pub fn set_sl_lnh(&mut self, sl: u8, lnh: u8) {
        self.buffer.as_mut()[field::SL_LNH] = (sl << 4) | (lnh & 0x3);
    }
    /// Set DLID.
    pub fn set_dlid(&mut self, v: u16) {
        be::set_u16(self.buffer.as_mut(), field::DLID, v);
    }
    /// Set PktLen (11 bits); the reserved bits are cleared.
    pub fn set_pkt_len(&mut self, v: u16) {
        be::set_u16(self.buffer.as_mut(), field::PKTLEN, v & 0x7ff);
    }
    /// Set SLID.
    pub fn set_slid(&mut self, v: u16) {
        be::set_u16(self.buffer.as_mut(), field::SLID, v);
    }
}

/// An LRH as a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// VL (15 for SMPs).
    pub vl: u8,
    /// SL.
    pub sl: u8,
    /// LNH.
    pub lnh: u8,
    /// DLID.
    pub dlid: u16,
    /// PktLen in 4-byte words.
    pub pkt_len: u16,
    /// SLID.
    pub slid: u16,
}

impl Repr {
    /// Parse an LRH.
    ///
    /// # Errors
    ///
    /// [`Error::Truncated`] for fewer than 8 bytes; [`Error::BadVersion`] if LVer is not 0.
    pub fn parse<T: AsRef<[u8]>>(p: &Packet<T>) -> Result<Repr> {
        p.check_len()?;
        if p.lver() != 0 {
            return Err(Error::BadVersion);
        }
        Ok(Repr {
            vl: p.vl(),
            sl: p.sl(),
            lnh: p.lnh(),
            dlid: p.dlid(),
            pkt_len: p.pkt_len(),
            slid: p.slid(),
        })
    }
    /// Bytes `emit` writes.
    pub const fn buffer_len(&self) -> usize {
        LEN
    }
    /// Write all 8 bytes (LVer 0).
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut Packet<T>) {
        p.set_vl_lver(self.vl, 0);
        p.set_sl_lnh(self.sl, self.lnh);
        p.set_dlid(self.dlid);
        p.set_pkt_len(self.pkt_len);
        p.set_slid(self.slid);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A VL15 SMP from LID 1 to the permissive LID: LRH + BTH + DETH + 256 + ICRC
    /// = 8 + 12 + 8 + 256 + 4 = 288 bytes = 72 words.
    static SMP_LRH: [u8; 8] = [0xf0, 0x02, 0xff, 0xff, 0x00, 0x48, 0x00, 0x01];

    fn smp_repr() -> Repr {
        Repr {
            vl: 15,
            sl: 0,
            lnh: LNH_IBA_LOCAL,
            dlid: 0xffff,
            pkt_len: 72,
            slid: 1,
        }
    }

    #[test]
    fn test_deconstruct() {
        let p = Packet::new_checked(&SMP_LRH[..]).unwrap();
        assert_eq!((p.vl(), p.lver(), p.sl(), p.lnh()), (15, 0, 0, 2));
        assert_eq!((p.dlid(), p.pkt_len(), p.slid()), (0xffff, 72, 1));
    }

    #[test]
    fn test_emit_over_garbage() {
        let mut b = [0xa5u8; 8];
        smp_repr().emit(&mut Packet::new_unchecked(&mut b[..]));
        assert_eq!(b, SMP_LRH);
        assert_eq!(
            Repr::parse(&Packet::new_checked(&b[..]).unwrap()),
            Ok(smp_repr())
        );
    }

    #[test]
    fn test_truncated_and_version() {
        assert_eq!(
            Packet::new_checked(&SMP_LRH[..7]).unwrap_err(),
            Error::Truncated
        );
        let mut b = SMP_LRH;
        b[0] = 0xf1;
        assert_eq!(
            Repr::parse(&Packet::new_unchecked(&b[..])).unwrap_err(),
            Error::BadVersion
        );
    }

    proptest! {
        #[test]
        fn roundtrip(vl in 0u8..16, sl in 0u8..16, lnh in 0u8..4, dlid in any::<u16>(),
                     len in 0u16..2048, slid in any::<u16>()) {
            let r = Repr { vl, sl, lnh, dlid, pkt_len: len, slid };
            let mut buf = vec![0xa5u8; r.buffer_len()];
            r.emit(&mut Packet::new_unchecked(&mut buf[..]));
            prop_assert_eq!(Repr::parse(&Packet::new_checked(&buf[..]).unwrap()).unwrap(), r);
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..16)) {
            let _ = Repr::parse(&Packet::new_unchecked(&bytes[..]));
        }
    }
}
