//! vmad's one integration-test binary: everything here goes through the public API.

mod access;
mod client;
mod client_opensm;
mod client_vendor;
// The `vmad` binary exists only with the `cli` feature (on by default).
#[cfg(feature = "cli")]
mod cli;
mod cli_perf;
mod close_sends;
mod counters;
mod dead_transport;
mod discover;
mod dr_walk;
#[cfg(all(feature = "kernel", feature = "roce"))]
mod dropin_faults;
#[cfg(feature = "cli")]
mod fabric;
mod hostile;
mod hostile_load;
#[cfg(all(feature = "kernel", feature = "roce", feature = "verbs"))]
mod hybrid;
mod ibsim;
#[cfg(all(feature = "kernel", feature = "roce"))]
mod kernel;
#[cfg(any(feature = "roce", feature = "verbs"))]
mod kernel_peer;
mod pcap;
mod ready_fd;
mod rmpp_gettable;
#[cfg(feature = "roce")]
mod roce;
#[cfg(feature = "verbs")]
mod rxe;
mod sa_parity;
mod sim_fabric;
mod sim_subnet;
mod sm_role;
mod test_transport;
mod transmit_bursts;
mod umad_semantics;
mod util;
