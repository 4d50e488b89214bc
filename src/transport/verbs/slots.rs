//! Send slot bookkeeping: which slots are free, which are posted, and which
//! send completions still name a slot's current post.
//!
//! A recovery (`recovery.rs`) resets the QP and frees every send slot, but rxe
//! flushes the old QP's sends asynchronously: a flush completion for a slot that
//! was in flight can come out of the send CQ after the reset, when the slot is
//! free again or already posted anew. Counted as a completion, it would put the
//! slot on the free list twice (two MADs then share one slot) or free a slot the
//! device still reads. So every post carries the recovery epoch in its `wr_id`,
//! and a completion frees its slot only when that slot is posted and the epoch
//! is the current one; any other completion is stale and only counted.

/// The send slots of one transport. Pure bookkeeping, testable without a device.
#[derive(Debug)]
pub(super) struct SendSlots {
    free: Vec<u32>,
    posted: Vec<bool>,
    /// Recoveries so far: the high half of every send's `wr_id`.
    epoch: u32,
}

impl SendSlots {
    pub(super) fn new(n: usize) -> SendSlots {
        let n = u32::try_from(n).unwrap_or(u32::MAX);
        SendSlots {
            free: (0..n).rev().collect(),
            posted: vec![false; n as usize],
            epoch: 0,
        }
    }

    /// A free slot, to fill (not posted yet).
    pub(super) fn take(&mut self) -> Option<u32> {
        self.free.pop()
    }

    /// A slot taken and not posted (nothing to send, dropped, refused) is free again.
    pub(super) fn put_back(&mut self, slot: u32) {
        debug_assert!(!self.posted[slot as usize], "send slot {slot} is posted");
        self.free.push(slot);
    }

    pub(super) fn free_len(&self) -> usize {
        self.free.len()
    }

    /// The `wr_id` to post `slot` with.
    pub(super) fn wr_id(&self, slot: u32) -> u64 {
        u64::from(self.epoch) << 32 | u64::from(slot)
    }

    /// `slot` was handed to the device.
    pub(super) fn posted(&mut self, slot: u32) {
        self.posted[slot as usize] = true;
    }

    /// A send completion: frees its slot and returns true when it names a posted
    /// slot of the current epoch; false for a stale one (left alone).
    pub(super) fn complete(&mut self, wr_id: u64) -> bool {
        let (epoch, slot) = ((wr_id >> 32) as u32, wr_id as u32);
        let current =
            epoch == self.epoch && self.posted.get(slot as usize).is_some_and(|&posted| posted);
        if current {
            self.posted[slot as usize] = false;
            self.free.push(slot);
        }
        current
    }

    /// After a QP reset: nothing is posted, every slot is free, and the completions
    /// of earlier posts are stale.
    pub(super) fn reset(&mut self) {
        self.epoch = self.epoch.wrapping_add(1);
        self.posted.fill(false);
        let n = self.posted.len() as u32;
        self.free = (0..n).rev().collect();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Take, post and return every slot id, as the transport does.
    fn post_all(s: &mut SendSlots) -> Vec<u64> {
        let mut ids = Vec::new();
        while let Some(slot) = s.take() {
            s.posted(slot);
            ids.push(s.wr_id(slot));
        }
        ids
    }

    #[test]
    fn completions_free_their_slots_once() {
        let mut s = SendSlots::new(4);
        let ids = post_all(&mut s);
        assert_eq!(ids.len(), 4);
        assert_eq!(s.free_len(), 0);
        assert!(s.complete(ids[1]));
        // The same completion twice (it cannot happen on a sane CQ) frees nothing more.
        assert!(!s.complete(ids[1]));
        assert_eq!(s.free_len(), 1);
        // A wr_id naming no slot is ignored.
        assert!(!s.complete(99));
    }

    /// The bug: a flush completion for a slot in flight at the recovery, polled after
    /// it, put the slot on the free list a second time, so two MADs shared it.
    #[test]
    fn late_flush_after_recovery_frees_nothing() {
        let mut s = SendSlots::new(3);
        let old = post_all(&mut s);
        s.reset();
        assert_eq!(s.free_len(), 3);
        // Slot taken again and posted anew before the old flush comes out.
        let again = s.take().unwrap();
        s.posted(again);
        for id in &old {
            assert!(!s.complete(*id), "stale completion {id:#x} freed a slot");
        }
        assert_eq!(s.free_len(), 2);
        let mut free = Vec::new();
        while let Some(x) = s.take() {
            free.push(x);
        }
        assert!(!free.contains(&again), "slot {again} is posted and free");
        free.sort_unstable();
        free.dedup();
        assert_eq!(free.len(), 2, "a slot is on the free list twice");
        // The new post's own completion still frees it.
        assert!(s.complete(s.wr_id(again)));
    }

    #[test]
    fn put_back_returns_an_unposted_slot() {
        let mut s = SendSlots::new(2);
        let a = s.take().unwrap();
        s.put_back(a);
        assert_eq!(s.free_len(), 2);
        assert_eq!(s.take(), Some(a));
    }
}
