//! The engine's send side: requests in (TID stamping, duplicate sends), the
//! transmit queue out, and what a request's end or timer sets moving (the
//! backlog, retries, timeouts). State lives in the transaction table
//! ([`super::txn::TxnTable`]); this sequences it.

use core::time::Duration;

use super::ids::TxnId;
use super::txn::{Admitted, Expired, Out, Txn, TxnKey, TxnState};
use super::{smi, AgentId, Engine, Event, SendRequest, Transmit};
use crate::time::Instant;
use crate::wire::mad;
use crate::wire::mad::MgmtClass;
use crate::wire::{rmpp, MAD_SIZE};
use crate::{Error, Result};
use alloc::boxed::Box;

impl Engine {
    pub(super) fn send_inner(
        &mut self,
        now: Instant,
        id: AgentId,
        req: SendRequest<'_>,
    ) -> Result<()> {
        let agent = self.agents.get(id).ok_or(Error::UnknownAgent(id.0))?;
        let (qp, hi_tid, serial) = (agent.spec.qp, agent.hi_tid, agent.serial);
        let bytes = req.mad;
        if bytes.len() < rmpp::END {
            return Err(Error::InvalidArgument("MAD shorter than 36 bytes"));
        }
        // kernel: RMPP when the agent runs it, the class has it, and the user set Active.
        if agent.kernel_rmpp() && super::rmpp::is_rmpp_active(bytes) {
            return self.send_rmpp(now, id, req);
        }
        if bytes.len() > MAD_SIZE {
            return Err(Error::MessageTooLarge {
                len: bytes.len(),
                limit: MAD_SIZE,
            });
        }
        let mut buf = self.mad_buf(bytes);
        let mut pkt = mad::Packet::new_unchecked(&mut buf[..]);
        let class = u8::from(pkt.mgmt_class());
        let response = pkt.is_response();
        let tid = if response {
            pkt.tid()
        } else {
            (u64::from(hi_tid) << 32) | (pkt.tid() & 0xffff_ffff)
        };
        pkt.set_tid(tid);
        if MgmtClass::from(class) == MgmtClass::SubnDirectedRoute && !smi::dr_send(&mut buf[..]) {
            return Err(Error::InvalidArgument(
                "directed-route SMP with a hop pointer an end node cannot send",
            ));
        }
        if response {
            self.dedup.forget(&mut self.timers, &req.addr, tid, class);
        }
        if req.timeout_ms == 0 {
            self.tx_queue.push_back(Out::Raw {
                agent: Some((id, serial)),
                qp,
                dest: req.addr,
                mad: buf,
            });
            return Ok(());
        }
        let key = TxnKey::new(id, tid, class);
        let Some(place) = self.txns.vacancy(&key) else {
            self.recycle(buf);
            return Err(Error::DuplicateRequest(tid));
        };
        let txn_id = place.insert(
            Txn {
                agent: id,
                tid,
                class,
                qp,
                dest: req.addr,
                mad: buf,
                timeout: Duration::from_millis(u64::from(req.timeout_ms)),
                retries_left: req.retries,
                state: TxnState::Backlog,
                deadline: None,
                wants_response: true,
                rmpp: None,
            },
            &mut self.stats,
        );
        self.admit(now, id, txn_id);
        Ok(())
    }

    /// Let a new request go (queued, or its RMPP sender started), or park it
    /// in the agent's backlog.
    #[inline]
    pub(super) fn admit(&mut self, now: Instant, id: AgentId, txn_id: TxnId) {
        match self.txns.admit(id, txn_id, &mut self.stats) {
            Admitted::Backlogged => {}
            Admitted::Queued => self.tx_queue.push_back(Out::Txn(txn_id)),
            Admitted::Rmpp => self.start_rmpp_send(now, txn_id),
        }
    }

    /// Remove a finished request (answered, timed out) and let the backlog
    /// move; its MAD buffer, for the caller to recycle or drop.
    pub(super) fn finish_txn(
        &mut self,
        now: Instant,
        txn_id: TxnId,
    ) -> Option<Box<[u8; MAD_SIZE]>> {
        self.finish_txn_with(now, txn_id, |_| ())
            .map(|(mad, ())| mad)
    }

