//! Subnet administration (IBA 15.2.1.1): the 20-byte SA header at MAD
//! offset 36..56, SA attribute IDs and status codes, record iteration over
//! a (coalesced RMPP) GetTable response, the record views (one module per
//! record) and their ComponentMask layouts ([`comp`]).
//!
//! The header view wraps the whole MAD (or the whole coalesced message),
//! like every header view here. Record views wrap one record.

use super::{be, enum_with_unknown, mad, Error, Field, Result};

pub mod comp;
pub mod guid_info_record;
pub mod inform_info;
pub mod inform_info_record;
pub mod link_record;
pub mod mcmember_record;
pub mod node_record;
pub mod notice;
pub mod path_record;
pub mod port_info_record;
pub mod service_record;
pub mod switch_info_record;

mod field {
    use super::Field;
    pub(super) const SM_KEY: Field = 36..44;
    pub(super) const ATTR_OFFSET: Field = 44..46;
    pub(super) const RESERVED: Field = 46..48;
    pub(super) const COMP_MASK: Field = 48..56;
}

/// Offset of the SA header in a MAD.
pub const HEADER_OFFSET: usize = super::rmpp::END;
/// Offset of the SA data (the records) in a MAD and in a coalesced message.
pub const DATA_OFFSET: usize = field::COMP_MASK.end;
/// Bytes of SA data in one MAD (`UMAD_LEN_SA_DATA`).
pub const DATA_LEN: usize = super::MAD_SIZE - DATA_OFFSET;
/// The SA class version.
pub const CLASS_VERSION: u8 = 2;
const _: () = assert!(HEADER_OFFSET == 36 && DATA_OFFSET == 56 && DATA_LEN == 200);

enum_with_unknown! {
    /// SA attribute IDs (IBA 15.2.5, table 206).
    pub enum AttrId(u16) {
        /// ClassPortInfo.
        ClassPortInfo = 0x0001,
        /// Notice.
        Notice = 0x0002,
        /// InformInfo.
        InformInfo = 0x0003,
        /// NodeRecord.
        NodeRecord = 0x0011,
        /// PortInfoRecord.
        PortInfoRecord = 0x0012,
        /// SLtoVLMappingTableRecord.
        SlToVlRecord = 0x0013,
        /// SwitchInfoRecord.
        SwitchInfoRecord = 0x0014,
        /// LinearForwardingTableRecord.
        LinearFdbRecord = 0x0015,
        /// RandomForwardingTableRecord.
        RandomFdbRecord = 0x0016,
        /// MulticastForwardingTableRecord.
        MulticastFdbRecord = 0x0017,
        /// SMInfoRecord.
        SmInfoRecord = 0x0018,
        /// LinkRecord.
        LinkRecord = 0x0020,
        /// GuidInfoRecord.
        GuidInfoRecord = 0x0030,
        /// ServiceRecord.
        ServiceRecord = 0x0031,
        /// P_KeyTableRecord.
        PKeyTableRecord = 0x0033,
        /// PathRecord.
        PathRecord = 0x0035,
        /// VLArbitrationTableRecord.
        VlArbRecord = 0x0036,
        /// MCMemberRecord.
        McMemberRecord = 0x0038,
        /// TraceRecord.
        TraceRecord = 0x0039,
        /// MultiPathRecord.
        MultiPathRecord = 0x003a,
        /// ServiceAssociationRecord.
        ServiceAssocRecord = 0x003b,
        /// InformInfoRecord.
        InformInfoRecord = 0x00f3,
    }
}

enum_with_unknown! {
    /// SA status codes: the class-specific bits 8–14 of the MAD status
    /// (IBA 15.2.1.1, table 204), from [`mad::MadStatus::class_specific`].
    pub enum SaStatus(u8) {
        /// No SA-specific error.
        Ok = 0,
        /// ERR_NO_RESOURCES.
        NoResources = 1,
        /// ERR_REQ_INVALID.
        ReqInvalid = 2,
        /// ERR_NO_RECORDS.
        NoRecords = 3,
        /// ERR_TOO_MANY_RECORDS.
        TooManyRecords = 4,
        /// ERR_REQ_INVALID_GID.
        ReqInvalidGid = 5,
        /// ERR_REQ_INSUFFICIENT_COMPONENTS.
        InsufficientComponents = 6,
        /// ERR_REQ_DENIED.
        ReqDenied = 7,
        /// ERR_STATUS_PRIO_SUGGESTED.
        PrioSuggested = 8,
    }
}

impl SaStatus {
    /// The SA status code of a MAD status word.
    pub fn of(status: mad::MadStatus) -> SaStatus {
        SaStatus::from(status.class_specific())
    }

    /// The MAD status word carrying this SA code (class-independent bits 0).
    pub fn to_mad_status(self) -> mad::MadStatus {
        mad::MadStatus(u16::from(u8::from(self) & 0x7f) << 8)
    }
}

