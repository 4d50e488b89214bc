//! A typed MAD client: requests as handles, typed attributes, two faces.
//!
//! A [`Client`] is a cheap, cloneable handle on one open of a [`Port`] (its own,
//! made with [`Port::open_again`], so it never takes another user's messages). It
//! sends typed requests ([`Attribute`]s: NodeInfo, PortInfo, NodeRecord,
//! PathRecord, PortCounters, …) and hands each answer to the request that asked,
//! by TID, whichever thread or task waits for it:
//!
//! - **blocking**: [`Client::get`], [`Client::sa_get_table`], [`Client::port_counters`], …
//!   return the typed answer;
//! - **async**: the `*_async` calls and [`Client::submit`] return a [`Pending`], a
//!   runtime-neutral [`Future`](core::future::Future) (no runtime dependency: a
//!   driver thread of the client files answers and wakes the task's waker).
//!
//! Both faces share one engine (this module): requests wait in a queue until
//! the windows allow them on the wire (an SMP window, a GMP window and a cap per
//! destination, [`ClientConfig`]); whoever waits takes the open's receive in turn
//! and files every answer it reads under its TID, so two threads sharing a
//! client each get only their own answers. A BUSY answer is sent again after a
//! backoff ([`ClientConfig::busy_retries`]).
//!
//! An outside event loop can drive a client without its driver thread: poll its
//! descriptor ([`AsFd`](std::os::fd::AsFd)), then [`Client::drive`] and
//! [`Pending::try_wait`]. [`Client::subscribe`] takes InformInfo subscriptions; the
//! SA's Reports come back as typed Notices ([`Client::next_report`]).
//!
//! A GMP answered "redirect required" is sent once more, to the LID, QP, Q_Key and
//! SL of the ClassPortInfo in the answer (a redirect to another subnet's GID is not
//! followed: the address keeps the answer's route).
//!
//! Vendor classes ([`Vendor`]): range 1 (0x09–0x0F) and range 2 (0x30–0x4F, with its
//! OUI) by [`Client::vendor_get`], [`Client::vendor_set`], [`Client::vendor_call`] (any
//! answered method) and [`Client::vendor_send`] (unanswered); a range-2 class with RMPP
//! ([`Vendor::with_rmpp`]) sends and receives messages of any size. The calls carry the
//! attribute's bytes ([`VendorAnswer::attr`] parses them as a program's own
//! [`Attribute`]). Vendor MADs go to QP1 by LID only (no GID-routed requests).
//!
//! Keys: every SMP carries the M_Key the client's table gives its [`Target`]
//! ([`Client::set_m_key`]), every SA request the SM_Key given for its SA's LID
//! ([`Client::set_sm_key`]); [`ClientConfig::m_key`] and [`ClientConfig::sm_key`]
//! (0) for the rest. The table is keyed by the target as written: a port reached by
//! LID and by directed route are two entries. The client does not learn keys (no
//! M_Key from PortInfo answers, no SM_Key from the SM).
//!
//! The async face's driver thread wakes every 50 ms while the client lives, to
//! notice when it is dropped.
//!
//! ```
//! use vmad::client::{Client, NodeInfo, Target};
//! use vmad::subnet::Fabric;
//!
//! # fn main() -> vmad::Result<()> {
//! let fabric = Fabric::builder().ca("cl0").ca("cl1").link("cl0", 1, "cl1", 1).build()?;
//! let client = Client::open("cl0", 1)?;
//! // NodeInfo of the CA at the other end of the link: one directed-route hop.
//! let info: NodeInfo = client.get(&Target::dr(&[1]), 0)?;
//! assert_eq!(Some(info.node_guid), fabric.node_guid("cl1"));
//! // The same node through the SA: its NodeRecord, found by LID.
//! let lid = client.resolve_guid(info.port_guid)?;
//! assert_eq!(Some(lid), fabric.lid("cl1", 1));
//! # drop(client);
//! # fabric.unregister();
//! # Ok(())
//! # }
//! ```

mod attr;
mod calls;
mod config;
mod engine;
mod future;
mod keys;
mod request;
mod vendor;

