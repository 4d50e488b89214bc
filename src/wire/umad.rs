//! TODO(wire helper): umad codec.
