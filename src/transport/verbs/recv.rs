//! The receive path: one turn's [`Transport::recv_burst`](crate::transport::Transport::recv_burst),
//! and, in the caller-driven mode, what keeps the ready descriptor truthful (the
//! rules are in `ready.rs`).

use std::io;

use ibverbs_sys as sys;

use super::VerbsTransport;
use crate::engine::RecvMeta;
use crate::wire::grh;

impl VerbsTransport {
    /// One receive burst: events, the sends queued, then the receive CQ. In the
    /// caller-driven mode also the ready descriptor's rules (`ready.rs`, 1–8).
    pub(super) fn receive(
        &mut self,
        max: usize,
        sink: &mut dyn FnMut(RecvMeta, &[u8]),
    ) -> io::Result<usize> {
        let seen = match &mut self.ready {
            Some(r) => Some(r.look()?),
            None => None,
        };
        if let Some(seen) = seen {
            // Rule 6: the async fd is drained below (`poll_events`) when readable.
            self.async_ready |= seen.async_fd;
            self.extra_seen = seen.extra;
            if seen.channel {
                // Rule 3: taken and acked now, in the turn.
                self.take_cq_events();
            }
        }
        // Rule 7: a quiet descriptor (an idle turn) looks at the clock for liveness.
        self.poll_events(false, seen.is_some_and(|s| s.quiet()))?;
        self.flush_sends()?;
        let (mut delivered, mut full) = self.drain_recv(max, sink)?;
        if self.ready.is_some() {
            if !self.armed {
                // Rules 1 and 2: arm in every turn that finds the CQ unarmed, then
                // poll again (a completion before the arm raised no event).
                self.recv_cq.arm()?;
                self.armed = true;
                let (more, f) = self.drain_recv(max - delivered, sink)?;
                delivered += more;
                full = f;
            }
            if full {
                if let Some(r) = &mut self.ready {
                    // Rule 2: what this burst had no room for keeps the descriptor readable.
                    r.set_leftover()?;
                }
            }
            if delivered == 0 {
                // Rule 8: an idle port reposts what it held back for batching.
                self.flush_reposts(true)?;
            }
        }
        self.stats.received += delivered as u64;
        if self.qp_suspect {
            self.check_qp()?;
        }
        Ok(delivered)
    }

    /// Take every completion event off the channel and ack it (the fd is
    /// non-blocking: this ends at EAGAIN); the CQ it was for is no longer armed.
    pub(super) fn take_cq_events(&mut self) {
        while let Some(which) = self.channel.take_event(&[&self.recv_cq, &self.send_cq]) {
            match which {
                0 => self.armed = false,
                _ => self.send_armed = false,
            }
        }
    }

    /// Hand up to `max` receive completions (the stash first) to `sink`; returns how
    /// many were delivered, and whether the CQ may hold more (the poll filled its room).
    fn drain_recv(
        &mut self,
        max: usize,
        sink: &mut dyn FnMut(RecvMeta, &[u8]),
    ) -> io::Result<(usize, bool)> {
        let mut stash = std::mem::take(&mut self.stash);
        let room = max.saturating_sub(stash.len()).min(self.wcs.len());
        let n = if room > 0 {
            self.recv_cq.poll(&mut self.wcs[..room])?
        } else {
            0
        };
        let full = n == room;
        stash.extend_from_slice(&self.wcs[..n]);
        let mut delivered = 0;
        for wc in &stash {
            let slot = usize::try_from(wc.wr_id()).unwrap_or(usize::MAX);
            if slot >= self.config.recv_slots {
                continue;
            }
            let flushed = wc
                .error()
                .is_some_and(|(status, _)| status == sys::ibv_wc_status::IBV_WC_WR_FLUSH_ERR);
            if flushed {
                // The QP is (or was, before a recovery) in the error state: the
                // slot is reposted by the recovery, not here.
                self.stats.recv_flushed += 1;
                self.qp_suspect = true;
                continue;
            }
            self.recv_posted = self.recv_posted.saturating_sub(1);
            if self.recv_posted == 0 {
                self.stats.recv_ring_empty += 1;
            }
            if wc.is_valid() {
                // SAFETY: `wc` is this slot's completion, polled from the receive CQ: the
                // device is done with the slot, which is reposted (`repost`, then
                // `flush_reposts` below) only after `bytes` is dropped.
                let bytes = unsafe { self.ring.recv_slot(slot) };
                let end = wc.len().min(bytes.len());
                if end >= grh::LEN + 24 {
                    let meta = self.meta(wc, bytes);
                    sink(meta, &bytes[grh::LEN..end]);
                    delivered += 1;
                } else {
                    self.stats.runts += 1;
                }
            } else {
                self.stats.recv_errors += 1;
            }
            let (addr, len) = self.ring.recv_sge(slot);
            self.repost.push((slot as u64, addr, len));
        }
        stash.clear();
        self.stash = stash;
        self.flush_reposts(false)?;
        Ok((delivered, full))
    }
}
