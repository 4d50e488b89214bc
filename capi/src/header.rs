//! Functions that only read or write a caller's `ib_user_mad` buffer, through
//! `vmad::umad`'s buffer helpers: a getter is lent the caller's header as a slice; a
//! setter works on headers of its own and stores only the bytes it wrote (see `set`).

use core::ffi::{c_int, c_void};

use vmad::error::errno::EINVAL;
use vmad::types::GrhAddr;
use vmad::umad;
use vmad::wire::umad::ADDR_OFFSET;

use crate::abi::IbMadAddr;
use crate::boundary::guard_no_cancel_point;

/// Size of the header in front of the MAD: always the 64-byte (P_Key index) form.
pub(crate) const HEADER_SIZE: usize = umad::size();

/// `size_t umad_size(void)`: 64.
pub extern "C" fn umad_size() -> usize {
    HEADER_SIZE
}

/// `void *umad_get_mad(void *umad)`: the MAD after the header.
///
/// Safe: the pointer is offset (wrapping), never read.
pub extern "C" fn umad_get_mad(umad: *mut c_void) -> *mut c_void {
    if umad.is_null() {
        return core::ptr::null_mut();
    }
    umad.cast::<u8>().wrapping_add(HEADER_SIZE).cast()
}

/// `ib_mad_addr_t *umad_get_mad_addr(void *umad)`.
///
/// Safe: the pointer is offset (wrapping), never read.
pub extern "C" fn umad_get_mad_addr(umad: *mut c_void) -> *mut IbMadAddr {
    if umad.is_null() {
        return core::ptr::null_mut();
    }
    umad.cast::<u8>().wrapping_add(ADDR_OFFSET).cast()
}

/// Run a getter on the caller's header: its value, or `fallback` for NULL.
///
/// The header is lent as a shared slice and only read, so it may lie on a read-only page.
///
/// # Safety
/// `umad` is NULL or valid for reads of `umad_size()` initialised bytes (a header
/// `umad_recv` filled, or one the caller wrote), not written by another thread meanwhile.
unsafe fn get<T: Copy>(
    umad: *mut c_void,
    fallback: T,
    f: impl FnOnce(&[u8]) -> vmad::Result<T>,
) -> T {
    if umad.is_null() {
        return fallback;
    }
    guard_no_cancel_point(fallback, || {
        // SAFETY: the caller's contract; the slice lives for this call only.
        let header = unsafe { core::slice::from_raw_parts(umad.cast::<u8>(), HEADER_SIZE) };
        f(header).unwrap_or(fallback)
    })
}

/// Run a setter on the caller's header: 0, or -EINVAL for NULL (errno untouched).
///
/// The header may be fresh `malloc` memory that nothing has written yet, so no slice is
/// made over it. The setter runs on two headers of ours instead, one of zeros and one of
/// ones; a setter stores values of its arguments whatever was there before, so the bytes
/// that come out equal in both are exactly the ones it wrote, and only those are stored
/// into the caller's header, through the raw pointer. Every other byte is left as it
/// was, as libibumad's setters leave it (and another thread may be writing those).
///
/// # Safety
/// `umad` is NULL or valid for writes of `umad_size()` bytes (initialised or not).
unsafe fn set(umad: *mut c_void, f: impl Fn(&mut [u8]) -> vmad::Result<()>) -> c_int {
    if umad.is_null() {
        return -EINVAL;
    }
    guard_no_cancel_point(-EINVAL, || {
        let mut zeros = [0u8; HEADER_SIZE];
        let mut ones = [0xffu8; HEADER_SIZE];
        if let Err(e) = f(&mut zeros).and_then(|()| f(&mut ones)) {
            return -e.errno();
        }
        // SAFETY: the caller's contract: `umad` is valid for writes of the header.
        unsafe { store_written(umad.cast::<u8>(), &zeros, &ones) };
        0
    })
}

/// Store into `dst` the bytes a setter wrote: those where its run on `zeros` and its
/// run on `ones` agree. Eight bytes at a time: a setter writes a few fields, so most
/// words hold none of its bytes (skipped) and the rest mostly whole fields.
///
/// # Safety
/// `dst` is valid for writes of `HEADER_SIZE` bytes (initialised or not).
unsafe fn store_written(dst: *mut u8, zeros: &[u8; HEADER_SIZE], ones: &[u8; HEADER_SIZE]) {
    const W: usize = 8;
    let as_u64 = |bytes: &[u8]| {
        let mut w = [0u8; W];
        w.copy_from_slice(bytes);
        u64::from_ne_bytes(w)
    };
    for (i, (z, o)) in zeros.chunks_exact(W).zip(ones.chunks_exact(W)).enumerate() {
        let (z, o) = (as_u64(z), as_u64(o));
        // A byte the setter wrote is equal in both: zero in `differ`.
        let differ = z ^ o;
        if differ == u64::MAX {
            continue;
        }
        // SAFETY: i * W + W <= HEADER_SIZE: within the bytes the caller lets us write.
        let word = unsafe { dst.add(i * W) };
        if differ == 0 {
            // SAFETY: as above; unaligned, as the caller's buffer may be.
            unsafe { word.cast::<u64>().write_unaligned(z) };
            continue;
        }
        for (b, (&zb, &d)) in z
            .to_ne_bytes()
            .iter()
            .zip(&differ.to_ne_bytes())
            .enumerate()
        {
            if d == 0 {
                // SAFETY: as above, b < W.
                unsafe { word.add(b).write(zb) };
            }
        }
    }
}

