//! Functions that only read or write a caller's `ib_user_mad` buffer: each one lends the
//! caller's header to `vmad::umad`'s buffer helpers as a slice and converts the result.

use core::ffi::{c_int, c_void};

use vmad::error::errno::EINVAL;
use vmad::types::GrhAddr;
use vmad::umad;
use vmad::wire::umad::ADDR_OFFSET;

use crate::abi::IbMadAddr;
use crate::boundary::guard;

/// Size of the header in front of the MAD: always the 64-byte (P_Key index) form.
pub(crate) const HEADER_SIZE: usize = umad::size();

/// `size_t umad_size(void)`: 64.
pub extern "C" fn umad_size() -> usize {
    HEADER_SIZE
}

/// `void *umad_get_mad(void *umad)`: the MAD after the header.
pub extern "C" fn umad_get_mad(umad: *mut c_void) -> *mut c_void {
    if umad.is_null() {
        return core::ptr::null_mut();
    }
    umad.cast::<u8>().wrapping_add(HEADER_SIZE).cast()
}

/// `ib_mad_addr_t *umad_get_mad_addr(void *umad)`.
pub extern "C" fn umad_get_mad_addr(umad: *mut c_void) -> *mut IbMadAddr {
    if umad.is_null() {
        return core::ptr::null_mut();
    }
    umad.cast::<u8>().wrapping_add(ADDR_OFFSET).cast()
}

/// Run a getter on the caller's header: its value, or `fallback` for NULL.
///
/// The header is lent as a shared slice, and the getters of `vmad::umad` read only the
/// bytes of their own field: the page may be read-only, and another thread may be
/// writing the header's other fields meanwhile.
fn get<T: Copy>(umad: *mut c_void, fallback: T, f: impl FnOnce(&[u8]) -> vmad::Result<T>) -> T {
    if umad.is_null() {
        return fallback;
    }
    guard(fallback, || {
        // SAFETY: a non-NULL umad points to at least umad_size() bytes (libibumad's
        // contract); the slice is only read, for the length of this call.
        let header = unsafe { core::slice::from_raw_parts(umad.cast::<u8>(), HEADER_SIZE) };
        f(header).unwrap_or(fallback)
    })
}

/// Run a setter on the caller's header: 0, or -EINVAL for NULL (errno untouched).
///
/// The setters of `vmad::umad` write only the bytes of their own fields; every other
/// byte of the buffer is left as it was.
fn set(umad: *mut c_void, f: impl FnOnce(&mut [u8]) -> vmad::Result<()>) -> c_int {
    if umad.is_null() {
        return -EINVAL;
    }
    guard(-EINVAL, || {
        // SAFETY: a non-NULL umad points to at least umad_size() bytes that are the
        // caller's to write (a setter's contract); the slice lives for this call only.
        let header = unsafe { core::slice::from_raw_parts_mut(umad.cast::<u8>(), HEADER_SIZE) };
        match f(header) {
            Ok(()) => 0,
            Err(e) => -e.errno(),
        }
    })
}

/// `int umad_status(void *umad)`: 0, or ETIMEDOUT for a send-timeout completion.
pub extern "C" fn umad_status(umad: *mut c_void) -> c_int {
    get(umad, -EINVAL, umad::status)
}

/// `int umad_set_addr(void *umad, int dlid, int dqp, int sl, int qkey)`: host-order values,
/// truncated to the fields' widths as C's conversions do.
pub extern "C" fn umad_set_addr(
    umad: *mut c_void,
    dlid: c_int,
    dqp: c_int,
    sl: c_int,
    qkey: c_int,
) -> c_int {
    set(umad, |h| {
        umad::set_addr(h, dlid as u16, dqp as u32, sl as u8, qkey as u32)
    })
}

/// `int umad_set_addr_net(void *umad, __be16 dlid, __be32 dqp, int sl, __be32 qkey)`: stored as given.
pub extern "C" fn umad_set_addr_net(
    umad: *mut c_void,
    dlid: u16,
    dqp: u32,
    sl: c_int,
    qkey: u32,
) -> c_int {
    set(umad, |h| {
        let (dlid, dqp, qkey) = (u16::from_be(dlid), u32::from_be(dqp), u32::from_be(qkey));
        umad::set_addr(h, dlid, dqp, sl as u8, qkey)
    })
}

/// `int umad_set_grh(void *umad, void *mad_addr)`: NULL clears grh_present; otherwise copies
/// gid, hop limit, traffic class and the host-order flow label (not gid_index, as libibumad).
pub extern "C" fn umad_set_grh(umad: *mut c_void, mad_addr: *mut c_void) -> c_int {
    set(umad, |h| {
        if mad_addr.is_null() {
            return umad::set_grh(h, None);
        }
        // SAFETY: a non-NULL mad_addr points to an ib_mad_addr_t (libibumad's contract).
        let src = unsafe { core::ptr::read_unaligned(mad_addr.cast::<IbMadAddr>()) };
        let grh = GrhAddr {
            gid: src.gid,
            gid_index: src.gid_index,
            hop_limit: src.hop_limit,
            traffic_class: src.traffic_class,
            flow_label: src.flow_label,
        };
        umad::set_grh(h, Some(&grh))
    })
}

/// `int umad_set_pkey(void *umad, int pkey_index)`.
pub extern "C" fn umad_set_pkey(umad: *mut c_void, pkey_index: c_int) -> c_int {
    set(umad, |h| umad::set_pkey(h, pkey_index as u16))
}

/// `int umad_get_pkey(void *umad)`.
pub extern "C" fn umad_get_pkey(umad: *mut c_void) -> c_int {
    get(umad, -EINVAL, |h| umad::get_pkey(h).map(c_int::from))
}
