//! Ports, agents, send and receive: libibumad's sign conventions over `vmad::umad`.
//!
//! Each function checks its pointers, calls the raw layer of `vmad::umad`
//! (which holds every semantic: TIDs, timeouts, ENOSPC, …) and turns the
//! result into what the C caller of libibumad expects, quirks included
//! (anchors §1.3): `umad_send` fails with -EIO and errno set to the real
//! cause; `umad_register` fails with -EPERM; `umad_register2` returns a
//! positive errno; `umad_unregister` returns the raw ioctl result (-1 and
//! errno); the rest return -errno and set errno.

use core::ffi::{c_char, c_int, c_long, c_void};
use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicBool, Ordering};

use vmad::error::errno::{EINVAL, EIO, EPERM};
use vmad::port::PortConfig;
use vmad::umad::{self as umad, AgentId, PortId, RegAttr};
use vmad::wire::mad::MgmtClass;
use vmad::Error;

use crate::abi::UmadRegAttr;
use crate::boundary::{ca_name, fail, guard, set_errno};
use crate::header::HEADER_SIZE;
use crate::select;

fn port_id(portid: c_int) -> PortId {
    PortId(portid)
}

/// Port numbers beyond a byte name no port (libibumad finds no umad device for them).
fn port_num(portnum: c_int) -> Option<u8> {
    u8::try_from(portnum).ok()
}

/// `int umad_init(void)`: selects the transport (once) and returns 0.
pub extern "C" fn umad_init() -> c_int {
    guard(-EIO, || match select::ensure() {
        Ok(()) => 0,
        Err(e) => fail(&e),
    })
}

/// `int umad_done(void)`: 0.
pub extern "C" fn umad_done() -> c_int {
    0
}

/// # Safety
/// `ca` is NULL or a NUL-terminated string.
unsafe fn open(ca: *const c_char, portnum: c_int) -> c_int {
    guard(-EIO, || {
        // SAFETY: the caller's contract.
        let name = match unsafe { ca_name(ca) } {
            Ok(n) => n,
            Err(e) => return fail(&e),
        };
        let Some(port) = port_num(portnum) else {
            return fail(&Error::InvalidArgument("port number out of range"));
        };
        if let Err(e) = select::ensure() {
            return fail(&e);
        }
        let mut config = PortConfig {
            pcap: pcap_for(&name, port),
            ..PortConfig::default()
        };
        if let Some(us) = std::env::var("VMAD_SPIN_US")
            .ok()
            .and_then(|v| v.parse().ok())
        {
            config.spin = std::time::Duration::from_micros(us);
            config.caller_spin = std::time::Duration::from_micros(us);
        }
        match umad::open_with(&name, port, config) {
            Ok((id, _)) => id.0,
            Err(e) => fail(&e),
        }
    })
}

/// `VMAD_PCAP=path` (and `VMAD_PCAP_LINKTYPE`, `_MAX_BYTES`, `_KEEP`): capture every MAD
/// the port sends and receives. The first port this process opens writes `path`; later
/// ones write `path` with `.<ca>-<port>` before the extension, so no two share a file.
fn pcap_for(ca: &str, port: u8) -> Option<vmad::pcap::PcapConfig> {
    static FIRST_TAKEN: AtomicBool = AtomicBool::new(false);
    let config = vmad::pcap::from_env()?;
    if FIRST_TAKEN.swap(true, Ordering::Relaxed) {
        Some(config.for_port(ca, port))
    } else {
        Some(config)
    }
}

/// `int umad_open_port(const char *ca_name, int portnum)`: the port id (a small positive
/// number, never reused in the process; `umad_get_fd` gives its pollable descriptor).
/// NULL or "" names the first CA; port 0 its first active port.
///
/// # Safety
/// `ca` is NULL or a NUL-terminated string.
pub unsafe extern "C" fn umad_open_port(ca: *const c_char, portnum: c_int) -> c_int {
    // SAFETY: the caller's contract.
    unsafe { open(ca, portnum) }
}

/// `int umad_open_smi_port(const char *ca_name, int portnum)` (IBUMAD_1.3): every vmad
/// port carries its own QP0, so the SMI port is the port itself.
///
/// # Safety
/// `ca` is NULL or a NUL-terminated string.
pub unsafe extern "C" fn umad_open_smi_port(ca: *const c_char, portnum: c_int) -> c_int {
    // SAFETY: the caller's contract.
    unsafe { open(ca, portnum) }
}

