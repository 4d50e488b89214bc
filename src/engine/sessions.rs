//! RMPP integration: session tables keyed as the kernel keys them, dispatch
//! of RMPP MADs to the sender and receiver machines (`rmpp::send`,
//! `rmpp::recv`), addressing of what they emit, and delivery of reassembled
//! messages.
//!
//! Send sessions live inside their transaction (`Txn::rmpp`) and are found by
//! (agent, TID, peer); receive sessions by (agent, TID, source QPN, LID/GID, class,
//! class version, method). Receivers' ACKs go straight to the transmit queue;
//! senders are polled lazily from `rmpp_ready`, so a window of segments is
//! never copied ahead of the transport.

use core::time::Duration;

use super::ids::TxnId;
use super::peer::{reply_addr, same_peer, send_key};
use super::rmpp::receiving::{RecvEnd, RecvOutcome};
use super::rmpp::send::Sender;
use super::rmpp::{format_ds_ack, Progress};
use super::timers::TimerKey;
use super::txn::{Out, PendingRmpp, RmppTx, Txn, TxnKey, TxnState};
use super::{AgentId, Engine, Event, RecvMeta, SendRequest, Transmit};
use crate::time::Instant;
use crate::types::{MadAddr, Qp};
use crate::wire::mad::{self, MgmtClass};
use crate::wire::rmpp::{RmppStatus, RmppType};
use crate::wire::MAD_SIZE;
use crate::{Error, Result};

/// An ACK with status 0 whose NewWindowLast is not below its segment (what
/// the kernel's `process_rmpp_ack` takes further than its ABORTs).
fn is_plain_ack(buf: &[u8; MAD_SIZE]) -> bool {
    let p = crate::wire::rmpp::Packet::new_unchecked(&buf[..]);
    p.rmpp_type() == RmppType::Ack
        && p.rmpp_status() == RmppStatus::Success
        && p.paylen_newwin() >= p.seg_num()
}

impl Engine {
    /// `send` for an agent running RMPP in the engine, with RMPPFlags.Active set.
    pub(super) fn send_rmpp(
        &mut self,
        now: Instant,
        id: AgentId,
        req: SendRequest<'_>,
    ) -> Result<()> {
        let agent = self.agents.get(id).ok_or(Error::UnknownAgent(id.0))?;
        let (qp, hi_tid) = (agent.spec.qp, agent.hi_tid);
        let class = MgmtClass::from(req.mad[1]);
        let hdr_len = class.data_offset();
        if req.mad.len() < hdr_len {
            return Err(Error::InvalidArgument(
                "RMPP message shorter than its class header",
            ));
        }
        let limit = self.config.rmpp.max_message;
        if req.mad.len() > limit {
            return Err(Error::MessageTooLarge {
                len: req.mad.len(),
                limit,
            });
        }
        let mut message = req.mad.to_vec();
        let mut pkt = mad::Packet::new_unchecked(&mut message[..]);
        let response = pkt.is_response();
        let tid = if response {
            pkt.tid()
        } else {
            (u64::from(hi_tid) << 32) | (pkt.tid() & 0xffff_ffff)
        };
        pkt.set_tid(tid);
        let class = u8::from(class);
        let wants_response = req.timeout_ms != 0;
        if self.send_index.contains_key(&send_key(id, tid, &req.addr))
            || (wants_response && self.txns.find(&TxnKey::new(id, tid, class)).is_some())
        {
            return Err(Error::DuplicateRequest(tid));
        }
        // A response starts from the window the requester's dual-sided ACK
        // gave the request's receive session (kernel init_newwin).
        let window_last = if response {
            self.recv.reply_window(id, &req.addr, &message)
        } else {
            1
        };
        let user = Duration::from_millis(u64::from(req.timeout_ms));
        let ack_timeout = if user.is_zero() || user > self.config.rmpp.ack_timeout {
            self.config.rmpp.ack_timeout
        } else {
            user
        };
        let mut first = Box::new([0u8; MAD_SIZE]);
        let n = message.len().min(MAD_SIZE);
        first[..n].copy_from_slice(&message[..n]);
        let backlogged = wants_response && self.txns.at_limit(id);
        let cfg = self.config.rmpp;
        // Sender::new validates; a backlogged send validates on a copy and
        // gets its real sender (and timers) when admitted.
        let rmpp = if backlogged {
            Sender::new(
                now,
                message.clone(),
                hdr_len,
                window_last,
                ack_timeout,
                0,
                &cfg,
            )?;
            RmppTx::Pending(Box::new(PendingRmpp {
                message,
                hdr_len,
                window_last,
                ack_timeout,
            }))
        } else {
            let sender = Sender::new(
                now,
                message,
                hdr_len,
                window_last,
                ack_timeout,
                req.retries,
                &cfg,
            )?;
            RmppTx::Running(Box::new(sender))
        };
        if response {
            self.dedup.forget(&mut self.timers, &req.addr, tid, class);
        }
        let txn = Txn {
            agent: id,
            tid,
            class,
            qp,
            dest: req.addr,
            mad: first,
            timeout: user,
            retries_left: req.retries,
            state: TxnState::Backlog,
            deadline: None,
            wants_response,
            rmpp: Some(rmpp),
        };
        let txn_id = self.txns.insert_rmpp(txn, &mut self.stats);
        self.send_index.insert(send_key(id, tid, &req.addr), txn_id);
        if wants_response {
            self.admit(now, id, txn_id);
        } else {
            self.start_rmpp_send(now, txn_id);
        }
        Ok(())
    }

