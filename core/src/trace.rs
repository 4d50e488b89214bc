//! Internal `tracing` hooks, compiled only with the `tracing` feature.
//!
//! [`vmad_trace!`] forwards to `tracing::trace!` with the feature and expands
//! to nothing without it: not even its arguments are evaluated, so the per-MAD
//! path costs nothing when the feature is off. Its events carry the target
//! `vmad::engine`, the name users of `vmad` filter on.
//!
//! The engine's internals count what they drop, retry or time out in
//! [`EngineStats`]; rather than hooking every counting site, the public entry
//! points snapshot the counters and the event queue ([`EngineProbe`]) and
//! report what changed as one event per reason. One input changes few counters,
//! so this is cheap, and the engine internals stay free of tracing code.

#[cfg(feature = "tracing")]
macro_rules! vmad_trace {
    ($($t:tt)*) => { ::tracing::trace!(target: "vmad::engine", $($t)*) };
}
#[cfg(not(feature = "tracing"))]
macro_rules! vmad_trace {
    ($($t:tt)*) => {};
}

/// Evaluate `$body` with the engine `$engine`; with the feature, report what
/// the call changed (drops by reason, retries, timeouts, RMPP sessions).
#[cfg(feature = "tracing")]
macro_rules! vmad_observe {
    ($engine:expr, $op:literal, $body:expr) => {{
        let probe = $crate::trace::EngineProbe::take($engine);
        let out = $body;
        probe.report($engine, $op);
        out
    }};
}
#[cfg(not(feature = "tracing"))]
macro_rules! vmad_observe {
    ($engine:expr, $op:literal, $body:expr) => {
        $body
    };
}

#[cfg(feature = "tracing")]
pub(crate) use probe::EngineProbe;

#[cfg(feature = "tracing")]
mod probe {
    use crate::engine::{EngineStats, Event};

    /// What the engine looked like before an input.
    pub(crate) struct EngineProbe {
        stats: EngineStats,
        events: usize,
        rmpp_sends: usize,
        rmpp_recvs: usize,
    }

    /// Counters that mean a MAD was dropped, with the reason reported for each.
    /// Reads one counter.
    type Counter = fn(&EngineStats) -> u64;

    const DROPS: &[(&str, Counter)] = &[
        ("invalid", |s| s.dropped_invalid),
        ("unclaimed", |s| s.dropped_unclaimed),
        ("duplicate request", |s| s.dropped_duplicates),
        ("unmatched response", |s| s.unmatched_responses),
        ("RMPP segment for no session", |s| s.dropped_rmpp_unknown),
        ("RMPP segment out of window", |s| s.dropped_rmpp_segments),
        ("RMPP reassembly limit", |s| s.dropped_rmpp_limit),
        ("event queue full", |s| s.queue_drops),
        ("undelivered report ignored", |s| s.undelivered_ignored),
    ];

    impl EngineProbe {
        pub(crate) fn take(engine: &crate::engine::Engine) -> EngineProbe {
            let (rmpp_sends, rmpp_recvs) = engine.rmpp_session_counts();
            EngineProbe {
                stats: engine.stats(),
                events: engine.pending_events(),
                rmpp_sends,
                rmpp_recvs,
            }
        }

        pub(crate) fn report(&self, engine: &crate::engine::Engine, op: &'static str) {
            let (b, a) = (&self.stats, engine.stats());
            for (reason, get) in DROPS {
                let n = get(&a) - get(b);
                if n > 0 {
                    tracing::debug!(target: "vmad::engine", op, reason, count = n, "drop");
                }
            }
            if a.retries > b.retries {
                tracing::debug!(target: "vmad::engine", op, count = a.retries - b.retries, "request expired: retry");
            }
            if a.auto_replies > b.auto_replies {
                tracing::debug!(target: "vmad::engine", op, "unclaimed Get/Set: engine answers UNSUPPORTED_METHOD_ATTR");
            }
            if a.undelivered > b.undelivered {
                tracing::debug!(target: "vmad::engine", op, "transport reported an attempt undelivered");
            }
            let (sends, recvs) = engine.rmpp_session_counts();
            if sends > self.rmpp_sends {
                tracing::debug!(target: "vmad::engine", op, sessions = sends, "RMPP send start");
            }
            if recvs > self.rmpp_recvs {
                tracing::debug!(target: "vmad::engine", op, sessions = recvs, "RMPP receive start");
            }
            if a.rmpp_reassembled > b.rmpp_reassembled {
                tracing::debug!(target: "vmad::engine", op, "RMPP receive complete");
            }
            let aborted = a.rmpp_aborts - b.rmpp_aborts;
            // Aborts are counted, not queued: the last one's details stand for this input's.
            if let Some(last) = engine.last_rmpp_abort().filter(|_| aborted > 0) {
                tracing::debug!(target: "vmad::engine", op, count = aborted, agent = last.agent.0, tid = format_args!("{:#018x}", last.tid), status = ?last.status, sending = last.sending, "RMPP abort");
            }
            let timed_out = a.timeouts - b.timeouts;
            let ended = self.rmpp_sends.saturating_sub(sends) as u64;
            if ended > aborted + timed_out {
                tracing::debug!(target: "vmad::engine", op, count = ended - aborted - timed_out, "RMPP send complete");
            }
            // Events this input queued (inputs only ever add to the queue).
            for i in self.events..engine.pending_events() {
                match engine.event_at(i) {
                    Some(Event::SendTimedOut { agent, header, .. }) => {
                        let tid = u64::from_be_bytes(header[8..16].try_into().unwrap_or([0; 8]));
                        tracing::debug!(target: "vmad::engine", op, agent = agent.0, tid = format_args!("{tid:#018x}"), "send timed out (ETIMEDOUT)");
                    }
                    Some(Event::Recv { agent, mad, .. }) => {
                        tracing::trace!(target: "vmad::engine", op, agent = agent.0, len = mad.len(), "deliver");
                    }
                    None => {}
                }
            }
        }
    }
}

#[cfg(all(test, not(feature = "tracing")))]
mod tests {
    #[test]
    fn trace_macro_without_the_feature_evaluates_nothing() {
        let evaluated = core::cell::Cell::new(false);
        vmad_trace!(
            x = {
                evaluated.set(true);
                1
            },
            "never"
        );
        assert!(!evaluated.get());
    }
}
