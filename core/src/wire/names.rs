//! Names of management classes, methods, attributes, status codes and RMPP
//! codes, and a one-line, tcpdump-style rendering of any MAD ([`pretty`]).
//!
//! ```text
//! SubnAdm v2 GetTableResp NodeRecord(0x0011) tid 0x0000000112345678 status 0x0000 rmpp DATA seg 3 FL paylen 0
//! SubnDR v1 GetResp NodeInfo(0x0011) tid 0x000000000000002a status 0x0000 hop 3/3 D=1
//! ```
//!
//! Rendering never panics, whatever the bytes: a buffer too short for a
//! header it needs ends the line with `<truncated N bytes>`.

use core::fmt;

use super::mad::{self, MadStatus, MgmtClass};
use super::rmpp::{self, RmppStatus, RmppType};
use super::sa::SaStatus;
use super::{be, vendor};

/// Short name of a management class, as vmad prints it.
pub fn class_str(class: u8) -> Option<&'static str> {
    Some(match class {
        0x01 => "Subn",
        0x03 => "SubnAdm",
        0x04 => "Perf",
        0x05 => "BM",
        0x06 => "DevMgt",
        0x07 => "ComMgt",
        0x08 => "SNMP",
        0x10 => "DevAdm",
        0x11 => "BootMgt",
        0x12 => "BIS",
        0x21 => "CongMgt",
        0x81 => "SubnDR",
        _ => return None,
    })
}

/// Name of a method byte, R bit included (GetResp is 0x81).
pub fn method_str(method: u8) -> Option<&'static str> {
    Some(match method {
        0x01 => "Get",
        0x02 => "Set",
        0x03 => "Send",
        0x05 => "Trap",
        0x06 => "Report",
        0x07 => "TrapRepress",
        0x12 => "GetTable",
        0x13 => "GetTraceTable",
        0x14 => "GetMulti",
        0x15 => "Delete",
        0x81 => "GetResp",
        0x86 => "ReportResp",
        0x92 => "GetTableResp",
        0x94 => "GetMultiResp",
        0x95 => "DeleteResp",
        _ => return None,
    })
}

/// Attributes every class shares (IBA 13.4.8).
static COMMON_ATTRS: &[(u16, &str)] = &[
    (0x0001, "ClassPortInfo"),
    (0x0002, "Notice"),
    (0x0003, "InformInfo"),
];

/// SMP attributes (IBA 14.2.5).
static SMP_ATTRS: &[(u16, &str)] = &[
    (0x0001, "ClassPortInfo"),
    (0x0002, "Notice"),
    (0x0010, "NodeDesc"),
    (0x0011, "NodeInfo"),
    (0x0012, "SwitchInfo"),
    (0x0014, "GUIDInfo"),
    (0x0015, "PortInfo"),
    (0x0016, "P_KeyTable"),
    (0x0017, "SLtoVLMappingTable"),
    (0x0018, "VLArbitrationTable"),
    (0x0019, "LinearForwardingTable"),
    (0x001a, "RandomForwardingTable"),
    (0x001b, "MulticastForwardingTable"),
    (0x0020, "SMInfo"),
    (0x0030, "VendorDiag"),
    (0x0031, "LedInfo"),
];

/// SA attributes (IBA 15.2.5).
static SA_ATTRS: &[(u16, &str)] = &[
    (0x0001, "ClassPortInfo"),
    (0x0002, "Notice"),
    (0x0003, "InformInfo"),
    (0x0011, "NodeRecord"),
    (0x0012, "PortInfoRecord"),
    (0x0013, "SLtoVLMappingTableRecord"),
    (0x0014, "SwitchInfoRecord"),
    (0x0015, "LinearForwardingTableRecord"),
    (0x0016, "RandomForwardingTableRecord"),
    (0x0017, "MulticastForwardingTableRecord"),
    (0x0018, "SMInfoRecord"),
    (0x0020, "LinkRecord"),
    (0x0030, "GuidInfoRecord"),
    (0x0031, "ServiceRecord"),
    (0x0033, "P_KeyTableRecord"),
    (0x0035, "PathRecord"),
    (0x0036, "VLArbitrationTableRecord"),
    (0x0038, "MCMemberRecord"),
    (0x0039, "TraceRecord"),
    (0x003a, "MultiPathRecord"),
    (0x003b, "ServiceAssociationRecord"),
    (0x00f3, "InformInfoRecord"),
];

