//! # vmad: a userspace InfiniBand MAD stack
//!
//! Management datagrams (SMPs on QP0, GMPs on QP1) normally go through the
//! kernel's `ib_umad` module and `libibumad`. vmad does that work in
//! userspace, in layers:
//!
//! ```text
//! wire       bounds-checked views and values of MAD, SMP, SA, RMPP, vendor, GRH, ib_user_mad
//! engine     sans-IO: agents, TID routing, request/response matching, timeouts, retries, RMPP
//! transport  sim (in-process fabric) | ibsim | verbs (own UD QP) | roce (UDP 4791)
//! port       the one driver loop per port: the only place that reads a clock
//! umad       libibumad's API in Rust (the C ABI lives in the `capi/` crate)
//! ```
//!
//! **What each transport can and cannot do.** Userspace verbs cannot create
//! QP0 or QP1: on the verbs transport vmad owns an ordinary UD QP, so it is a
//! GMP *client* of any remote QP1 (replies come back to its QPN) and a full
//! peer of other vmad endpoints, but it cannot send SMPs or receive
//! unsolicited QP1 traffic. Full QP0 + QP1 ownership exists on the embedded
//! simulated fabric and on ibsim; QP1 ownership on RoCE v2 through the roce
//! transport.
#![deny(unsafe_code)]

pub mod engine;
pub mod error;
pub mod pcap;
pub mod port;
pub mod time;
pub mod transport;
pub mod types;
pub mod umad;
pub mod wire;

pub use error::{Error, Result};
