//! TODO(wire helper): class_port_info codec.
