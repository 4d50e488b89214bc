//! TODO(wire helper): sa codec.