/// `int umad_close_port(int portid)`: 0, as libibumad (which ignores close's result);
/// an id that is not open sets errno EINVAL and returns -EINVAL (the man page's promise).
pub extern "C" fn umad_close_port(portid: c_int) -> c_int {
    guard(-EIO, || match umad::close_port(port_id(portid)) {
        Ok(()) => 0,
        Err(e) => fail(&e),
    })
}

/// `int umad_get_fd(int portid)`: a real descriptor that polls readable exactly while a
/// message is queued (libibumad's port id is its device fd; vmad's is not, so callers that
/// poll must ask for it, as the API says).
pub extern "C" fn umad_get_fd(portid: c_int) -> c_int {
    guard(-EIO, || {
        // Test hook of debug builds (capi/tests/c/robust.c): a panic here must come
        // back as an error return, not unwind into C.
        #[cfg(debug_assertions)]
        if std::env::var_os("VMAD_TEST_PANIC").is_some_and(|v| v == "umad_get_fd") {
            panic!("VMAD_TEST_PANIC=umad_get_fd");
        }
        match umad::get_fd(port_id(portid)) {
            Ok(fd) => fd,
            Err(e) => fail(&e),
        }
    })
}

/// `long method_mask[16 / sizeof(long)]` as two u64 words; NULL: client only.
///
/// # Safety
/// `mask` is NULL or valid for reads of 16 initialised bytes (any alignment).
unsafe fn read_mask(mask: *const c_long) -> Option<[u64; 2]> {
    if mask.is_null() {
        return None;
    }
    // SAFETY: the caller's contract; read bytewise.
    let bytes = unsafe { core::ptr::read_unaligned(mask.cast::<[u8; 16]>()) };
    let lo = u64::from_ne_bytes(bytes[..8].try_into().unwrap_or_default());
    let hi = u64::from_ne_bytes(bytes[8..].try_into().unwrap_or_default());
    Some([lo, hi])
}

/// libibumad's `umad_register` reports any failure as -EPERM, errno keeping the cause
/// (said on stderr under `VMAD_LOG` or `umad_debug(1)`: -EPERM alone hides it).
fn eperm(e: &Error) -> c_int {
    if crate::select::logging() {
        crate::dump::ibwarn("umad_register", format_args!("vmad: {e}"));
    }
    set_errno(e.errno());
    -EPERM
}

/// `int umad_register(int portid, int mgmt_class, int mgmt_version, uint8_t rmpp_version,
/// long method_mask[2])`: the agent id, or -EPERM (errno = the cause).
///
/// # Safety
/// `method_mask` is NULL or valid for reads of 16 initialised bytes (any alignment).
pub unsafe extern "C" fn umad_register(
    portid: c_int,
    mgmt_class: c_int,
    mgmt_version: c_int,
    rmpp_version: u8,
    method_mask: *const c_long,
) -> c_int {
    guard(-EPERM, || {
        let (Ok(class), Ok(version)) = (u8::try_from(mgmt_class), u8::try_from(mgmt_version))
        else {
            return eperm(&Error::InvalidArgument("class or version out of range"));
        };
        // SAFETY: the caller's contract.
        let mask = unsafe { read_mask(method_mask) };
        match umad::register(port_id(portid), class, version, rmpp_version, mask.as_ref()) {
            Ok(AgentId(id)) => id as c_int,
            Err(e) => eperm(&e),
        }
    })
}

/// `int umad_register_oui(int portid, int mgmt_class, uint8_t rmpp_version, uint8_t oui[3],
/// long method_mask[2])`: the agent id; -EINVAL for a class outside 0x30–0x4F; else -EPERM.
///
/// # Safety
/// `oui` is NULL or valid for reads of 3 initialised bytes; `method_mask` as for
/// [`umad_register`].
pub unsafe extern "C" fn umad_register_oui(
    portid: c_int,
    mgmt_class: c_int,
    rmpp_version: u8,
    oui: *const u8,
    method_mask: *const c_long,
) -> c_int {
    guard(-EPERM, || {
        // libibumad checks the class itself (-EINVAL); the kernel's refusals are -EPERM.
        let class = match u8::try_from(mgmt_class) {
            Ok(c) if MgmtClass::from(c).is_vendor_range2() => c,
            _ => {
                return fail(&Error::InvalidArgument(
                    "register_oui needs a class in 0x30..=0x4f",
                ))
            }
        };
        if oui.is_null() {
            return fail(&Error::InvalidArgument("oui is NULL"));
        }
        // SAFETY: the caller's contract: 3 readable bytes.
        let oui = unsafe { core::ptr::read_unaligned(oui.cast::<[u8; 3]>()) };
        // SAFETY: the caller's contract.
        let mask = unsafe { read_mask(method_mask) };
        match umad::register_oui(port_id(portid), class, rmpp_version, oui, mask.as_ref()) {
            Ok(AgentId(id)) => id as c_int,
            Err(e) => eperm(&e),
        }
    })
}