pub use self::attr::{
    Attribute, Class, ClassPortInfo, GuidInfo, Lft, Mft, NodeDesc, NodeInfo, PKeyTable,
    PortCounters, PortCountersExt, PortInfo, SaRecord, SmInfo, SwitchInfo,
};
pub use self::calls::{Table, Target};
pub use self::config::{ClientConfig, ClientStats};
pub use self::future::Pending;
pub use self::request::{Request, Response};
pub use self::vendor::{Vendor, VendorAnswer};

use std::sync::Arc;

use crate::port::{Port, PortConfig};
use crate::Result;

use self::engine::Inner;

/// A handle on a typed MAD client; clones share it (see the [module](self) docs).
#[derive(Clone)]
pub struct Client {
    inner: Arc<Inner>,
}

impl core::fmt::Debug for Client {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Client")
            .field("port", &self.inner.port)
            .finish_non_exhaustive()
    }
}

impl Client {
    /// A client on a new open of `port` (the caller's open keeps its own agents and queue).
    ///
    /// # Errors
    /// As [`Port::open_again`].
    pub fn new(port: &Port, config: ClientConfig) -> Result<Client> {
        Ok(Client {
            inner: Inner::new(Arc::new(port.open_again()?), None, config),
        })
    }

    /// Open `ca`'s `port` (any CA the process registry knows: the embedded subnet's,
    /// the default pair's, ibsim's, the host's) with default settings, as
    /// [`crate::umad::open`] does: a port that `umad` has open already is opened
    /// again, and `umad` opens the client's port again while the client lives.
    ///
    /// # Errors
    /// ENODEV for an unknown CA or port; as [`crate::umad::open`].
    pub fn open(ca: &str, port: u8) -> Result<Client> {
        Self::open_with(ca, port, PortConfig::default(), ClientConfig::default())
    }

    /// [`Client::open`] with the port's settings (used if the port is not open yet) and
    /// the client's.
    ///
    /// # Errors
    /// As [`Client::open`].
    pub fn open_with(ca: &str, port: u8, pc: PortConfig, config: ClientConfig) -> Result<Client> {
        let (id, port) = crate::umad::open_with(ca, port, pc)?;
        Ok(Client {
            inner: Inner::new(port, Some(id), config),
        })
    }

    /// The client's own open of the port (its attributes, counters, descriptor).
    pub fn port(&self) -> &Port {
        &self.inner.port
    }

    /// What the client has done so far.
    pub fn stats(&self) -> ClientStats {
        self.inner.stats()
    }

    /// Send a request built by hand (any class) and get a handle on its answer;
    /// [`Pending::wait`] blocks for it, `.await` waits asynchronously.
    ///
    /// # Errors
    /// EINVAL for a request the engine refuses at once (agent registration failed).
    pub fn submit(&self, req: Request) -> Result<Pending<Response>> {
        let tid = self.inner.submit(req)?;
        Ok(Pending::new(self.inner.clone(), tid, Ok))
    }
}

impl Client {
    /// File whatever answers the port has queued for this client, waiting up to `wait`
    /// for the first: for an outside event loop that polls the client's descriptor
    /// ([`AsFd`](std::os::fd::AsFd)) and has no thread to spare for the client's
    /// driver. Returns how many requests are still unanswered.
    pub fn drive(&self, wait: std::time::Duration) -> usize {
        self.inner.drive(wait)
    }
}

/// The client's open's descriptor ([`Port::fd`]): it polls readable while an answer
/// waits to be filed (then call [`Client::drive`]) or the port has failed.
impl std::os::fd::AsFd for Client {
    fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        let fd = self.inner.port.fd();
        // The client's open lives as long as the client; only a caller closing it
        // through `Client::port().close()` ends it early.
        assert!(fd >= 0, "the client's open was closed");
        // SAFETY: the descriptor is owned by the port's open, which `self.inner` keeps
        // alive for at least the borrow's lifetime; it is valid (checked above).
        #[allow(unsafe_code)]
        unsafe {
            std::os::fd::BorrowedFd::borrow_raw(fd)
        }
    }
}
