//! vmad as a drop-in `libibumad.so.3`.
//!
//! WIP scaffolding: ABI structs (`abi`), the panic/errno boundary
//! (`boundary`) and the header-only functions (`header`). The port,
//! agent, send/recv, CA-discovery and string functions come next.
#![allow(missing_docs)]

mod abi;
mod boundary;
mod header;