    /// [`Engine::finish_txn`], with what `read` took from the request first.
    #[inline]
    fn finish_txn_with<R>(
        &mut self,
        now: Instant,
        txn_id: TxnId,
        read: impl FnOnce(&Txn) -> R,
    ) -> Option<(Box<[u8; MAD_SIZE]>, R)> {
        let rmpp_sends = &mut self.rmpp_sends;
        let (done, r) = self
            .txns
            .finish(&mut self.timers, &mut self.stats, txn_id, |txn| {
                if txn.rmpp.is_some() {
                    rmpp_sends.remove(txn);
                }
                read(txn)
            })?;
        if let Some(next) = done.next {
            self.admit(now, done.agent, next);
        }
        Some((done.mad, r))
    }

    pub(super) fn transmit(&mut self, now: Instant, out: &mut [u8; MAD_SIZE]) -> Option<Transmit> {
        while let Some(item) = self.tx_queue.pop_front() {
            match item {
                Out::Txn(txn_id) => {
                    let Some(tx) = self.txns.transmit(&mut self.timers, now, txn_id, out) else {
                        continue;
                    };
                    self.stats.sent += 1;
                    return Some(tx);
                }
                Out::Raw {
                    agent,
                    qp,
                    dest,
                    mad,
                } => {
                    if let Some((id, serial)) = agent {
                        if self.agents.get(id).map(|a| a.serial) != Some(serial) {
                            continue;
                        }
                    }
                    out.copy_from_slice(&mad[..]);
                    self.recycle(mad);
                    self.stats.sent += 1;
                    return Some(Transmit {
                        qp,
                        dest,
                        len: MAD_SIZE,
                        timeout_ms: 0,
                    });
                }
            }
        }
        self.transmit_rmpp(now, out)
    }

    /// The request's timer expired: retry, time it out, or let its RMPP sender act.
    #[inline(always)]
    pub(super) fn txn_expired(&mut self, now: Instant, txn_id: TxnId) {
        match self.txns.expire(&mut self.stats, txn_id) {
            Expired::Nothing => {}
            Expired::Retry => self.tx_queue.push_back(Out::Txn(txn_id)),
            Expired::TimedOut => self.time_out_txn(now, txn_id),
            Expired::RmppSender => self.rmpp_send_timeout(now, txn_id),
        }
    }

    /// See [`Engine::handle_undelivered`]; false when the report matches no waiting attempt.
    pub(super) fn undelivered(&mut self, now: Instant, header: &[u8]) -> bool {
        let Ok(pkt) = mad::Packet::new_checked(header) else {
            return false;
        };
        if pkt.is_response() {
            return false;
        }
        let tid = pkt.tid();
        let class = u8::from(pkt.mgmt_class());
        let Some(agent) = self.agents.by_hi_tid((tid >> 32) as u32) else {
            return false;
        };
        let key = TxnKey::new(agent, tid, class);
        let Some(txn_id) = self.txns.end_attempt(&mut self.timers, &key) else {
            return false;
        };
        self.stats.undelivered += 1;
        self.txn_expired(now, txn_id);
        true
    }

    /// Every attempt failed: report ETIMEDOUT with the header as sent.
    pub(super) fn time_out_txn(&mut self, now: Instant, txn_id: TxnId) {
        let ended = self.finish_txn_with(now, txn_id, |txn| {
            let mut header = [0u8; mad::HEADER_LEN];
            header.copy_from_slice(&txn.mad[..mad::HEADER_LEN]);
            (txn.agent, txn.dest, header)
        });
        if let Some((mad, (agent, addr, header))) = ended {
            self.stats.timeouts += 1;
            self.recycle(mad);
            self.push_event(Event::SendTimedOut {
                agent,
                addr,
                header,
            });
        }
    }

    /// Drop everything of an unregistered agent, silently (the kernel flushes).
    pub(super) fn purge_agent(&mut self, id: AgentId) {
        for txn in self.txns.purge_agent(&mut self.timers, &mut self.stats, id) {
            self.rmpp_sends.remove(&txn);
        }
        self.dedup.forget_agent(&mut self.timers, id);
        self.recv.purge_agent(&mut self.timers, id);
    }

    /// The port below is gone for good (its device removed, its simulator killed):
    /// drop every request, RMPP session (sending and receiving), remembered request,
    /// unsent MAD and timer, silently, as the kernel's device removal flushes an
    /// agent's sends without a completion for any (the application's reads fail with
    /// EIO instead). Agents stay registered and queued events stay queued: a driver
    /// may still hand those out. Nothing is left for a timer to do.
    pub fn abandon(&mut self) {
        for id in 0..super::agent::MAX_AGENTS {
            // `MAX_AGENTS` is 32: the cast cannot truncate.
            self.purge_agent(AgentId(id as u32));
        }
        self.tx_queue.clear();
    }
}
