//! The index of outstanding requests by what a response carries back:
//! agent, TID and class. Responses are matched through it, and every request
//! enters and leaves it once, so its cost is a part of every MAD's.
//!
//! An entry is 8 bytes, the request's slab slot and a 32-bit hash of its key;
//! the key itself is compared in the request table. A `HashMap` holding the
//! keys took 32 bytes an entry (3.2 MB at 100,000 outstanding, 0.8 MB here)
//! and needed two probes to send (duplicate check, insert) where a vacancy
//! needs one: it was a third of a MAD's cost in `benches/engine.rs`
//! (`send_timeout_churn`), and most of what grew with the outstanding count.

use hashbrown::HashTable;

use super::ids::TxnId;
use super::slab::{self, Slab};
use super::AgentId;

/// What identifies an outstanding request: agent, full TID, class.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TxnKey {
    pub(crate) agent: u32,
    pub(crate) tid: u64,
    pub(crate) class: u8,
}

impl TxnKey {
    pub(crate) fn new(agent: AgentId, tid: u64, class: u8) -> TxnKey {
        TxnKey {
            agent: agent.0,
            tid,
            class,
        }
    }
}

/// A request the index finds: its key is compared in the request table.
pub(crate) trait Keyed {
    fn key(&self) -> TxnKey;
}

#[derive(Debug, Clone, Copy)]
struct Entry {
    slot: u32,
    hash: u32,
}

/// A free place for one key, from [`TxnIndex::vacancy`].
pub(crate) struct Vacancy<'a> {
    place: hashbrown::hash_table::VacantEntry<'a, Entry>,
    hash: u32,
}

impl Vacancy<'_> {
    /// Index request `id` here.
    pub(crate) fn fill(self, id: TxnId) {
        self.place.insert(Entry {
            slot: slab::slot_of(id),
            hash: self.hash,
        });
    }
}

#[derive(Debug, Default)]
pub(crate) struct TxnIndex {
    table: HashTable<Entry>,
}

