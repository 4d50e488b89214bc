//! The 24-byte common MAD header (IBA 13.4.3), present in every MAD.

use super::{be, enum_with_unknown, Field, Result};

mod field {
    use super::Field;
    pub(super) const BASE_VERSION: usize = 0;
    pub(super) const MGMT_CLASS: usize = 1;
    pub(super) const CLASS_VERSION: usize = 2;
    pub(super) const METHOD: usize = 3;
    pub(super) const STATUS: Field = 4..6;
    pub(super) const CLASS_SPECIFIC: Field = 6..8;
    pub(super) const TID: Field = 8..16;
    pub(super) const ATTR_ID: Field = 16..18;
    pub(super) const RESERVED: Field = 18..20;
    pub(super) const ATTR_MOD: Field = 20..24;
}

/// Length of the common MAD header.
pub const HEADER_LEN: usize = field::ATTR_MOD.end;
const _: () = assert!(HEADER_LEN == 24);

/// The base version of every IB MAD.
pub const BASE_VERSION: u8 = 1;

/// The response bit of the method byte.
pub const METHOD_RESP: u8 = 0x80;

enum_with_unknown! {
    /// Management class (IBA 13.4.4).
    pub enum MgmtClass(u8) {
        /// Subnet management, LID-routed (QP0).
        SubnLid = 0x01,
        /// Subnet administration.
        SubnAdm = 0x03,
        /// Performance management.
        Perf = 0x04,
        /// Baseboard management.
        Bm = 0x05,
        /// Device management.
        DevMgmt = 0x06,
        /// Communication management.
        Cm = 0x07,
        /// SNMP tunneling.
        Snmp = 0x08,
        /// Device administration.
        DevAdm = 0x10,
        /// Boot management.
        Boot = 0x11,
        /// Bus-independent services.
        Bis = 0x12,
        /// Congestion control.
        Cc = 0x21,
        /// Subnet management, directed route (QP0).
        SubnDirectedRoute = 0x81,
    }
}

impl MgmtClass {
    /// Subnet management classes go to QP0; everything else to QP1.
    #[inline]
    pub fn is_smp(self) -> bool {
        matches!(self, MgmtClass::SubnLid | MgmtClass::SubnDirectedRoute)
    }

    /// Vendor range 1 (0x09–0x0F): vendor classes with no OUI and no RMPP.
    #[inline]
    pub fn is_vendor_range1(self) -> bool {
        (0x09..=0x0f).contains(&u8::from(self))
    }

    /// Vendor range 2 (0x30–0x4F): classes that carry an OUI and may use RMPP.
    #[inline]
    pub fn is_vendor_range2(self) -> bool {
        (0x30..=0x4f).contains(&u8::from(self))
    }

    /// Whether the class may use RMPP (kernel `ib_is_mad_class_rmpp`).
    #[inline]
    pub fn is_rmpp_class(self) -> bool {
        matches!(
            self,
            MgmtClass::SubnAdm | MgmtClass::DevMgmt | MgmtClass::DevAdm | MgmtClass::Bis
        ) || self.is_vendor_range2()
    }

    /// Where the class data starts in each MAD (and in each RMPP segment):
    /// the class header is repeated in every segment (kernel `ib_get_mad_data_offset`).
    #[inline]
    pub fn data_offset(self) -> usize {
        match self {
            MgmtClass::SubnAdm => 56,
            MgmtClass::DevMgmt | MgmtClass::DevAdm | MgmtClass::Bis => 64,
            c if c.is_vendor_range2() => 40,
            _ => HEADER_LEN,
        }
    }

    /// Where a (single-MAD) request's attribute starts: after the class header, which
    /// for SMPs and PerfMgt is 40 reserved bytes (IBA 14.2.1, 16.1.1), unlike
    /// [`MgmtClass::data_offset`], the RMPP notion that puts PerfMgt's data at 24.
    #[inline]
    pub fn attr_offset(self) -> usize {
        match self {
            MgmtClass::SubnLid | MgmtClass::SubnDirectedRoute | MgmtClass::Perf => 64,
            other => other.data_offset(),
        }
    }
}

enum_with_unknown! {
    /// Method, including the response bit (IBA 13.4.5, 15.2.2).
    pub enum Method(u8) {
        /// Get.
        Get = 0x01,
        /// Set.
        Set = 0x02,
        /// Send.
        Send = 0x03,
        /// Trap.
        Trap = 0x05,
        /// Report.
        Report = 0x06,
        /// TrapRepress.
        TrapRepress = 0x07,
        /// SA GetTable.
        GetTable = 0x12,
        /// SA GetTraceTable.
        GetTraceTable = 0x13,
        /// SA GetMulti.
        GetMulti = 0x14,
        /// SA Delete.
        Delete = 0x15,
        /// GetResp.
        GetResp = 0x81,
        /// ReportResp.
        ReportResp = 0x86,
        /// SA GetTableResp.
        GetTableResp = 0x92,
        /// SA GetMultiResp.
        GetMultiResp = 0x94,
        /// SA DeleteResp.
        DeleteResp = 0x95,
    }
}