/// Performance management attributes (IBA 16.1.3).
static PMA_ATTRS: &[(u16, &str)] = &[
    (0x0001, "ClassPortInfo"),
    (0x0010, "PortSamplesControl"),
    (0x0011, "PortSamplesResult"),
    (0x0012, "PortCounters"),
    (0x0015, "PortRcvErrorDetails"),
    (0x0016, "PortXmitDiscardDetails"),
    (0x0017, "PortOpRcvCounters"),
    (0x0018, "PortFlowCtlCounters"),
    (0x0019, "PortVLOpPackets"),
    (0x001a, "PortVLOpData"),
    (0x001b, "PortVLXmitFlowCtlUpdateErrors"),
    (0x001c, "PortVLXmitWaitCounters"),
    (0x001d, "PortCountersExtended"),
    (0x001e, "PortSamplesResultExtended"),
    (0x0036, "PortXmitDataSL"),
    (0x0037, "PortRcvDataSL"),
];

fn lookup(table: &[(u16, &'static str)], id: u16) -> Option<&'static str> {
    table.iter().find(|&&(k, _)| k == id).map(|&(_, v)| v)
}

/// Name of an attribute ID in the context of its management class.
pub fn attr_str(class: u8, attr_id: u16) -> Option<&'static str> {
    let table = match class {
        0x01 | 0x81 => SMP_ATTRS,
        0x03 => SA_ATTRS,
        0x04 => PMA_ATTRS,
        _ => COMMON_ATTRS,
    };
    lookup(table, attr_id)
}

/// Text of the class-independent status bits (like `umad_common_mad_status_str`):
/// busy and redirect first, then the invalid-field code.
pub fn mad_status_str(status: MadStatus) -> &'static str {
    if status.busy() {
        return "Busy";
    }
    if status.redirect() {
        return "Redirection required";
    }
    match status.invalid_field() {
        mad::InvalidField::None => "Success",
        mad::InvalidField::BadVersion => "Bad version",
        mad::InvalidField::UnsupportedMethod => "Method not supported",
        mad::InvalidField::UnsupportedMethodAttr => "Method/attribute combination not supported",
        mad::InvalidField::InvalidAttrValue => "Invalid attribute/modifier value",
        mad::InvalidField::Unknown(_) => "Unknown",
    }
}

/// Text of an SA status code (the class-specific bits 8–14).
pub fn sa_status_str(status: SaStatus) -> &'static str {
    match status {
        SaStatus::Ok => "Success",
        SaStatus::NoResources => "Insufficient resources",
        SaStatus::ReqInvalid => "Invalid request",
        SaStatus::NoRecords => "No records",
        SaStatus::TooManyRecords => "Too many records",
        SaStatus::ReqInvalidGid => "Invalid GID",
        SaStatus::InsufficientComponents => "Insufficient components",
        SaStatus::ReqDenied => "Request denied",
        SaStatus::PrioSuggested => "Priority suggested",
        SaStatus::Unknown(_) => "Unknown",
    }
}

/// Short name of an RMPP type.
pub fn rmpp_type_str(t: RmppType) -> &'static str {
    match t {
        RmppType::None => "NONE",
        RmppType::Data => "DATA",
        RmppType::Ack => "ACK",
        RmppType::Stop => "STOP",
        RmppType::Abort => "ABORT",
        RmppType::Unknown(_) => "UNKNOWN",
    }
}

/// Text of an RMPP status (IBA table 178).
pub fn rmpp_status_str(s: RmppStatus) -> &'static str {
    match s {
        RmppStatus::Success => "Success",
        RmppStatus::ResourcesExhausted => "Resources exhausted",
        RmppStatus::TotalTimeTooLong => "Total time too long",
        RmppStatus::BadLength => "Inconsistent last and payload length",
        RmppStatus::BadSegment => "Inconsistent first and segment number",
        RmppStatus::BadType => "Bad RMPPType",
        RmppStatus::WindowTooSmall => "NewWindowLast too small",
        RmppStatus::SegmentTooBig => "SegmentNumber too big",
        RmppStatus::BadStatus => "Illegal status",
        RmppStatus::UnsupportedVersion => "Unsupported version",
        RmppStatus::TooManyRetries => "Too many retries",
        RmppStatus::Unspecified => "Unspecified",
        RmppStatus::Unknown(_) => "Unknown",
    }
}

/// A MAD rendered on one line; see the module docs. Build it with [`pretty`].
#[derive(Debug, Clone, Copy)]
pub struct MadDisplay<'a>(pub &'a [u8]);

/// Render any byte slice as one line describing the MAD it holds.
pub fn pretty(bytes: &[u8]) -> MadDisplay<'_> {
    MadDisplay(bytes)
}