/// `int umad_status(void *umad)`: 0, or ETIMEDOUT for a send-timeout completion.
///
/// # Safety
/// `umad` is NULL or valid for reads of `umad_size()` initialised bytes (a header
/// `umad_recv` filled, or one the caller wrote), not written by another thread meanwhile.
pub unsafe extern "C" fn umad_status(umad: *mut c_void) -> c_int {
    // SAFETY: the caller's contract.
    unsafe { get(umad, -EINVAL, umad::status) }
}

/// `int umad_set_addr(void *umad, int dlid, int dqp, int sl, int qkey)`: host-order values,
/// truncated to the fields' widths as C's conversions do.
///
/// # Safety
/// `umad` is NULL or valid for writes of `umad_size()` bytes.
pub unsafe extern "C" fn umad_set_addr(
    umad: *mut c_void,
    dlid: c_int,
    dqp: c_int,
    sl: c_int,
    qkey: c_int,
) -> c_int {
    // SAFETY: the caller's contract.
    unsafe {
        set(umad, |h| {
            umad::set_addr(h, dlid as u16, dqp as u32, sl as u8, qkey as u32)
        })
    }
}

/// `int umad_set_addr_net(void *umad, __be16 dlid, __be32 dqp, int sl, __be32 qkey)`: stored as given.
///
/// # Safety
/// `umad` is NULL or valid for writes of `umad_size()` bytes.
pub unsafe extern "C" fn umad_set_addr_net(
    umad: *mut c_void,
    dlid: u16,
    dqp: u32,
    sl: c_int,
    qkey: u32,
) -> c_int {
    let (dlid, dqp, qkey) = (u16::from_be(dlid), u32::from_be(dqp), u32::from_be(qkey));
    // SAFETY: the caller's contract.
    unsafe { set(umad, |h| umad::set_addr(h, dlid, dqp, sl as u8, qkey)) }
}

/// `int umad_set_grh(void *umad, void *mad_addr)`: NULL clears grh_present; otherwise copies
/// gid, hop limit, traffic class and the host-order flow label (not gid_index, as libibumad).
///
/// # Safety
/// `umad` is NULL or valid for writes of `umad_size()` bytes; `mad_addr` is NULL or valid
/// for reads of an initialised `ib_mad_addr_t` (any alignment).
pub unsafe extern "C" fn umad_set_grh(umad: *mut c_void, mad_addr: *mut c_void) -> c_int {
    let grh = (!mad_addr.is_null()).then(|| {
        // SAFETY: the caller's contract; read bytewise, so its alignment does not matter.
        let src = unsafe { core::ptr::read_unaligned(mad_addr.cast::<IbMadAddr>()) };
        GrhAddr {
            gid: src.gid,
            gid_index: src.gid_index,
            hop_limit: src.hop_limit,
            traffic_class: src.traffic_class,
            flow_label: src.flow_label,
        }
    });
    // SAFETY: the caller's contract.
    unsafe { set(umad, |h| umad::set_grh(h, grh.as_ref())) }
}

/// `int umad_set_pkey(void *umad, int pkey_index)`.
///
/// # Safety
/// `umad` is NULL or valid for writes of `umad_size()` bytes.
pub unsafe extern "C" fn umad_set_pkey(umad: *mut c_void, pkey_index: c_int) -> c_int {
    // SAFETY: the caller's contract.
    unsafe { set(umad, |h| umad::set_pkey(h, pkey_index as u16)) }
}

/// `int umad_get_pkey(void *umad)`.
///
/// # Safety
/// `umad` is NULL or valid for reads of `umad_size()` initialised bytes (a header
/// `umad_recv` filled, or one the caller wrote), not written by another thread meanwhile.
pub unsafe extern "C" fn umad_get_pkey(umad: *mut c_void) -> c_int {
    // SAFETY: the caller's contract.
    unsafe { get(umad, -EINVAL, |h| umad::get_pkey(h).map(c_int::from)) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_setter_stores_the_bytes_it_wrote_and_no_other() {
        // Word 0 untouched, word 1 whole, word 2 in part, word 7's last byte alone.
        let set_some = |h: &mut [u8]| {
            h[8..16].copy_from_slice(&[1, 2, 3, 4, 5, 6, 7, 8]);
            h[17] = 0x11;
            h[20..22].copy_from_slice(&[0x00, 0xff]);
            h[63] = 0x63;
            Ok(())
        };
        let mut caller = [0xa5u8; HEADER_SIZE];
        // SAFETY: `caller` is HEADER_SIZE bytes, ours to write.
        assert_eq!(unsafe { set(caller.as_mut_ptr().cast(), set_some) }, 0);
        let mut want = [0xa5u8; HEADER_SIZE];
        want[8..16].copy_from_slice(&[1, 2, 3, 4, 5, 6, 7, 8]);
        want[17] = 0x11;
        want[20..22].copy_from_slice(&[0x00, 0xff]);
        want[63] = 0x63;
        assert_eq!(caller, want);
    }

    #[test]
    fn set_addr_leaves_the_rest_of_the_header_as_it_was() {
        let mut caller = [0x5au8; HEADER_SIZE];
        let qkey = 0x8001_0000_u32;
        // SAFETY: `caller` is HEADER_SIZE bytes, ours to write.
        let r = unsafe { umad_set_addr(caller.as_mut_ptr().cast(), 0x1234, 1, 3, qkey as c_int) };
        assert_eq!(r, 0);
        // What the same setter writes over the same bytes: its fields, and the rest kept.
        let mut want = [0x5au8; HEADER_SIZE];
        umad::set_addr(&mut want, 0x1234, 1, 3, qkey).unwrap();
        assert_eq!(caller, want);
    }
}
