//! The port: the one driver loop per port. SKELETON: the port/umad helper fills this in.