impl fmt::Display for MadDisplay<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = self.0;
        if b.len() < mad::HEADER_LEN {
            return write!(f, "<truncated {} bytes>", b.len());
        }
        let class = b[1];
        match class_str(class) {
            Some(name) => f.write_str(name)?,
            None if vendor::is_vendor_range1(class) => write!(f, "Vendor1(0x{class:02x})")?,
            None if vendor::is_vendor_range2(class) => write!(f, "Vendor2(0x{class:02x})")?,
            None => write!(f, "Class(0x{class:02x})")?,
        }
        if b[0] != mad::BASE_VERSION {
            write!(f, " base 0x{:02x}", b[0])?;
        }
        write!(f, " v{}", b[2])?;
        match method_str(b[3]) {
            Some(name) => write!(f, " {name}")?,
            None => write!(f, " Method(0x{:02x})", b[3])?,
        }
        let attr = be::u16(b, 16..18);
        match attr_str(class, attr) {
            Some(name) => write!(f, " {name}(0x{attr:04x})")?,
            None => write!(f, " Attr(0x{attr:04x})")?,
        }
        let attr_mod = be::u32(b, 20..24);
        if attr_mod != 0 {
            write!(f, " mod 0x{attr_mod:08x}")?;
        }
        write!(f, " tid 0x{:016x}", be::u64(b, 8..16))?;

        let raw_status = be::u16(b, 4..6);
        let dr = class == u8::from(MgmtClass::SubnDirectedRoute);
        let status = MadStatus(if dr { raw_status & 0x7fff } else { raw_status });
        write!(f, " status 0x{:04x}", status.0)?;
        if status != MadStatus::OK {
            if class == u8::from(MgmtClass::SubnAdm) && status.class_specific() != 0 {
                write!(f, " ({})", sa_status_str(SaStatus::of(status)))?;
            } else {
                write!(f, " ({})", mad_status_str(status))?;
            }
        }
        if dr {
            write!(f, " hop {}/{} D={}", b[6], b[7], raw_status >> 15)?;
        }

        let mgmt = MgmtClass::from(class);
        if mgmt.is_rmpp_class() {
            if b.len() < rmpp::END {
                return write!(f, " <truncated {} bytes>", b.len());
            }
            fmt_rmpp(f, b)?;
        }
        if mgmt.is_vendor_range2() {
            if b.len() < vendor::DATA_OFFSET {
                return write!(f, " <truncated {} bytes>", b.len());
            }
            write!(f, " oui 0x{:06x}", vendor::Packet::new_unchecked(b).oui())?;
        }
        Ok(())
    }
}

