//! Owned libibverbs objects, each destroyed by `Drop`.
//!
//! Every handle keeps an `Arc` of what it was created from, so the C
//! objects are destroyed in the order libibverbs requires (AH, QP, MR, CQ
//! before the PD, everything before the context) whatever order Rust drops
//! the Rust values in. A failing destroy is ignored: there is nothing to do
//! about it in `drop`, and panicking there would abort.
//!
//! `ibv_post_send`, `ibv_post_recv`, `ibv_poll_cq` and `ibv_req_notify_cq`
//! are static inlines in `verbs.h`, so bindgen does not see them; they are
//! called here through the provider's ops table, exactly as the inlines do.
//! The QP and its posts are in `qp.rs`.

use std::ffi::CStr;
use std::io;
use std::os::fd::BorrowedFd;
use std::os::raw::c_int;
use std::ptr::{self, NonNull};
use std::sync::Arc;

use ibverbs_sys as sys;

mod qp;

pub(super) use self::qp::{Qp, UdSend};

const ENOSYS: i32 = 38;

/// The OS error libibverbs left in `errno`, or `fallback` when it left none.
pub(super) fn last_error(fallback: i32) -> io::Error {
    let e = io::Error::last_os_error();
    match e.raw_os_error() {
        Some(0) | None => io::Error::from_raw_os_error(fallback),
        _ => e,
    }
}

/// A positive errno returned directly (the modify/post/destroy convention).
pub(super) fn rc_error(rc: c_int) -> io::Error {
    io::Error::from_raw_os_error(rc.abs())
}

/// A device found by `ibv_get_device_list`.
#[derive(Debug, Clone)]
pub(super) struct DeviceEntry {
    pub(super) name: String,
    pub(super) node_guid: u64,
    pub(super) node_type: u8,
    /// The device's uverbs node in sysfs (`/sys/class/infiniband_verbs/uverbsN`):
    /// the kernel removes it first when the device goes away.
    pub(super) uverbs_path: String,
}

/// The open device chosen from the list, and the list's other names.
pub(super) struct Opened {
    pub(super) ctx: Arc<Context>,
    pub(super) entry: DeviceEntry,
}

/// The RDMA devices, and the one named `want` (or the first) opened.
///
/// `Ok(None)` when there is no such device; `all` receives every name seen.
pub(super) fn open_device(want: Option<&str>, all: &mut Vec<String>) -> io::Result<Option<Opened>> {
    let mut n: c_int = 0;
    // SAFETY: `n` is a valid out-pointer; a NULL result is handled below.
    let list = unsafe { sys::ibv_get_device_list(&mut n) };
    if list.is_null() {
        let e = io::Error::last_os_error();
        // ENOSYS: no uverbs ABI in sysfs (no RDMA support in the kernel at all).
        return match e.raw_os_error() {
            Some(ENOSYS) => Ok(None),
            _ => Err(e),
        };
    }
    let mut chosen: Option<(*mut sys::ibv_device, DeviceEntry)> = None;
    for i in 0..usize::try_from(n).unwrap_or(0) {
        // SAFETY: `list` holds `n` valid device pointers until it is freed below.
        let dev = unsafe { *list.add(i) };
        if dev.is_null() {
            break;
        }
        // SAFETY: `dev` is a valid device; the name is a NUL-terminated string it owns.
        let name = unsafe { CStr::from_ptr(sys::ibv_get_device_name(dev)) }
            .to_string_lossy()
            .into_owned();
        all.push(name.clone());
        if chosen.is_none() && want.is_none_or(|w| w == name) {
            // SAFETY: `dev` is valid; reading plain fields of the device struct.
            let (guid, node_type) = unsafe { (sys::ibv_get_device_guid(dev), (*dev).node_type) };
            // SAFETY: `dev_path` is a NUL-terminated array inside the live device struct.
            let uverbs_path = unsafe { CStr::from_ptr((*dev).dev_path.as_ptr()) }
                .to_string_lossy()
                .into_owned();
            let entry = DeviceEntry {
                name,
                node_guid: u64::from_be(guid),
                node_type: u8::try_from(node_type).unwrap_or(0),
                uverbs_path,
            };
            chosen = Some((dev, entry));
        }
    }
    let result = match chosen {
        None => Ok(None),
        Some((dev, entry)) => {
            // SAFETY: `dev` is still valid: the list has not been freed yet.
            let ctx = unsafe { sys::ibv_open_device(dev) };
            match NonNull::new(ctx) {
                None => Err(last_error(19)),
                Some(ctx) => Ok(Some(Opened {
                    ctx: Arc::new(Context(ctx)),
                    entry,
                })),
            }
        }
    };
    // SAFETY: `list` came from ibv_get_device_list; an opened context outlives the list.
    unsafe { sys::ibv_free_device_list(list) };
    result
}

