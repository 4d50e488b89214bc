//! The deadline index: one ordered set of `(deadline, owner)` for everything
//! that waits (requests, RMPP sessions, remembered requests).
//!
//! Each owner stores its own current deadline and moves its entry with
//! [`Timers::set`], so the set never holds stale entries: `poll_timeout` is
//! the first element, exact, and ties fire in owner order.
//!
//! Deadlines mostly arrive in order (one timeout, requests sent one after the
//! other), so those go to a sorted run where arming and expiring are O(1) at
//! any outstanding count; only out-of-order ones pay for the B-tree.
//!
//! An entry is packed into one `u128` (deadline in the high half, owner kind
//! and id in the low half), ordered exactly as `(deadline, owner)`. With
//! 100,000 entries an insertion walks about six B-tree nodes comparing keys;
//! as one integer compare each that walk stays a small part of a MAD's cost
//! (measured in `benches/engine.rs`, `send_timeout_churn`), where the
//! derived tuple-and-enum compare made it grow with the outstanding count.

use alloc::collections::{BTreeSet, VecDeque};

use super::ids::{DedupId, RecvId, TxnId};
use crate::time::Instant;

/// Who a deadline belongs to. Ordered, so ties fire in a fixed order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum TimerKey {
    /// A request waiting for its response (or an RMPP send session).
    Txn(TxnId),
    /// An RMPP receive session.
    Recv(RecvId),
    /// A delivered request remembered to drop its retransmissions.
    Dedup(DedupId),
}

/// Bits of an owner id in a packed entry; the two above them name the kind.
const ID_BITS: u32 = 62;
const ID_MASK: u64 = (1 << ID_BITS) - 1;

impl TimerKey {
    fn pack(self) -> u64 {
        let (kind, id) = match self {
            TimerKey::Txn(id) => (0u64, id.0),
            TimerKey::Recv(id) => (1, id.0),
            TimerKey::Dedup(id) => (2, id.0),
        };
        // Ids are slab ids (30-bit generation, 32-bit slot) or a counter: never this big.
        debug_assert!(id <= ID_MASK, "timer owner id {id:#x} out of range");
        (kind << ID_BITS) | (id & ID_MASK)
    }

    fn unpack(bits: u64) -> TimerKey {
        let id = bits & ID_MASK;
        match bits >> ID_BITS {
            0 => TimerKey::Txn(TxnId(id)),
            1 => TimerKey::Recv(RecvId(id)),
            _ => TimerKey::Dedup(DedupId(id)),
        }
    }
}

fn entry(at: Instant, key: TimerKey) -> u128 {
    (u128::from(at.as_micros()) << 64) | u128::from(key.pack())
}

fn deadline_of(entry: u128) -> Instant {
    Instant::from_micros((entry >> 64) as u64)
}

/// A slot of the in-order run: an entry, or what is left of one removed from
/// the middle (cleared when it reaches either end, or by a compaction).
#[derive(Debug, Clone, Copy)]
struct Slot {
    entry: u128,
    live: bool,
}

#[derive(Debug, Default)]
pub(crate) struct Timers {
    /// Entries armed in increasing order (the common case: requests of one
    /// timeout sent one after the other): appending and popping the front are
    /// O(1). Strictly increasing, dead slots included; both ends always live.
    run: VecDeque<Slot>,
    run_live: usize,
    /// Entries armed earlier than the run's last one.
    set: BTreeSet<u128>,
}

impl Timers {
    /// Move `key`'s deadline from `old` to `new` (either may be `None`).
    pub(crate) fn set(&mut self, key: TimerKey, old: Option<Instant>, new: Option<Instant>) {
        if old == new {
            return;
        }
        if let Some(t) = old {
            self.remove(entry(t, key));
        }
        if let Some(t) = new {
            let e = entry(t, key);
            if self.run.back().is_none_or(|s| s.entry < e) {
                self.run.push_back(Slot {
                    entry: e,
                    live: true,
                });
                self.run_live += 1;
            } else {
                self.set.insert(e);
            }
        }
    }

    fn remove(&mut self, e: u128) {
        match self.run.binary_search_by(|s| s.entry.cmp(&e)) {
            Ok(i) if self.run[i].live => {
                self.run[i].live = false;
                self.run_live -= 1;
                self.trim();
            }
            _ => {
                self.set.remove(&e);
            }
        }
    }

    /// Keep both ends of the run live, and its dead slots fewer than its live
    /// ones (plus some slack), so it never grows with removed entries.
    fn trim(&mut self) {
        while self.run.front().is_some_and(|s| !s.live) {
            self.run.pop_front();
        }
        while self.run.back().is_some_and(|s| !s.live) {
            self.run.pop_back();
        }
        if self.run.len() > 2 * self.run_live + 64 {
            self.run.retain(|s| s.live);
        }
    }

