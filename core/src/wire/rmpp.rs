//! The 12-byte RMPP header (IBA 13.6.2.1), at MAD offset 24..36.
//!
//! The view wraps the whole MAD buffer, like every header view here.

use super::{be, enum_with_unknown, mad, Field, Result};

mod field {
    use super::Field;
    pub(super) const VERSION: usize = 24;
    pub(super) const TYPE: usize = 25;
    pub(super) const RTIME_FLAGS: usize = 26;
    pub(super) const STATUS: usize = 27;
    pub(super) const SEG_NUM: Field = 28..32;
    pub(super) const PAYLEN_NEWWIN: Field = 32..36;
}

/// Offset of the RMPP header inside a MAD.
pub const OFFSET: usize = mad::HEADER_LEN;
/// Length of the RMPP header.
pub const HEADER_LEN: usize = field::PAYLEN_NEWWIN.end - OFFSET;
/// End of the RMPP header inside a MAD (where SA/vendor class headers begin).
pub const END: usize = field::PAYLEN_NEWWIN.end;
const _: () = assert!(HEADER_LEN == 12 && END == 36);

/// The only RMPP version defined by IBA.
pub const VERSION: u8 = 1;
/// Bytes of each segment counted by PayloadLength: 256 − 36 (kernel `IB_MGMT_RMPP_DATA`).
pub const SEGMENT_PAYLOAD: usize = super::MAD_SIZE - END;
/// RRespTime value meaning "no time given".
pub const RESP_TIME_NONE: u8 = 0x1f;

/// RMPPFlags bit: this MAD is part of an RMPP transfer.
pub const FLAG_ACTIVE: u8 = 0x01;
/// RMPPFlags bit: first segment.
pub const FLAG_FIRST: u8 = 0x02;
/// RMPPFlags bit: last segment.
pub const FLAG_LAST: u8 = 0x04;

enum_with_unknown! {
    /// RMPPType.
    pub enum RmppType(u8) {
        /// Not an RMPP packet (RMPPFlags.Active clear).
        None = 0,
        /// A data segment.
        Data = 1,
        /// An acknowledgement (NewWindowLast in the last word).
        Ack = 2,
        /// The receiver asks the sender to stop (resources).
        Stop = 3,
        /// Either side abandons the transfer.
        Abort = 4,
    }
}

enum_with_unknown! {
    /// RMPPStatus (IBA 13.6.2.3, table 178).
    pub enum RmppStatus(u8) {
        /// Normal.
        Success = 0,
        /// STOP: resources exhausted.
        ResourcesExhausted = 1,
        /// ABORT: total time too long.
        TotalTimeTooLong = 118,
        /// ABORT: inconsistent last and payload length.
        BadLength = 119,
        /// ABORT: inconsistent first and segment number.
        BadSegment = 120,
        /// ABORT: bad RMPPType.
        BadType = 121,
        /// ABORT: NewWindowLast too small.
        WindowTooSmall = 122,
        /// ABORT: segment number too big.
        SegmentTooBig = 123,
        /// ABORT: illegal status.
        BadStatus = 124,
        /// ABORT: unsupported version.
        UnsupportedVersion = 125,
        /// ABORT: too many retries.
        TooManyRetries = 126,
        /// ABORT: unspecified.
        Unspecified = 127,
    }
}

