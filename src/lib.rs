//! # vmad: a userspace InfiniBand MAD stack
//!
//! Management datagrams (SMPs on QP0, GMPs on QP1) normally go through the
//! kernel's `ib_umad` module and `libibumad`. vmad does that work in
//! userspace, in layers:
//!
//! ```text
//! wire       bounds-checked views and values of MAD, SMP, SA, PerfMgt, RMPP, vendor, GRH,
//!            ib_user_mad, RoCE v2
//! engine     sans-IO: agents, TID routing, request/response matching, timeouts, retries, RMPP
//! transport  kernel | hybrid | sim | ibsim | verbs | roce
//! subnet     the simulated managed subnet the sim transport carries (SM, SA, SMAs, PMAs)
//! port       the one driver loop per port: the only place that reads a clock
//! client     typed requests as handles (SMP, SA, PerfMgt), blocking and async, over a port
//! umad       libibumad's API in Rust (the C ABI lives in the `capi/` crate)
//! ```
//!
//! `wire` and `engine`, with `time` and `types`, are the `no_std` crate
//! `vmad-core`, re-exported here unchanged: the compiler keeps them free of
//! clocks and I/O. Their errors reach this crate's API as [`Error`] (`From`).
//!
//! **What each transport can and cannot do.** Userspace verbs cannot create
//! QP0 or QP1, so only the transports below that reach a QP1 some other way
//! own it; vmad never pretends otherwise.
//!
//! | transport | QP0 (SMPs) | QP1 (GMPs) | built |
//! |---|---|---|---|
//! | `kernel` | where the port has one (not RoCE) | the kernel's QP1 through `/dev/infiniband/umadN`; RMPP, timeouts and retries are vmad's | feature `kernel` (default) |
//! | `hybrid` | as `kernel` | per MAD: client GMPs over vmad's own UD QP, the rest through the kernel | features `kernel` and `verbs` |
//! | `sim` | yes | yes: the in-process managed subnet | always |
//! | `ibsim` | yes | yes (RMPP by vmad's engine over ibsim's 256-byte MADs) | always |
//! | `verbs` | no | vmad's own UD QP, not QP1: a GMP *client* of any remote QP1 (replies come back to its QPN) and a full peer of other vmad endpoints; no unsolicited QP1 traffic | feature `verbs` |
//! | `roce` | no (RoCE has no QP0) | yes: vmad is QP1 of its own IP address (UDP 4791) | feature `roce` (default) |
//!
//! Which one a port uses follows from the CA it opens (see [`transport`] and
//! [`transport::registry`]).
//!
//! # Quick start: two CAs on the embedded fabric
//!
//! No hardware, no root: a fabric of simulated CAs lives in the process, brought
//! up by its built-in SM (with an SA, and a PMA on every port). A
//! [`client::Client`] asks typed questions and gets typed answers; each answer
//! goes to the request that asked.
//!
//! ```
//! use vmad::client::{Client, NodeInfo, PortInfo, Target};
//! use vmad::subnet::Fabric;
//!
//! # fn main() -> vmad::Result<()> {
//! // Two CAs joined by one link: LIDs 1 and 2. `build` registers them by name.
//! let fabric = Fabric::builder()
//!     .ca("qs0")
//!     .ca("qs1")
//!     .link("qs0", 1, "qs1", 1)
//!     .build()?;
//! let client = Client::open("qs0", 1)?;
//!
//! // SubnGet(NodeInfo) along a directed route of one hop: the CA at the other end.
//! let peer: NodeInfo = client.get(&Target::dr(&[1]), 0)?;
//! assert_eq!(Some(peer.node_guid), fabric.node_guid("qs1"));
//!
//! // Its LID, from the SA (its NodeRecord, found by port GUID), then its PortInfo by LID.
//! let lid = client.resolve_guid(peer.port_guid)?;
//! let port: PortInfo = client.get(&Target::lid(lid), 1)?;
//! assert_eq!(port.lid, lid);
//!
//! // Its PMA's PortCounters, 100 requests at once: handles, each waited for in turn.
//! let asked = (0..100)
//!     .map(|_| client.port_counters_async(lid, 1))
//!     .collect::<vmad::Result<Vec<_>>>()?;
//! for pending in asked {
//!     assert_eq!(pending.wait()?.view().port_select(), 1);
//! }
//!
//! drop(client);
//! fabric.unregister();
//! # Ok(())
//! # }
//! ```
//!
//! The same exchanges can be made the libibumad way, with `ib_user_mad` buffers:
//! see [`umad`].
//!
//! Without a fabric of your own, `umad::open_port("vmadsim0", 1)` opens the
//! default one: CAs `vmadsim0` and `vmadsim1`, LIDs 1 and 2.
//!
//! # Cargo features
//!
//! Default: `roce`, `kernel`, `cli`.
//!
//! - `roce` (default): the RoCE v2 transport.
//! - `kernel` (default): the kernel transport (the host's CAs through the
//!   kernel's umad and issm devices; Linux only, nothing but ioctls).
//! - `cli` (default): the `vmad` command; the library never uses its dependencies.
//! - `verbs`: the ibverbs UD transport (needs libibverbs); with `kernel`, also
//!   the hybrid transport.
//! - `tracing`: [`tracing`](https://docs.rs/tracing) events at the engine, port
//!   and transport boundaries (targets `vmad::engine`, `vmad::port`,
//!   `vmad::transport`, `vmad::transport::{roce,ibsim}`): sends, receives (one-line MAD at TRACE), drops with
//!   their reason, retries, timeouts, RMPP session start/complete/abort and
//!   transport errors (DEBUG). Off by default; when off, the hooks expand to
//!   nothing. The counters behind the drop reasons are always there:
//!   [`engine::EngineStats`], through [`port::Port::stats`].
#![deny(unsafe_code)]
// docs.rs builds with every feature; this labels the feature-gated items.
#![cfg_attr(docsrs, feature(doc_cfg))]

// First: its macros are used by the modules below.
#[macro_use]
mod trace;

pub mod client;
pub mod clock;
pub mod discover;
mod entropy;
pub mod error;
pub mod fabric;
pub mod pcap;
pub mod port;
pub mod subnet;
pub mod transport;
pub mod umad;

// The sans-IO core, a no_std crate of its own (core/): the compiler holds its
// "no clock, no I/O" rule. Its paths stay `vmad::wire`, `vmad::engine`, ….
pub use vmad_core::{engine, time, types, wire};

pub use error::{Error, Result};

// The README's Rust example is compiled with the doc tests (`cargo test --doc`), so it
// cannot drift from the API it shows.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

/// The process-wide registry ([`transport::registry::global`]): its default CAs are
/// the embedded subnet's pair ([`subnet::DefaultPair`]), built when first asked for,
/// so a host without CAs of its own still has a fabric to open. It lives here, above
/// both: the registry is the transports', the default pair the subnet's, and the
/// subnet is built on the transports.
fn global_registry() -> &'static std::sync::Arc<transport::registry::Registry> {
    use std::sync::{Arc, OnceLock};
    use transport::registry::Registry;
    static GLOBAL: OnceLock<Arc<Registry>> = OnceLock::new();
    GLOBAL.get_or_init(|| {
        // `eval "$(vmad fabric up FILE)"` names a fabric server: the default CA is
        // vmad's ibsim client attached to it.
        if fabric::selected_by_env() {
            return Arc::new(Registry::with_default(Arc::new(fabric::EnvDefault)));
        }
        Arc::new(Registry::with_default(Arc::new(subnet::DefaultPair)))
    })
}
