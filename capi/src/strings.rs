//! `umad_str.h`: names of classes, methods, attributes and status codes,
//! from `vmad::wire::names`, as static NUL-terminated strings.

use core::ffi::{c_char, CStr};
use std::collections::BTreeMap;
use std::ffi::CString;
use std::sync::{Mutex, PoisonError};

use vmad::wire::mad::MadStatus;
use vmad::wire::names;
use vmad::wire::sa::SaStatus;

use crate::boundary::guard;

const UNKNOWN: &CStr = c"<unknown>";

/// NUL-terminated copies of the names, made once each and never freed: the set is
/// finite (every name is a `&'static str` of vmad's tables), and callers keep the pointers.
static INTERNED: Mutex<BTreeMap<&'static str, CString>> = Mutex::new(BTreeMap::new());

fn intern(name: Option<&'static str>) -> *const c_char {
    let Some(name) = name else {
        return UNKNOWN.as_ptr();
    };
    let mut table = INTERNED.lock().unwrap_or_else(PoisonError::into_inner);
    let entry = table
        .entry(name)
        .or_insert_with(|| CString::new(name).unwrap_or_else(|_| UNKNOWN.to_owned()));
    // The CString's heap buffer does not move when the map rebalances, and is never dropped.
    entry.as_ptr()
}

/// `const char *umad_class_str(uint8_t mgmt_class)`.
pub extern "C" fn umad_class_str(mgmt_class: u8) -> *const c_char {
    guard(UNKNOWN.as_ptr(), || intern(names::class_str(mgmt_class)))
}

/// `const char *umad_method_str(uint8_t mgmt_class, uint8_t method)`.
pub extern "C" fn umad_method_str(_mgmt_class: u8, method: u8) -> *const c_char {
    guard(UNKNOWN.as_ptr(), || intern(names::method_str(method)))
}

/// `const char *umad_attribute_str(uint8_t mgmt_class, __be16 attr_id)`.
pub extern "C" fn umad_attribute_str(mgmt_class: u8, attr_id: u16) -> *const c_char {
    guard(UNKNOWN.as_ptr(), || {
        intern(names::attr_str(mgmt_class, u16::from_be(attr_id)))
    })
}

/// `const char *umad_common_mad_status_str(__be16 status)`.
pub extern "C" fn umad_common_mad_status_str(status: u16) -> *const c_char {
    guard(UNKNOWN.as_ptr(), || {
        intern(Some(names::mad_status_str(MadStatus(u16::from_be(status)))))
    })
}

/// `const char *umad_sa_mad_status_str(__be16 status)`.
pub extern "C" fn umad_sa_mad_status_str(status: u16) -> *const c_char {
    guard(UNKNOWN.as_ptr(), || {
        let s = SaStatus::of(MadStatus(u16::from_be(status)));
        intern(Some(names::sa_status_str(s)))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(p: *const c_char) -> &'static str {
        // SAFETY: every pointer these functions return is a static NUL-terminated string.
        unsafe { CStr::from_ptr(p) }.to_str().unwrap()
    }

    #[test]
    fn names_are_static_and_stable() {
        assert_eq!(s(umad_class_str(0x03)), "SubnAdm");
        assert_eq!(s(umad_class_str(0x77)), "<unknown>");
        assert_eq!(s(umad_method_str(0x03, 0x92)), "GetTableResp");
        assert_eq!(s(umad_attribute_str(0x01, 0x0011u16.to_be())), "NodeInfo");
        assert_eq!(umad_class_str(0x03), umad_class_str(0x03));
        assert_eq!(
            s(umad_common_mad_status_str(0x000cu16.to_be())),
            "Method/attribute combination not supported"
        );
        assert_eq!(s(umad_sa_mad_status_str(0x0300u16.to_be())), "No records");
    }
}
