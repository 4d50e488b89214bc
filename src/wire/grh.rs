//! TODO(wire helper): grh codec.
