//! The send path: queueing filled slots, posting them as one chain, reaping
//! completions, and telling a wait that a slot came free (see the module docs of
//! `mod.rs` for the batching, and `slots.rs` for the slot bookkeeping).

use std::io;

use super::ffi::UdSend;
use super::{Pending, VerbsTransport};
use crate::engine::Transmit;
use crate::types::Qp;
use crate::wire::MAD_SIZE;

impl VerbsTransport {
    /// Free the send slots whose sends completed.
    pub(super) fn reap_sends(&mut self) -> io::Result<()> {
        let n = self.send_cq.poll(&mut self.wcs)?;
        let mut completed = 0;
        for wc in &self.wcs[..n] {
            if !self.send_slots.complete(wc.wr_id()) {
                // A post from before a recovery: its slot is free or posted anew.
                self.stats.send_stale += 1;
                continue;
            }
            completed += 1;
            if !wc.is_valid() {
                self.stats.send_errors += 1;
            }
        }
        self.completed_sends += completed;
        self.ahs.release(self.completed_sends);
        Ok(())
    }

    /// Queue a filled send slot; the queue is posted as one chain (one
    /// doorbell, which on rxe is one system call) when it is full or the
    /// engine has nothing more to send.
    /// `Ok(false)`: dropped, unroutable (the slot is free again).
    pub(super) fn queue(&mut self, slot: u32, t: &Transmit) -> io::Result<bool> {
        if t.qp == Qp::Smi {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "verbs: QP0 (SMPs) cannot be used from userspace verbs",
            ));
        }
        let Some(key) = self.ah_key(&t.dest) else {
            // Lost as on a fabric that cannot route it; the engine's timers report it.
            self.stats.unroutable += 1;
            return Ok(false);
        };
        self.cache_ah(key)?;
        self.pending.push(Pending {
            slot,
            key,
            len: u32::try_from(t.len.min(MAD_SIZE)).unwrap_or(0),
            qpn: t.dest.qpn,
        });
        Ok(true)
    }

    /// Post the queued sends. A chain the device refuses loses its MADs as
    /// a datagram network would (the engine's timers and retries cover
    /// requests): counted, and the QP is checked (a QP in the error state
    /// refuses posts; recovery resets it).
    pub(super) fn flush_sends(&mut self) -> io::Result<()> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let (ring, ahs, slots, qkey) = (&self.ring, &self.ahs, &self.send_slots, self.config.qkey);
        // Every queued key is live: `cache_ah` posts the queue before it evicts.
        let sends: Vec<UdSend<'_>> = self
            .pending
            .iter()
            .filter_map(|p| {
                Some(UdSend {
                    wr_id: slots.wr_id(p.slot),
                    addr: ring.send_addr(p.slot as usize),
                    len: p.len,
                    lkey: ring.lkey(),
                    ah: ahs.peek(&p.key)?,
                    remote_qpn: p.qpn,
                    // As the kernel's QP1: every send carries the GSI Q_Key,
                    // whatever the caller put in `qkey`.
                    remote_qkey: qkey,
                })
            })
            .collect();
        let result = match sends.len() == self.pending.len() {
            true => self.qp.post_sends(&sends),
            false => Err((0, io::ErrorKind::NotFound.into())),
        };
        drop(sends);
        let posted = match &result {
            Ok(()) => self.pending.len(),
            Err((n, _)) => *n,
        };
        self.stats.sent += posted as u64;
        self.posted_sends += posted as u64;
        for p in &self.pending[..posted] {
            self.send_slots.posted(p.slot);
        }
        for p in self.pending.drain(posted..) {
            self.stats.send_errors += 1;
            self.send_slots.put_back(p.slot);
        }
        self.pending.clear();
        if result.is_err() {
            self.qp_suspect = true;
        }
        Ok(())
    }

    /// For a transmit that found no free send slot: reap, and say whether a slot came
    /// free (the wait then ends, so the port transmits again; `send_starved` is cleared
    /// until a transmit finds none again).
    pub(super) fn slot_freed(&mut self) -> io::Result<bool> {
        if !self.send_starved {
            return Ok(false);
        }
        self.reap_sends()?;
        let freed = self.send_slots.free_len() > 0;
        self.send_starved = !freed;
        Ok(freed)
    }

    /// A transmit found every send slot in flight: a wait must end at the next send
    /// completion (`send_starved`). In the caller-driven mode nothing waits in `wait`:
    /// arm the send CQ here (rule 9 of `ready.rs`, under the I/O lock as every arm),
    /// then reap once more, as a completion before the arm raised no event; a slot
    /// that came free meanwhile is returned.
    pub(super) fn starved(&mut self) -> io::Result<Option<u32>> {
        self.send_starved = true;
        if self.ready.is_none() {
            return Ok(None);
        }
        if !self.send_armed {
            self.send_cq.arm()?;
            self.send_armed = true;
        }
        self.reap_sends()?;
        let slot = self.send_slots.take();
        if slot.is_some() {
            self.send_starved = false;
        }
        Ok(slot)
    }
}