    /// Start an admitted RMPP send (building its sender if it waited in the
    /// backlog) and offer it to `poll_transmit`.
    pub(super) fn start_rmpp_send(&mut self, now: Instant, txn_id: TxnId) {
        let cfg = self.config.rmpp;
        let Some(txn) = self.txns.get_mut(txn_id) else {
            return;
        };
        if let Some(RmppTx::Pending(pending)) =
            txn.rmpp.take_if(|r| matches!(r, RmppTx::Pending(_)))
        {
            let PendingRmpp {
                message,
                hdr_len,
                window_last,
                ack_timeout,
            } = *pending;
            match Sender::new(
                now,
                message,
                hdr_len,
                window_last,
                ack_timeout,
                txn.retries_left,
                &cfg,
            ) {
                Ok(sender) => txn.rmpp = Some(RmppTx::Running(Box::new(sender))),
                // Validated in send_rmpp; never leak the transaction all the same.
                Err(_) => {
                    txn.rmpp = Some(RmppTx::Done);
                    self.finish_txn(now, txn_id);
                    return;
                }
            }
        }
        txn.state = TxnState::RmppSending;
        self.rmpp_ready.push_back(txn_id);
        self.sync_txn_timer(txn_id);
    }

    /// Point the transaction's timer at its sender's deadline.
    fn sync_txn_timer(&mut self, txn_id: TxnId) {
        let Some(txn) = self.txns.get_mut(txn_id) else {
            return;
        };
        let new = match &txn.rmpp {
            Some(RmppTx::Running(s)) => s.deadline(),
            _ => return,
        };
        let old = core::mem::replace(&mut txn.deadline, new);
        self.timers.set(TimerKey::Txn(txn_id), old, new);
    }

    /// The next DATA segment (or ABORT) of a sender with something due.
    pub(super) fn transmit_rmpp(
        &mut self,
        now: Instant,
        out: &mut [u8; MAD_SIZE],
    ) -> Option<Transmit> {
        while let Some(&txn_id) = self.rmpp_ready.front() {
            let sent = match self.txns.get_mut(txn_id) {
                Some(
                    txn @ Txn {
                        rmpp: Some(RmppTx::Running(_)),
                        ..
                    },
                ) => {
                    let timeout_ms = txn.transmit_timeout_ms();
                    let (qp, dest) = (txn.qp, txn.dest);
                    let Some(RmppTx::Running(sender)) = &mut txn.rmpp else {
                        unreachable!("matched above");
                    };
                    sender.poll_transmit(now, out).then_some(Transmit {
                        qp,
                        dest,
                        len: MAD_SIZE,
                        timeout_ms,
                    })
                }
                _ => None,
            };
            match sent {
                Some(tx) => {
                    self.sync_txn_timer(txn_id);
                    self.stats.sent += 1;
                    return Some(tx);
                }
                None => {
                    self.rmpp_ready.pop_front();
                }
            }
        }
        None
    }