impl Method {
    /// The R bit is set (a response).
    #[inline]
    pub fn is_response_bit(self) -> bool {
        u8::from(self) & METHOD_RESP != 0
    }

    /// The response method for this request method (sets the R bit).
    #[inline]
    pub fn response(self) -> Method {
        Method::from(u8::from(self) | METHOD_RESP)
    }
}

/// The 16-bit MAD status (IBA 13.4.7, table 139).
///
/// Bits 0–4 are class-independent; bits 8–14 belong to the class. In a
/// directed-route SMP, bit 15 is the D (direction) bit, not status:
/// see [`crate::wire`]'s SMP view.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct MadStatus(pub u16);

enum_with_unknown! {
    /// The class-independent invalid-field code (status bits 2–4).
    pub enum InvalidField(u8) {
        /// No invalid fields.
        None = 0,
        /// Bad version: class version or base version not supported.
        BadVersion = 1,
        /// The method is not supported.
        UnsupportedMethod = 2,
        /// The method/attribute combination is not supported.
        UnsupportedMethodAttr = 3,
        /// One or more fields of the attribute or modifier hold invalid values.
        InvalidAttrValue = 7,
    }
}

impl MadStatus {
    /// Success.
    pub const OK: MadStatus = MadStatus(0);
    /// Busy (bit 0): the request was discarded, retry later.
    pub const BUSY: u16 = 0x0001;
    /// Redirect required (bit 1): see ClassPortInfo.
    pub const REDIRECT: u16 = 0x0002;
    /// Bad base/class version (code 1 in bits 2–4).
    pub const BAD_VERSION: MadStatus = MadStatus(1 << 2);
    /// Method not supported (code 2).
    pub const UNSUPPORTED_METHOD: MadStatus = MadStatus(2 << 2);
    /// Method/attribute combination not supported (code 3): the kernel's
    /// answer (0x000c) to an unclaimed Get/Set.
    pub const UNSUPPORTED_METHOD_ATTR: MadStatus = MadStatus(3 << 2);
    /// Invalid attribute or modifier value (code 7).
    pub const INVALID_ATTR_VALUE: MadStatus = MadStatus(7 << 2);

    /// Busy bit.
    #[inline]
    pub fn busy(self) -> bool {
        self.0 & Self::BUSY != 0
    }
    /// Redirect-required bit.
    #[inline]
    pub fn redirect(self) -> bool {
        self.0 & Self::REDIRECT != 0
    }
    /// The class-independent invalid-field code.
    #[inline]
    pub fn invalid_field(self) -> InvalidField {
        InvalidField::from(((self.0 >> 2) & 0x7) as u8)
    }
    /// The class-specific bits 8–14 (SA status codes live here).
    #[inline]
    pub fn class_specific(self) -> u8 {
        ((self.0 >> 8) & 0x7f) as u8
    }
}

