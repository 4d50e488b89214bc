//! The pinned buffer rings: one anonymous mapping, registered once as one MR.
//!
//! ```text
//! [ recv slot 0 | recv slot 1 | ... | send slot 0 | send slot 1 | ... ]
//!   40 B GRH area + 256 B MAD, stride 320      256 B MAD, stride 256
//! ```
//!
//! The NIC writes received datagrams straight into a receive slot and reads
//! sends straight out of a send slot; the engine reads and writes the same
//! bytes through the slices lent by the transport. Nothing is copied.
//!
//! Once registered, the mapping is never borrowed whole: the device writes posted
//! receive slots at any time, so a Rust reference may cover only a slot the device
//! is done with. The ring keeps the mapping's base pointer and lends one slot at a
//! time ([`Ring::recv_slot`], [`Ring::send_slot`]), under the caller's promise that
//! the slot is not posted.

use std::io;
use std::ptr::NonNull;
use std::sync::Arc;

use memmap2::{MmapMut, MmapOptions};

use super::ffi::{Mr, Pd};
use crate::wire::{grh, MAD_SIZE};

/// Bytes a receive slot uses: the GRH area, then the MAD.
pub(super) const RECV_LEN: usize = grh::LEN + MAD_SIZE;
/// Receive slot stride: [`RECV_LEN`] rounded up to whole cache lines.
pub(super) const RECV_STRIDE: usize = RECV_LEN.div_ceil(64) * 64;
/// Send slot stride: one MAD (a multiple of the cache line already).
pub(super) const SEND_STRIDE: usize = MAD_SIZE;

/// Where the slots lie in the mapping (pure arithmetic, testable without a device).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Layout {
    pub(super) recv_slots: usize,
    pub(super) send_slots: usize,
}

impl Layout {
    pub(super) fn recv_offset(&self, i: usize) -> usize {
        debug_assert!(i < self.recv_slots);
        i * RECV_STRIDE
    }

    pub(super) fn send_offset(&self, i: usize) -> usize {
        debug_assert!(i < self.send_slots);
        self.recv_slots * RECV_STRIDE + i * SEND_STRIDE
    }

    /// Total bytes, rounded up to `page`.
    pub(super) fn len(&self, page: usize) -> usize {
        (self.recv_slots * RECV_STRIDE + self.send_slots * SEND_STRIDE).div_ceil(page) * page
    }
}

/// How the mapping was made, for diagnostics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Pinning {
    /// Backed by huge pages.
    pub(super) huge: bool,
    /// `mlock` succeeded (otherwise the MR registration alone pins the pages).
    pub(super) locked: bool,
}

/// The mapping and its registration. Field order matters: the MR is
/// deregistered before the mapping goes away.
pub(super) struct Ring {
    mr: Mr,
    /// Owns the mapping (unmapped on drop); not read through once registered.
    _map: MmapMut,
    /// The mapping's first byte: every slot is reached from it.
    ptr: NonNull<u8>,
    /// `ptr` as the device address.
    base: u64,
    layout: Layout,
    pinning: Pinning,
}

// SAFETY: `ptr` points into the mapping this Ring owns (as MmapMut, which is Send), and
// the slots are reached only through `&self`/`&mut self` methods, so moving the Ring to
// another thread moves the sole access to them with it. (Not Sync: not needed, and
// `send_slot` relies on `&mut self` for exclusive access.)
unsafe impl Send for Ring {}

const HUGE_PAGE: usize = 2 << 20;
const PAGE: usize = 4096;

fn map(len: usize, huge: bool) -> io::Result<MmapMut> {
    let mut opts = MmapOptions::new();
    opts.len(len).populate();
    if huge {
        opts.huge(None);
    }
    opts.map_anon()
}

