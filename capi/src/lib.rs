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
// An entry point that dereferences a C caller's pointer is an `unsafe extern "C" fn`
// whose `# Safety` section is the contract the C caller keeps (issue 31).
#![deny(clippy::not_unsafe_ptr_arg_deref, clippy::missing_safety_doc)]

mod abi;
mod boundary;
// `pub`: clippy checks only reachable functions for the two lints above, so the
// modules of entry points are reachable. Nothing else is exported by it: the C names are
// `exports`' trampolines, the Rust items are mangled and the library is a cdylib.
pub mod devices;
pub mod dump;
mod exports;
pub mod header;
pub mod ports;
pub mod select;
pub mod strings;
pub mod waiting;
