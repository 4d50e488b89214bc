//! Functions that only read or write a caller's `ib_user_mad` buffer.

use core::ffi::{c_int, c_void};

use crate::abi::{IbMadAddr, IbUserMad};
use crate::boundary::guard;

/// Size of the header in front of the MAD: always the 64-byte (P_Key index) form.
pub(crate) const HEADER_SIZE: usize = core::mem::size_of::<IbUserMad>();

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
    umad.cast::<u8>()
        .wrapping_add(core::mem::offset_of!(IbUserMad, addr))
        .cast()
}

/// Run `f` on the caller's header, or return `fallback` for NULL.
fn with_header<R>(umad: *mut c_void, fallback: R, f: impl FnOnce(&mut IbUserMad) -> R) -> R {
    if umad.is_null() {
        return fallback;
    }
    guard(fallback, || {
        // SAFETY: the caller passes a umad buffer of at least umad_size() bytes (libibumad's
        // contract); read_unaligned/write_unaligned make no alignment assumption.
        let mut hdr = unsafe { core::ptr::read_unaligned(umad.cast::<IbUserMad>()) };
        let r = f(&mut hdr);
        // SAFETY: as above.
        unsafe { core::ptr::write_unaligned(umad.cast::<IbUserMad>(), hdr) };
        r
    })
}

/// `int umad_status(void *umad)`: 0, or ETIMEDOUT for a send-timeout completion.
pub extern "C" fn umad_status(umad: *mut c_void) -> c_int {
    with_header(umad, -vmad::error::errno::EINVAL, |h| h.status as c_int)
}

/// `int umad_set_addr(void *umad, int dlid, int dqp, int sl, int qkey)`: host-order values.
pub extern "C" fn umad_set_addr(
    umad: *mut c_void,
    dlid: c_int,
    dqp: c_int,
    sl: c_int,
    qkey: c_int,
) -> c_int {
    with_header(umad, -vmad::error::errno::EINVAL, |h| {
        h.addr.qpn = (dqp as u32).to_be();
        h.addr.lid = (dlid as u16).to_be();
        h.addr.qkey = (qkey as u32).to_be();
        h.addr.sl = sl as u8;
        0
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
    with_header(umad, -vmad::error::errno::EINVAL, |h| {
        h.addr.qpn = dqp;
        h.addr.lid = dlid;
        h.addr.qkey = qkey;
        h.addr.sl = sl as u8;
        0
    })
}

/// `int umad_set_grh(void *umad, void *mad_addr)`: NULL clears grh_present; otherwise copies
/// gid, hop limit, traffic class and the host-order flow label (not gid_index, as libibumad).
pub extern "C" fn umad_set_grh(umad: *mut c_void, mad_addr: *mut c_void) -> c_int {
    with_header(umad, -vmad::error::errno::EINVAL, |h| {
        if mad_addr.is_null() {
            h.addr.grh_present = 0;
            return 0;
        }
        // SAFETY: a non-NULL mad_addr points to an ib_mad_addr_t (libibumad's contract).
        let src = unsafe { core::ptr::read_unaligned(mad_addr.cast::<IbMadAddr>()) };
        h.addr.grh_present = 1;
        h.addr.gid = src.gid;
        h.addr.hop_limit = src.hop_limit;
        h.addr.traffic_class = src.traffic_class;
        h.addr.flow_label = src.flow_label.to_be();
        0
    })
}

/// `int umad_set_pkey(void *umad, int pkey_index)`.
pub extern "C" fn umad_set_pkey(umad: *mut c_void, pkey_index: c_int) -> c_int {
    with_header(umad, -vmad::error::errno::EINVAL, |h| {
        h.addr.pkey_index = pkey_index as u16;
        0
    })
}

/// `int umad_get_pkey(void *umad)`.
pub extern "C" fn umad_get_pkey(umad: *mut c_void) -> c_int {
    with_header(umad, -vmad::error::errno::EINVAL, |h| {
        c_int::from(h.addr.pkey_index)
    })
}
