//! The 8-byte Datagram Extended Transport Header (IBA 9.3.3), after the
//! BTH of every UD packet.
//!
//! ```text
//!  0..4   Q_Key
//!  4      reserved
//!  5..8   SrcQP (24 bits)
//! ```

use crate::wire::{be, Field, Result};

mod field {
    use super::Field;
    pub(super) const QKEY: Field = 0..4;
    /// Bytes 4..8: reserved byte and the 24-bit SrcQP.
    pub(super) const QP_WORD: Field = 4..8;
}

/// Length of the DETH.
pub const LEN: usize = field::QP_WORD.end;
const _: () = assert!(LEN == 8);
const MASK24: u32 = 0x00ff_ffff;

/// A view over a DETH.
#[derive(Debug, Clone)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    crate::wire::view_constructors!(LEN, "the DETH");
    /// Q_Key.
    pub fn qkey(&self) -> u32 {
        be::u32(self.buffer.as_ref(), field::QKEY)
    }
    /// SrcQP (24 bits).
    pub fn src_qp(&self) -> u32 {
        be::u32(self.buffer.as_ref(), field::QP_WORD) & MASK24
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Set Q_Key.
    pub fn set_qkey(&mut self, v: u32) {
        be::set_u32(self.buffer.as_mut(), field::QKEY, v);
    }
    /// Set SrcQP (the low 24 bits of `v`) and clear the reserved byte.
    pub fn set_src_qp(&mut self, v: u32) {
        be::set_u32(self.buffer.as_mut(), field::QP_WORD, v & MASK24);
    }
}

/// A DETH as a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// Q_Key.
    pub qkey: u32,
    /// SrcQP (24 bits).
    pub src_qp: u32,
}

impl Repr {
    /// Parse a DETH.
    ///
    /// # Errors
    ///
    /// [`Error::Truncated`](crate::wire::Error::Truncated) for fewer than 8 bytes.
    pub fn parse<T: AsRef<[u8]>>(p: &Packet<T>) -> Result<Repr> {
        p.check_len()?;
        Ok(Repr {
            qkey: p.qkey(),
            src_qp: p.src_qp(),
        })
    }
    /// Bytes `emit` writes.
    pub const fn buffer_len(&self) -> usize {
        LEN
    }
    /// Write all 8 bytes.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut Packet<T>) {
        p.set_qkey(self.qkey);
        p.set_src_qp(self.src_qp);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::Error;
    use proptest::prelude::*;

    /// rxe's QP1 DETH (roce-udp.md): Q_Key 0x80010000, source QP 1.
    static RXE_QP1_DETH: [u8; 8] = [0x80, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01];

    #[test]
    fn test_deconstruct() {
        let p = Packet::new_checked(&RXE_QP1_DETH[..]).unwrap();
        assert_eq!((p.qkey(), p.src_qp()), (crate::types::GSI_QKEY, 1));
    }

    #[test]
    fn test_emit_over_garbage() {
        let mut b = [0xa5u8; 8];
        let r = Repr {
            qkey: 0x8001_0000,
            src_qp: 1,
        };
        r.emit(&mut Packet::new_unchecked(&mut b[..]));
        assert_eq!(b, RXE_QP1_DETH);
        assert_eq!(Repr::parse(&Packet::new_checked(&b[..]).unwrap()), Ok(r));
    }

    #[test]
    fn test_truncated_and_reserved() {
        assert_eq!(
            Packet::new_checked(&RXE_QP1_DETH[..7]).unwrap_err(),
            Error::Truncated
        );
        let mut b = RXE_QP1_DETH;
        b[4] = 0xee;
        assert_eq!(Packet::new_checked(&b[..]).unwrap().src_qp(), 1);
    }

    proptest! {
        #[test]
        fn roundtrip(qkey in any::<u32>(), qp in 0u32..(1 << 24)) {
            let r = Repr { qkey, src_qp: qp };
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
