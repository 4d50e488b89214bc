//! A slab: values in a `Vec`, found by an id that names their slot, so a
//! lookup is one index (no hashing) and a freed slot is reused first (its
//! memory is still warm). Ids carry the slot's generation: an id whose value
//! was removed finds nothing, also after its slot was reused.

use alloc::vec::Vec;
use core::marker::PhantomData;

/// Where a value lives: `generation << 32 | slot`. Generations start at 1, so
/// no live id is 0; ids order by generation, then slot, which is deterministic.
pub(crate) type SlabId = u64;

const MAX_GENERATION: u32 = (1 << 30) - 1;

#[derive(Debug)]
struct Slot<T> {
    generation: u32,
    value: Option<T>,
}

/// A slab of `T` whose ids are `I` (a newtype of [`SlabId`]).
#[derive(Debug)]
pub(crate) struct Slab<T, I = SlabId> {
    slots: Vec<Slot<T>>,
    /// Free slots, most recently freed last.
    free: Vec<u32>,
    len: usize,
    id: PhantomData<I>,
}

impl<T, I> Default for Slab<T, I> {
    fn default() -> Self {
        Slab {
            slots: Vec::new(),
            free: Vec::new(),
            len: 0,
            id: PhantomData,
        }
    }
}

/// The slot `id` names.
pub(crate) fn slot_of(id: impl Into<SlabId>) -> u32 {
    id.into() as u32
}

fn split(id: SlabId) -> (usize, u32) {
    ((id & 0xffff_ffff) as usize, (id >> 32) as u32)
}

impl<T, I: Copy + From<SlabId> + Into<SlabId>> Slab<T, I> {
    /// Store `value`; its id.
    pub(crate) fn insert(&mut self, value: T) -> I {
        self.len += 1;
        let index = match self.free.pop() {
            Some(i) => i,
            None => {
                let i = u32::try_from(self.slots.len()).expect("more than 2^32 slab slots");
                self.slots.push(Slot {
                    generation: 0,
                    value: None,
                });
                i
            }
        };
        let slot = &mut self.slots[index as usize];
        // 30-bit generations (ids fit the timer index's packed entries); wrapping
        // skips 0, so that no id is ever 0.
        slot.generation = if slot.generation >= MAX_GENERATION {
            1
        } else {
            slot.generation + 1
        };
        slot.value = Some(value);
        I::from((u64::from(slot.generation) << 32) | u64::from(index))
    }

    pub(crate) fn get(&self, id: I) -> Option<&T> {
        let (index, generation) = split(id.into());
        let slot = self.slots.get(index)?;
        if slot.generation != generation {
            return None;
        }
        slot.value.as_ref()
    }

    pub(crate) fn get_mut(&mut self, id: I) -> Option<&mut T> {
        let (index, generation) = split(id.into());
        let slot = self.slots.get_mut(index)?;
        if slot.generation != generation {
            return None;
        }
        slot.value.as_mut()
    }

    pub(crate) fn remove(&mut self, id: I) -> Option<T> {
        let (index, generation) = split(id.into());
        let slot = self.slots.get_mut(index)?;
        if slot.generation != generation {
            return None;
        }
        let value = slot.value.take()?;
        self.free.push(index as u32);
        self.len -= 1;
        Some(value)
    }

    /// The value in `slot`, with its id.
    pub(crate) fn by_slot(&self, slot: u32) -> Option<(I, &T)> {
        let s = self.slots.get(slot as usize)?;
        let v = s.value.as_ref()?;
        Some((
            I::from((u64::from(s.generation) << 32) | u64::from(slot)),
            v,
        ))
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Slots allocated, live or free.
    #[cfg(test)]
    pub(crate) fn slots(&self) -> usize {
        self.slots.len()
    }

    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Live values with their ids, in slot order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (I, &T)> {
        self.slots.iter().enumerate().filter_map(|(i, s)| {
            let v = s.value.as_ref()?;
            Some((I::from((u64::from(s.generation) << 32) | i as u64), v))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stale_ids_find_nothing_after_reuse() {
        let mut s: Slab<&str> = Slab::default();
        let a = s.insert("a");
        let b = s.insert("b");
        assert_eq!(s.remove(a), Some("a"));
        assert_eq!(s.remove(a), None);
        let c = s.insert("c");
        assert_eq!(c & 0xffff_ffff, a & 0xffff_ffff, "the freed slot is reused");
        assert_ne!(c, a);
        assert_eq!(
            (s.get(a), s.get(c), s.get(b)),
            (None, Some(&"c"), Some(&"b"))
        );
        assert_eq!(s.len(), 2);
        let ids: Vec<_> = s.iter().map(|(id, v)| (id, *v)).collect();
        assert_eq!(ids, [(c, "c"), (b, "b")]);
        assert_eq!(s.get_mut(a), None);
        assert_ne!(a, 0);
    }
}