/// An open device (`ibv_context`).
pub(super) struct Context(NonNull<sys::ibv_context>);

// SAFETY: a context is not tied to the thread that opened it: libibverbs keeps no
// per-thread state for it.
unsafe impl Send for Context {}
// SAFETY: every `&self` method is a verb (query_port, query_gid, query_pkey,
// get/ack_async_event), thread-safe by default per the verbs API (ibv_alloc_td(3): the
// library and providers lock what they share unless a thread domain says otherwise),
// or a read of a field libibverbs sets when the context is opened and never changes
// (`abi_compat`, `async_fd`, the ops table). Closing needs ownership (Drop). Sync is
// what lets the PD, channel and CQs share it through an Arc.
unsafe impl Sync for Context {}

impl Drop for Context {
    fn drop(&mut self) {
        // SAFETY: the context is open and every object made from it is gone
        // (they hold an Arc of it).
        unsafe { sys::ibv_close_device(self.0.as_ptr()) };
    }
}

impl Context {
    pub(super) fn as_ptr(&self) -> *mut sys::ibv_context {
        self.0.as_ptr()
    }

    /// The port's attributes, `active_speed_ex` and `port_cap_flags2` included
    /// where the library knows them: through the extended context's
    /// `query_port` with the full struct size, as `verbs.h`'s inline
    /// `ibv_query_port` does; else the exported entry point, which fills
    /// only the older fields (those two stay 0).
    pub(super) fn query_port(&self, port: u8) -> io::Result<sys::ibv_port_attr> {
        let mut attr = sys::ibv_port_attr::default();
        if let Some(query) = self.extended_query_port() {
            let size = std::mem::size_of::<sys::ibv_port_attr>();
            // SAFETY: the library's own `query_port` of this open context, given a
            // buffer of the size it is told.
            let rc = unsafe { query(self.as_ptr(), port, &mut attr, size) };
            if rc != 0 {
                return Err(rc_error(rc));
            }
            return Ok(attr);
        }
        // SAFETY: the compat entry point writes at most the (older, smaller)
        // compat struct, which fits in `ibv_port_attr`.
        let rc = unsafe {
            sys::ibv_query_port(
                self.as_ptr(),
                port,
                ptr::addr_of_mut!(attr).cast::<sys::_compat_ibv_port_attr>(),
            )
        };
        if rc != 0 {
            return Err(rc_error(rc));
        }
        Ok(attr)
    }

    /// The extended context's `query_port`, when the library has one (what
    /// `verbs_get_ctx_op(ctx, query_port)` finds).
    fn extended_query_port(&self) -> Option<QueryPortFn> {
        let ctx = self.as_ptr();
        // SAFETY: reading a plain field of the open context.
        let compat = unsafe { (*ctx).abi_compat };
        // `__VERBS_ABI_IS_EXTENDED`: the context is the last field of a `verbs_context`.
        if compat as usize != usize::MAX || std::mem::size_of::<usize>() != 8 {
            return None;
        }
        let offset = std::mem::offset_of!(VerbsContextTail, context);
        // SAFETY: an extended context is embedded in a `verbs_context`, whose
        // fields from `query_port` to `context` `VerbsContextTail` mirrors (this
        // part of the struct only grows at its start, so its layout is fixed).
        let vctx = unsafe { &*ctx.cast::<u8>().sub(offset).cast::<VerbsContextTail>() };
        // The library's struct must reach back as far as `query_port`.
        if vctx.sz < std::mem::size_of::<VerbsContextTail>() {
            return None;
        }
        vctx.query_port
    }

