//! Undoing ibsim's TID rewrite.
//!
//! ibsim overwrites bits 63..48 of every request's TID with the sender's
//! client slot, and routes the response back by those bits. The engine owns
//! the upper half of its TIDs (agent id, as the kernel does), so the
//! transport remembers the original bits per request and puts them back on
//! the response, and on the request itself when ibsim returns it undelivered.

use std::collections::{BTreeMap, VecDeque};

use crate::wire::{mad, rmpp};

/// Bits of a TID that ibsim replaces on requests.
pub(crate) const SLOT_BITS: u64 = 0xffff_0000_0000_0000;

/// Key of an outstanding request: the TID bits ibsim keeps, and the class
/// (a response carries its request's class).
type Key = (u64, u8);

fn tid_of(mad: &[u8]) -> Option<u64> {
    mad::Packet::new_checked(mad).ok().map(|p| p.tid())
}

fn set_tid(mad: &mut [u8], tid: u64) {
    if let Ok(mut p) = mad::Packet::new_checked(mad) {
        p.set_tid(tid);
    }
}

fn key_of(mad: &[u8]) -> Option<Key> {
    let p = mad::Packet::new_checked(mad).ok()?;
    Some((p.tid() & !SLOT_BITS, u8::from(p.mgmt_class())))
}

fn is_response(mad: &[u8]) -> bool {
    mad::Packet::new_checked(mad).is_ok_and(|p| p.method().is_response_bit())
}

/// An RMPP-active MAD of an RMPP class (a nonzero RMPP version, the Active flag).
/// An RMPP response arrives as many segments, all carrying the request's TID.
fn is_rmpp_active(mad: &[u8]) -> bool {
    rmpp::Packet::new_checked(mad).is_ok_and(|r| {
        mad::Packet::new_unchecked(mad).mgmt_class().is_rmpp_class()
            && r.rmpp_version() != 0
            && r.is_active()
    })
}

/// The original high TID bits of outstanding requests, bounded: requests
/// that never see an answer (a peer that stays silent) age out FIFO.
#[derive(Debug)]
pub(crate) struct TidRestore {
    high: BTreeMap<Key, (u64, u64)>,
    order: VecDeque<(Key, u64)>,
    seq: u64,
    cap: usize,
}

impl TidRestore {
    pub(crate) fn new(cap: usize) -> TidRestore {
        TidRestore {
            high: BTreeMap::new(),
            order: VecDeque::new(),
            seq: 0,
            cap: cap.max(1),
        }
    }

