//! The 12-byte Base Transport Header (IBA 9.2), first header of every
//! RoCE v2 payload and of every IB packet after the LRH (and GRH).
//!
//! ```text
//!  0      OpCode
//!  1      SE(1) M(1) PadCnt(2) TVer(4)
//!  2..4   P_Key
//!  4      resv8a (FECN/BECN on newer HCAs; all ones in the ICRC)
//!  5..8   DestQP (24 bits)
//!  8      AckReq(1) resv7
//!  9..12  PSN (24 bits)
//! ```

use crate::wire::{be, enum_with_unknown, Error, Field, Result};

mod field {
    use super::Field;
    pub(super) const OPCODE: usize = 0;
    pub(super) const FLAGS: usize = 1;
    pub(super) const PKEY: Field = 2..4;
    pub(super) const RESV8A: usize = 4;
    /// Bytes 4..8: resv8a and the 24-bit DestQP.
    pub(super) const QP_WORD: Field = 4..8;
    /// Bytes 8..12: AckReq, resv7 and the 24-bit PSN.
    pub(super) const PSN_WORD: Field = 8..12;
}

/// Length of the BTH.
pub const LEN: usize = field::PSN_WORD.end;
/// Offset of resv8a, the byte the ICRC masks.
pub const RESV8A_OFFSET: usize = field::RESV8A;
/// The only transport header version defined.
pub const TVER: u8 = 0;
const _: () = assert!(LEN == 12);

const SE: u8 = 0x80;
const MIG: u8 = 0x40;
const ACK_REQ: u32 = 0x8000_0000;
const MASK24: u32 = 0x00ff_ffff;

enum_with_unknown! {
    /// BTH OpCode (IBA table 38). Only the UD codes a MAD can travel in have names.
    pub enum Opcode(u8) {
        /// UD SEND Only: every MAD on QP0/QP1.
        UdSendOnly = 0x64,
        /// UD SEND Only with Immediate.
        UdSendOnlyImm = 0x65,
    }
}

/// A view over a BTH.
#[derive(Debug, Clone)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    crate::wire::view_constructors!(LEN, "the BTH");
    /// OpCode.
    pub fn opcode(&self) -> Opcode {
        Opcode::from(self.buffer.as_ref()[field::OPCODE])
    }
    fn flags(&self) -> u8 {
        self.buffer.as_ref()[field::FLAGS]
    }
    /// SE: solicited event.
    pub fn solicited(&self) -> bool {
        self.flags() & SE != 0
    }
    /// M: migration request.
    pub fn mig_req(&self) -> bool {
        self.flags() & MIG != 0
    }
    /// PadCnt: bytes of padding before the ICRC (0..4).
    pub fn pad_count(&self) -> u8 {
        (self.flags() >> 4) & 0x3
    }
    /// TVer (4 bits; 0).
    pub fn tver(&self) -> u8 {
        self.flags() & 0xf
    }
    /// P_Key.
    pub fn pkey(&self) -> u16 {
        be::u16(self.buffer.as_ref(), field::PKEY)
    }
    /// resv8a.
    pub fn resv8a(&self) -> u8 {
        self.buffer.as_ref()[field::RESV8A]
    }
    /// DestQP (24 bits).
    pub fn dest_qp(&self) -> u32 {
        be::u32(self.buffer.as_ref(), field::QP_WORD) & MASK24
    }
    /// AckReq.
    pub fn ack_req(&self) -> bool {
        be::u32(self.buffer.as_ref(), field::PSN_WORD) & ACK_REQ != 0
    }
    /// PSN (24 bits).
    pub fn psn(&self) -> u32 {
        be::u32(self.buffer.as_ref(), field::PSN_WORD) & MASK24
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Set OpCode.
    pub fn set_opcode(&mut self, v: Opcode) {
        self.buffer.as_mut()[field::OPCODE] = v.into();
    }
    /// Set SE, M, PadCnt (2 bits) and TVer (4 bits).
    pub fn set_flags(&mut self, solicited: bool, mig_req: bool, pad_count: u8, tver: u8) {
        let mut b = ((pad_count & 0x3) << 4) | (tver & 0xf);
        if solicited {
            b |= SE;
        }
        if mig_req {
            b |= MIG;
        }
        self.buffer.as_mut()[field::FLAGS] = b;
    }
    /// Set P_Key.
    pub fn set_pkey(&mut self, v: u16) {
        be::set_u16(self.buffer.as_mut(), field::PKEY, v);
    }
    /// Set resv8a.
    pub fn set_resv8a(&mut self, v: u8) {
        self.buffer.as_mut()[field::RESV8A] = v;
    }
    /// Set DestQP (the low 24 bits of `v`); resv8a is kept.
    pub fn set_dest_qp(&mut self, v: u32) {
        let b = self.buffer.as_mut();
        let w = (be::u32(b, field::QP_WORD) & !MASK24) | (v & MASK24);
        be::set_u32(b, field::QP_WORD, w);
    }
    /// Set AckReq and the PSN (the low 24 bits of `psn`); resv7 is cleared.
    pub fn set_ack_req_psn(&mut self, ack_req: bool, psn: u32) {
        let w = if ack_req { ACK_REQ } else { 0 } | (psn & MASK24);
        be::set_u32(self.buffer.as_mut(), field::PSN_WORD, w);
    }
}

