//! libibumad's API in Rust.
//!
//! Two layers:
//!
//! - **Typed**: [`open`] gives an `Arc<`[`Port`]`>`, a handle with
//!   `register`/`send`/`recv_with`/`poll` on Rust types ([`AgentSpec`],
//!   [`SendRequest`], [`Event`]) and [`Error`] values that carry errnos.
//! - **Raw**: free functions named after libibumad's (`open_port`,
//!   `register`, `send`, `recv`, `poll`, `get_fd`, … and the buffer helpers
//!   re-exported from `buf`) that work on [`PortId`]s and on
//!   `ib_user_mad` byte buffers — a 64-byte header, then the MAD — with
//!   libibumad's semantics, so the C ABI crate is a thin shell over them.
//!
//! Both work on a [`Umad`]: a handle owning a [`Registry`] of CAs, the ports
//! opened through it (by [`PortId`]) and their SM roles. A Rust program may hold
//! its own ([`Umad::new`]); the free functions work on the process-wide one,
//! [`Umad::global`], over the process-wide registry ([`registry::global`]), which
//! the C ABI needs (libibumad's ports are process-wide integers). Ports are opened
//! by CA name only: which transport serves a CA is the registry's business. The
//! process-wide registry's default CAs, registered when a CA is first looked up
//! unless `vmadsim0` or `vmadsim1` is, are the embedded fabric's pair (those two
//! CAs on one switch, LIDs 1 and 2).
//!
//! A [`PortId`] is a small positive number that is never reused within the
//! process (libibumad's is the device fd, whose number the OS reuses after a
//! close; a stale id here fails with EINVAL instead of reaching another
//! port). [`get_fd`] gives the port's pollable descriptor.
//!
//! # Receive semantics (`umad_recv(3)`, `umad_poll(3)`, `umad_status(3)`)
//!
//! - [`recv`] returns the receiving agent's id. `*length` is the data
//!   capacity after the header and must be at least 256 (else EINVAL).
//! - A message larger than `*length` fails with ENOSPC, sets `*length` to
//!   the data length needed and **stays queued**: a retry with a bigger
//!   buffer gets it. RMPP messages arrive coalesced (the first segment's
//!   headers, then all the data).
//! - `timeout_ms` 0: non-blocking (EWOULDBLOCK when empty); negative: block;
//!   positive: wait that long, then ETIMEDOUT.
//! - A request whose every attempt timed out comes back as a message with
//!   header status ETIMEDOUT, the original destination, and as data the
//!   first 24 bytes of the request as sent (the TID carries the agent's high
//!   word); its data length is 24.
//! - [`poll`] returns `Ok` when a message is queued, ETIMEDOUT otherwise,
//!   EINVAL for a port that is not open. Any number of threads may receive
//!   on one port; each message goes to exactly one of them.

mod buf;
mod sm_role;

use std::collections::BTreeMap;
use std::mem::MaybeUninit;
use std::os::fd::RawFd;
use std::sync::{Arc, Mutex, OnceLock, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::Duration;

pub use buf::{
    get_mad, get_mad_addr, get_mad_mut, get_pkey, set_addr, set_grh, set_pkey, size, status,
};

pub use crate::engine::{AgentId, AgentSpec, Event, SendRequest};
pub use crate::port::{Port, PortConfig};
pub use crate::transport::registry::{CaInfo, Registry};

use crate::error::errno;
use crate::port::cabi::WaitHooks;
use crate::transport::{registry, PortAttrs};
use crate::types::{MadAddr, Qp};
use crate::wire::mad::MgmtClass;
use crate::wire::umad::{Packet, HEADER_LEN};
use crate::wire::MAD_SIZE;
use crate::{Error, Result};

/// An open port's id, what `umad_open_port` returns (positive, never reused).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PortId(pub i32);

/// `UMAD_USER_RMPP`: the agent does RMPP itself; RMPP MADs pass through untouched.
pub const USER_RMPP: u32 = 1;
/// The OpenIB OUI libibumad's `umad_register` uses for vendor range 2 classes.
pub const OPENIB_OUI: u32 = 0x00_1405;

/// What [`register2`] takes: libibumad's `struct umad_reg_attr`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RegAttr {
    /// Management class.
    pub mgmt_class: u8,
    /// Class version.
    pub mgmt_class_version: u8,
    /// Flags: only [`USER_RMPP`] is defined.
    pub flags: u32,
    /// Methods served (bit n = method n); all zero: client only.
    pub method_mask: [u64; 2],
    /// OUI for vendor range 2 classes (low 24 bits).
    pub oui: u32,
    /// RMPP version (0 or 1).
    pub rmpp_version: u8,
}