impl Ring {
    /// Map, pre-fault, try to lock, and register the rings.
    pub(super) fn new(pd: &Arc<Pd>, layout: Layout, want_huge: bool) -> crate::Result<Ring> {
        let (mut map, huge) = match want_huge {
            true => match map(layout.len(HUGE_PAGE), true) {
                Ok(m) => (m, true),
                // No huge pages reserved (vm.nr_hugepages = 0): normal pages do.
                Err(_) => (map(layout.len(PAGE), false)?, false),
            },
            false => (map(layout.len(PAGE), false)?, false),
        };
        // Locking is best effort: the registration pins the pages anyway;
        // when it is refused, RLIMIT_MEMLOCK is what ibv_reg_mr hits next.
        let locked = map.lock().is_ok();
        let len = map.len();
        let ptr = NonNull::new(map.as_mut_ptr())
            .ok_or_else(|| crate::Error::Io(io::Error::other("mmap returned NULL")))?;
        let addr = ptr.as_ptr();
        // SAFETY: the mapping lives in the same Ring and is dropped after the MR.
        let mr = unsafe { Mr::new(pd, addr, len) }.map_err(|e| {
            if e.raw_os_error() == Some(12) {
                crate::Error::LimitReached(
                    "ibv_reg_mr: ENOMEM; RLIMIT_MEMLOCK (ulimit -l) is too low for the \
                     receive/send rings: raise it, run with CAP_IPC_LOCK, or use fewer slots",
                )
            } else {
                crate::Error::Io(e)
            }
        })?;
        Ok(Ring {
            mr,
            base: addr as u64,
            ptr,
            _map: map,
            layout,
            pinning: Pinning { huge, locked },
        })
    }

    pub(super) fn lkey(&self) -> u32 {
        self.mr.lkey()
    }

    pub(super) fn pinning(&self) -> Pinning {
        self.pinning
    }

    /// The device address of receive slot `i` and the length to post.
    pub(super) fn recv_sge(&self, i: usize) -> (u64, u32) {
        (
            self.base + self.layout.recv_offset(i) as u64,
            RECV_LEN as u32,
        )
    }

    /// The device address of send slot `i`.
    pub(super) fn send_addr(&self, i: usize) -> u64 {
        self.base + self.layout.send_offset(i) as u64
    }

    /// Receive slot `i`: GRH area then MAD.
    ///
    /// # Safety
    /// Slot `i` is not posted while the slice lives: its completion was polled from the
    /// receive CQ (so the device has finished writing it) and it is not reposted until
    /// the slice is dropped.
    pub(super) unsafe fn recv_slot(&self, i: usize) -> &[u8] {
        assert!(i < self.layout.recv_slots, "receive slot {i} out of range");
        let off = self.layout.recv_offset(i);
        // SAFETY: the slot lies inside the mapping (`Layout::len` covers every slot), which
        // lives as long as `self`; the mapping is initialised (anonymous: zero-filled, then
        // written only by the device); the caller's contract: the device does not write
        // the slot while the slice lives, and no `&mut` to it exists (`send_slot` lends
        // send slots only).
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr().add(off), RECV_LEN) }
    }

    /// Send slot `i`.
    ///
    /// # Safety
    /// Slot `i` is not posted while the reference lives: it was never posted, or its
    /// send completion was polled (or the QP was reset), and it is posted only after
    /// the reference is dropped.
    pub(super) unsafe fn send_slot(&mut self, i: usize) -> &mut [u8; MAD_SIZE] {
        assert!(i < self.layout.send_slots, "send slot {i} out of range");
        let off = self.layout.send_offset(i);
        // SAFETY: the slot (one MAD: SEND_STRIDE == MAD_SIZE) lies inside the mapping,
        // which lives as long as `self`; `&mut self` makes this the only reference into the
        // ring; the caller's contract: the device does not read it meanwhile.
        unsafe { &mut *self.ptr.as_ptr().add(off).cast::<[u8; MAD_SIZE]>() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_do_not_overlap_and_fit() {
        assert_eq!(RECV_LEN, 296);
        assert_eq!(RECV_STRIDE, 320);
        let l = Layout {
            recv_slots: 3,
            send_slots: 2,
        };
        assert_eq!(l.recv_offset(0), 0);
        assert_eq!(l.recv_offset(2), 640);
        assert_eq!(l.send_offset(0), 960);
        assert_eq!(l.send_offset(1), 1216);
        assert!(l.send_offset(1) + SEND_STRIDE <= l.len(PAGE));
        assert_eq!(l.len(PAGE), 4096);
        assert_eq!(l.len(HUGE_PAGE), HUGE_PAGE);
        // Every slot starts on a cache line.
        assert_eq!(l.recv_offset(1) % 64, 0);
        assert_eq!(l.send_offset(1) % 64, 0);
    }
}
