//! What `src/wait.c` asks of the port around its poll(2): the descriptors, the spin,
//! and the count of callers waiting on the transport (see `vmad::port`'s docs).

use core::ffi::{c_int, c_long, c_void};
use std::time::Duration;

use vmad::port::cabi::{WaitGuard, WaitHooks};
use vmad::umad::{self as umad, PortId};

use crate::boundary::{fail, guard};

/// Start a wait: writes the descriptors to poll into `fds[0]` (the open's) and `fds[1]`
/// (the transport's, or -1) and returns a token for [`wait_end`], which must be called
/// once (from a cancellation cleanup handler too); NULL with errno set if the port is
/// not open.
///
/// # Safety
/// `fds` is NULL or valid for writes of two `int`s (aligned: `src/wait.c` passes an
/// `int[2]`).
pub unsafe extern "C" fn wait_begin(portid: c_int, fds: *mut c_int) -> *mut c_void {
    if fds.is_null() {
        return core::ptr::null_mut();
    }
    guard(core::ptr::null_mut(), || {
        match umad::port(PortId(portid)).and_then(|p| p.begin_wait()) {
            Ok(wait) => {
                let [open, transport] = wait.fds();
                // SAFETY: the caller's contract: two writable ints.
                unsafe {
                    fds.write(open);
                    fds.add(1).write(transport);
                }
                Box::into_raw(Box::new(wait)).cast()
            }
            Err(e) => {
                fail(&e);
                core::ptr::null_mut()
            }
        }
    })
}

/// End the wait [`wait_begin`] started.
///
/// # Safety
/// `token` is NULL or a token [`wait_begin`] returned that was not ended yet; it is
/// not used again.
pub unsafe extern "C" fn wait_end(token: *mut c_void) {
    if token.is_null() {
        return;
    }
    guard((), || {
        // SAFETY: the caller's contract: a live token of wait_begin's Box, ended once.
        drop(unsafe { Box::from_raw(token.cast::<WaitGuard>()) });
    });
}

/// How many microseconds `umad_recv` drives the port itself before it polls (the port's
/// `caller_spin`, 0 while its recent waits were longer); -1 where the port's callers never
/// spin (the transport gains nothing by it: `umad_recv` then need not time its waits for
/// [`waited`]) and for a port not open.
pub extern "C" fn spin_us(portid: c_int) -> c_int {
    guard(-1, || {
        umad::port(PortId(portid)).map_or(-1, |p| {
            if p.caller_spins() {
                c_int::try_from(p.caller_spin().as_micros()).unwrap_or(c_int::MAX)
            } else {
                -1
            }
        })
    })
}

/// `umad_recv` waited `us` microseconds for a message it then got (counts in the port's
/// spin policy).
pub extern "C" fn waited(portid: c_int, us: c_long) {
    guard((), || {
        if let Ok(p) = umad::port(PortId(portid)) {
            p.note_wait(Duration::from_micros(u64::try_from(us).unwrap_or(0)));
        }
    });
}