struct Table {
    next: i32,
    open: BTreeMap<i32, Arc<Port>>,
}

/// What a [`Umad`] handle shares: its registry, its open ports and its SM roles.
struct Inner {
    registry: Arc<Registry>,
    /// Read on every call (a sender's and a receiver's at once, on OpenSM), written
    /// only by open and close.
    ports: RwLock<Table>,
    /// Serializes opens, so that two threads opening one port share it.
    opening: Mutex<()>,
    roles: sm_role::Roles,
}

/// A libibumad instance: the CAs of a [`Registry`], the ports opened through it (by
/// [`PortId`]) and their SM roles. Cloning gives another handle on the same instance.
///
/// The free functions of this module (and so the C ABI) work on one process-wide
/// instance, [`Umad::global`], over the process-wide registry; a Rust program may hold
/// its own, over a registry of its own.
#[derive(Clone)]
pub struct Umad(Arc<Inner>);

impl core::fmt::Debug for Umad {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Umad")
            .field("registry", &self.0.registry)
            .field("open", &self.ports_read().open.len())
            .finish()
    }
}

impl Umad {
    /// An instance over `registry`, no port open.
    pub fn new(registry: Arc<Registry>) -> Umad {
        Umad(Arc::new(Inner {
            registry,
            ports: RwLock::new(Table {
                next: 1,
                open: BTreeMap::new(),
            }),
            opening: Mutex::new(()),
            roles: sm_role::Roles::default(),
        }))
    }