/// A view over a MAD buffer's common header.
#[derive(Debug, Clone)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    crate::wire::view_constructors!(HEADER_LEN, "every header field");

    /// BaseVersion.
    pub fn base_version(&self) -> u8 {
        self.buffer.as_ref()[field::BASE_VERSION]
    }
    /// MgmtClass.
    // Always inlined, like `method`: a caller that turns the open enum back
    // into its byte then compiles to the one load (the engine's hot paths do).
    #[inline(always)]
    pub fn mgmt_class(&self) -> MgmtClass {
        MgmtClass::from(self.buffer.as_ref()[field::MGMT_CLASS])
    }
    /// ClassVersion.
    pub fn class_version(&self) -> u8 {
        self.buffer.as_ref()[field::CLASS_VERSION]
    }
    /// Method (with the R bit).
    #[inline(always)]
    pub fn method(&self) -> Method {
        Method::from(self.buffer.as_ref()[field::METHOD])
    }
    /// Status, raw 16 bits.
    pub fn status(&self) -> MadStatus {
        MadStatus(be::u16(self.buffer.as_ref(), field::STATUS))
    }
    /// ClassSpecific (hop pointer and hop count in a DR SMP).
    pub fn class_specific(&self) -> u16 {
        be::u16(self.buffer.as_ref(), field::CLASS_SPECIFIC)
    }
    /// TransactionID.
    pub fn tid(&self) -> u64 {
        be::u64(self.buffer.as_ref(), field::TID)
    }
    /// AttributeID.
    pub fn attr_id(&self) -> u16 {
        be::u16(self.buffer.as_ref(), field::ATTR_ID)
    }
    /// AttributeModifier.
    pub fn attr_mod(&self) -> u32 {
        be::u32(self.buffer.as_ref(), field::ATTR_MOD)
    }
    /// Whether the MAD is a response (kernel `ib_response_mad`): the R bit,
    /// or TrapRepress, or a BM MAD with the response bit of its modifier.
    pub fn is_response(&self) -> bool {
        let method = self.buffer.as_ref()[field::METHOD];
        method & METHOD_RESP != 0
            || method == u8::from(Method::TrapRepress)
            || (self.mgmt_class() == MgmtClass::Bm && self.attr_mod() & 0x0100_0000 != 0)
    }
    /// Everything after the common header.
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Set BaseVersion.
    pub fn set_base_version(&mut self, v: u8) {
        self.buffer.as_mut()[field::BASE_VERSION] = v;
    }
    /// Set MgmtClass.
    pub fn set_mgmt_class(&mut self, v: MgmtClass) {
        self.buffer.as_mut()[field::MGMT_CLASS] = v.into();
    }
    /// Set ClassVersion.
    pub fn set_class_version(&mut self, v: u8) {
        self.buffer.as_mut()[field::CLASS_VERSION] = v;
    }
    /// Set Method.
    pub fn set_method(&mut self, v: Method) {
        self.buffer.as_mut()[field::METHOD] = v.into();
    }
    /// Set Status.
    pub fn set_status(&mut self, v: MadStatus) {
        be::set_u16(self.buffer.as_mut(), field::STATUS, v.0);
    }
    /// Set ClassSpecific.
    pub fn set_class_specific(&mut self, v: u16) {
        be::set_u16(self.buffer.as_mut(), field::CLASS_SPECIFIC, v);
    }
    /// Set TransactionID.
    pub fn set_tid(&mut self, v: u64) {
        be::set_u64(self.buffer.as_mut(), field::TID, v);
    }
    /// Set AttributeID.
    pub fn set_attr_id(&mut self, v: u16) {
        be::set_u16(self.buffer.as_mut(), field::ATTR_ID, v);
    }
    /// Set AttributeModifier.
    pub fn set_attr_mod(&mut self, v: u32) {
        be::set_u32(self.buffer.as_mut(), field::ATTR_MOD, v);
    }
    /// Zero the reserved field.
    pub fn clear_reserved(&mut self) {
        self.buffer.as_mut()[field::RESERVED].fill(0);
    }
    /// Everything after the common header, mutably.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[HEADER_LEN..]
    }
}

/// The common MAD header as a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// BaseVersion (1 for IB).
    pub base_version: u8,
    /// MgmtClass.
    pub mgmt_class: MgmtClass,
    /// ClassVersion.
    pub class_version: u8,
    /// Method, with the R bit.
    pub method: Method,
    /// Status.
    pub status: MadStatus,
    /// ClassSpecific.
    pub class_specific: u16,
    /// TransactionID.
    pub tid: u64,
    /// AttributeID.
    pub attr_id: u16,
    /// AttributeModifier.
    pub attr_mod: u32,
}

impl Repr {
    /// Parse a checked header. Any base version is accepted here (OPA uses
    /// 0x80); the engine decides what it serves.
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Result<Repr> {
        packet.check_len()?;
        Ok(Repr {
            base_version: packet.base_version(),
            mgmt_class: packet.mgmt_class(),
            class_version: packet.class_version(),
            method: packet.method(),
            status: packet.status(),
            class_specific: packet.class_specific(),
            tid: packet.tid(),
            attr_id: packet.attr_id(),
            attr_mod: packet.attr_mod(),
        })
    }

    /// Bytes `emit` writes.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Write every header field (reserved as zero). The buffer must hold
    /// at least [`HEADER_LEN`] bytes.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        packet.set_base_version(self.base_version);
        packet.set_mgmt_class(self.mgmt_class);
        packet.set_class_version(self.class_version);
        packet.set_method(self.method);
        packet.set_status(self.status);
        packet.set_class_specific(self.class_specific);
        packet.set_tid(self.tid);
        packet.set_attr_id(self.attr_id);
        packet.clear_reserved();
        packet.set_attr_mod(self.attr_mod);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::Error;
    use proptest::prelude::*;

    /// A SubnAdm GetTable request for NodeRecords (IBA 15.2.5.2), TID 0x0000_0001_1234_5678.
    static SA_GETTABLE_HDR: [u8; 24] = [
        0x01, 0x03, 0x02, 0x12, // base 1, SA, version 2, GetTable
        0x00, 0x00, 0x00, 0x00, // status, class specific
        0x00, 0x00, 0x00, 0x01, 0x12, 0x34, 0x56, 0x78, // TID
        0x00, 0x11, 0x00, 0x00, // NodeRecord, reserved
        0x00, 0x00, 0x00, 0x00, // attribute modifier
    ];