    fn first(&self) -> Option<u128> {
        let run = self.run.front().map(|s| s.entry);
        match (run, self.set.first().copied()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        self.first().map(deadline_of)
    }

    /// Remove and return the earliest entry due at `now`.
    pub(crate) fn pop_due(&mut self, now: Instant) -> Option<TimerKey> {
        let e = self.first().filter(|&e| deadline_of(e) <= now)?;
        if self.run.front().is_some_and(|s| s.entry == e) {
            self.run.pop_front();
            self.run_live -= 1;
            self.trim();
        } else {
            self.set.pop_first();
        }
        Some(TimerKey::unpack(e as u64))
    }

    pub(crate) fn len(&self) -> usize {
        self.run_live + self.set.len()
    }

    /// Entries in the in-order run (dead slots included) and in the B-tree.
    #[cfg(test)]
    pub(crate) fn shape(&self) -> (usize, usize) {
        (self.run.len(), self.set.len())
    }

    /// Whether `key` has a deadline armed.
    pub(crate) fn contains(&self, key: TimerKey) -> bool {
        let bits = u128::from(key.pack());
        let owned = |e: u128| e & u128::from(u64::MAX) == bits;
        self.run.iter().any(|s| s.live && owned(s.entry)) || self.set.iter().any(|&e| owned(e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packed_entries_order_as_deadline_then_owner() {
        let keys = [
            TimerKey::Txn(TxnId(0)),
            TimerKey::Txn(TxnId(ID_MASK)),
            TimerKey::Recv(RecvId(3)),
            TimerKey::Dedup(DedupId(1)),
            TimerKey::Dedup(DedupId(2)),
        ];
        let times = [Instant::ZERO, Instant::from_micros(7), Instant::MAX];
        let mut pairs: Vec<(Instant, TimerKey)> = times
            .iter()
            .flat_map(|&t| keys.iter().map(move |&k| (t, k)))
            .collect();
        pairs.reverse();
        let mut packed: Vec<u128> = pairs.iter().map(|&(t, k)| entry(t, k)).collect();
        pairs.sort();
        packed.sort_unstable();
        let unpacked: Vec<(Instant, TimerKey)> = packed
            .iter()
            .map(|&e| (deadline_of(e), TimerKey::unpack(e as u64)))
            .collect();
        assert_eq!(unpacked, pairs);
    }

    #[test]
    fn pops_in_order_and_moves_entries() {
        let mut t = Timers::default();
        let (a, b, c) = (
            TimerKey::Txn(TxnId(5)),
            TimerKey::Recv(RecvId(1)),
            TimerKey::Dedup(DedupId(9)),
        );
        t.set(a, None, Some(Instant::from_micros(30)));
        t.set(b, None, Some(Instant::from_micros(10)));
        t.set(c, None, Some(Instant::from_micros(10)));
        t.set(
            a,
            Some(Instant::from_micros(30)),
            Some(Instant::from_micros(10)),
        );
        assert_eq!(t.next_deadline(), Some(Instant::from_micros(10)));
        assert!(t.contains(a) && t.contains(c));
        assert_eq!(t.pop_due(Instant::from_micros(9)), None);
        let now = Instant::from_micros(10);
        assert_eq!(
            [
                t.pop_due(now),
                t.pop_due(now),
                t.pop_due(now),
                t.pop_due(now)
            ],
            [Some(a), Some(b), Some(c), None]
        );
        assert_eq!(
            (t.len(), t.next_deadline(), t.contains(a)),
            (0, None, false)
        );
    }

    #[test]
    fn matches_an_ordered_set_under_mixed_orders() {
        // In-order, out-of-order, moved, removed and popped entries, against a model.
        let mut t = Timers::default();
        let mut model = std::collections::BTreeMap::<TimerKey, Instant>::new();
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut now = 0u64;
        for step in 0..20_000u64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let key = TimerKey::Txn(TxnId(x % 300));
            let old = model.get(&key).copied();
            match x >> 60 {
                0..=7 => {
                    let at = Instant::from_micros(now + if x & 1 == 0 { 1000 } else { x % 900 });
                    t.set(key, old, Some(at));
                    model.insert(key, at);
                }
                8..=11 => {
                    t.set(key, old, None);
                    model.remove(&key);
                }
                _ => {
                    now += x % 50;
                    let due = Instant::from_micros(now);
                    while let Some(k) = t.pop_due(due) {
                        let first = model.iter().map(|(&k, &at)| (at, k)).min().unwrap();
                        assert_eq!((first.1, first.0 <= due), (k, true), "step {step}");
                        model.remove(&k);
                    }
                }
            }
            let first = model.values().min().copied();
            assert_eq!(
                (t.next_deadline(), t.len()),
                (first, model.len()),
                "step {step}"
            );
            assert!(t.run.len() <= 2 * t.run_live + 64);
        }
    }
}
