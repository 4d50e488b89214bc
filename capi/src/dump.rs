//! `umad_debug`, `umad_dump`, `umad_addr_dump`: diagnostics to stderr in
//! libibumad's `ibwarn: [pid] func: …` form.

use core::ffi::{c_int, c_void};
use std::io::Write;
use std::sync::atomic::{AtomicI32, Ordering};

use crate::abi::{IbMadAddr, IbUserMad};
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

fn addr_lines(a: &IbMadAddr) {
    ibwarn(
        "umad_addr_dump",
        format_args!(
            "qpn {} qkey {:#x} lid {} sl {}",
            u32::from_be(a.qpn),
            u32::from_be(a.qkey),
            u16::from_be(a.lid),
            a.sl
        ),
    );
    ibwarn(
        "umad_addr_dump",
        format_args!(
            "grh_present {} gid_index {} hop_limit {} traffic_class {} flow_label {:#x} pkey_index {:#x}",
            a.grh_present,
            a.gid_index,
            a.hop_limit,
            a.traffic_class,
            u32::from_be(a.flow_label),
            a.pkey_index
        ),
    );
    let gid: String = a.gid.iter().map(|b| format!("{b:02x}")).collect();
    ibwarn("umad_addr_dump", format_args!("Gid 0x{gid}"));
}

/// `void umad_addr_dump(ib_mad_addr_t *addr)`.
pub extern "C" fn umad_addr_dump(addr: *mut IbMadAddr) {
    if addr.is_null() {
        return;
    }
    guard((), || {
        // SAFETY: a non-NULL addr points to an ib_mad_addr_t (44 bytes); no alignment assumed.
        let a = unsafe { core::ptr::read_unaligned(addr) };
        addr_lines(&a);
    })
}

/// `void umad_dump(void *umad)`: the header and the address. The MAD itself is not read:
/// a buffer being prepared for `umad_send` has no trustworthy `length`.
pub extern "C" fn umad_dump(umad: *mut c_void) {
    if umad.is_null() {
        return;
    }
    guard((), || {
        // SAFETY: a non-NULL umad points to at least umad_size() bytes (libibumad's contract).
        let h = unsafe { core::ptr::read_unaligned(umad.cast::<IbUserMad>()) };
        ibwarn(
            "umad_dump",
            format_args!(
                "agent id {} status {:#x} timeout {} length {}",
                h.agent_id, h.status, h.timeout_ms, h.length
            ),
        );
        addr_lines(&h.addr);
    })
}