    fn sa_gettable_repr() -> Repr {
        Repr {
            base_version: 1,
            mgmt_class: MgmtClass::SubnAdm,
            class_version: 2,
            method: Method::GetTable,
            status: MadStatus::OK,
            class_specific: 0,
            tid: 0x0000_0001_1234_5678,
            attr_id: 0x0011,
            attr_mod: 0,
        }
    }

    #[test]
    fn test_deconstruct() {
        let p = Packet::new_checked(&SA_GETTABLE_HDR[..]).unwrap();
        assert_eq!(p.base_version(), 1);
        assert_eq!(p.mgmt_class(), MgmtClass::SubnAdm);
        assert_eq!(p.class_version(), 2);
        assert_eq!(p.method(), Method::GetTable);
        assert_eq!(p.tid(), 0x0000_0001_1234_5678);
        assert_eq!(p.attr_id(), 0x11);
        assert!(!p.is_response());
    }

    #[test]
    fn test_construct_over_garbage() {
        let mut bytes = [0xa5u8; 24];
        let mut p = Packet::new_unchecked(&mut bytes[..]);
        sa_gettable_repr().emit(&mut p);
        assert_eq!(bytes, SA_GETTABLE_HDR);
    }

    #[test]
    fn test_parse_emit() {
        let p = Packet::new_checked(&SA_GETTABLE_HDR[..]).unwrap();
        assert_eq!(Repr::parse(&p).unwrap(), sa_gettable_repr());
    }

    #[test]
    fn test_truncated() {
        assert_eq!(
            Packet::new_checked(&SA_GETTABLE_HDR[..23]).unwrap_err(),
            Error::Truncated
        );
        let p = Packet::new_unchecked(&SA_GETTABLE_HDR[..10]);
        assert_eq!(Repr::parse(&p).unwrap_err(), Error::Truncated);
    }

    #[test]
    fn status_bits_decode() {
        let s = MadStatus(0x000c);
        assert_eq!(s.invalid_field(), InvalidField::UnsupportedMethodAttr);
        assert!(!s.busy() && !s.redirect());
        let s = MadStatus(0x0303);
        assert!(s.busy() && s.redirect());
        assert_eq!(s.class_specific(), 3);
        assert_eq!(
            MadStatus(0x1c).invalid_field(),
            InvalidField::InvalidAttrValue
        );
        assert_eq!(MadStatus(5 << 2).invalid_field(), InvalidField::Unknown(5));
    }

    #[test]
    fn class_properties() {
        assert_eq!(MgmtClass::SubnAdm.data_offset(), 56);
        assert_eq!(MgmtClass::from(0x30).data_offset(), 40);
        assert_eq!(MgmtClass::DevMgmt.data_offset(), 64);
        assert_eq!(MgmtClass::Perf.data_offset(), 24);
        assert!(MgmtClass::from(0x4f).is_rmpp_class());
        assert!(!MgmtClass::Perf.is_rmpp_class());
        assert!(MgmtClass::SubnDirectedRoute.is_smp());
        assert_eq!(MgmtClass::from(0x42), MgmtClass::Unknown(0x42));
        assert_eq!(Method::Get.response(), Method::GetResp);
        assert_eq!(Method::GetMulti.response(), Method::GetMultiResp);
    }

    #[test]
    fn response_detection() {
        let mut b = SA_GETTABLE_HDR;
        b[3] = 0x07; // TrapRepress is a response without the R bit
        assert!(Packet::new_checked(&b[..]).unwrap().is_response());
        b[1] = 0x05; // BM with the response bit in the modifier
        b[3] = 0x01;
        b[20] = 0x01;
        assert!(Packet::new_checked(&b[..]).unwrap().is_response());
    }

    prop_compose! {
        fn arb_repr()(b in any::<u8>(), c in any::<u8>(), v in any::<u8>(), m in any::<u8>(),
                      s in any::<u16>(), cs in any::<u16>(), tid in any::<u64>(),
                      id in any::<u16>(), am in any::<u32>()) -> Repr {
            Repr { base_version: b, mgmt_class: c.into(), class_version: v, method: m.into(),
                   status: MadStatus(s), class_specific: cs, tid, attr_id: id, attr_mod: am }
        }
    }

    proptest! {
        #[test]
        fn roundtrip(r in arb_repr()) {
            let mut buf = vec![0xa5u8; r.buffer_len()];
            r.emit(&mut Packet::new_unchecked(&mut buf[..]));
            prop_assert_eq!(Repr::parse(&Packet::new_checked(&buf[..]).unwrap()).unwrap(), r);
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            if let Ok(p) = Packet::new_checked(&bytes[..]) {
                let _ = Repr::parse(&p);
                let _ = p.is_response();
                let _ = p.payload().len();
            }
        }
    }
}