/// A BTH as a value. resv8a and resv7 are emitted as zero.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// OpCode.
    pub opcode: Opcode,
    /// SE.
    pub solicited: bool,
    /// M.
    pub mig_req: bool,
    /// PadCnt (0..4).
    pub pad_count: u8,
    /// P_Key.
    pub pkey: u16,
    /// DestQP (24 bits).
    pub dest_qp: u32,
    /// AckReq.
    pub ack_req: bool,
    /// PSN (24 bits).
    pub psn: u32,
}

impl Repr {
    /// The BTH rxe puts on a MAD: UD SEND Only, no SE, no padding.
    pub fn ud_send(pkey: u16, dest_qp: u32, psn: u32) -> Repr {
        Repr {
            opcode: Opcode::UdSendOnly,
            solicited: false,
            mig_req: false,
            pad_count: 0,
            pkey,
            dest_qp: dest_qp & MASK24,
            ack_req: false,
            psn: psn & MASK24,
        }
    }

    /// Parse a BTH.
    ///
    /// # Errors
    ///
    /// [`Error::Truncated`] for fewer than 12 bytes; [`Error::BadVersion`] if TVer is not 0.
    pub fn parse<T: AsRef<[u8]>>(p: &Packet<T>) -> Result<Repr> {
        p.check_len()?;
        if p.tver() != TVER {
            return Err(Error::BadVersion);
        }
        Ok(Repr {
            opcode: p.opcode(),
            solicited: p.solicited(),
            mig_req: p.mig_req(),
            pad_count: p.pad_count(),
            pkey: p.pkey(),
            dest_qp: p.dest_qp(),
            ack_req: p.ack_req(),
            psn: p.psn(),
        })
    }
    /// Bytes `emit` writes.
    pub const fn buffer_len(&self) -> usize {
        LEN
    }
    /// Write all 12 bytes.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut Packet<T>) {
        p.set_opcode(self.opcode);
        p.set_flags(self.solicited, self.mig_req, self.pad_count, TVER);
        p.set_pkey(self.pkey);
        p.set_resv8a(0);
        p.set_dest_qp(self.dest_qp);
        p.set_ack_req_psn(self.ack_req, self.psn);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// What rxe0 sent as QP1 (roce-udp.md): UD SEND Only, P_Key 0xffff,
    /// dest QP 1, AckReq, PSN 2.
    static RXE_QP1_BTH: [u8; 12] = [
        0x64, 0x00, 0xff, 0xff, 0x00, 0x00, 0x00, 0x01, 0x80, 0x00, 0x00, 0x02,
    ];

