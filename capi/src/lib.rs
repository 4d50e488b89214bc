//! vmad as a drop-in `libibumad.so.3`.
//!
//! A thin C ABI over `vmad::umad`'s raw layer: pointer checks, libibumad's
//! sign conventions and errno, and a panic boundary (`boundary::guard`) on
//! every entry point. SONAME and symbol versions come from `build.rs` and
//! `libibumad.map`; the struct layouts are asserted in `abi`.
//!
//! - `header`: functions on a caller's `ib_user_mad` buffer
//! - `ports`: init, ports, agents, send, receive, poll
//! - `devices`: CAs, ports, device lists, SMI/GSI pairs
//! - `select`: the transport chosen from the environment; the issm path
//! - `strings`, `dump`: the `*_str` names; `umad_dump`, `umad_debug`
#![allow(missing_docs)]
// The workspace's lint: `pub` here marks the C ABI (exported symbols), not a Rust API.
#![allow(unreachable_pub)]

mod abi;
mod boundary;
mod devices;
mod dump;
mod exports;
mod header;
mod ports;
mod select;
mod strings;
mod waiting;
