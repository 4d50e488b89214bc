//! The ibsim transport. SKELETON: the ibsim helper fills this in.
