//! vmad's one integration-test binary: everything here goes through the public API.

mod access;
mod cli;
mod dr_walk;
mod hostile;
mod ibsim;
mod pcap;
mod rmpp_gettable;
#[cfg(feature = "verbs")]
mod rxe;
mod sim_fabric;
mod umad_semantics;
mod util;
