//! libibumad's API in Rust. SKELETON: the port/umad helper fills this in.