/// `int umad_register2(int port_fd, struct umad_reg_attr *attr, uint32_t *agent_id)`:
/// 0, or a **positive** errno (errno itself is not promised).
///
/// # Safety
/// `attr` is NULL or valid for reads and writes of an initialised `struct umad_reg_attr`;
/// `agent_id` is NULL or valid for writes of a `uint32_t` (either may be misaligned:
/// both are read and written bytewise, never through a reference).
pub unsafe extern "C" fn umad_register2(
    portid: c_int,
    attr: *mut UmadRegAttr,
    agent_id: *mut u32,
) -> c_int {
    if attr.is_null() || agent_id.is_null() {
        return EINVAL;
    }
    guard(EIO, || {
        // SAFETY: the caller's contract; attr is non-NULL.
        let a = unsafe { core::ptr::read_unaligned(attr) };
        let reg = RegAttr {
            mgmt_class: a.mgmt_class,
            mgmt_class_version: a.mgmt_class_version,
            flags: a.flags,
            method_mask: a.method_mask,
            oui: a.oui,
            rmpp_version: a.rmpp_version,
        };
        match umad::register2(port_id(portid), &reg) {
            Ok(AgentId(id)) => {
                // SAFETY: the caller's contract; agent_id is non-NULL.
                unsafe { core::ptr::write_unaligned(agent_id, id) };
                0
            }
            Err(e) => {
                // libibumad writes the kernel's "supported flags" back on failure, but zeroed
                // first, so callers always see 0 there.
                // SAFETY: as above; only the flags field is written.
                unsafe { core::ptr::addr_of_mut!((*attr).flags).write_unaligned(0) };
                e.errno()
            }
        }
    })
}

/// `int umad_unregister(int portid, int agentid)`: the raw ioctl result: 0, or -1 with errno.
pub extern "C" fn umad_unregister(portid: c_int, agentid: c_int) -> c_int {
    guard(-1, || {
        let Ok(agent) = u32::try_from(agentid) else {
            set_errno(EINVAL);
            return -1;
        };
        match umad::unregister(port_id(portid), AgentId(agent)) {
            Ok(()) => 0,
            Err(e) => {
                set_errno(e.errno());
                -1
            }
        }
    })
}

/// `int umad_send(int portid, int agentid, void *umad, int length, int timeout_ms, int retries)`:
/// 0, or -EIO with errno set to the real cause (libibumad's write() convention).
///
/// # Safety
/// `umad_buf` is NULL or valid for reads and writes of `umad_size() + length` bytes, all
/// initialised (the address is read whole, as libibumad hands the whole buffer to the
/// kernel) and not accessed by another thread during the call.
pub unsafe extern "C" fn umad_send(
    portid: c_int,
    agentid: c_int,
    umad_buf: *mut c_void,
    length: c_int,
    timeout_ms: c_int,
    retries: c_int,
) -> c_int {
    let send_fail = |errno: c_int| {
        set_errno(if errno == 0 { EIO } else { errno });
        -EIO
    };
    if umad_buf.is_null() {
        return send_fail(EINVAL);
    }
    let (Ok(len), Ok(agent)) = (usize::try_from(length), u32::try_from(agentid)) else {
        return send_fail(EINVAL);
    };
    guard(-EIO, || {
        // SAFETY: the caller's contract; the slice lives for this call only.
        let buf =
            unsafe { core::slice::from_raw_parts_mut(umad_buf.cast::<u8>(), HEADER_SIZE + len) };
        match umad::send(
            port_id(portid),
            AgentId(agent),
            buf,
            len,
            timeout_ms,
            retries,
        ) {
            Ok(()) => 0,
            Err(e) => send_fail(e.errno()),
        }
    })
}

