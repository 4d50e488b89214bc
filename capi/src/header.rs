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

/// Where field `offset` of the caller's header lies.
fn field<T>(umad: *mut c_void, offset: usize) -> *mut T {
    umad.cast::<u8>().wrapping_add(offset).cast()
}

/// Read the one field at `offset` of the caller's header, or `None` for NULL. Nothing
/// else is read and nothing is written: the buffer may be read-only, and another thread
/// may be writing its other fields.
fn read_field<T: Copy>(umad: *mut c_void, offset: usize) -> Option<T> {
    if umad.is_null() {
        return None;
    }
    // SAFETY: the caller passes a umad buffer of at least umad_size() bytes (libibumad's
    // contract), so the field lies inside it; read_unaligned makes no alignment assumption.
    Some(unsafe { core::ptr::read_unaligned(field::<T>(umad, offset)) })
}

/// Write `value` into the one field at `offset` of the caller's (non-NULL) header,
/// leaving every other byte of the buffer untouched.
fn write_field<T>(umad: *mut c_void, offset: usize, value: T) {
    // SAFETY: as in read_field; the buffer is the caller's to write (a setter's contract).
    unsafe { core::ptr::write_unaligned(field::<T>(umad, offset), value) }
}

/// Offsets of the header fields, from `struct ib_user_mad`'s start.
mod at {
    use crate::abi::{IbMadAddr, IbUserMad};
    use core::mem::offset_of;

    const ADDR: usize = offset_of!(IbUserMad, addr);
    pub(super) const STATUS: usize = offset_of!(IbUserMad, status);
    pub(super) const QPN: usize = ADDR + offset_of!(IbMadAddr, qpn);
    pub(super) const QKEY: usize = ADDR + offset_of!(IbMadAddr, qkey);
    pub(super) const LID: usize = ADDR + offset_of!(IbMadAddr, lid);
    pub(super) const SL: usize = ADDR + offset_of!(IbMadAddr, sl);
    pub(super) const GRH_PRESENT: usize = ADDR + offset_of!(IbMadAddr, grh_present);
    pub(super) const HOP_LIMIT: usize = ADDR + offset_of!(IbMadAddr, hop_limit);
    pub(super) const TRAFFIC_CLASS: usize = ADDR + offset_of!(IbMadAddr, traffic_class);
    pub(super) const GID: usize = ADDR + offset_of!(IbMadAddr, gid);
    pub(super) const FLOW_LABEL: usize = ADDR + offset_of!(IbMadAddr, flow_label);
    pub(super) const PKEY_INDEX: usize = ADDR + offset_of!(IbMadAddr, pkey_index);
}

/// Run a setter on the caller's header, or return -EINVAL for NULL.
fn set(umad: *mut c_void, f: impl FnOnce()) -> c_int {
    if umad.is_null() {
        return -vmad::error::errno::EINVAL;
    }
    guard(-vmad::error::errno::EINVAL, || {
        f();
        0
    })
}

/// `int umad_status(void *umad)`: 0, or ETIMEDOUT for a send-timeout completion.
pub extern "C" fn umad_status(umad: *mut c_void) -> c_int {
    read_field::<u32>(umad, at::STATUS).map_or(-vmad::error::errno::EINVAL, |s| s as c_int)
}

/// `int umad_set_addr(void *umad, int dlid, int dqp, int sl, int qkey)`: host-order values.
pub extern "C" fn umad_set_addr(
    umad: *mut c_void,
    dlid: c_int,
    dqp: c_int,
    sl: c_int,
    qkey: c_int,
) -> c_int {
    set(umad, || {
        write_field(umad, at::QPN, (dqp as u32).to_be());
        write_field(umad, at::LID, (dlid as u16).to_be());
        write_field(umad, at::QKEY, (qkey as u32).to_be());
        write_field(umad, at::SL, sl as u8);
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
    set(umad, || {
        write_field(umad, at::QPN, dqp);
        write_field(umad, at::LID, dlid);
        write_field(umad, at::QKEY, qkey);
        write_field(umad, at::SL, sl as u8);
    })
}

/// `int umad_set_grh(void *umad, void *mad_addr)`: NULL clears grh_present; otherwise copies
/// gid, hop limit, traffic class and the host-order flow label (not gid_index, as libibumad).
pub extern "C" fn umad_set_grh(umad: *mut c_void, mad_addr: *mut c_void) -> c_int {
    set(umad, || {
        if mad_addr.is_null() {
            write_field(umad, at::GRH_PRESENT, 0u8);
            return;
        }
        // SAFETY: a non-NULL mad_addr points to an ib_mad_addr_t (libibumad's contract).
        let src = unsafe { core::ptr::read_unaligned(mad_addr.cast::<IbMadAddr>()) };
        write_field(umad, at::GRH_PRESENT, 1u8);
        write_field(umad, at::GID, src.gid);
        write_field(umad, at::HOP_LIMIT, src.hop_limit);
        write_field(umad, at::TRAFFIC_CLASS, src.traffic_class);
        write_field(umad, at::FLOW_LABEL, src.flow_label.to_be());
    })
}

/// `int umad_set_pkey(void *umad, int pkey_index)`.
pub extern "C" fn umad_set_pkey(umad: *mut c_void, pkey_index: c_int) -> c_int {
    set(umad, || {
        write_field(umad, at::PKEY_INDEX, pkey_index as u16)
    })
}

/// `int umad_get_pkey(void *umad)`.
pub extern "C" fn umad_get_pkey(umad: *mut c_void) -> c_int {
    read_field::<u16>(umad, at::PKEY_INDEX).map_or(-vmad::error::errno::EINVAL, c_int::from)
}
