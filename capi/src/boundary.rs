//! The FFI boundary: panics never cross it, errno is set where libibumad sets it.

use core::ffi::c_int;
use std::panic::{catch_unwind, AssertUnwindSafe};

extern "C" {
    fn __errno_location() -> *mut c_int;
}

/// Set the calling thread's `errno`.
pub(crate) fn set_errno(value: c_int) {
    // SAFETY: glibc's __errno_location returns a valid pointer to this thread's errno.
    unsafe { *__errno_location() = value };
}

/// Run `f`; a panic inside becomes `fallback` (and errno EIO) instead of aborting the C caller.
pub(crate) fn guard<R>(fallback: R, f: impl FnOnce() -> R) -> R {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(_) => {
            set_errno(vmad::error::errno::EIO);
            fallback
        }
    }
}
