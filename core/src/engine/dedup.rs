//! The duplicate-request filter: delivered requests remembered until the
//! application takes them, they are answered or their window ends, so that a
//! requester's retransmission of a request still waiting in a queue is
//! dropped (see the engine's departures from the kernel).

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use core::time::Duration;

use super::hash::{IdMap, PeerMap, SipKeys};
use super::ids::DedupId;
use super::peer::{match_key, PeerKey};
use super::timers::{TimerKey, Timers};
use super::AgentId;
use crate::time::Instant;
use crate::types::MadAddr;

/// A delivered request, remembered until it is answered: what a requester's
/// retransmission repeats and an answer's address names. Not the agent (any
/// agent of the port may send the answer), and the peer as response matching
/// sees it (the GID with a GRH, else the LID), as in [`match_key`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct DedupKey {
    qpn: u32,
    peer: PeerKey,
    tid: u64,
    class: u8,
}

impl DedupKey {
    fn new(peer: &MadAddr, tid: u64, class: u8) -> DedupKey {
        DedupKey {
            qpn: peer.qpn,
            peer: match_key(peer),
            tid,
            class,
        }
    }

    /// The same request named by LID alone (an answer with a GRH to a request without one).
    fn by_lid(peer: &MadAddr, tid: u64, class: u8) -> DedupKey {
        DedupKey {
            qpn: peer.qpn,
            peer: (peer.lid, None),
            tid,
            class,
        }
    }
}

/// Delivered requests awaiting their answer. Each holds a deadline in the
/// engine's [`Timers`] under [`TimerKey::Dedup`]; the engine calls
/// [`DuplicateFilter::expire`] when it fires.
#[derive(Debug)]
pub(crate) struct DuplicateFilter {
    /// How long a request is remembered; zero turns the filter off.
    window: Duration,
    /// At most this many remembered (a flood lets retransmissions through).
    limit: usize,
    /// Remembered request -> its id.
    by_key: PeerMap<DedupKey, DedupId>,
    /// Id -> (request, the agent it was delivered to, end of its window).
    entries: IdMap<DedupId, (DedupKey, AgentId, Instant)>,
    next_id: u64,
}

impl DuplicateFilter {
    pub(crate) fn new(window: Duration, limit: usize, keys: SipKeys) -> DuplicateFilter {
        DuplicateFilter {
            window,
            limit,
            by_key: PeerMap::with_hasher(keys),
            entries: IdMap::default(),
            next_id: 1,
        }
    }

    /// Whether this request from `src` was delivered and is not yet answered.
    #[inline]
    pub(crate) fn is_remembered(&self, src: &MadAddr, tid: u64, class: u8) -> bool {
        !self.window.is_zero() && self.by_key.contains_key(&DedupKey::new(src, tid, class))
    }

    /// Remember a request of `agent` delivered from `src`, until it is answered or the window ends.
    #[inline]
    pub(crate) fn remember(
        &mut self,
        timers: &mut Timers,
        now: Instant,
        agent: AgentId,
        src: &MadAddr,
        tid: u64,
        class: u8,
    ) {
        if self.window.is_zero() || self.by_key.len() >= self.limit {
            // Off, or a flood: stay bounded, at the price of letting its retransmissions through.
            return;
        }
        let key = DedupKey::new(src, tid, class);
        let id = DedupId(self.next_id);
        self.next_id += 1;
        let deadline = now + self.window;
        self.by_key.insert(key, id);
        self.entries.insert(id, (key, agent, deadline));
        timers.set(TimerKey::Dedup(id), None, Some(deadline));
    }

    /// An answer to `peer` went out (from any agent): the request it answers
    /// is forgotten, so that the requester's retry, should the answer be lost,
    /// is delivered again.
    #[inline]
    pub(crate) fn forget(&mut self, timers: &mut Timers, peer: &MadAddr, tid: u64, class: u8) {
        let mut found = self.by_key.remove(&DedupKey::new(peer, tid, class));
        if found.is_none() && peer.grh.is_some() {
            found = self.by_key.remove(&DedupKey::by_lid(peer, tid, class));
        }
        if let Some(id) = found {
            if let Some((_, _, deadline)) = self.entries.remove(&id) {
                timers.set(TimerKey::Dedup(id), Some(deadline), None);
            }
        }
    }

    /// `id`'s window ended (its timer fired).
    #[inline]
    pub(crate) fn expire(&mut self, id: DedupId) {
        if let Some((key, _, _)) = self.entries.remove(&id) {
            self.by_key.remove(&key);
        }
    }

    /// Forget every request delivered to `agent` (it unregistered).
    pub(crate) fn forget_agent(&mut self, timers: &mut Timers, agent: AgentId) {
        let mut doomed: Vec<_> = self
            .entries
            .iter()
            .filter(|(_, (_, a, _))| *a == agent)
            .map(|(&id, _)| id)
            .collect();
        doomed.sort_unstable();
        for id in doomed {
            if let Some((key, _, deadline)) = self.entries.remove(&id) {
                self.by_key.remove(&key);
                timers.set(TimerKey::Dedup(id), Some(deadline), None);
            }
        }
    }

    /// Requests remembered.
    pub(crate) fn len(&self) -> usize {
        self.by_key.len()
    }

    /// Whether no request is remembered.
    pub(crate) fn is_empty(&self) -> bool {
        self.by_key.is_empty()
    }

    /// Whether both maps agree (for [`super::Engine::check_invariants`]).
    pub(crate) fn check(&self) -> Result<(), String> {
        if self.by_key.len() != self.entries.len() {
            return Err("dedup and dedup_entries differ in size".into());
        }
        for (key, id) in &self.by_key {
            if self.entries.get(id).map(|(k, _, _)| k) != Some(key) {
                return Err(format!("dedup entry {id} disagrees"));
            }
        }
        Ok(())
    }
}