/// `umad_poll` without waiting (`src/wait.c` waits on the descriptor, then calls this):
/// runs one turn of the port, then 0 if a message is queued, else -ETIMEDOUT; -EIO once
/// the transport has failed; -EINVAL for a port that is not open; errno set.
pub extern "C" fn poll_nonblocking(portid: c_int) -> c_int {
    guard(-EIO, || match umad::poll(port_id(portid), 0) {
        Ok(()) => 0,
        Err(e) => fail(&e),
    })
}

/// `umad_recv` without waiting (`src/wait.c` waits, then calls this): the agent id, or
/// -EINVAL / -EWOULDBLOCK / -ENOSPC (then `*length` = data length needed and the message
/// stays queued) / -EIO, errno set.
///
/// # Safety
/// `umad_buf` is NULL or valid for writes of `umad_size() + *length` bytes (initialised
/// or not); `length` is NULL or valid for reads and writes of an initialised `int` (any
/// alignment). Neither is accessed by another thread during the call.
pub unsafe extern "C" fn recv_nonblocking(
    portid: c_int,
    umad_buf: *mut c_void,
    length: *mut c_int,
) -> c_int {
    // SAFETY: the caller's contract.
    unsafe {
        recv_into(portid, umad_buf, length, |id, buf, cap| {
            umad::recv_uninit(id, buf, cap, 0)
        })
    }
}

/// [`recv_nonblocking`] before the caller polls the port's descriptors: the turn it
/// runs does not read a transport that has a descriptor of its own (the poll tells
/// whether that is worth a system call; see `umad::recv_before_wait`).
///
/// # Safety
/// `umad_buf` is NULL or valid for writes of `umad_size() + *length` bytes (initialised
/// or not); `length` is NULL or valid for reads and writes of an initialised `int` (any
/// alignment). Neither is accessed by another thread during the call.
pub unsafe extern "C" fn recv_before_wait(
    portid: c_int,
    umad_buf: *mut c_void,
    length: *mut c_int,
) -> c_int {
    // SAFETY: the caller's contract.
    unsafe { recv_into(portid, umad_buf, length, umad::recv_before_wait) }
}

/// Receive into the caller's buffer, seen as memory it may not have initialised (fresh
/// `malloc`): `umad::recv_uninit` writes the header and the data into it, nothing else;
/// the caller's bytes past them are not touched, as libibumad's read() leaves them.
///
/// # Safety
/// `umad_buf` is NULL or valid for writes of `umad_size() + *length` bytes (initialised
/// or not); `length` is NULL or valid for reads and writes of an initialised `int` (any
/// alignment). Neither is accessed by another thread during the call.
unsafe fn recv_into(
    portid: c_int,
    umad_buf: *mut c_void,
    length: *mut c_int,
    receive: impl FnOnce(PortId, &mut [MaybeUninit<u8>], &mut usize) -> vmad::Result<(AgentId, usize)>,
) -> c_int {
    if umad_buf.is_null() || length.is_null() {
        return fail(&Error::InvalidArgument("NULL buffer or length"));
    }
    guard(-EIO, || {
        // SAFETY: the caller's contract; read bytewise.
        let want = unsafe { length.read_unaligned() };
        let Ok(room) = usize::try_from(want) else {
            return fail(&Error::InvalidArgument("*length is negative"));
        };
        // SAFETY: the caller's contract: valid for writes of umad_size() + *length bytes,
        // not touched by another thread meanwhile; MaybeUninit<u8> needs no initialised
        // bytes and has u8's alignment.
        let buf = unsafe {
            core::slice::from_raw_parts_mut(umad_buf.cast::<MaybeUninit<u8>>(), HEADER_SIZE + room)
        };
        let mut cap = room;
        let r = receive(port_id(portid), buf, &mut cap);
        let out = c_int::try_from(cap).unwrap_or(c_int::MAX);
        match r {
            Ok((AgentId(id), _)) => {
                // SAFETY: the caller's contract; written bytewise.
                unsafe { length.write_unaligned(out) };
                id as c_int
            }
            Err(e @ Error::BufferTooSmall { .. }) => {
                // SAFETY: as above.
                unsafe { length.write_unaligned(out) };
                fail(&e)
            }
            Err(e) => fail(&e),
        }
    })
}
