//! The embedded simulated fabric. SKELETON: the port/umad helper fills this in.
