//! TODO(wire helper): smp codec.