/// The 32-bit hash an entry keeps. Applications number requests with a
/// counter and a request leaves about as many requests after it came as are
/// outstanding: runs of 64 consecutive TIDs get neighbouring buckets (low
/// six bits), so entering and leaving walk the table in order. The top
/// seven bits (the table's tag byte) mix the whole TID, so that neighbours
/// do not all share one tag. (TIDs come from this host's applications, not
/// from peers: nobody aims collisions at this.)
fn hash32(key: &TxnKey) -> u32 {
    const TAG: u32 = 0xfe00_0000;
    const RUN: u32 = !TAG & !63;
    let who = (u64::from(key.agent) << 8) | u64::from(key.class);
    let run = ((key.tid >> 6) ^ who.rotate_left(40)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    let tag = (key.tid ^ who.rotate_left(20)).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    ((tag >> 32) as u32 & TAG) | ((run >> 32) as u32 & RUN) | (key.tid as u32 & 63)
}

/// The table takes bucket bits from the low end and the tag from the top 7.
fn widen(hash: u32) -> u64 {
    (u64::from(hash) << 32) | u64::from(hash)
}

impl TxnIndex {
    /// The request with `key`.
    pub(crate) fn get<T: Keyed>(&self, txns: &Slab<T, TxnId>, key: &TxnKey) -> Option<TxnId> {
        let hash = hash32(key);
        let e = self.table.find(widen(hash), |e| {
            e.hash == hash && txns.by_slot(e.slot).is_some_and(|(_, t)| t.key() == *key)
        })?;
        txns.by_slot(e.slot).map(|(id, _)| id)
    }

    #[cfg(test)]
    pub(crate) fn contains<T: Keyed>(&self, txns: &Slab<T, TxnId>, key: &TxnKey) -> bool {
        self.get(txns, key).is_some()
    }

    /// Where a request with `key` would go; `None` when one is indexed already.
    /// One probe serves both the duplicate check and the insertion.
    pub(crate) fn vacancy<T: Keyed>(
        &mut self,
        txns: &Slab<T, TxnId>,
        key: &TxnKey,
    ) -> Option<Vacancy<'_>> {
        let hash = hash32(key);
        let eq = |e: &Entry| {
            e.hash == hash && txns.by_slot(e.slot).is_some_and(|(_, t)| t.key() == *key)
        };
        match self.table.entry(widen(hash), eq, |e| widen(e.hash)) {
            hashbrown::hash_table::Entry::Vacant(place) => Some(Vacancy { place, hash }),
            hashbrown::hash_table::Entry::Occupied(_) => None,
        }
    }

    /// Index request `id` (stored in `txns`, not yet indexed) under `key`.
    pub(crate) fn insert(&mut self, key: &TxnKey, id: TxnId) {
        let entry = Entry {
            slot: slab::slot_of(id),
            hash: hash32(key),
        };
        self.table
            .insert_unique(widen(entry.hash), entry, |e| widen(e.hash));
    }

    /// Forget request `id`, indexed under `key`.
    pub(crate) fn remove(&mut self, key: &TxnKey, id: TxnId) -> bool {
        let slot = slab::slot_of(id);
        let hash = hash32(key);
        match self.table.find_entry(widen(hash), |e| e.slot == slot) {
            Ok(found) => {
                found.remove();
                true
            }
            Err(_) => false,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.table.len()
    }

    /// Bytes the table holds (its buckets and tags).
    #[cfg(test)]
    pub(crate) fn bytes(&self) -> usize {
        self.table.allocation_size()
    }

    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.table.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A request as the index sees it.
    struct Txn(TxnKey);

    impl Keyed for Txn {
        fn key(&self) -> TxnKey {
            self.0
        }
    }

    fn txn(agent: u32, tid: u64, class: u8) -> Txn {
        Txn(TxnKey::new(AgentId(agent), tid, class))
    }

    #[test]
    fn finds_each_key_once_and_forgets_removed_ones() {
        let (mut txns, mut index): (Slab<Txn, TxnId>, _) = (Slab::default(), TxnIndex::default());
        // Same TIDs under other classes and agents, so only the key tells them apart.
        let keys: Vec<(u32, u64, u8)> = (0..3_000u64)
            .flat_map(|t| [(1, t, 0x04), (1, t, 0x03), (2, (2 << 32) | t, 0x04)])
            .collect();
        let mut ids = Vec::new();
        for &(a, tid, class) in &keys {
            let key = TxnKey::new(AgentId(a), tid, class);
            let place = index.vacancy(&txns, &key).expect("new key");
            let id = txns.insert(txn(a, tid, class));
            place.fill(id);
            assert!(
                index.vacancy(&txns, &key).is_none(),
                "a duplicate is refused"
            );
            ids.push(id);
        }
        assert_eq!(index.len(), keys.len());
        for (i, (&(a, tid, class), &id)) in keys.iter().zip(&ids).enumerate() {
            let key = TxnKey::new(AgentId(a), tid, class);
            assert_eq!(index.get(&txns, &key), Some(id));
            if i % 2 == 0 {
                assert!(index.remove(&key, id));
                txns.remove(id);
                assert!(!index.remove(&key, id), "removed once");
            }
        }
        for (i, (&(a, tid, class), &id)) in keys.iter().zip(&ids).enumerate() {
            let key = TxnKey::new(AgentId(a), tid, class);
            let want = (i % 2 == 1).then_some(id);
            assert_eq!(index.get(&txns, &key), want);
            assert_eq!(index.contains(&txns, &key), want.is_some());
        }
        assert_eq!(index.len(), keys.len() / 2);
        // A freed slot reused by another key is found under the new key only.
        let key = TxnKey::new(AgentId(1), 7, 0x81);
        let place = index.vacancy(&txns, &key).unwrap();
        let id = txns.insert(txn(1, 7, 0x81));
        place.fill(id);
        assert_eq!(slab::slot_of(id), slab::slot_of(ids[ids.len() - 2]));
        assert_eq!(index.get(&txns, &key), Some(id));
        assert_eq!(
            index.get(&txns, &TxnKey::new(AgentId(1), 2_999, 0x03)),
            None
        );
    }

    #[test]
    fn consecutive_tids_share_a_run_but_not_a_tag() {
        let hashes: Vec<u32> = (0x1_0000_0040u64..0x1_0000_0080)
            .map(|tid| hash32(&TxnKey::new(AgentId(1), tid, 0x04)))
            .collect();
        // Neighbouring buckets: the same run bits, the TID's low six bits in order.
        assert!(hashes
            .iter()
            .all(|h| h & 0x01ff_ffc0 == hashes[0] & 0x01ff_ffc0));
        assert!(hashes
            .iter()
            .enumerate()
            .all(|(i, h)| (h & 63) as usize == i));
        // Tags (the top seven bits) spread, so a probe compares few keys.
        let mut tags: Vec<u32> = hashes.iter().map(|h| h >> 25).collect();
        tags.sort_unstable();
        tags.dedup();
        assert!(tags.len() > 32, "only {} tags for 64 TIDs", tags.len());
    }
}
