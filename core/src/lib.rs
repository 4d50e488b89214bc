//! # vmad-core: the sans-IO core of vmad
//!
//! The layers of vmad that never touch the outside world:
//!
//! ```text
//! wire    bounds-checked views and values of MAD, SMP, SA, RMPP, vendor, GRH, ib_user_mad
//! engine  agents, TID routing, request/response matching, timeouts, retries, RMPP
//! time    the engine's Instant: a value passed in, never read from a clock
//! types   ids and addresses shared by the layers
//! ```
//!
//! The crate is `no_std` (it needs `alloc`), so the compiler holds the
//! engine's rule: no clock, no I/O, no randomness but its seed. Time comes
//! in as an argument, datagrams go out through `poll_transmit`, and the
//! seed comes from the caller ([`engine::EngineConfig::rng_seed`]).
//!
//! The `vmad` crate re-exports these modules unchanged (`vmad::wire`,
//! `vmad::engine`, …) and drives them: its port loop owns the clock and the
//! transports, and its one error type converts this crate's [`Error`]
//! variant by variant.
// Tests run on the host with std (its prelude, threads, proptest).
#![cfg_attr(not(test), no_std)]
#![deny(unsafe_code)]
// docs.rs builds with every feature; this labels the feature-gated items.
#![cfg_attr(docsrs, feature(doc_cfg))]

extern crate alloc;

// First: its macros are used by the modules below.
#[macro_use]
mod trace;

pub mod engine;
pub mod error;
pub mod time;
pub mod types;
pub mod wire;

pub use error::{Error, Result};