    /// Number of requests remembered.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.high.len()
    }

    /// A MAD is being sent: remember a request's high bits.
    pub(crate) fn note_send(&mut self, mad: &[u8]) {
        if is_response(mad) {
            return;
        }
        let (Some(key), Some(tid)) = (key_of(mad), tid_of(mad)) else {
            return;
        };
        self.seq += 1;
        self.high.insert(key, (tid & SLOT_BITS, self.seq));
        self.order.push_back((key, self.seq));
        while self.high.len() > self.cap || self.order.len() > 2 * self.cap {
            let Some((k, s)) = self.order.pop_front() else {
                break;
            };
            if self.high.get(&k).is_some_and(|&(_, cur)| cur == s) {
                self.high.remove(&k);
            }
        }
    }

    fn restore(&mut self, mad: &mut [u8]) -> bool {
        let (Some(key), Some(tid)) = (key_of(mad), tid_of(mad)) else {
            return false;
        };
        // An RMPP response comes in many segments: keep the entry (it ages out FIFO).
        let found = if is_rmpp_active(mad) {
            self.high.get(&key).copied()
        } else {
            self.high.remove(&key)
        };
        match found {
            Some((high, _)) => {
                set_tid(mad, (tid & !SLOT_BITS) | high);
                true
            }
            None => false,
        }
    }

    /// A MAD arrived: if it answers one of our requests, give its TID back its high bits.
    /// Requests from others keep the TID ibsim gave them: the response must carry it.
    pub(crate) fn restore_response(&mut self, mad: &mut [u8]) -> bool {
        is_response(mad) && self.restore(mad)
    }

    /// One of our packets came back undelivered: undo the rewrite on it.
    pub(crate) fn restore_echo(&mut self, mad: &mut [u8]) -> bool {
        self.restore(mad)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rmpp(class: u8, method: u8, tid: u64, rmpp_type: u8) -> [u8; 256] {
        let mut m = mad(class, method, tid);
        m[24] = 1;
        m[25] = rmpp_type;
        m[26] = 0x01;
        m
    }

    #[test]
    fn rmpp_segments_all_get_the_high_bits_back() {
        let mut t = TidRestore::new(16);
        t.note_send(&mad(0x03, 0x12, 0x0000_0001_0000_0042));
        for _ in 0..3 {
            let mut seg = rmpp(0x03, 0x92, 0x0005_0001_0000_0042, 1);
            assert!(t.restore_response(&mut seg));
            assert_eq!(tid_of(&seg), Some(0x0000_0001_0000_0042));
        }
    }

    fn mad(class: u8, method: u8, tid: u64) -> [u8; 256] {
        let mut m = [0u8; 256];
        m[0] = 1;
        m[1] = class;
        m[3] = method;
        set_tid(&mut m, tid);
        m
    }

    #[test]
    fn response_gets_the_high_bits_back() {
        let mut t = TidRestore::new(16);
        t.note_send(&mad(0x81, 0x01, 0xabcd_0001_0000_0042));
        // ibsim: slot 3 in bits 63..48, and the SMA answers with R set.
        let mut rsp = mad(0x81, 0x81, 0x0003_0001_0000_0042);
        assert!(t.restore_response(&mut rsp));
        assert_eq!(tid_of(&rsp), Some(0xabcd_0001_0000_0042));
        assert_eq!(t.len(), 0);
        // A second copy finds nothing and is left alone.
        let mut dup = mad(0x81, 0x81, 0x0003_0001_0000_0042);
        assert!(!t.restore_response(&mut dup));
        assert_eq!(tid_of(&dup), Some(0x0003_0001_0000_0042));
    }

    #[test]
    fn requests_from_others_keep_ibsims_tid() {
        let mut t = TidRestore::new(16);
        t.note_send(&mad(0x03, 0x01, 0xabcd_0001_0000_0042));
        let mut req = mad(0x03, 0x01, 0x0005_0001_0000_0042);
        assert!(!t.restore_response(&mut req));
        assert_eq!(tid_of(&req), Some(0x0005_0001_0000_0042));
    }

    #[test]
    fn echo_and_classes_are_distinct() {
        let mut t = TidRestore::new(16);
        t.note_send(&mad(0x04, 0x01, 0x1111_0000_0000_0007));
        t.note_send(&mad(0x03, 0x01, 0x2222_0000_0000_0007));
        let mut echo = mad(0x03, 0x01, 0x0001_0000_0000_0007);
        assert!(t.restore_echo(&mut echo));
        assert_eq!(tid_of(&echo), Some(0x2222_0000_0000_0007));
        let mut rsp = mad(0x04, 0x81, 0x0001_0000_0000_0007);
        assert!(t.restore_response(&mut rsp));
        assert_eq!(tid_of(&rsp), Some(0x1111_0000_0000_0007));
    }

    #[test]
    fn responses_we_send_are_not_remembered_and_table_is_bounded() {
        let mut t = TidRestore::new(4);
        t.note_send(&mad(0x03, 0x81, 1));
        assert_eq!(t.len(), 0);
        for i in 0..100u64 {
            t.note_send(&mad(0x03, 0x01, (i << 48) | i));
        }
        assert_eq!(t.len(), 4);
        let mut old = mad(0x03, 0x81, 1);
        assert!(!t.restore_response(&mut old));
        let mut new = mad(0x03, 0x81, 99);
        assert!(t.restore_response(&mut new));
        assert_eq!(tid_of(&new), Some((99 << 48) | 99));
    }
}