    /// The valid GID entries of `port` (index, GID, type), one query per index.
    ///
    /// Per index rather than `ibv_query_gid_table`, which fails as a whole
    /// (EINVAL) on some kernels when the size it is given does not suit it.
    pub(super) fn gid_entries(&self, port: u8, table_len: u32) -> Vec<sys::ibv_gid_entry> {
        let mut out = Vec::new();
        for index in 0..table_len {
            let mut e = sys::ibv_gid_entry::default();
            // SAFETY: `e` is a valid out-struct of the size passed.
            let rc = unsafe {
                sys::_ibv_query_gid_ex(
                    self.as_ptr(),
                    u32::from(port),
                    index,
                    &mut e,
                    0,
                    std::mem::size_of::<sys::ibv_gid_entry>(),
                )
            };
            // Empty slots answer ENODATA (or EINVAL on older kernels): skipped.
            if rc == 0 {
                out.push(e);
            }
        }
        out
    }

    /// The async event fd, made non-blocking so that reading it never parks the port.
    pub(super) fn async_fd_nonblocking(&self) -> io::Result<c_int> {
        // SAFETY: the context is open; `async_fd` is a plain field.
        let fd = unsafe { (*self.as_ptr()).async_fd };
        // SAFETY: libibverbs keeps the async fd open until ibv_close_device, in Drop;
        // borrowed for this call only.
        set_nonblocking(unsafe { BorrowedFd::borrow_raw(fd) })?;
        Ok(fd)
    }

    /// The next async event, acknowledged, or `None` when there is none now
    /// (the fd is non-blocking, see [`Context::async_fd_nonblocking`]).
    pub(super) fn next_async_event(&self) -> io::Result<Option<AsyncEvent>> {
        let mut ev = sys::ibv_async_event {
            element: sys::ibv_async_event__bindgen_ty_1 { port_num: 0 },
            event_type: 0,
        };
        // SAFETY: the context is open; `ev` is a valid out-struct.
        let rc = unsafe { sys::ibv_get_async_event(self.as_ptr(), &mut ev) };
        if rc != 0 {
            let e = io::Error::last_os_error();
            return match e.kind() {
                io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => Ok(None),
                _ => Err(e),
            };
        }
        let port = match ev.event_type {
            sys::IBV_EVENT_PORT_ACTIVE
            | sys::IBV_EVENT_PORT_ERR
            | sys::IBV_EVENT_LID_CHANGE
            | sys::IBV_EVENT_PKEY_CHANGE
            | sys::IBV_EVENT_SM_CHANGE
            | sys::IBV_EVENT_CLIENT_REREGISTER
            | sys::IBV_EVENT_GID_CHANGE => {
                // SAFETY: for port events the union holds the port number.
                u8::try_from(unsafe { ev.element.port_num }).ok()
            }
            _ => None,
        };
        let kind = ev.event_type;
        // SAFETY: `ev` came from ibv_get_async_event and is acked exactly once
        // (destroying the QP or closing the context waits for every ack).
        unsafe { sys::ibv_ack_async_event(&mut ev) };
        Ok(Some(AsyncEvent { kind, port }))
    }

    pub(super) fn query_pkey(&self, port: u8, index: u16) -> io::Result<u16> {
        let mut pkey: u16 = 0;
        // SAFETY: `pkey` is a valid out-pointer.
        let rc = unsafe { sys::ibv_query_pkey(self.as_ptr(), port, c_int::from(index), &mut pkey) };
        if rc != 0 {
            return Err(rc_error(rc));
        }
        Ok(u16::from_be(pkey))
    }
}

type QueryPortFn =
    unsafe extern "C" fn(*mut sys::ibv_context, u8, *mut sys::ibv_port_attr, usize) -> c_int;

