//! The deadline index: one ordered set of `(deadline, owner)` for everything
//! that waits (requests, RMPP sessions, remembered requests).
//!
//! Each owner stores its own current deadline and moves its entry with
//! [`Timers::set`], so the set never holds stale entries: `poll_timeout` is
//! the first element and each arm/disarm is O(log n) whatever the load.

use std::collections::BTreeSet;

use crate::time::Instant;

/// Who a deadline belongs to. Ordered, so ties fire in a fixed order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum TimerKey {
    /// A request waiting for its response (or an RMPP send session).
    Txn(u64),
    /// An RMPP receive session.
    Recv(u64),
    /// A delivered request remembered to drop its retransmissions.
    Dedup(u64),
}

#[derive(Debug, Default)]
pub(crate) struct Timers {
    set: BTreeSet<(Instant, TimerKey)>,
}

impl Timers {
    /// Move `key`'s deadline from `old` to `new` (either may be `None`).
    pub(crate) fn set(&mut self, key: TimerKey, old: Option<Instant>, new: Option<Instant>) {
        if old == new {
            return;
        }
        if let Some(t) = old {
            self.set.remove(&(t, key));
        }
        if let Some(t) = new {
            self.set.insert((t, key));
        }
    }

    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        self.set.first().map(|&(t, _)| t)
    }

    /// Remove and return the earliest entry due at `now`.
    pub(crate) fn pop_due(&mut self, now: Instant) -> Option<TimerKey> {
        match self.set.first() {
            Some(&(t, _)) if t <= now => self.set.pop_first().map(|(_, k)| k),
            _ => None,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.set.len()
    }

    /// Whether `key` has a deadline armed.
    pub(crate) fn contains(&self, key: TimerKey) -> bool {
        self.set.iter().any(|&(_, k)| k == key)
    }
}