    /// The process-wide instance, over [`registry::global`]: what the free functions
    /// of this module and the C ABI use.
    pub fn global() -> &'static Umad {
        static GLOBAL: OnceLock<Umad> = OnceLock::new();
        GLOBAL.get_or_init(|| Umad::new(registry::global().clone()))
    }

    /// The registry this instance finds CAs in.
    pub fn registry(&self) -> &Arc<Registry> {
        &self.0.registry
    }

    fn ports_mut(&self) -> RwLockWriteGuard<'_, Table> {
        self.0.ports.write().unwrap_or_else(PoisonError::into_inner)
    }

    fn ports_read(&self) -> RwLockReadGuard<'_, Table> {
        self.0.ports.read().unwrap_or_else(PoisonError::into_inner)
    }

    /// The CA `ca` names, or for `""` the first registered CA.
    fn resolve(&self, ca: &str) -> Result<String> {
        self.0.registry.ensure_default();
        if ca.is_empty() {
            self.0
                .registry
                .ca_names()
                .into_iter()
                .next()
                .ok_or_else(|| Error::NoDevice("no CA registered".into()))
        } else {
            Ok(ca.to_owned())
        }
    }

    /// Names of every CA that can be opened, sorted (`umad_get_cas_names`).
    pub fn get_cas_names(&self) -> Vec<String> {
        self.0.registry.ensure_default();
        self.0.registry.ca_names()
    }

    /// Describe CA `ca` (`umad_get_ca`; `""`: the first CA).
    ///
    /// # Errors
    /// ENODEV if there is no such CA.
    pub fn get_ca(&self, ca: &str) -> Result<CaInfo> {
        self.0.registry.ca_info(&self.resolve(ca)?)
    }

    /// Describe port `port` of CA `ca` (`umad_get_port`; `""`: the first CA, port 0: its
    /// first active port, else its first).
    ///
    /// # Errors
    /// ENODEV if there is no such CA or port.
    pub fn get_port(&self, ca: &str, port: u8) -> Result<PortAttrs> {
        let info = self.get_ca(ca)?;
        let found = if port == 0 {
            preferred_port(&info)
        } else {
            info.ports.iter().find(|p| p.port_num == port)
        };
        found
            .cloned()
            .ok_or_else(|| Error::NoDevice(format!("{} has no port {port}", info.name)))
    }

    /// Open a port with the default [`PortConfig`] and return its id and typed handle.
    ///
    /// A port already open in this instance is opened again ([`Port::open_again`]): the
    /// new open has its own agents, receive queue and descriptor, as each `open()` of the
    /// kernel's umad device has.
    ///
    /// # Errors
    /// ENODEV for an unknown CA or port; EADDRINUSE if another process (or a [`Port`]
    /// opened outside this instance) holds the port on a transport that allows one owner;
    /// EIO if the port thread cannot start or the open port's transport has failed;
    /// ENOMEM after 2^31 opens.
    pub fn open(&self, ca: &str, port: u8) -> Result<(PortId, Arc<Port>)> {
        self.open_with(ca, port, PortConfig::default())
    }

    /// Open a port with `config` (used only if the port is not open yet); see [`Umad::open`].
    ///
    /// # Errors
    /// As [`Umad::open`].
    pub fn open_with(&self, ca: &str, port: u8, config: PortConfig) -> Result<(PortId, Arc<Port>)> {
        let name = self.resolve(ca)?;
        let port_num = if port == 0 {
            self.get_port(&name, 0)?.port_num
        } else {
            port
        };
        let _opening = self
            .0
            .opening
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let existing = self
            .ports_read()
            .open
            .values()
            .find(|p| {
                let a = p.attrs();
                a.ca_name == name && a.port_num == port_num && p.is_open() && p.failure().is_none()
            })
            .cloned();
        let handle = match existing {
            Some(p) => Arc::new(p.open_again()?),
            None => {
                let transport = self.0.registry.open(&name, port_num)?;
                Arc::new(Port::open(transport, config)?)
            }
        };
        self.0.roles.opened(&handle);
        let mut table = self.ports_mut();
        if table.next == i32::MAX {
            return Err(Error::LimitReached("port ids exhausted"));
        }
        let id = PortId(table.next);
        table.next += 1;
        table.open.insert(id.0, handle.clone());
        Ok((id, handle))
    }

    /// `umad_open_port`: open port `port` of CA `ca` (`""`: the first CA; 0: its first
    /// active port).
    ///
    /// # Errors
    /// As [`Umad::open`].
    pub fn open_port(&self, ca: &str, port: u8) -> Result<PortId> {
        self.open(ca, port).map(|(id, _)| id)
    }

    /// The typed handle of an open port.
    ///
    /// # Errors
    /// EINVAL if `id` is not open.
    pub fn port(&self, id: PortId) -> Result<Arc<Port>> {
        // Not `ok_or`: that builds the error and drops it, on every call (an out-of-line
        // drop of the error enum, on each MAD's path).
        match self.ports_read().open.get(&id.0) {
            Some(port) => Ok(port.clone()),
            None => Err(Error::InvalidPort),
        }
    }

    /// `umad_close_port`: unregister every agent, drop queued messages, release the port.
    /// Threads blocked on it return EINVAL.
    ///
    /// # Errors
    /// EINVAL if `id` is not open.
    pub fn close_port(&self, id: PortId) -> Result<()> {
        let handle = self
            .ports_mut()
            .open
            .remove(&id.0)
            .ok_or(Error::InvalidPort)?;
        handle.close();
        Ok(())
    }

    /// The open port of CA port `key` ((CA name, port number)), if any.
    fn open_on(&self, ca: &str, port_num: u8) -> Option<Arc<Port>> {
        self.ports_read()
            .open
            .values()
            .find(|p| {
                let a = p.attrs();
                a.ca_name == ca && a.port_num == port_num && p.is_open()
            })
            .cloned()
    }
}

/// The process-wide instance's registry stops offering its default CAs (the embedded
/// fabric) in this process. For a caller that chose another transport (the C library
/// with `VMAD_TRANSPORT=ibsim`), so that only that transport's CAs are listed and opened.
pub fn disable_default_fabric() {
    Umad::global().registry().set_default(None);
}

/// Names of every CA that can be opened, sorted (`umad_get_cas_names`); see [`Umad`].
pub fn get_cas_names() -> Vec<String> {
    Umad::global().get_cas_names()
}

/// Describe CA `ca` (`umad_get_ca`; `""`: the first CA); see [`Umad::get_ca`].
///
/// # Errors
/// ENODEV if there is no such CA.
pub fn get_ca(ca: &str) -> Result<CaInfo> {
    Umad::global().get_ca(ca)
}

/// Describe port `port` of CA `ca` (`umad_get_port`); see [`Umad::get_port`].
///
/// # Errors
/// ENODEV if there is no such CA or port.
pub fn get_port(ca: &str, port: u8) -> Result<PortAttrs> {
    Umad::global().get_port(ca, port)
}

/// The port that port number 0 names on `info`: its first active port, else its first
/// port (libibumad's "preferred port"); `None` for a CA without ports.
pub fn preferred_port(info: &CaInfo) -> Option<&PortAttrs> {
    info.ports
        .iter()
        .find(|p| p.state == 4)
        .or(info.ports.first())
}