/// A view over the SA header of a MAD or of a coalesced SA message.
#[derive(Debug, Clone)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    crate::wire::view_constructors!(DATA_OFFSET, "the SA header (56 bytes)");

    /// SM_Key.
    pub fn sm_key(&self) -> u64 {
        be::u64(self.buffer.as_ref(), field::SM_KEY)
    }
    /// AttributeOffset, in 8-byte units.
    pub fn attr_offset(&self) -> u16 {
        be::u16(self.buffer.as_ref(), field::ATTR_OFFSET)
    }
    /// ComponentMask.
    pub fn comp_mask(&self) -> u64 {
        be::u64(self.buffer.as_ref(), field::COMP_MASK)
    }
    /// The SA data after the header: one record in a request, the records
    /// of a (coalesced) GetTable response.
    pub fn data(&self) -> &[u8] {
        &self.buffer.as_ref()[DATA_OFFSET..]
    }
    /// The records of the data, each `attr_offset * 8` bytes. Wrap a buffer
    /// cut to the message's real length (for RMPP, 56 + the coalesced
    /// payload): padding after the last record would count as records.
    ///
    /// # Errors
    ///
    /// [`Error::BadAttrOffset`] if AttributeOffset is 0 but there is data.
    pub fn records(&self) -> Result<Records<'_>> {
        Records::new(self.data(), self.attr_offset())
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Set SM_Key.
    pub fn set_sm_key(&mut self, v: u64) {
        be::set_u64(self.buffer.as_mut(), field::SM_KEY, v);
    }
    /// Set AttributeOffset (8-byte units).
    pub fn set_attr_offset(&mut self, v: u16) {
        be::set_u16(self.buffer.as_mut(), field::ATTR_OFFSET, v);
    }
    /// Set ComponentMask.
    pub fn set_comp_mask(&mut self, v: u64) {
        be::set_u64(self.buffer.as_mut(), field::COMP_MASK, v);
    }
    /// Zero the reserved field.
    pub fn clear_reserved(&mut self) {
        self.buffer.as_mut()[field::RESERVED].fill(0);
    }
    /// The SA data, mutably.
    pub fn data_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[DATA_OFFSET..]
    }
}

/// The SA header as a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Repr {
    /// SM_Key.
    pub sm_key: u64,
    /// AttributeOffset, in 8-byte units.
    pub attr_offset: u16,
    /// ComponentMask.
    pub comp_mask: u64,
}

impl Repr {
    /// Parse a checked SA header. AttributeOffset is not judged here: see
    /// [`Packet::records`].
    ///
    /// # Errors
    ///
    /// [`Error::Truncated`] if the buffer ends before byte 56.
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Result<Repr> {
        packet.check_len()?;
        Ok(Repr {
            sm_key: packet.sm_key(),
            attr_offset: packet.attr_offset(),
            comp_mask: packet.comp_mask(),
        })
    }

    /// Bytes of the MAD buffer `emit` needs (the headers before it included).
    pub const fn buffer_len(&self) -> usize {
        DATA_OFFSET
    }

    /// Write bytes 36..56 (reserved as zero).
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        packet.set_sm_key(self.sm_key);
        packet.set_attr_offset(self.attr_offset);
        packet.clear_reserved();
        packet.set_comp_mask(self.comp_mask);
    }

    /// AttributeOffset for a record of `len` bytes: rounded up to 8-byte units.
    pub const fn attr_offset_for(len: usize) -> u16 {
        len.div_ceil(8) as u16
    }
}

/// The records of SA data: `count = data.len() / (attr_offset * 8)`, as
/// saquery computes it; a trailing partial record is not yielded.
#[derive(Debug, Clone)]
pub struct Records<'a> {
    chunks: core::slice::ChunksExact<'a, u8>,
}

impl<'a> Records<'a> {
    /// Records of `attr_offset * 8` bytes over `data` (the bytes after the
    /// SA header, already cut to the message's real length).
    ///
    /// # Errors
    ///
    /// [`Error::BadAttrOffset`] if `attr_offset` is 0 and `data` is not empty.
    pub fn new(data: &'a [u8], attr_offset: u16) -> Result<Records<'a>> {
        let size = usize::from(attr_offset) * 8;
        if size == 0 {
            if data.is_empty() {
                return Ok(Records {
                    chunks: data.chunks_exact(1),
                });
            }
            return Err(Error::BadAttrOffset);
        }
        Ok(Records {
            chunks: data.chunks_exact(size),
        })
    }
}

impl<'a> Iterator for Records<'a> {
    type Item = &'a [u8];
    fn next(&mut self) -> Option<&'a [u8]> {
        self.chunks.next()
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        self.chunks.size_hint()
    }
}