    /// The sender's ACK timer expired.
    pub(super) fn rmpp_send_timeout(&mut self, now: Instant, txn_id: TxnId) {
        let progress = match self.txns.get_mut(txn_id) {
            Some(Txn {
                rmpp: Some(RmppTx::Running(sender)),
                ..
            }) => sender.handle_timeout(now),
            _ => return,
        };
        self.sender_progress(now, txn_id, progress, None);
    }

    /// Act on a sender's progress; `trigger` is the ACK/STOP/ABORT that caused it.
    fn sender_progress(
        &mut self,
        now: Instant,
        txn_id: TxnId,
        progress: Progress,
        trigger: Option<&[u8]>,
    ) {
        match progress {
            Progress::Pending => {
                self.sync_txn_timer(txn_id);
                self.rmpp_ready.push_back(txn_id);
            }
            Progress::Complete => {
                let Some(txn) = self.txns.get_mut(txn_id) else {
                    return;
                };
                let hdr_len = MgmtClass::from(txn.class).data_offset();
                txn.rmpp = Some(RmppTx::Done);
                if !txn.wants_response {
                    self.finish_txn(now, txn_id);
                    return;
                }
                // Every segment ACKed: wait for the response with the user's timeout.
                txn.state = TxnState::Waiting;
                let deadline = now + txn.timeout;
                let old = txn.deadline.replace(deadline);
                let (qp, dest, agent) = (txn.qp, txn.dest, txn.agent);
                self.timers.set(TimerKey::Txn(txn_id), old, Some(deadline));
                if let Some(ack) = trigger {
                    // Dual-sided RMPP: tell the responder the window for its response.
                    let mut buf = Box::new([0u8; MAD_SIZE]);
                    format_ds_ack(ack, hdr_len, &mut buf);
                    self.queue_raw(Some(agent), qp, dest, buf);
                }
            }
            Progress::Failed { status, .. } => {
                let Some(txn) = self.txns.get_mut(txn_id) else {
                    return;
                };
                let (agent, tid, qp, dest) = (txn.agent, txn.tid, txn.qp, txn.dest);
                let mut abort = Box::new([0u8; MAD_SIZE]);
                let notify = match &mut txn.rmpp {
                    Some(RmppTx::Running(s)) => s.poll_transmit(now, &mut abort),
                    _ => false,
                };
                txn.rmpp = Some(RmppTx::Done);
                if notify {
                    self.queue_raw(Some(agent), qp, dest, abort);
                }
                if status == RmppStatus::TooManyRetries {
                    // kernel: IB_WC_RESP_TIMEOUT_ERR, reported as ETIMEDOUT.
                    self.time_out_txn(now, txn_id);
                } else {
                    self.finish_txn(now, txn_id);
                    self.rmpp_aborted(agent, tid, status, true);
                }
            }
        }
    }

    fn rmpp_aborted(&mut self, agent: AgentId, tid: u64, status: RmppStatus, sending: bool) {
        self.stats.rmpp_aborts += 1;
        self.push_event(Event::RmppAborted {
            agent,
            tid,
            status,
            sending,
        });
    }

    fn queue_raw(
        &mut self,
        agent: Option<AgentId>,
        qp: Qp,
        dest: MadAddr,
        mad: Box<[u8; MAD_SIZE]>,
    ) {
        let agent = agent.and_then(|a| Some((a, self.agents.get(a)?.serial)));
        self.tx_queue.push_back(Out::Raw {
            agent,
            qp,
            dest,
            mad,
        });
    }