/// A view over the RMPP header of a MAD buffer.
#[derive(Debug, Clone)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    crate::wire::view_constructors!(END, "the MAD and RMPP headers");

    /// RMPPVersion.
    pub fn rmpp_version(&self) -> u8 {
        self.buffer.as_ref()[field::VERSION]
    }
    /// RMPPType.
    pub fn rmpp_type(&self) -> RmppType {
        RmppType::from(self.buffer.as_ref()[field::TYPE])
    }
    /// RRespTime (5 bits).
    pub fn resp_time(&self) -> u8 {
        self.buffer.as_ref()[field::RTIME_FLAGS] >> 3
    }
    /// RMPPFlags (3 bits).
    pub fn flags(&self) -> u8 {
        self.buffer.as_ref()[field::RTIME_FLAGS] & 0x07
    }
    /// RMPPFlags.Active.
    pub fn is_active(&self) -> bool {
        self.flags() & FLAG_ACTIVE != 0
    }
    /// RMPPFlags.First.
    pub fn is_first(&self) -> bool {
        self.flags() & FLAG_FIRST != 0
    }
    /// RMPPFlags.Last.
    pub fn is_last(&self) -> bool {
        self.flags() & FLAG_LAST != 0
    }
    /// RMPPStatus.
    pub fn rmpp_status(&self) -> RmppStatus {
        RmppStatus::from(self.buffer.as_ref()[field::STATUS])
    }
    /// SegmentNumber (DATA, ACK).
    pub fn seg_num(&self) -> u32 {
        be::u32(self.buffer.as_ref(), field::SEG_NUM)
    }
    /// PayloadLength (DATA) or NewWindowLast (ACK), raw.
    pub fn paylen_newwin(&self) -> u32 {
        be::u32(self.buffer.as_ref(), field::PAYLEN_NEWWIN)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Set RMPPVersion.
    pub fn set_rmpp_version(&mut self, v: u8) {
        self.buffer.as_mut()[field::VERSION] = v;
    }
    /// Set RMPPType.
    pub fn set_rmpp_type(&mut self, v: RmppType) {
        self.buffer.as_mut()[field::TYPE] = v.into();
    }
    /// Set RRespTime (low 5 bits used) and RMPPFlags (low 3 bits used).
    pub fn set_resp_time_flags(&mut self, resp_time: u8, flags: u8) {
        self.buffer.as_mut()[field::RTIME_FLAGS] = (resp_time << 3) | (flags & 0x07);
    }
    /// Set RMPPStatus.
    pub fn set_rmpp_status(&mut self, v: RmppStatus) {
        self.buffer.as_mut()[field::STATUS] = v.into();
    }
    /// Set SegmentNumber.
    pub fn set_seg_num(&mut self, v: u32) {
        be::set_u32(self.buffer.as_mut(), field::SEG_NUM, v);
    }
    /// Set PayloadLength / NewWindowLast.
    pub fn set_paylen_newwin(&mut self, v: u32) {
        be::set_u32(self.buffer.as_mut(), field::PAYLEN_NEWWIN, v);
    }
}

/// The RMPP header as a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// RMPPVersion (1; 0 when RMPP is not in use).
    pub version: u8,
    /// RMPPType.
    pub rmpp_type: RmppType,
    /// RRespTime, 5 bits ([`RESP_TIME_NONE`] = none).
    pub resp_time: u8,
    /// RMPPFlags, 3 bits.
    pub flags: u8,
    /// RMPPStatus.
    pub status: RmppStatus,
    /// SegmentNumber.
    pub seg_num: u32,
    /// PayloadLength (DATA) or NewWindowLast (ACK).
    pub paylen_newwin: u32,
}

impl Repr {
    /// Parse a checked header. The 5- and 3-bit fields are split; no value is refused:
    /// protocol checks (an ABORT with status BadType, …) are the engine's.
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Result<Repr> {
        packet.check_len()?;
        Ok(Repr {
            version: packet.rmpp_version(),
            rmpp_type: packet.rmpp_type(),
            resp_time: packet.resp_time(),
            flags: packet.flags(),
            status: packet.rmpp_status(),
            seg_num: packet.seg_num(),
            paylen_newwin: packet.paylen_newwin(),
        })
    }

    /// Bytes of the MAD buffer `emit` needs (the MAD header included).
    pub const fn buffer_len(&self) -> usize {
        END
    }

