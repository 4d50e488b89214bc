//! The FFI boundary: panics never cross it, errno is set where libibumad sets it.

use core::ffi::c_int;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// Set the calling thread's `errno`.
pub(crate) fn set_errno(value: c_int) {
    nix::errno::Errno::set_raw(value);
}

/// `-errno` for `e`, with errno set: the return of most entry points that fail.
pub(crate) fn fail(e: &vmad::Error) -> c_int {
    let n = e.errno();
    set_errno(n);
    -n
}

/// Run `f` with thread cancellation disabled; a panic inside becomes `fallback` (and
/// errno EIO) instead of aborting the C caller.
///
/// Cancellation: the C caller may `pthread_cancel` this thread (OpenSM stops its threads
/// so); a cancellation point reached inside `f` would unwind through Rust frames, which
/// Rust cannot do (the process aborts). So it is off while `f` runs and restored after;
/// a cancel that came meanwhile acts at the caller's next cancellation point
/// (`src/wait.c`'s poll() for a blocked `umad_recv`/`umad_poll`).
pub(crate) fn guard<R>(fallback: R, f: impl FnOnce() -> R) -> R {
    let _off = CancelOff::new();
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(_) => {
            set_errno(vmad::error::errno::EIO);
            fallback
        }
    }
}

/// As [`guard`], for an entry point that reaches no cancellation point: it makes no
/// system call, takes no lock that may wait, and logs nothing (the header accessors,
/// which only read or write the caller's buffer). Cancellation is left as it is: the
/// two `pthread_setcancelstate` calls were a fifth of such an accessor's instructions.
pub(crate) fn guard_no_cancel_point<R>(fallback: R, f: impl FnOnce() -> R) -> R {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(_) => {
            set_errno(vmad::error::errno::EIO);
            fallback
        }
    }
}

/// Thread cancellation disabled from `new` to drop, then as it was (`src/wait.c`'s helpers:
/// `libc` does not declare `pthread_setcancelstate`).
struct CancelOff(c_int);

#[cfg(not(any(test, fuzzing)))]
extern "C" {
    // Defined in src/wait.c, linked into the cdylib only.
    fn vmad_capi_cancel_off() -> c_int;
    fn vmad_capi_cancel_restore(old: c_int);
}

// Unit tests and the fuzz targets (which use this crate as an rlib) link no wait.c,
// and nothing cancels their threads.
#[cfg(any(test, fuzzing))]
unsafe fn vmad_capi_cancel_off() -> c_int {
    0
}
#[cfg(any(test, fuzzing))]
unsafe fn vmad_capi_cancel_restore(_old: c_int) {}

impl CancelOff {
    fn new() -> CancelOff {
        // SAFETY: pthread_setcancelstate on the calling thread; no pointer crosses.
        CancelOff(unsafe { vmad_capi_cancel_off() })
    }
}

impl Drop for CancelOff {
    fn drop(&mut self) {
        // SAFETY: as in `new`; restores the state `new` found.
        unsafe { vmad_capi_cancel_restore(self.0) };
    }
}

/// A C string argument naming a CA: NULL or "" mean "the first CA" (libibumad's default).
///
/// # Errors
/// EINVAL if the name is not UTF-8.
///
/// # Safety
/// `p` is NULL or points to a NUL-terminated string, valid for reads up to its NUL.
pub(crate) unsafe fn ca_name(p: *const core::ffi::c_char) -> vmad::Result<String> {
    if p.is_null() {
        return Ok(String::new());
    }
    // SAFETY: the caller's contract: a non-NULL name is a NUL-terminated C string.
    let s = unsafe { core::ffi::CStr::from_ptr(p) };
    s.to_str()
        .map(str::to_owned)
        .map_err(|_| vmad::Error::InvalidArgument("CA name is not UTF-8"))
}

/// `s` as a fixed `char[N]`, truncated to N-1 bytes and NUL-terminated.
pub(crate) fn c_str_array<const N: usize>(s: &str) -> [core::ffi::c_char; N] {
    let mut out = [0; N];
    for (d, b) in out.iter_mut().zip(s.bytes().take(N - 1)) {
        *d = b as core::ffi::c_char;
    }
    out
}

/// `malloc` a copy of `items` (C callers may `free` what libibumad mallocs); NULL when
/// empty or out of memory.
pub(crate) fn c_alloc_copy<T: Copy>(items: &[T]) -> *mut T {
    if items.is_empty() {
        return core::ptr::null_mut();
    }
    let bytes = core::mem::size_of_val(items);
    // SAFETY: malloc with a non-zero size; the result is checked for NULL before use.
    let p = unsafe { libc::malloc(bytes) }.cast::<T>();
    if !p.is_null() {
        // SAFETY: p holds `bytes` bytes, malloc's alignment suits any T; no overlap.
        unsafe { core::ptr::copy_nonoverlapping(items.as_ptr(), p, items.len()) };
    }
    p
}

/// `malloc` one `T`; NULL when out of memory.
pub(crate) fn c_alloc_one<T>(value: T) -> *mut T {
    // SAFETY: malloc with a non-zero size; checked for NULL before the write.
    let p = unsafe { libc::malloc(core::mem::size_of::<T>().max(1)) }.cast::<T>();
    if !p.is_null() {
        // SAFETY: p is fresh, large enough and suitably aligned for T.
        unsafe { p.write(value) };
    }
    p
}

/// `free` what [`c_alloc_copy`] / [`c_alloc_one`] returned (NULL is fine).
///
/// # Safety
/// `p` is NULL or came from this module's allocators and is not used again.
pub(crate) unsafe fn c_free<T>(p: *mut T) {
    // SAFETY: the caller's contract.
    unsafe { libc::free(p.cast()) };
}