/// The end of libibverbs' `struct verbs_context` (rdma-core 55's `verbs.h`;
/// the bindings do not carry it): `query_port`, the 38 older 8-byte entries
/// after it (function pointers and one `uint64_t`, on the 64-bit targets
/// vmad builds for), `sz` (the library's own size of the struct) and the
/// context itself. New entries are only ever added before `query_port`, so
/// this part does not move between library versions.
#[repr(C)]
struct VerbsContextTail {
    query_port: Option<QueryPortFn>,
    _older_ops: [u64; 38],
    sz: usize,
    context: sys::ibv_context,
}

/// An async event of the context, already acknowledged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct AsyncEvent {
    /// `IBV_EVENT_*`.
    pub(super) kind: sys::ibv_event_type,
    /// The port, for port events.
    pub(super) port: Option<u8>,
}

/// Make one of libibverbs' descriptors non-blocking (it stays libibverbs'; its calls
/// on it then answer EAGAIN instead of waiting).
fn set_nonblocking(fd: BorrowedFd<'_>) -> io::Result<()> {
    use nix::fcntl::{fcntl, FcntlArg, OFlag};
    let flags = OFlag::from_bits_retain(fcntl(fd, FcntlArg::F_GETFL)?);
    fcntl(fd, FcntlArg::F_SETFL(flags | OFlag::O_NONBLOCK))?;
    Ok(())
}

/// A protection domain.
pub(super) struct Pd {
    raw: NonNull<sys::ibv_pd>,
    _ctx: Arc<Context>,
}

// SAFETY: a PD is a kernel handle with no per-thread state in libibverbs.
unsafe impl Send for Pd {}
// SAFETY: `&self` lends only the pointer, which the thread-safe verbs that create MRs,
// QPs and AHs take (ibv_alloc_td(3)); the PD itself never changes after
// ibv_alloc_pd, and ibv_dealloc_pd needs ownership (Drop, when no Arc is left).
unsafe impl Sync for Pd {}

impl Pd {
    pub(super) fn new(ctx: &Arc<Context>) -> io::Result<Arc<Pd>> {
        // SAFETY: the context is open.
        let raw = unsafe { sys::ibv_alloc_pd(ctx.as_ptr()) };
        let raw = NonNull::new(raw).ok_or_else(|| last_error(12))?;
        Ok(Arc::new(Pd {
            raw,
            _ctx: ctx.clone(),
        }))
    }

    pub(super) fn as_ptr(&self) -> *mut sys::ibv_pd {
        self.raw.as_ptr()
    }
}

impl Drop for Pd {
    fn drop(&mut self) {
        // SAFETY: every MR, QP and AH of this PD holds an Arc of it, so none is left.
        unsafe { sys::ibv_dealloc_pd(self.raw.as_ptr()) };
    }
}

/// A completion channel: a pollable fd that signals armed CQs.
pub(super) struct Channel {
    raw: NonNull<sys::ibv_comp_channel>,
    _ctx: Arc<Context>,
}

// SAFETY: a channel is an fd plus a refcount, with no per-thread state.
unsafe impl Send for Channel {}
// SAFETY: `&self` methods read the fd (set at creation, never changed) or take one
// event: ibv_get_cq_event is a read(2) of the non-blocking fd, which the kernel
// serialises (two callers get two events, or EAGAIN), and ibv_ack_cq_events updates
// the CQ's count under the CQ's own mutex. Destroying it needs ownership (Drop).
unsafe impl Sync for Channel {}

impl Channel {
    pub(super) fn new(ctx: &Arc<Context>) -> io::Result<Arc<Channel>> {
        // SAFETY: the context is open.
        let raw = unsafe { sys::ibv_create_comp_channel(ctx.as_ptr()) };
        let raw = NonNull::new(raw).ok_or_else(|| last_error(12))?;
        let channel = Channel {
            raw,
            _ctx: ctx.clone(),
        };
        // Several threads may find the channel readable and one take the event:
        // the others must get EAGAIN from `take_event`, not wait in it.
        set_nonblocking(channel.as_fd())?;
        Ok(Arc::new(channel))
    }