    /// Write the RMPP header into bytes 24..36 of the buffer.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        packet.set_rmpp_version(self.version);
        packet.set_rmpp_type(self.rmpp_type);
        packet.set_resp_time_flags(self.resp_time & 0x1f, self.flags);
        packet.set_rmpp_status(self.status);
        packet.set_seg_num(self.seg_num);
        packet.set_paylen_newwin(self.paylen_newwin);
    }

    /// RMPPFlags.Active.
    pub fn is_active(&self) -> bool {
        self.flags & FLAG_ACTIVE != 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::Error;
    use proptest::prelude::*;

    /// Bytes 24..36 of the first DATA segment of a 3-segment SA GetTableResp
    /// (600 bytes of SA data: PayloadLength = 3 × 220 − 0 pad), RRespTime none.
    static FIRST_DATA: [u8; 12] = [
        0x01, 0x01, 0xfb, 0x00, // v1, DATA, rtime 0x1f | Active|First, status 0
        0x00, 0x00, 0x00, 0x01, // segment 1
        0x00, 0x00, 0x02, 0x94, // PayloadLength 660
    ];
    /// An ACK of segment 64 opening the window to 128.
    static ACK: [u8; 12] = [
        0x01, 0x02, 0x01, 0x00, 0x00, 0x00, 0x00, 0x40, 0x00, 0x00, 0x00, 0x80,
    ];
    /// An ABORT with status 119 (BadLength).
    static ABORT_BAD_LEN: [u8; 12] = [
        0x01, 0x04, 0x01, 0x77, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    ];

    fn with_mad(rmpp: &[u8; 12]) -> [u8; 36] {
        let mut b = [0u8; 36];
        b[24..].copy_from_slice(rmpp);
        b
    }

    #[test]
    fn test_deconstruct() {
        let b = with_mad(&FIRST_DATA);
        let p = Packet::new_checked(&b[..]).unwrap();
        assert_eq!(p.rmpp_version(), 1);
        assert_eq!(p.rmpp_type(), RmppType::Data);
        assert_eq!(p.resp_time(), RESP_TIME_NONE);
        assert!(p.is_active() && p.is_first() && !p.is_last());
        assert_eq!(p.seg_num(), 1);
        assert_eq!(p.paylen_newwin(), 660);

        let b = with_mad(&ACK);
        let p = Packet::new_checked(&b[..]).unwrap();
        assert_eq!(p.rmpp_type(), RmppType::Ack);
        assert_eq!((p.seg_num(), p.paylen_newwin()), (64, 128));

        let b = with_mad(&ABORT_BAD_LEN);
        let p = Packet::new_checked(&b[..]).unwrap();
        assert_eq!(p.rmpp_type(), RmppType::Abort);
        assert_eq!(p.rmpp_status(), RmppStatus::BadLength);
    }

    #[test]
    fn test_emit_over_garbage() {
        let mut b = [0xa5u8; 36];
        let r = Repr {
            version: 1,
            rmpp_type: RmppType::Data,
            resp_time: RESP_TIME_NONE,
            flags: FLAG_ACTIVE | FLAG_FIRST,
            status: RmppStatus::Success,
            seg_num: 1,
            paylen_newwin: 660,
        };
        r.emit(&mut Packet::new_unchecked(&mut b[..]));
        assert_eq!(&b[24..], &FIRST_DATA);
        assert_eq!(&b[..24], &[0xa5; 24], "the MAD header is not touched");
        assert_eq!(
            Repr::parse(&Packet::new_checked(&b[..]).unwrap()).unwrap(),
            r
        );
    }

    #[test]
    fn test_truncated() {
        let b = with_mad(&ACK);
        assert_eq!(Packet::new_checked(&b[..35]).unwrap_err(), Error::Truncated);
    }

    #[test]
    fn status_codes_are_complete() {
        let named: Vec<u8> = [0u8, 1, 118, 119, 120, 121, 122, 123, 124, 125, 126, 127]
            .into_iter()
            .filter(|&c| !matches!(RmppStatus::from(c), RmppStatus::Unknown(_)))
            .collect();
        assert_eq!(named.len(), 12);
        assert_eq!(RmppStatus::from(2), RmppStatus::Unknown(2));
    }

    proptest! {
        #[test]
        fn roundtrip(v in any::<u8>(), t in any::<u8>(), rt in 0u8..32, fl in 0u8..8,
                     s in any::<u8>(), seg in any::<u32>(), pl in any::<u32>()) {
            let r = Repr { version: v, rmpp_type: t.into(), resp_time: rt, flags: fl,
                           status: s.into(), seg_num: seg, paylen_newwin: pl };
            let mut buf = vec![0x5au8; r.buffer_len()];
            r.emit(&mut Packet::new_unchecked(&mut buf[..]));
            prop_assert_eq!(Repr::parse(&Packet::new_checked(&buf[..]).unwrap()).unwrap(), r);
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..48)) {
            if let Ok(p) = Packet::new_checked(&bytes[..]) {
                let _ = Repr::parse(&p);
            }
        }
    }
}