impl ExactSizeIterator for Records<'_> {}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Bytes 36..56 of a PathRecord GetTable request: SM_Key 0, AttributeOffset
    /// 8 (64 bytes), ComponentMask DGID|SGID|NumbPath (0x100c).
    const PR_QUERY: [u8; 20] = [
        0, 0, 0, 0, 0, 0, 0, 0, // SM_Key
        0x00, 0x08, 0x00, 0x00, // AttributeOffset 8, reserved
        0, 0, 0, 0, 0, 0, 0x10, 0x0c, // ComponentMask
    ];

    fn with_mad(sa: &[u8; 20]) -> [u8; 56] {
        let mut b = [0u8; 56];
        b[36..].copy_from_slice(sa);
        b
    }

    #[test]
    fn test_deconstruct() {
        let b = with_mad(&PR_QUERY);
        let p = Packet::new_checked(&b[..]).unwrap();
        assert_eq!(p.sm_key(), 0);
        assert_eq!(p.attr_offset(), 8);
        assert_eq!(p.comp_mask(), 0x100c);
        assert!(p.data().is_empty());
        assert_eq!(p.records().unwrap().count(), 0);
    }

    #[test]
    fn test_emit_over_garbage() {
        let mut b = [0xa5u8; 56];
        let r = Repr {
            sm_key: 0,
            attr_offset: Repr::attr_offset_for(64),
            comp_mask: 0x100c,
        };
        r.emit(&mut Packet::new_unchecked(&mut b[..]));
        assert_eq!(&b[36..], &PR_QUERY);
        assert_eq!(
            &b[..36],
            &[0xa5u8; 36],
            "the MAD and RMPP headers are not touched"
        );
        assert_eq!(
            Repr::parse(&Packet::new_checked(&b[..]).unwrap()).unwrap(),
            r
        );
    }

    #[test]
    fn test_truncated() {
        let b = with_mad(&PR_QUERY);
        assert_eq!(Packet::new_checked(&b[..55]).unwrap_err(), Error::Truncated);
        assert_eq!(
            Repr::parse(&Packet::new_unchecked(&b[..40])).unwrap_err(),
            Error::Truncated
        );
    }

    #[test]
    fn records_of_a_coalesced_gettable() {
        // 3 NodeRecords of 112 bytes (attr offset 14) plus 5 stray bytes.
        let mut msg = vec![0u8; 56 + 3 * 112 + 5];
        msg[45] = 14;
        for (i, rec) in msg[56..56 + 336].chunks_mut(112).enumerate() {
            rec[1] = i as u8 + 1; // LID i+1
        }
        let p = Packet::new_checked(&msg[..]).unwrap();
        let recs = p.records().unwrap();
        assert_eq!(recs.len(), 3);
        let lids: Vec<u8> = recs.map(|r| r[1]).collect();
        assert_eq!(lids, [1, 2, 3]);
    }

    #[test]
    fn zero_attr_offset() {
        let mut msg = [0u8; 64];
        let p = Packet::new_checked(&msg[..]).unwrap();
        assert_eq!(p.records().unwrap_err(), Error::BadAttrOffset);
        // An empty response (ERR_NO_RECORDS) may carry offset 0.
        let p = Packet::new_checked(&msg[..56]).unwrap();
        assert_eq!(p.records().unwrap().count(), 0);
        msg[45] = 1;
        assert_eq!(
            Packet::new_checked(&msg[..])
                .unwrap()
                .records()
                .unwrap()
                .len(),
            1
        );
    }

    #[test]
    fn sa_status_codes() {
        let s = mad::MadStatus(0x0300);
        assert_eq!(SaStatus::of(s), SaStatus::NoRecords);
        assert_eq!(SaStatus::NoRecords.to_mad_status(), s);
        assert_eq!(SaStatus::of(mad::MadStatus(0x0900)), SaStatus::Unknown(9));
        assert_eq!(AttrId::from(0x35), AttrId::PathRecord);
        assert_eq!(u16::from(AttrId::InformInfoRecord), 0xf3);
    }

    proptest! {
        #[test]
        fn roundtrip(k in any::<u64>(), o in any::<u16>(), m in any::<u64>()) {
            let r = Repr { sm_key: k, attr_offset: o, comp_mask: m };
            let mut buf = vec![0xa5u8; r.buffer_len()];
            r.emit(&mut Packet::new_unchecked(&mut buf[..]));
            prop_assert_eq!(Repr::parse(&Packet::new_checked(&buf[..]).unwrap()).unwrap(), r);
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
            if let Ok(p) = Packet::new_checked(&bytes[..]) {
                let _ = Repr::parse(&p);
                if let Ok(recs) = p.records() {
                    let n = recs.len();
                    prop_assert_eq!(recs.count(), n);
                }
            }
        }
    }
}
