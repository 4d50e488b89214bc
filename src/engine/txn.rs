//! Outgoing work: requests in flight (TID stamping, duplicate sends,
//! retries, timeouts, the per-agent backlog) and the transmit queue.

use core::time::Duration;

use super::ids::TxnId;
use super::rmpp::send::Sender;
use super::timers::TimerKey;
use super::{smi, AgentId, Engine, Event, SendRequest, Transmit};
use crate::time::Instant;
use crate::types::{MadAddr, Qp};
use crate::wire::mad::{self, MgmtClass};
use crate::wire::{rmpp, MAD_SIZE};
use crate::{Error, Result};

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

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TxnState {
    /// Waiting for the agent's outstanding count to drop.
    Backlog,
    /// In the transmit queue.
    Queued,
    /// Handed out; the response timer runs.
    Waiting,
    /// An RMPP transfer in progress (the timer is the sender's ACK timer).
    RmppSending,
}

/// One request that expects a response.
#[derive(Debug)]
pub(crate) struct Txn {
    pub(crate) agent: AgentId,
    pub(crate) tid: u64,
    pub(crate) class: u8,
    pub(crate) qp: Qp,
    pub(crate) dest: MadAddr,
    pub(crate) mad: Box<[u8; MAD_SIZE]>,
    pub(crate) timeout: Duration,
    pub(crate) retries_left: u32,
    pub(crate) state: TxnState,
    pub(crate) deadline: Option<Instant>,
    /// Whether a response completes it (`timeout_ms != 0`); RMPP sends without
    /// one are kept here only while their segments are in flight.
    pub(crate) wants_response: bool,
    /// The RMPP side of an RMPP send.
    pub(crate) rmpp: Option<RmppTx>,
}

/// The RMPP side of a send.
#[derive(Debug)]
pub(crate) enum RmppTx {
    /// Backlogged: the sender is built (and its timers start) when admitted.
    /// Boxed, like `Running`, so that every request's record stays small: the
    /// expiring one is read cold (`benches/engine.rs`, `send_timeout_churn`).
    Pending(Box<PendingRmpp>),
    /// Segments in flight.
    Running(Box<Sender>),
    /// Every segment ACKed (waiting for the response), or the sender failed.
    Done,
}

/// An RMPP send waiting in the backlog.
#[derive(Debug)]
pub(crate) struct PendingRmpp {
    pub(crate) message: Vec<u8>,
    pub(crate) hdr_len: usize,
    pub(crate) window_last: u32,
    pub(crate) ack_timeout: Duration,
}

impl Txn {
    pub(crate) fn key(&self) -> TxnKey {
        TxnKey::new(self.agent, self.tid, self.class)
    }

    /// [`Transmit::timeout_ms`] for this request's MADs.
    pub(crate) fn transmit_timeout_ms(&self) -> u32 {
        if self.wants_response {
            u32::try_from(self.timeout.as_millis()).unwrap_or(u32::MAX)
        } else {
            0
        }
    }
}