    /// RMPP MADs of agents that run RMPP in the engine go to the session
    /// machines before anything else; true if consumed here.
    pub(super) fn rmpp_intercept(
        &mut self,
        now: Instant,
        agent: AgentId,
        meta: RecvMeta,
        buf: &[u8; MAD_SIZE],
    ) -> bool {
        let kernel_rmpp = self.agents.get(agent).is_some_and(|a| a.kernel_rmpp());
        if !kernel_rmpp || !super::rmpp::is_rmpp_active(buf) {
            return false;
        }
        match RmppType::from(buf[25]) {
            RmppType::Data => {
                let outcome =
                    self.recv
                        .data(&mut self.timers, &mut self.stats, now, agent, meta, buf);
                if let Some(outcome) = outcome {
                    self.recv_outcome(now, outcome);
                }
            }
            RmppType::Ack | RmppType::Stop | RmppType::Abort => {
                self.rmpp_control(now, agent, meta, buf)
            }
            _ => self.stats.dropped_rmpp_unknown += 1,
        }
        true
    }

    /// ACK, STOP or ABORT: for our sender of that TID, else for a receive session.
    fn rmpp_control(&mut self, now: Instant, agent: AgentId, meta: RecvMeta, buf: &[u8; MAD_SIZE]) {
        let tid = mad::Packet::new_unchecked(&buf[..]).tid();
        if let Some(&txn_id) = self.send_index.get(&send_key(agent, tid, &meta.src)) {
            let progress = match self.txns.get_mut(txn_id) {
                Some(Txn {
                    rmpp: Some(RmppTx::Running(sender)),
                    class,
                    dest,
                    ..
                }) if *class == buf[1] && same_peer(dest, &meta.src) => {
                    Some(sender.handle_rmpp(now, &buf[..]))
                }
                Some(Txn {
                    rmpp: Some(RmppTx::Done),
                    state: TxnState::Waiting,
                    class,
                    qp,
                    dest,
                    ..
                }) if *class == buf[1] && is_plain_ack(buf) => {
                    // kernel process_rmpp_ack, "Repeated ACK for DS RMPP
                    // transaction": every segment is ACKed and the response is
                    // awaited; our dual-sided ACK was lost, so send it again.
                    let (qp, dest) = (*qp, *dest);
                    let mut ds_ack = Box::new([0u8; MAD_SIZE]);
                    format_ds_ack(&buf[..], MgmtClass::from(buf[1]).data_offset(), &mut ds_ack);
                    self.queue_raw(Some(agent), qp, dest, ds_ack);
                    return;
                }
                _ => None,
            };
            if let Some(progress) = progress {
                let trigger = (RmppType::from(buf[25]) == RmppType::Ack).then_some(&buf[..]);
                self.sender_progress(now, txn_id, progress, trigger);
                return;
            }
        }
        let outcome = self
            .recv
            .control(&mut self.timers, &mut self.stats, now, agent, meta, buf);
        if let Some(outcome) = outcome {
            self.recv_outcome(now, outcome);
        }
    }

    /// Act on what a receive session asks: send its reply, deliver its
    /// message, report its abort.
    pub(super) fn recv_outcome(&mut self, now: Instant, outcome: RecvOutcome) {
        let RecvOutcome {
            agent,
            qp,
            src,
            reply,
            end,
        } = outcome;
        if let Some(reply) = reply {
            self.queue_raw(Some(agent), qp, reply_addr(qp, &src), reply);
        }
        match end {
            RecvEnd::Running => {}
            RecvEnd::Delivered(message) => {
                self.stats.rmpp_reassembled += 1;
                self.rmpp_deliver(now, agent, src, message);
            }
            RecvEnd::Aborted { tid, status } => self.rmpp_aborted(agent, tid, status, false),
        }
    }

    /// A reassembled message: a response completes its request, a request is delivered.
    fn rmpp_deliver(&mut self, now: Instant, agent: AgentId, src: MadAddr, message: Vec<u8>) {
        let pkt = mad::Packet::new_unchecked(&message[..]);
        let (tid, class) = (pkt.tid(), u8::from(pkt.mgmt_class()));
        if pkt.is_response() {
            match self.txns.match_response(agent, tid, class, &src) {
                Some(txn_id) => {
                    self.finish_txn(now, txn_id);
                    self.deliver_answer(agent, src, message);
                }
                None => self.stats.unmatched_responses += 1,
            }
            return;
        }
        let filtered = pkt.method() != mad::Method::Send;
        self.deliver_request(now, agent, src, message, filtered);
    }
}