fn fmt_rmpp(f: &mut fmt::Formatter<'_>, b: &[u8]) -> fmt::Result {
    let p = rmpp::Packet::new_unchecked(b);
    if !p.is_active() {
        return Ok(());
    }
    let t = p.rmpp_type();
    match t {
        RmppType::Unknown(x) => write!(f, " rmpp type({x})")?,
        _ => write!(f, " rmpp {}", rmpp_type_str(t))?,
    }
    match t {
        RmppType::Data => {
            write!(f, " seg {}", p.seg_num())?;
            if p.is_first() || p.is_last() {
                f.write_str(" ")?;
                if p.is_first() {
                    f.write_str("F")?;
                }
                if p.is_last() {
                    f.write_str("L")?;
                }
            }
            write!(f, " paylen {}", p.paylen_newwin())
        }
        RmppType::Ack => write!(f, " seg {} newwin {}", p.seg_num(), p.paylen_newwin()),
        _ => {
            let s = p.rmpp_status();
            write!(f, " status {}({})", rmpp_status_str(s), u8::from(s))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{sa, smp};
    use proptest::prelude::*;

    fn sa_gettable_resp_seg3() -> [u8; 256] {
        let mut b = [0u8; 256];
        b[..24].copy_from_slice(&[
            0x01, 0x03, 0x02, 0x92, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x12, 0x34,
            0x56, 0x78, 0x00, 0x11, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        ]);
        // RMPP v1 DATA, rtime 0, Active|First|Last, segment 3, paylen 0.
        b[24..36].copy_from_slice(&[1, 1, 0x07, 0, 0, 0, 0, 3, 0, 0, 0, 0]);
        b
    }

    #[test]
    fn sa_line() {
        let b = sa_gettable_resp_seg3();
        assert_eq!(
            pretty(&b).to_string(),
            "SubnAdm v2 GetTableResp NodeRecord(0x0011) tid 0x0000000112345678 status 0x0000 \
             rmpp DATA seg 3 FL paylen 0"
        );
    }

    #[test]
    fn sa_error_and_rmpp_ack_abort() {
        let mut b = sa_gettable_resp_seg3();
        b[4] = 0x03; // ERR_NO_RECORDS
        b[24..36].copy_from_slice(&[1, 2, 0x01, 0, 0, 0, 0, 64, 0, 0, 0, 128]);
        assert_eq!(
            pretty(&b).to_string(),
            "SubnAdm v2 GetTableResp NodeRecord(0x0011) tid 0x0000000112345678 \
             status 0x0300 (No records) rmpp ACK seg 64 newwin 128"
        );
        b[4] = 0;
        b[24..36].copy_from_slice(&[1, 4, 0x01, 119, 0, 0, 0, 0, 0, 0, 0, 0]);
        assert!(pretty(&b).to_string().ends_with(
            "status 0x0000 rmpp ABORT status Inconsistent last and payload length(119)"
        ));
        // Not active: no RMPP section.
        b[26] = 0;
        assert!(pretty(&b).to_string().ends_with("status 0x0000"));
    }

    #[test]
    fn dr_smp_line() {
        let mut b = [0u8; 256];
        b[..24].copy_from_slice(&[
            0x01, 0x81, 0x01, 0x81, 0x80, 0x1c, 0x03, 0x03, 0, 0, 0, 0, 0, 0, 0, 0x2a, 0x00, 0x15,
            0, 0, 0, 0, 0, 1,
        ]);
        assert_eq!(
            pretty(&b).to_string(),
            "SubnDR v1 GetResp PortInfo(0x0015) mod 0x00000001 tid 0x000000000000002a \
             status 0x001c (Invalid attribute/modifier value) hop 3/3 D=1"
        );
        let p = smp::Packet::new_checked(&b[..]).unwrap();
        assert_eq!(p.direction(), smp::Direction::Inbound);
    }

    #[test]
    fn other_classes() {
        let mut b = [0u8; 24];
        b[..4].copy_from_slice(&[0x01, 0x04, 0x01, 0x01]);
        b[17] = 0x12;
        assert_eq!(
            pretty(&b).to_string(),
            "Perf v1 Get PortCounters(0x0012) tid 0x0000000000000000 status 0x0000"
        );
        b[1] = 0x07; // CM: attribute unnamed
        b[3] = 0x03;
        b[4..6].copy_from_slice(&[0x00, 0x01]);
        assert_eq!(
            pretty(&b).to_string(),
            "ComMgt v1 Send Attr(0x0012) tid 0x0000000000000000 status 0x0001 (Busy)"
        );
        b[0] = 0x80;
        b[1] = 0x0a;
        b[3] = 0x42;
        b[4] = 0;
        b[5] = 0;
        assert_eq!(
            pretty(&b).to_string(),
            "Vendor1(0x0a) base 0x80 v1 Method(0x42) Attr(0x0012) tid 0x0000000000000000 status 0x0000"
        );
    }

    #[test]
    fn vendor_range2_and_truncation() {
        let mut b = [0u8; 40];
        b[..4].copy_from_slice(&[0x01, 0x30, 0x01, 0x01]);
        b[17] = 0x01;
        b[37..40].copy_from_slice(&[0x00, 0x14, 0x05]);
        assert_eq!(
            pretty(&b).to_string(),
            "Vendor2(0x30) v1 Get ClassPortInfo(0x0001) tid 0x0000000000000000 status 0x0000 oui 0x001405"
        );
        assert!(pretty(&b[..38])
            .to_string()
            .ends_with("status 0x0000 <truncated 38 bytes>"));
        let sa = sa_gettable_resp_seg3();
        assert!(pretty(&sa[..30])
            .to_string()
            .ends_with("<truncated 30 bytes>"));
        assert_eq!(pretty(&sa[..23]).to_string(), "<truncated 23 bytes>");
        assert_eq!(pretty(&[]).to_string(), "<truncated 0 bytes>");
    }

    #[test]
    fn tables_agree_with_enums() {
        for &(id, _) in SMP_ATTRS {
            assert!(
                !matches!(smp::AttrId::from(id), smp::AttrId::Unknown(_)),
                "{id:#x}"
            );
        }
        for &(id, _) in SA_ATTRS {
            assert!(
                !matches!(sa::AttrId::from(id), sa::AttrId::Unknown(_)),
                "{id:#x}"
            );
        }
        for m in 0..=255u8 {
            let known = !matches!(mad::Method::from(m), mad::Method::Unknown(_));
            assert_eq!(method_str(m).is_some(), known, "{m:#x}");
        }
        for c in 0..=255u8 {
            let known = !matches!(MgmtClass::from(c), MgmtClass::Unknown(_));
            assert_eq!(class_str(c).is_some(), known, "{c:#x}");
        }
        for s in 0..=255u8 {
            let st = RmppStatus::from(s);
            assert_eq!(
                rmpp_status_str(st) == "Unknown",
                matches!(st, RmppStatus::Unknown(_))
            );
        }
        assert_eq!(sa_status_str(SaStatus::from(6)), "Insufficient components");
        assert_eq!(mad_status_str(MadStatus(0x0002)), "Redirection required");
        assert_eq!(mad_status_str(MadStatus(0x0014)), "Unknown");
    }

    proptest! {
        #[test]
        fn any_bytes_render_on_one_line(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
            let s = pretty(&bytes).to_string();
            prop_assert!(!s.is_empty() && !s.contains('\n'));
        }
    }
}