    pub(super) fn fd(&self) -> c_int {
        // SAFETY: the channel is alive; `fd` is a plain field.
        unsafe { (*self.raw.as_ptr()).fd }
    }

    /// The channel's fd, to poll: borrowed from the channel.
    pub(super) fn as_fd(&self) -> BorrowedFd<'_> {
        // SAFETY: libibverbs keeps the fd open until ibv_destroy_comp_channel, in Drop:
        // as long as `self`, which the BorrowedFd borrows.
        unsafe { BorrowedFd::borrow_raw(self.fd()) }
    }

    /// Take one completion event without blocking (the fd is non-blocking) and
    /// acknowledge it at once (an unacknowledged event makes `ibv_destroy_cq` wait);
    /// returns the index in `cqs` of the CQ it was for, `None` when there was none.
    /// `cqs` are the CQs attached to this channel.
    pub(super) fn take_event(&self, cqs: &[&Cq]) -> Option<usize> {
        let mut ev_cq: *mut sys::ibv_cq = ptr::null_mut();
        let mut ev_ctx: *mut std::os::raw::c_void = ptr::null_mut();
        // SAFETY: both are valid out-pointers; the channel is alive.
        let rc = unsafe { sys::ibv_get_cq_event(self.raw.as_ptr(), &mut ev_cq, &mut ev_ctx) };
        if rc != 0 {
            return None;
        }
        let which = cqs.iter().position(|cq| cq.as_ptr() == ev_cq)?;
        // SAFETY: `ev_cq` is `cqs[which]`, alive; one event is acked for one got.
        unsafe { sys::ibv_ack_cq_events(ev_cq, 1) };
        Some(which)
    }
}

impl Drop for Channel {
    fn drop(&mut self) {
        // SAFETY: the CQ attached to the channel holds an Arc of it, so it is gone.
        unsafe { sys::ibv_destroy_comp_channel(self.raw.as_ptr()) };
    }
}

/// A completion queue.
pub(super) struct Cq {
    raw: NonNull<sys::ibv_cq>,
    _channel: Option<Arc<Channel>>,
    _ctx: Arc<Context>,
}

// SAFETY: a CQ has no per-thread state in libibverbs.
unsafe impl Send for Cq {}
// SAFETY: `&self` methods are poll_cq and req_notify_cq through the provider's ops
// table, the verbs behind ibv_poll_cq/ibv_req_notify_cq, which providers make
// thread-safe by locking the CQ (ibv_alloc_td(3): the default without a thread
// domain); the ops table and context pointer are fixed at creation. Destroying it
// needs ownership (Drop, when no Arc is left).
unsafe impl Sync for Cq {}

impl Cq {
    pub(super) fn new(
        ctx: &Arc<Context>,
        entries: usize,
        channel: Option<&Arc<Channel>>,
    ) -> io::Result<Arc<Cq>> {
        let ch = channel.map_or(ptr::null_mut(), |c| c.raw.as_ptr());
        let n = c_int::try_from(entries).unwrap_or(c_int::MAX);
        // SAFETY: the context is open; `ch` is null or a live channel of it.
        let raw = unsafe { sys::ibv_create_cq(ctx.as_ptr(), n, ptr::null_mut(), ch, 0) };
        let raw = NonNull::new(raw).ok_or_else(|| last_error(12))?;
        Ok(Arc::new(Cq {
            raw,
            _channel: channel.cloned(),
            _ctx: ctx.clone(),
        }))
    }

    pub(super) fn as_ptr(&self) -> *mut sys::ibv_cq {
        self.raw.as_ptr()
    }

    /// Poll up to `out.len()` completions into `out`; returns how many.
    pub(super) fn poll(&self, out: &mut [sys::ibv_wc]) -> io::Result<usize> {
        let cq = self.raw.as_ptr();
        let n = c_int::try_from(out.len()).unwrap_or(c_int::MAX);
        // SAFETY: the CQ and its context are alive; `out` has room for `n`
        // entries; `poll_cq` is always provided (the inline calls it unchecked).
        let rc = unsafe {
            let poll = (*(*cq).context)
                .ops
                .poll_cq
                .ok_or(io::ErrorKind::Unsupported)?;
            poll(cq, n, out.as_mut_ptr())
        };
        if rc < 0 {
            return Err(rc_error(rc));
        }
        Ok(usize::try_from(rc).unwrap_or(0))
    }

