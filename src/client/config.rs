//! A client's settings, and what it has done so far.

use std::time::Duration;

/// A client's settings.
///
/// The SMP window's default, 64, is where a whole-fabric directed-route walk
/// stops getting faster on ibsim and on the embedded subnet (1,612 and 3,992 nodes;
/// on ibsim 256 is slower again): `docs/performance.md`, `scripts/bench-client-windows`.
/// The per-destination cap showed no trend there (1 to 32), so its default, 8,
/// follows the field figures (a switch gains nothing beyond 2 to 20 outstanding and
/// drops VL15 above about 20). The GMP window's default, 128, is where batches of
/// PortCounters (ibsim's PMAs) and SA Gets (OpenSM's SA) stop getting faster, and 256
/// is 1.8–2.2× slower for PortCounters: `docs/performance.md` ("Client windows:
/// which GMP window?"), `examples/gmp_window`.
#[derive(Debug, Clone)]
pub struct ClientConfig {
    /// Most SMPs (QP0) on the wire at once. Default 64.
    pub smp_window: usize,
    /// Most GMPs (QP1: SA, PerfMgt, vendor) on the wire at once. Default 128
    /// (measured; see the type's docs).
    pub gmp_window: usize,
    /// Most requests on the wire to one destination (a LID, or one directed route).
    /// Default 8.
    pub per_destination: usize,
    /// Wait for an answer per attempt, in ms. Default 500.
    pub timeout_ms: u32,
    /// Attempts after the first when no answer comes. Default 2.
    pub retries: u32,
    /// How often an answer of BUSY is retried (after [`ClientConfig::busy_backoff`],
    /// doubling each time) before it is returned as the MAD status error. Default 4.
    pub busy_retries: u32,
    /// The first BUSY backoff. Default 10 ms.
    pub busy_backoff: Duration,
    /// The SA's LID. `None` (default): the port's SM LID.
    pub sa_lid: Option<u16>,
    /// SM_Key sent in SA requests to an SA the client's key table does not name
    /// ([`super::Client::set_sm_key`]). Default 0.
    pub sm_key: u64,
    /// M_Key sent in SMPs to a target the client's key table does not name
    /// ([`super::Client::set_m_key`]). Default 0.
    pub m_key: u64,
}

impl Default for ClientConfig {
    fn default() -> Self {
        ClientConfig {
            smp_window: 64,
            // Measured: docs/performance.md, "Client windows: which GMP window?".
            gmp_window: 128,
            per_destination: 8,
            timeout_ms: 500,
            retries: 2,
            busy_retries: 4,
            busy_backoff: Duration::from_millis(10),
            sa_lid: None,
            sm_key: 0,
            m_key: 0,
        }
    }
}

/// What a client has done so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ClientStats {
    /// Requests put on the wire (a BUSY retry counts again).
    pub sent: u64,
    /// Requests that got an answer (whatever its status).
    pub answered: u64,
    /// Requests that timed out or failed.
    pub failed: u64,
    /// Answers of BUSY that were retried.
    pub busy_retries: u64,
    /// The most requests on the wire at once: [SMPs, GMPs].
    pub max_on_wire: [usize; 2],
    /// The most requests on the wire at once to one destination.
    pub max_to_one_destination: usize,
}
