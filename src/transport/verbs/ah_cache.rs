//! A bounded cache of address handles, least recently used out first.
//!
//! A fabric of thousands of peers (an SA answering every node, an SM
//! sweeping) would otherwise pin one AH per destination for ever. An
//! evicted AH cannot be destroyed at once: a posted send may still name it.
//! Sends on a QP complete in the order they were posted, so the cache
//! remembers how many sends had been posted when it evicted an AH, and lets
//! the AH go once that many have completed ([`AhCache::release`]).
//!
//! Generic over the handle so that the policy is tested without a device.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::hash::Hash;

/// At most `capacity` live entries; evicted ones wait in `retired` until no
/// posted send can use them.
pub(super) struct AhCache<K, V> {
    capacity: usize,
    /// Key → (handle, last use).
    live: HashMap<K, (V, u64)>,
    /// Last use → key: the oldest first.
    by_use: BTreeMap<u64, K>,
    clock: u64,
    /// (sends posted when evicted, handle), oldest first.
    retired: VecDeque<(u64, V)>,
}

impl<K: Copy + Eq + Hash, V> AhCache<K, V> {
    /// A cache of at most `capacity` (at least 1) live handles.
    pub(super) fn new(capacity: usize) -> Self {
        AhCache {
            capacity: capacity.max(1),
            live: HashMap::new(),
            by_use: BTreeMap::new(),
            clock: 0,
            retired: VecDeque::new(),
        }
    }

    /// The handle for `key`, marked as just used.
    pub(super) fn get(&mut self, key: &K) -> Option<&V> {
        let (_, used) = self.live.get_mut(key)?;
        self.by_use.remove(used);
        self.clock += 1;
        *used = self.clock;
        self.by_use.insert(self.clock, *key);
        self.live.get(key).map(|(v, _)| v)
    }

    /// The handle for `key` without touching its age (for posting what was queued).
    pub(super) fn peek(&self, key: &K) -> Option<&V> {
        self.live.get(key).map(|(v, _)| v)
    }

    /// Whether adding a key now would evict one.
    pub(super) fn full(&self) -> bool {
        self.live.len() >= self.capacity
    }

    /// Add `value` for `key` (not present), evicting the least recently used
    /// handle when full; `posted` is how many sends have been posted so far.
    /// Returns whether one was evicted.
    pub(super) fn insert(&mut self, key: K, value: V, posted: u64) -> bool {
        let mut evicted = false;
        while self.live.len() >= self.capacity {
            let Some((_, old)) = self.by_use.pop_first() else {
                break;
            };
            if let Some((v, _)) = self.live.remove(&old) {
                self.retired.push_back((posted, v));
                evicted = true;
            }
        }
        self.clock += 1;
        self.by_use.insert(self.clock, key);
        self.live.insert(key, (value, self.clock));
        evicted
    }

    /// Drop the retired handles that no posted send can use any more:
    /// `completed` sends have completed (sends complete in posting order).
    pub(super) fn release(&mut self, completed: u64) {
        while self.retired.front().is_some_and(|(p, _)| *p <= completed) {
            self.retired.pop_front();
        }
    }

    /// Drop every retired handle (nothing is in flight: the QP was reset).
    pub(super) fn release_all(&mut self) {
        self.retired.clear();
    }

    /// Live handles.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.live.len()
    }

    /// Handles evicted and not released yet.
    #[cfg(test)]
    fn retired(&self) -> usize {
        self.retired.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn never_more_than_the_bound_and_the_oldest_goes_first() {
        let mut c = AhCache::new(3);
        let mut evictions = 0;
        for k in 0..10u32 {
            if c.get(&k).is_none() {
                evictions += u32::from(c.insert(k, k * 10, u64::from(k)));
            }
            assert!(c.len() <= 3, "{} live after key {k}", c.len());
        }
        assert_eq!(evictions, 7);
        // The three most recent stay, the older ones are gone.
        for k in 0..7 {
            assert!(c.peek(&k).is_none(), "{k} should have been evicted");
        }
        for k in 7..10 {
            assert_eq!(c.peek(&k), Some(&(k * 10)));
        }
    }

    #[test]
    fn a_use_keeps_a_handle_in() {
        let mut c = AhCache::new(2);
        c.insert(1u8, "a", 0);
        c.insert(2, "b", 0);
        assert_eq!(c.get(&1), Some(&"a"));
        assert!(c.full());
        assert!(c.insert(3, "c", 0), "full: one goes");
        assert_eq!(c.peek(&1), Some(&"a"), "recently used: kept");
        assert!(c.peek(&2).is_none(), "least recently used: evicted");
    }

    #[test]
    fn evicted_handles_live_until_their_sends_completed() {
        let mut c = AhCache::new(1);
        c.insert(1u8, 'a', 0);
        c.insert(2, 'b', 5); // 'a' evicted after 5 sends were posted
        c.insert(3, 'c', 9); // 'b' after 9
        assert_eq!(c.retired(), 2);
        c.release(4);
        assert_eq!(c.retired(), 2, "send 5 may still use 'a'");
        c.release(5);
        assert_eq!(c.retired(), 1);
        c.release(8);
        assert_eq!(c.retired(), 1);
        c.release_all();
        assert_eq!(c.retired(), 0);
        assert_eq!(c.len(), 1);
    }
}