/// An entry of the transmit queue.
#[derive(Debug)]
pub(crate) enum Out {
    /// A request (first attempt or retry); skipped if it completed meanwhile.
    Txn(TxnId),
    /// A MAD that expects nothing back: a response, a `timeout_ms == 0` send,
    /// or an answer of the engine itself (`agent == None`).
    Raw {
        agent: Option<(AgentId, u64)>,
        qp: Qp,
        dest: MadAddr,
        mad: Box<[u8; MAD_SIZE]>,
    },
}

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
        let Some(place) = self.txn_index.vacancy(&self.txns, &key) else {
            self.recycle(buf);
            return Err(Error::DuplicateRequest(tid));
        };
        let txn_id = self.txns.insert(Txn {
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
        });
        place.fill(txn_id);
        self.stats.outstanding += 1;
        self.admit(now, id, txn_id);
        Ok(())
    }

    /// Queue a new request, or park it in the agent's backlog when the agent is at its limit.
    pub(super) fn admit(&mut self, now: Instant, id: AgentId, txn_id: TxnId) {
        let limit = self.config.max_outstanding_per_agent;
        let Some(agent) = self.agents.get_mut(id) else {
            return;
        };
        if limit != 0 && agent.active >= limit {
            self.backlogs[id.0 as usize].push_back(txn_id);
            self.stats.backlogged += 1;
            self.stats.backlog_depth += 1;
            return;
        }
        agent.active += 1;
        let Some(txn) = self.txns.get_mut(txn_id) else {
            return;
        };
        if txn.rmpp.is_some() {
            self.start_rmpp_send(now, txn_id);
            return;
        }
        txn.state = TxnState::Queued;
        self.tx_queue.push_back(Out::Txn(txn_id));
    }

    /// Remove a finished request (answered, timed out) and let the backlog move.
    pub(super) fn finish_txn(&mut self, now: Instant, txn_id: TxnId) -> Option<Txn> {
        let txn = self.txns.remove(txn_id)?;
        self.timers.set(TimerKey::Txn(txn_id), txn.deadline, None);
        if txn.rmpp.is_some() {
            self.send_index
                .remove(&super::peer::send_key(txn.agent, txn.tid, &txn.dest));
        }
        if !txn.wants_response {
            return Some(txn);
        }
        self.txn_index.remove(&txn.key(), txn_id);
        self.stats.outstanding -= 1;
        if txn.state == TxnState::Backlog {
            let backlog = &mut self.backlogs[txn.agent.0 as usize];
            backlog.retain(|&t| t != txn_id);
            self.stats.backlog_depth -= 1;
            return Some(txn);
        }
        if let Some(agent) = self.agents.get_mut(txn.agent) {
            agent.active = agent.active.saturating_sub(1);
        }
        if let Some(next) = self.backlogs[txn.agent.0 as usize].pop_front() {
            self.stats.backlog_depth -= 1;
            self.admit(now, txn.agent, next);
        }
        Some(txn)
    }

    pub(super) fn transmit(&mut self, now: Instant, out: &mut [u8; MAD_SIZE]) -> Option<Transmit> {
        while let Some(item) = self.tx_queue.pop_front() {
            match item {
                Out::Txn(txn_id) => {
                    let Some(txn) = self.txns.get_mut(txn_id) else {
                        continue;
                    };
                    if txn.state != TxnState::Queued {
                        continue;
                    }
                    out.copy_from_slice(&txn.mad[..]);
                    txn.state = TxnState::Waiting;
                    let deadline = now + txn.timeout;
                    let old = txn.deadline.replace(deadline);
                    let tx = Transmit {
                        qp: txn.qp,
                        dest: txn.dest,
                        len: MAD_SIZE,
                        timeout_ms: txn.transmit_timeout_ms(),
                    };
                    self.timers.set(TimerKey::Txn(txn_id), old, Some(deadline));
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
    pub(super) fn txn_expired(&mut self, now: Instant, txn_id: TxnId) {
        let Some(txn) = self.txns.get_mut(txn_id) else {
            return;
        };
        txn.deadline = None;
        if txn.state == TxnState::RmppSending {
            self.rmpp_send_timeout(now, txn_id);
            return;
        }
        if txn.state != TxnState::Waiting {
            return;
        }
        // An RMPP request whose segments were all ACKed is not resent (kernel
        // ib_retry_rmpp answers PROCESSED, so the retry fails and the send times out).
        if txn.retries_left > 0 && txn.rmpp.is_none() {
            txn.retries_left -= 1;
            txn.state = TxnState::Queued;
            self.stats.retries += 1;
            self.tx_queue.push_back(Out::Txn(txn_id));
            return;
        }
        self.time_out_txn(now, txn_id);
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
        let Some(txn_id) = self
            .txn_index
            .get(&self.txns, &TxnKey::new(agent, tid, class))
        else {
            return false;
        };
        let Some(txn) = self.txns.get(txn_id) else {
            return false;
        };
        if txn.state != TxnState::Waiting {
            return false;
        }
        self.timers.set(TimerKey::Txn(txn_id), txn.deadline, None);
        self.stats.undelivered += 1;
        self.txn_expired(now, txn_id);
        true
    }

    /// Every attempt failed: report ETIMEDOUT with the header as sent.
    pub(super) fn time_out_txn(&mut self, now: Instant, txn_id: TxnId) {
        if let Some(txn) = self.finish_txn(now, txn_id) {
            self.stats.timeouts += 1;
            let mut header = [0u8; mad::HEADER_LEN];
            header.copy_from_slice(&txn.mad[..mad::HEADER_LEN]);
            self.recycle(txn.mad);
            self.push_event(Event::SendTimedOut {
                agent: txn.agent,
                addr: txn.dest,
                header,
            });
        }
    }

    /// Drop everything of an unregistered agent, silently (the kernel flushes).
    pub(super) fn purge_agent(&mut self, id: AgentId) {
        let mut doomed: Vec<_> = self
            .txns
            .iter()
            .filter(|(_, t)| t.agent == id)
            .map(|(k, _)| k)
            .collect();
        doomed.sort_unstable();
        for txn_id in doomed {
            if let Some(txn) = self.txns.remove(txn_id) {
                self.timers.set(TimerKey::Txn(txn_id), txn.deadline, None);
                self.send_index
                    .remove(&super::peer::send_key(txn.agent, txn.tid, &txn.dest));
                if txn.wants_response {
                    self.txn_index.remove(&txn.key(), txn_id);
                    self.stats.outstanding -= 1;
                }
            }
        }
        let backlog = &mut self.backlogs[id.0 as usize];
        self.stats.backlog_depth -= backlog.len() as u64;
        backlog.clear();
        self.dedup.forget_agent(&mut self.timers, id);
        self.recv.purge_agent(&mut self.timers, id);
    }
}
