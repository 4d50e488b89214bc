//! QP error recovery: a UD QP in the error state receives and sends nothing
//! until it is reset, so the transport brings it back by itself.
//!
//! What makes it suspect: a QP async event (QP_FATAL, QP_REQ_ERR,
//! QP_ACCESS_ERR), a receive flushed with IBV_WC_WR_FLUSH_ERR, or a post the
//! device refuses. Then the transport asks the QP's state; only in ERR or
//! SQE does it recover: RESET → INIT → RTR → RTS, every receive slot
//! reposted, every send slot freed. The MADs in flight at that moment are
//! lost as a datagram network loses them (the engine's timers and retries
//! cover requests); [`VerbsStats::qp_recoveries`](super::VerbsStats) counts
//! the recoveries.
//!
//! Flushed completions can still come out of the CQ after the reset (rxe
//! flushes asynchronously); they name slots that are posted again by then,
//! so they are counted and otherwise ignored, and the QP state, not the
//! completion, decides whether to recover again. Send completions carry the
//! recovery epoch (`slots.rs`), so a late one frees no slot a second time.

use std::io;

use ibverbs_sys as sys;

use super::VerbsTransport;

impl VerbsTransport {
    /// Recover the QP if it really is in an error state.
    pub(super) fn check_qp(&mut self) -> io::Result<()> {
        self.qp_suspect = false;
        let state = self.qp.state()?;
        if state == sys::ibv_qp_state::IBV_QPS_ERR || state == sys::ibv_qp_state::IBV_QPS_SQE {
            self.recover()?;
        }
        Ok(())
    }

    /// RESET → RTS, repost every receive, free every send slot.
    fn recover(&mut self) -> io::Result<()> {
        use sys::ibv_qp_state::IBV_QPS_RESET;
        // Whatever the CQs hold now belongs to the QP being reset.
        while self.recv_cq.poll(&mut self.wcs)? > 0 {}
        while self.send_cq.poll(&mut self.wcs)? > 0 {}
        self.stash.clear();
        self.repost.clear();
        self.qp.to_state(IBV_QPS_RESET)?;
        self.qp.to_init(
            self.attrs.port_num,
            self.config.pkey_index,
            self.config.qkey,
        )?;
        self.qp.to_rts()?;
        // Nothing is in flight after a reset: every slot is free again.
        self.stats.send_errors += self.pending.len() as u64;
        self.pending.clear();
        self.send_slots.reset();
        self.completed_sends = self.posted_sends;
        self.ahs.release_all();
        let all: Vec<_> = (0..self.config.recv_slots)
            .map(|i| {
                let (addr, len) = self.ring.recv_sge(i);
                (i as u64, addr, len)
            })
            .collect();
        self.qp.post_recvs(self.ring.lkey(), &all)?;
        self.recv_posted = self.config.recv_slots;
        self.armed = false;
        self.send_armed = false;
        self.stats.qp_recoveries += 1;
        Ok(())
    }

    /// Test hook: put the QP in the error state, as a fatal QP error would.
    pub(super) fn break_qp(&mut self) -> io::Result<()> {
        self.qp.to_state(sys::ibv_qp_state::IBV_QPS_ERR)
    }
}