/// [`Umad::open`] on the process-wide instance.
///
/// # Errors
/// As [`Umad::open`].
pub fn open(ca: &str, port: u8) -> Result<(PortId, Arc<Port>)> {
    Umad::global().open(ca, port)
}

/// [`Umad::open_with`] on the process-wide instance.
///
/// # Errors
/// As [`Umad::open`].
pub fn open_with(ca: &str, port: u8, config: PortConfig) -> Result<(PortId, Arc<Port>)> {
    Umad::global().open_with(ca, port, config)
}

/// `umad_open_port` ([`Umad::open_port`] on the process-wide instance).
///
/// # Errors
/// As [`Umad::open`].
pub fn open_port(ca: &str, port: u8) -> Result<PortId> {
    Umad::global().open_port(ca, port)
}

/// The typed handle of an open port of the process-wide instance.
///
/// # Errors
/// EINVAL if `id` is not open.
pub fn port(id: PortId) -> Result<Arc<Port>> {
    Umad::global().port(id)
}

/// `umad_close_port` ([`Umad::close_port`] on the process-wide instance).
///
/// # Errors
/// EINVAL if `id` is not open.
pub fn close_port(id: PortId) -> Result<()> {
    Umad::global().close_port(id)
}

/// `umad_get_fd`: a descriptor that polls readable exactly while a message is queued.
///
/// # Errors
/// EINVAL if `id` is not open.
pub fn get_fd(id: PortId) -> Result<RawFd> {
    Ok(port(id)?.fd())
}

/// `umad_get_issm_path` ([`Umad::get_issm_path`] on the process-wide instance).
///
/// # Errors
/// As [`Umad::get_issm_path`].
pub fn get_issm_path(ca: &str, port: u8) -> Result<std::path::PathBuf> {
    Umad::global().get_issm_path(ca, port)
}

/// `umad_register`: an agent for `mgmt_class`/`class_version` on QP0 (classes 0x01,
/// 0x81) or QP1. `method_mask` `None` (or all zero): a client that receives only
/// responses to its own requests. Vendor range 2 classes get the OpenIB OUI.
///
/// # Errors
/// EINVAL for a closed port, a bad class/version/RMPP version, or a method another
/// agent serves; ENOMEM when 32 agents are registered; EOPNOTSUPP for a QP the
/// transport lacks. (The C ABI turns every failure into -EPERM, as libibumad.)
pub fn register(
    id: PortId,
    mgmt_class: u8,
    class_version: u8,
    rmpp_version: u8,
    method_mask: Option<&[u64; 2]>,
) -> Result<AgentId> {
    let oui = if MgmtClass::from(mgmt_class).is_vendor_range2() {
        OPENIB_OUI
    } else {
        0
    };
    port(id)?.register(AgentSpec {
        qp: Qp::for_class(mgmt_class),
        mgmt_class: MgmtClass::from(mgmt_class),
        class_version,
        rmpp_version,
        method_mask: method_mask.copied().unwrap_or_default(),
        oui,
        user_rmpp: false,
    })
}

/// `umad_register_oui`: an agent for vendor range 2 class `mgmt_class` (0x30–0x4F),
/// class version 1, with the 3-byte `oui` (network order).
///
/// # Errors
/// EINVAL for a class outside 0x30–0x4F; otherwise as [`register`].
pub fn register_oui(
    id: PortId,
    mgmt_class: u8,
    rmpp_version: u8,
    oui: [u8; 3],
    method_mask: Option<&[u64; 2]>,
) -> Result<AgentId> {
    if !MgmtClass::from(mgmt_class).is_vendor_range2() {
        return Err(Error::InvalidArgument(
            "register_oui needs a class in 0x30..=0x4f",
        ));
    }
    port(id)?.register(AgentSpec {
        qp: Qp::Gsi,
        mgmt_class: MgmtClass::from(mgmt_class),
        class_version: 1,
        rmpp_version,
        method_mask: method_mask.copied().unwrap_or_default(),
        oui: u32::from_be_bytes([0, oui[0], oui[1], oui[2]]),
        user_rmpp: false,
    })
}