    fn rxe_repr() -> Repr {
        Repr {
            ack_req: true,
            ..Repr::ud_send(0xffff, 1, 2)
        }
    }

    #[test]
    fn test_deconstruct() {
        let p = Packet::new_checked(&RXE_QP1_BTH[..]).unwrap();
        assert_eq!(p.opcode(), Opcode::UdSendOnly);
        assert!(!p.solicited() && !p.mig_req());
        assert_eq!((p.pad_count(), p.tver(), p.pkey()), (0, 0, 0xffff));
        assert_eq!((p.resv8a(), p.dest_qp()), (0, 1));
        assert!(p.ack_req());
        assert_eq!(p.psn(), 2);
    }

    #[test]
    fn test_emit_over_garbage() {
        let mut b = [0xa5u8; 12];
        rxe_repr().emit(&mut Packet::new_unchecked(&mut b[..]));
        assert_eq!(b, RXE_QP1_BTH);
        let p = Packet::new_checked(&b[..]).unwrap();
        assert_eq!(Repr::parse(&p).unwrap(), rxe_repr());
    }

    #[test]
    fn flags_and_24_bit_fields() {
        let b = [
            0x65, 0xe0, 0x80, 0x01, 0xaa, 0x12, 0x34, 0x56, 0x7f, 0xab, 0xcd, 0xef,
        ];
        let p = Packet::new_checked(&b[..]).unwrap();
        assert_eq!(p.opcode(), Opcode::UdSendOnlyImm);
        assert!(p.solicited() && p.mig_req());
        assert_eq!(p.pad_count(), 2);
        assert_eq!((p.resv8a(), p.dest_qp()), (0xaa, 0x12_3456));
        assert!(!p.ack_req());
        assert_eq!(p.psn(), 0xab_cdef);
        let mut c = b;
        Packet::new_unchecked(&mut c[..]).set_dest_qp(0xff00_0001);
        assert_eq!(&c[4..8], &[0xaa, 0, 0, 1]);
    }

    #[test]
    fn test_bad_version_and_truncated() {
        let mut b = RXE_QP1_BTH;
        b[1] = 0x01;
        let p = Packet::new_checked(&b[..]).unwrap();
        assert_eq!(Repr::parse(&p).unwrap_err(), Error::BadVersion);
        assert_eq!(
            Packet::new_checked(&RXE_QP1_BTH[..11]).unwrap_err(),
            Error::Truncated
        );
        assert_eq!(
            Repr::parse(&Packet::new_unchecked(&RXE_QP1_BTH[..3])).unwrap_err(),
            Error::Truncated
        );
    }

    proptest! {
        #[test]
        fn roundtrip(op in any::<u8>(), se in any::<bool>(), m in any::<bool>(), pad in 0u8..4,
                     pkey in any::<u16>(), qp in 0u32..(1 << 24), ack in any::<bool>(),
                     psn in 0u32..(1 << 24)) {
            let r = Repr { opcode: Opcode::from(op), solicited: se, mig_req: m, pad_count: pad,
                           pkey, dest_qp: qp, ack_req: ack, psn };
            let mut buf = vec![0xa5u8; r.buffer_len()];
            r.emit(&mut Packet::new_unchecked(&mut buf[..]));
            prop_assert_eq!(Repr::parse(&Packet::new_checked(&buf[..]).unwrap()).unwrap(), r);
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..24)) {
            let p = Packet::new_unchecked(&bytes[..]);
            let _ = Repr::parse(&p);
            if let Ok(p) = Packet::new_checked(&bytes[..]) {
                let _ = (p.opcode(), p.dest_qp(), p.psn(), p.ack_req(), p.pad_count(), p.resv8a());
            }
        }
    }
}
