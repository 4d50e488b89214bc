//! Engine configuration: every limit, with the Linux kernel's values as defaults.

use core::time::Duration;

use super::rmpp::RmppConfig;

/// Engine configuration. Defaults match the Linux kernel's MAD layer.
///
/// Build it with struct update syntax so new fields keep their defaults:
/// `EngineConfig { rng_seed: Some(7), ..Default::default() }`.
#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// Seed for the engine's randomness (where the agents' 24-bit TID high words start,
    /// and the SipHash keys of its maps keyed by what peers send).
    /// `None` (the default): a `vmad::port::Port` seeds its engine from the OS, so
    /// that two ports or two processes do not stamp the same TID high words; an engine
    /// built directly with `None` (it never reads the OS) starts from 0. `Some`: that
    /// seed, everywhere, for runs that must repeat.
    pub rng_seed: Option<u64>,
    /// Most events held for the application (kernel `MAX_UMAD_RECV_LIST_SIZE`, 200,000).
    /// Received MADs beyond it are dropped and counted; timeout notifications are
    /// always queued, as the kernel does.
    pub max_events: usize,
    /// Most requests (sends with a response timeout) one agent may have in flight;
    /// further sends wait in a backlog, in order, and are never dropped.
    /// 0 = unlimited (the kernel before its 2025 flow control).
    pub max_outstanding_per_agent: usize,
    /// Most RMPP reassemblies one peer (LID or GID) may have open at once;
    /// a first segment beyond it is dropped and counted.
    pub max_reassemblies_per_peer: usize,
    /// Most RMPP reassemblies open at once from all peers together (peers can be
    /// spoofed LIDs); a first segment beyond it is dropped and counted.
    pub max_reassemblies: usize,
    /// How long a delivered request is remembered to drop its retransmissions
    /// while it has not been answered yet. Zero turns the filter off, which is
    /// what the kernel does: its MAD core hands every request to its agent (only a
    /// reassembled RMPP request's retransmitted segments are absorbed, by the
    /// receive session's 10 s linger). A request is remembered only once it is
    /// queued for the agent, by peer (GID with a GRH, else LID), QPN, TID and
    /// class; any answer to that peer with that TID and class, from any agent,
    /// forgets it, so a retry after a lost answer is delivered again (an answer
    /// with a GRH also finds a request that came without one; an answer without
    /// a GRH to a request that came with one does not, and its retries are
    /// dropped until the window ends). At most
    /// `max_events` requests are remembered: beyond that (a flood), requests
    /// are delivered without being remembered.
    pub duplicate_request_window: Duration,
    /// RMPP tunables (window, timers, largest message).
    pub rmpp: RmppConfig,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            rng_seed: None,
            max_events: 200_000,
            max_outstanding_per_agent: 0,
            max_reassemblies_per_peer: 64,
            max_reassemblies: 1024,
            duplicate_request_window: Duration::from_secs(10),
            rmpp: RmppConfig::default(),
        }
    }
}

/// A tiny deterministic generator (splitmix64): enough for TID seeds and test link models.
#[derive(Debug, Clone)]
pub(crate) struct SplitMix(u64);

impl SplitMix {
    pub(crate) fn new(seed: u64) -> SplitMix {
        SplitMix(seed)
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (n > 0); the modulo bias is irrelevant here.
    #[cfg(test)]
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }
}