/// `umad_register2`: register from a [`RegAttr`].
///
/// # Errors
/// EINVAL for unknown flags, a vendor range 2 class with an OUI of 0 or over 24 bits;
/// otherwise as [`register`]. (The C ABI returns these as positive errnos.)
pub fn register2(id: PortId, attr: &RegAttr) -> Result<AgentId> {
    if attr.flags & !USER_RMPP != 0 {
        return Err(Error::InvalidArgument("unknown registration flags"));
    }
    let class = MgmtClass::from(attr.mgmt_class);
    if class.is_vendor_range2() && (attr.oui == 0 || attr.oui & 0xff00_0000 != 0) {
        return Err(Error::InvalidArgument(
            "vendor class needs a 24-bit, non-zero OUI",
        ));
    }
    port(id)?.register(AgentSpec {
        qp: Qp::for_class(attr.mgmt_class),
        mgmt_class: class,
        class_version: attr.mgmt_class_version,
        rmpp_version: attr.rmpp_version,
        method_mask: attr.method_mask,
        oui: if class.is_vendor_range2() {
            attr.oui
        } else {
            0
        },
        user_rmpp: attr.flags & USER_RMPP != 0,
    })
}

/// `umad_unregister`.
///
/// # Errors
/// EINVAL for a closed port or an agent that is not registered.
pub fn unregister(id: PortId, agent: AgentId) -> Result<()> {
    port(id)?.unregister(agent)
}

/// `umad_send`: send the MAD in `umad[64..64 + length]` to the header's address.
///
/// Like libibumad, writes `agent`, `timeout_ms` and `retries` into the caller's header
/// (a negative `timeout_ms` becomes 0xFFFFFFFF, "forever"; `length` is not written).
/// `timeout_ms` 0: no response expected. Requests get the agent's TID high word.
///
/// # Errors
/// EINVAL for a closed port, an unknown agent, a buffer shorter than `64 + length`, a
/// MAD under 36 bytes or a duplicate outstanding request; EMSGSIZE for more than 256
/// bytes without RMPP. (The C ABI returns -EIO with errno set, as libibumad.)
pub fn send(
    id: PortId,
    agent: AgentId,
    umad: &mut [u8],
    length: usize,
    timeout_ms: i32,
    retries: i32,
) -> Result<()> {
    let handle = port(id)?;
    let end = HEADER_LEN
        .checked_add(length)
        .filter(|&e| e <= umad.len())
        .ok_or(Error::InvalidArgument(
            "buffer shorter than the header plus length",
        ))?;
    let mut h = Packet::new_unchecked(&mut umad[..]);
    h.set_agent_id(agent.0);
    // C's int-to-u32 conversion, as libibumad stores them.
    h.set_timeout_ms(timeout_ms as u32);
    h.set_retries(retries as u32);
    let addr = h.addr();
    handle.send(
        agent,
        SendRequest {
            addr,
            mad: &umad[HEADER_LEN..end],
            timeout_ms: timeout_ms as u32,
            retries: retries as u32,
        },
    )
}

/// The `umad_recv` timeout convention: 0 polls, negative blocks, positive waits.
fn timeout_of(timeout_ms: i32) -> Option<Duration> {
    u64::try_from(timeout_ms).ok().map(Duration::from_millis)
}

/// What a received message looks like in an `ib_user_mad` buffer.
/// A receive buffer: the caller's bytes, or memory it has not initialised (a C caller's
/// fresh `malloc`), written only where a message is put.
trait RecvBuf {
    fn len(&self) -> usize;
    /// Write `bytes` at `at` (in bounds: the caller checked the length).
    fn put(&mut self, at: usize, bytes: &[u8]);
}

impl RecvBuf for [u8] {
    fn len(&self) -> usize {
        <[u8]>::len(self)
    }
    fn put(&mut self, at: usize, bytes: &[u8]) {
        self[at..at + bytes.len()].copy_from_slice(bytes);
    }
}

impl RecvBuf for [MaybeUninit<u8>] {
    fn len(&self) -> usize {
        <[MaybeUninit<u8>]>::len(self)
    }
    fn put(&mut self, at: usize, bytes: &[u8]) {
        // A plain copy once optimised; MaybeUninit's own slice copy is not stable yet.
        for (d, s) in self[at..at + bytes.len()].iter_mut().zip(bytes) {
            d.write(*s);
        }
    }
}

/// Write a received message's header (its whole length) and the first `room` bytes of
/// `data`; how many bytes of `umad` that wrote.
fn write_message<B: RecvBuf + ?Sized>(
    umad: &mut B,
    room: usize,
    agent: AgentId,
    status: u32,
    addr: &MadAddr,
    data: &[u8],
) -> usize {
    let mut header = [0u8; HEADER_LEN];
    let mut h = Packet::new_unchecked(&mut header[..]);
    h.set_agent_id(agent.0);
    h.set_status(status);
    h.set_timeout_ms(0);
    h.set_retries(0);
    h.set_length((HEADER_LEN + data.len()) as u32);
    h.set_addr(&MadAddr { qkey: 0, ..*addr });
    umad.put(0, &header);
    let n = data.len().min(room);
    umad.put(HEADER_LEN, &data[..n]);
    HEADER_LEN + n
}

