//! `umad_debug`, `umad_dump`, `umad_addr_dump`: diagnostics to stderr in
//! libibumad's `ibwarn: [pid] func: …` form.

use core::ffi::{c_int, c_void};
use core::mem::size_of;
use std::io::Write;
use std::sync::atomic::{AtomicI32, Ordering};

use vmad::wire::umad::{Packet, ADDR_OFFSET, HEADER_LEN};

use crate::abi::IbMadAddr;
use crate::boundary::guard;

static DEBUG_LEVEL: AtomicI32 = AtomicI32::new(0);

/// The level set by `umad_debug` (0 = quiet).
pub(crate) fn debug_level() -> i32 {
    DEBUG_LEVEL.load(Ordering::Relaxed)
}

/// `int umad_debug(int level)`: a level ≥ 0 is set; returns the level now in force.
pub extern "C" fn umad_debug(level: c_int) -> c_int {
    if level >= 0 {
        DEBUG_LEVEL.store(level, Ordering::Relaxed);
    }
    debug_level()
}

/// Write one `ibwarn:` line; stderr errors are ignored (there is nowhere to report them).
pub(crate) fn ibwarn(func: &str, msg: core::fmt::Arguments<'_>) {
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err, "ibwarn: [{}] {func}: {msg}", std::process::id());
}

/// The address lines of `h`'s header, decoded by `vmad`'s view of it.
fn addr_lines(h: &Packet<&[u8]>) {
    ibwarn(
        "umad_addr_dump",
        format_args!(
            "qpn {} qkey {:#x} lid {} sl {}",
            h.qpn(),
            h.qkey(),
            h.lid(),
            h.sl()
        ),
    );
    ibwarn(
        "umad_addr_dump",
        format_args!(
            "grh_present {} gid_index {} hop_limit {} traffic_class {} flow_label {:#x} pkey_index {:#x}",
            h.grh_present(),
            h.gid_index(),
            h.hop_limit(),
            h.traffic_class(),
            h.flow_label(),
            h.pkey_index()
        ),
    );
    let gid: String = h.gid().iter().map(|b| format!("{b:02x}")).collect();
    ibwarn("umad_addr_dump", format_args!("Gid 0x{gid}"));
}

/// `void umad_addr_dump(ib_mad_addr_t *addr)`.
///
/// # Safety
/// `addr` is NULL or valid for reads of an initialised `ib_mad_addr_t` (any alignment).
pub unsafe extern "C" fn umad_addr_dump(addr: *mut IbMadAddr) {
    if addr.is_null() {
        return;
    }
    guard((), || {
        // The address alone, placed in a header of its own to be read as one.
        let mut header = [0u8; HEADER_LEN];
        let at = &mut header[ADDR_OFFSET..ADDR_OFFSET + size_of::<IbMadAddr>()];
        // SAFETY: the caller's contract: 44 readable bytes, copied bytewise into `at`
        // (as long); no reference to the caller's struct is made.
        unsafe { core::ptr::copy_nonoverlapping(addr.cast::<u8>(), at.as_mut_ptr(), at.len()) };
        addr_lines(&Packet::new_unchecked(&header[..]));
    })
}

/// `void umad_dump(void *umad)`: the header and the address. The MAD itself is not read:
/// a buffer being prepared for `umad_send` has no trustworthy `length`.
///
/// # Safety
/// `umad` is NULL or valid for reads of `umad_size()` initialised bytes, not written by
/// another thread meanwhile.
pub unsafe extern "C" fn umad_dump(umad: *mut c_void) {
    if umad.is_null() {
        return;
    }
    guard((), || {
        // SAFETY: the caller's contract; the slice is only read, for this call only.
        let header = unsafe { core::slice::from_raw_parts(umad.cast::<u8>(), HEADER_LEN) };
        let h = Packet::new_unchecked(header);
        ibwarn(
            "umad_dump",
            format_args!(
                "agent id {} status {:#x} timeout {} length {}",
                h.agent_id(),
                h.status(),
                h.timeout_ms(),
                h.length()
            ),
        );
        addr_lines(&h);
    })
}