    /// Ask for one event on the channel at the next completion.
    pub(super) fn arm(&self) -> io::Result<()> {
        let cq = self.raw.as_ptr();
        // SAFETY: as in `poll`.
        let rc = unsafe {
            let arm = (*(*cq).context)
                .ops
                .req_notify_cq
                .ok_or(io::ErrorKind::Unsupported)?;
            arm(cq, 0)
        };
        if rc != 0 {
            return Err(rc_error(rc));
        }
        Ok(())
    }
}

impl Drop for Cq {
    fn drop(&mut self) {
        // SAFETY: the QP using this CQ holds an Arc of it, so it is destroyed already.
        unsafe { sys::ibv_destroy_cq(self.raw.as_ptr()) };
    }
}

/// A registered memory region.
pub(super) struct Mr {
    raw: NonNull<sys::ibv_mr>,
    _pd: Arc<Pd>,
}

// SAFETY: an MR is a kernel handle plus keys, with no per-thread state; the only
// access is a read of `lkey`, which ibv_reg_mr sets and nothing changes afterwards, and
// deregistering needs ownership (Drop). (Not Sync: the ring owns its MR, unshared.)
unsafe impl Send for Mr {}

impl Mr {
    /// Register `len` bytes at `addr` for local writes.
    ///
    /// # Safety
    ///
    /// `addr..addr+len` must stay mapped until the returned `Mr` is dropped.
    pub(super) unsafe fn new(pd: &Arc<Pd>, addr: *mut u8, len: usize) -> io::Result<Mr> {
        let access = sys::ibv_access_flags::IBV_ACCESS_LOCAL_WRITE.0;
        // SAFETY: the caller guarantees the range stays mapped; the PD is alive.
        let raw = unsafe {
            sys::ibv_reg_mr(
                pd.as_ptr(),
                addr.cast(),
                len,
                c_int::try_from(access).unwrap_or(1),
            )
        };
        let raw = NonNull::new(raw).ok_or_else(|| last_error(12))?;
        Ok(Mr {
            raw,
            _pd: pd.clone(),
        })
    }

    pub(super) fn lkey(&self) -> u32 {
        // SAFETY: the MR is alive; `lkey` is a plain field.
        unsafe { (*self.raw.as_ptr()).lkey }
    }
}

impl Drop for Mr {
    fn drop(&mut self) {
        // SAFETY: the MR is registered; the mapping outlives it (field order in Ring).
        unsafe { sys::ibv_dereg_mr(self.raw.as_ptr()) };
    }
}

/// An address handle.
pub(super) struct Ah {
    raw: NonNull<sys::ibv_ah>,
    _pd: Arc<Pd>,
}

// SAFETY: an AH is immutable after ibv_create_ah and has no per-thread state; it is
// only lent (as a pointer) to posts, and destroyed by its owner (Drop). (Not Sync:
// nothing shares an AH.)
unsafe impl Send for Ah {}

impl Ah {
    pub(super) fn new(pd: &Arc<Pd>, attr: &mut sys::ibv_ah_attr) -> io::Result<Ah> {
        // SAFETY: the PD is alive; `attr` is a valid, initialised attribute struct.
        let raw = unsafe { sys::ibv_create_ah(pd.as_ptr(), attr) };
        let raw = NonNull::new(raw).ok_or_else(|| last_error(22))?;
        Ok(Ah {
            raw,
            _pd: pd.clone(),
        })
    }

    pub(super) fn as_ptr(&self) -> *mut sys::ibv_ah {
        self.raw.as_ptr()
    }
}

impl Drop for Ah {
    fn drop(&mut self) {
        // SAFETY: the AH exists; the transport drops AHs only with no send in flight.
        unsafe { sys::ibv_destroy_ah(self.raw.as_ptr()) };
    }
}