/// `umad_recv`: receive the next message into `umad` (header + up to `*length` data bytes).
///
/// On success returns the agent id and sets `*length` to the data length (24 for a
/// send-timeout report, whose header status is ETIMEDOUT).
///
/// # Errors
/// EINVAL if the port is not open, `*length` < 256, or `umad` is shorter than
/// `64 + *length`; ENOSPC when the message needs more than `*length` bytes: `*length` is
/// set to what it needs, the header and the first `*length` bytes are written, and the
/// message stays queued; EWOULDBLOCK (timeout 0) when nothing is queued; ETIMEDOUT when a
/// positive timeout passes.
pub fn recv(id: PortId, umad: &mut [u8], length: &mut usize, timeout_ms: i32) -> Result<AgentId> {
    recv_on(id, umad, length, |handle, take| {
        handle.recv_with(timeout_of(timeout_ms), take)
    })
    .map(|(agent, _)| agent)
}

/// [`recv`] into memory that need not be initialised (a C caller's fresh `malloc`):
/// also returns how many bytes from the start of `umad` it wrote, header included (on
/// ENOSPC too: the header and the first `*length` bytes). Bytes past them are not touched.
///
/// # Errors
/// As [`recv`].
pub fn recv_uninit(
    id: PortId,
    umad: &mut [MaybeUninit<u8>],
    length: &mut usize,
    timeout_ms: i32,
) -> Result<(AgentId, usize)> {
    recv_on(id, umad, length, |handle, take| {
        handle.recv_with(timeout_of(timeout_ms), take)
    })
}

/// [`recv_uninit`] with a zero timeout for a caller that, finding nothing, polls the
/// descriptors of [`WaitHooks::begin_wait`] (the drop-in's blocking `umad_recv`): see
/// [`WaitHooks::recv_before_wait_with`]. For `vmad-capi` only, with no stability
/// promise, as the rest of [`crate::port::cabi`].
///
/// # Errors
/// As [`recv`] with a zero timeout.
#[doc(hidden)]
pub fn recv_before_wait(
    id: PortId,
    umad: &mut [MaybeUninit<u8>],
    length: &mut usize,
) -> Result<(AgentId, usize)> {
    recv_on(id, umad, length, |handle, take| {
        handle.recv_before_wait_with(take)
    })
}

type Taken = Result<(AgentId, usize)>;

fn recv_on<B: RecvBuf + ?Sized>(
    id: PortId,
    umad: &mut B,
    length: &mut usize,
    receive: impl FnOnce(&Port, &mut dyn FnMut(&Event) -> Taken) -> Taken,
) -> Result<(AgentId, usize)> {
    let handle = port(id)?;
    if *length < MAD_SIZE {
        return Err(Error::InvalidArgument("*length must be at least 256"));
    }
    if umad.len() < HEADER_LEN + *length {
        return Err(Error::InvalidArgument("buffer shorter than 64 + *length"));
    }
    let cap = *length;
    let mut written = 0;
    let got = receive(&handle, &mut |event| match event {
        Event::Recv { agent, addr, mad } => {
            written = write_message(umad, cap, *agent, 0, addr, mad);
            if mad.len() > cap {
                return Err(Error::BufferTooSmall { needed: mad.len() });
            }
            Ok((*agent, mad.len()))
        }
        Event::SendTimedOut {
            agent,
            addr,
            header,
        } => {
            written = write_message(umad, cap, *agent, errno::ETIMEDOUT as u32, addr, header);
            Ok((*agent, header.len()))
        }
    });
    match got {
        Ok((agent, len)) => {
            *length = len;
            Ok((agent, written))
        }
        Err(Error::BufferTooSmall { needed }) => {
            *length = needed;
            Err(Error::BufferTooSmall { needed })
        }
        Err(e) => Err(e),
    }
}

/// `umad_poll`: wait up to `timeout_ms` (negative: forever) for a message to be queued.
/// With several receiving threads, a following `recv` may still find nothing.
///
/// # Errors
/// ETIMEDOUT if none was queued in time (at once for 0); EINVAL if the port is not open.
pub fn poll(id: PortId, timeout_ms: i32) -> Result<()> {
    port(id)?.poll(timeout_of(timeout_ms))
}
