//! Self-checks for tests, fuzzing and the soak: what the engine holds now
//! ([`Footprint`]) and whether its tables agree with each other
//! ([`Engine::check_invariants`]). Not part of the stable API.

use alloc::format;
use alloc::string::String;

use super::{Engine, Event};

/// How much one engine holds right now. Every field is bounded by the
/// configuration (or by time), whatever the peers send.
#[doc(hidden)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Footprint {
    /// Transactions (requests in flight, RMPP sends, backlog).
    pub txns: usize,
    /// RMPP receive sessions (reassembling or lingering).
    pub recv_sessions: usize,
    /// Bytes allocated by RMPP receive sessions (message buffers and held segments).
    pub reassembly_bytes: usize,
    /// Remembered requests (the duplicate filter).
    pub dedup: usize,
    /// Events queued for the application.
    pub events: usize,
    /// Bytes of MADs in queued events.
    pub event_bytes: usize,
    /// MADs waiting in the transmit queue.
    pub tx_queue: usize,
    /// Armed deadlines.
    pub timers: usize,
}

impl Engine {
    /// What the engine holds now.
    #[doc(hidden)]
    pub fn footprint(&self) -> Footprint {
        let event_bytes = self
            .events
            .iter()
            .map(|e| match e {
                Event::Recv { mad, .. } => mad.capacity(),
                _ => 0,
            })
            .sum();
        Footprint {
            txns: self.txns.len(),
            recv_sessions: self.recv.len(),
            reassembly_bytes: self.recv.buffered(),
            dedup: self.dedup.len(),
            events: self.events.len(),
            event_bytes,
            tx_queue: self.tx_queue.len(),
            timers: self.timers.len(),
        }
    }

    /// Check that the engine's tables agree with each other and with its limits.
    ///
    /// # Errors
    ///
    /// A description of the first broken invariant.
    #[doc(hidden)]
    pub fn check_invariants(&self) -> Result<(), String> {
        let fail = |what: String| Err(what);
        // Requests: the index and the table agree, and the gauges count them.
        self.txns.check(&self.timers, &self.stats)?;
        for (id, txn) in self.txns.iter() {
            if txn.rmpp.is_some()
                && self
                    .rmpp_sends
                    .get(&super::peer::send_key(txn.agent, txn.tid, &txn.dest))
                    != Some(id)
            {
                return fail(format!("RMPP txn {id} missing from send_index"));
            }
            if self.agents.get(txn.agent).is_none() {
                return fail(format!("txn {id} of unregistered agent {}", txn.agent.0));
            }
        }
        for (key, id) in self.rmpp_sends.iter() {
            if self.txns.get(*id).is_none_or(|t| t.rmpp.is_none()) {
                return fail(format!("send_index {key:?} points at no RMPP txn"));
            }
        }
        // Receive sessions: index, table and per-peer counts agree; memory is bounded.
        self.recv.check()?;
        // The duplicate filter: both maps agree.
        self.dedup.check()?;
        // The event queue: what peers send unasked never beyond its limit (timeout
        // reports and answers to our own requests may be: the application bounds those).
        let unasked = self
            .events
            .iter()
            .filter(|e| match e {
                Event::Recv { mad, .. } => mad.get(3).is_some_and(|m| m & 0x80 == 0),
                Event::SendTimedOut { .. } => false,
            })
            .count();
        if unasked > self.config.max_events {
            return fail(format!(
                "{unasked} unsolicited events queued, limit {}",
                self.config.max_events
            ));
        }
        Ok(())
    }
}
