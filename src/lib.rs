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
//! No hardware, no root: a fabric of simulated CAs lives in the process.
//! Here a client asks a server on the other CA a question, the libibumad
//! way (`ib_user_mad` buffers: a 64-byte header, then the MAD).
//!
//! ```
//! use vmad::subnet::Fabric;
//! use vmad::umad;
//!
//! # fn main() -> vmad::Result<()> {
//! // Two CAs joined by one link: LIDs 1 and 2. `build` registers them by name.
//! let fabric = Fabric::builder()
//!     .ca("qs0")
//!     .ca("qs1")
//!     .link("qs0", 1, "qs1", 1)
//!     .build()?;
//! let client_port = umad::open_port("qs0", 1)?;
//! let server_port = umad::open_port("qs1", 1)?;
//!
//! // PerfMgt (class 0x04, version 1): a client, and a server of Get (method 1).
//! let client = umad::register(client_port, 0x04, 1, 0, None)?;
//! let server = umad::register(server_port, 0x04, 1, 0, Some(&[1 << 1, 0]))?;
//!
//! // A Get to LID 2, QP1: wait 1 s per attempt, 2 retries.
//! let mut req = vec![0u8; umad::size() + 256];
//! req[64..68].copy_from_slice(&[1, 0x04, 1, 0x01]); // base version, class, version, Get
//! req[64 + 15] = 0x2a; // TID 42 (the engine fills the upper 32 bits)
//! umad::set_addr(&mut req, 2, 1, 0, vmad::types::GSI_QKEY)?;
//! umad::send(client_port, client, &mut req, 256, 1000, 2)?;
//!
//! // The server receives it (blocking), turns it into a GetResp and answers.
//! let mut buf = vec![0u8; umad::size() + 256];
//! let mut len = 256;
//! assert_eq!(umad::recv(server_port, &mut buf, &mut len, -1)?, server);
//! buf[64 + 3] = 0x81;
//! umad::send(server_port, server, &mut buf, len, 0, 0)?;
//!
//! // The client gets the response on its agent, with the TID it chose.
//! let mut len = 256;
//! assert_eq!(umad::recv(client_port, &mut buf, &mut len, -1)?, client);
//! assert_eq!(umad::status(&buf)?, 0);
//! assert_eq!(buf[64 + 3], 0x81);
//! assert_eq!(buf[64 + 15], 0x2a);
//!
//! umad::close_port(client_port)?;
//! umad::close_port(server_port)?;
//! fabric.unregister();
//! # Ok(())
//! # }
//! ```
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

pub mod clock;
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
