//! Reports of packets ibsim returned undelivered.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::types::Qp;

/// Most reports kept before the oldest are discarded (and counted as lost).
const MAX_REPORTS: usize = 4096;

/// One packet ibsim could not deliver (status 110): no route, link down,
/// injected error, no receiver, or an unknown attribute at an SMA/PMA.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DroppedMad {
    /// The QP it was sent from.
    pub qp: Qp,
    /// The destination LID it was sent to (0xffff: directed route).
    pub dest_lid: u16,
    /// The destination QP.
    pub dest_qpn: u32,
    /// The first 24 bytes of the MAD (the common header), TID as the engine
    /// sent it. ibsim may already have turned a request into its response
    /// (R bit set) when routing the answer back failed.
    pub header: [u8; 24],
    /// ibsim's status (110, ETIMEDOUT).
    pub status: u32,
}

impl DroppedMad {
    pub(crate) fn from_echo(mad: &[u8], sqp: u32, dqp: u32, dlid: u16, status: u32) -> DroppedMad {
        let mut header = [0u8; 24];
        header.copy_from_slice(&mad[..24]);
        DroppedMad {
            qp: if sqp == 0 { Qp::Smi } else { Qp::Gsi },
            dest_lid: dlid,
            dest_qpn: dqp,
            header,
            status,
        }
    }

    /// The TID of the dropped MAD.
    pub fn tid(&self) -> u64 {
        crate::wire::mad::Packet::new_unchecked(&self.header[..]).tid()
    }
}

#[derive(Debug, Default)]
struct Inner {
    report: bool,
    count: AtomicU64,
    lost: AtomicU64,
    pending: AtomicBool,
    queue: Mutex<VecDeque<DroppedMad>>,
}

/// A shared view of a transport's undelivered-packet echoes.
///
/// Cloning is cheap; every clone sees the same counters. The count always
/// runs; reports are queued only under [`super::DropPolicy::Report`].
#[derive(Debug, Clone, Default)]
pub struct DropMonitor {
    inner: Arc<Inner>,
}

impl DropMonitor {
    pub(crate) fn new(report: bool) -> DropMonitor {
        DropMonitor {
            inner: Arc::new(Inner {
                report,
                ..Inner::default()
            }),
        }
    }

    pub(crate) fn record(&self, d: DroppedMad) {
        self.inner.count.fetch_add(1, Ordering::Relaxed);
        if !self.inner.report {
            return;
        }
        let mut q = self.inner.queue.lock().unwrap_or_else(|p| p.into_inner());
        if q.len() == MAX_REPORTS {
            q.pop_front();
            self.inner.lost.fetch_add(1, Ordering::Relaxed);
        }
        q.push_back(d);
        self.inner.pending.store(true, Ordering::Release);
    }

    /// How many packets ibsim has returned undelivered so far.
    pub fn count(&self) -> u64 {
        self.inner.count.load(Ordering::Relaxed)
    }

    /// Whether reports wait to be taken (always false under `Ignore`).
    pub fn pending(&self) -> bool {
        self.inner.pending.load(Ordering::Acquire)
    }

    /// Reports discarded because nobody took them in time.
    pub fn lost(&self) -> u64 {
        self.inner.lost.load(Ordering::Relaxed)
    }

    /// Take the queued reports, oldest first.
    pub fn take(&self) -> Vec<DroppedMad> {
        let mut q = self.inner.queue.lock().unwrap_or_else(|p| p.into_inner());
        self.inner.pending.store(false, Ordering::Release);
        q.drain(..).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn echo(tid: u64) -> DroppedMad {
        let mut mad = [0u8; 256];
        mad[8..16].copy_from_slice(&tid.to_be_bytes());
        DroppedMad::from_echo(&mad, 1, 1, 7, 110)
    }

    #[test]
    fn ignore_counts_without_queueing() {
        let m = DropMonitor::new(false);
        m.record(echo(1));
        assert_eq!(m.count(), 1);
        assert!(!m.pending());
        assert!(m.take().is_empty());
    }

    #[test]
    fn report_queues_in_order_and_bounds() {
        let m = DropMonitor::new(true);
        let view = m.clone();
        for t in 0..(MAX_REPORTS as u64 + 2) {
            m.record(echo(t));
        }
        assert!(view.pending());
        assert_eq!(view.lost(), 2);
        let got = view.take();
        assert_eq!(got.len(), MAX_REPORTS);
        assert_eq!(got[0].tid(), 2);
        assert_eq!(got[0].qp, Qp::Gsi);
        assert_eq!(got[0].dest_lid, 7);
        assert!(!view.pending());
        assert_eq!(view.count(), MAX_REPORTS as u64 + 2);
    }
}
