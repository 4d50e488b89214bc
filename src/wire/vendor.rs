//! TODO(wire helper): vendor codec.
