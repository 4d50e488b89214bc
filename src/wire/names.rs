//! TODO(wire helper): names codec.
