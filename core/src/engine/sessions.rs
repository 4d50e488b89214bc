//! The engine's RMPP side: sending an RMPP message, routing incoming RMPP
//! MADs to the send sessions (`rmpp::send_sessions`) or receive sessions
//! (`rmpp::recv_sessions`), and acting on what they return: replies to address
//! and queue, requests to finish or time out, messages to deliver, aborts to
//! report.

use alloc::boxed::Box;
use alloc::vec::Vec;
use core::time::Duration;

use super::ids::TxnId;
use super::peer::reply_addr;
use super::rmpp::is_abort_status;
use super::rmpp::recv_sessions::{RecvEnd, RecvOutcome};
use super::rmpp::send_sessions::{Reply, SendStep};
use super::rmpp::sender::Sender;
use super::txn::{Out, PendingRmpp, RmppTx, Txn, TxnKey, TxnState};
use super::{AgentId, Engine, RecvMeta, RmppAbort, SendRequest, Transmit};
use crate::time::Instant;
use crate::types::{MadAddr, Qp};
use crate::wire::mad;
use crate::wire::rmpp::{RmppStatus, RmppType};
use crate::wire::MAD_SIZE;
use crate::{Error, Result};

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
        let class = mad::Packet::new_unchecked(req.mad).mgmt_class();
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
        if self.rmpp_sends.contains(id, tid, &req.addr)
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
        // The first segment's bytes (the header a timeout reports), in a spare buffer.
        let first = self.mad_buf(&message);
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
        self.rmpp_sends.insert(id, tid, &req.addr, txn_id);
        if wants_response {
            self.admit(now, id, txn_id);
        } else {
            self.start_rmpp_send(now, txn_id);
        }
        Ok(())
    }

    /// Start an admitted RMPP send and offer it to `poll_transmit`.
    pub(super) fn start_rmpp_send(&mut self, now: Instant, txn_id: TxnId) {
        let config = self.config.rmpp;
        if !self
            .rmpp_sends
            .start(&mut self.txns, &mut self.timers, &config, now, txn_id)
        {
            self.finish_txn(now, txn_id);
        }
    }

    /// The next DATA segment (or ABORT) of a sender with something due.
    #[inline]
    pub(super) fn transmit_rmpp(
        &mut self,
        now: Instant,
        out: &mut [u8; MAD_SIZE],
    ) -> Option<Transmit> {
        let tx = self
            .rmpp_sends
            .poll_transmit(&mut self.txns, &mut self.timers, now, out)?;
        self.stats.sent += 1;
        Some(tx)
    }

    /// The sender's ACK timer expired.
    pub(super) fn rmpp_send_timeout(&mut self, now: Instant, txn_id: TxnId) {
        let step = self
            .rmpp_sends
            .timeout(&mut self.txns, &mut self.timers, now, txn_id);
        if let Some(step) = step {
            self.send_step(now, txn_id, step);
        }
    }

    /// Act on what a send session asks after an input.
    fn send_step(&mut self, now: Instant, txn_id: TxnId, step: SendStep) {
        match step {
            SendStep::Continue(reply) => {
                if let Some(reply) = reply {
                    self.queue_reply(reply);
                }
            }
            SendStep::Finished => {
                self.finish_txn(now, txn_id);
            }
            SendStep::Failed {
                agent,
                tid,
                status,
                reply,
            } => {
                if let Some(reply) = reply {
                    self.queue_reply(reply);
                }
                if status == RmppStatus::TooManyRetries {
                    // kernel: IB_WC_RESP_TIMEOUT_ERR, reported as ETIMEDOUT.
                    self.time_out_txn(now, txn_id);
                } else if self.txns.get(txn_id).is_some_and(|t| t.wants_response) {
                    // The kernel ends such a send silently (umad does not
                    // report IB_WC_REM_ABORT_ERR) and its caller waits for
                    // ever; we end the request with the one failure umad
                    // reports (a departure, see the engine's docs). The abort
                    // is recorded first, for a reader of that report.
                    self.rmpp_aborted(agent, tid, status, true);
                    self.time_out_txn(now, txn_id);
                } else {
                    self.finish_txn(now, txn_id);
                    self.rmpp_aborted(agent, tid, status, true);
                }
            }
        }
    }

    fn queue_reply(&mut self, reply: Reply) {
        self.queue_raw(Some(reply.agent), reply.qp, reply.dest, reply.mad);
    }

    fn rmpp_aborted(&mut self, agent: AgentId, tid: u64, status: RmppStatus, sending: bool) {
        self.stats.rmpp_aborts += 1;
        self.last_rmpp_abort = Some(RmppAbort {
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
    /// machines before anything else; true if consumed here. One whose header
    /// was never filled in (Active, version 0) goes on as an ordinary MAD: a
    /// response then completes its request as a one-MAD message.
    pub(super) fn rmpp_intercept(
        &mut self,
        now: Instant,
        agent: AgentId,
        meta: RecvMeta,
        buf: &[u8; MAD_SIZE],
    ) -> bool {
        let kernel_rmpp = self.agents.get(agent).is_some_and(|a| a.kernel_rmpp());
        if !kernel_rmpp || !super::rmpp::is_rmpp_transfer(buf) {
            return false;
        }
        match crate::wire::rmpp::Packet::new_unchecked(&buf[..]).rmpp_type() {
            RmppType::Data => {
                let outcome =
                    self.recv
                        .data(&mut self.timers, &mut self.stats, now, agent, &meta, buf);
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

    /// ACK, STOP or ABORT: for our sender of that TID, else for a receive
    /// session; a STOP or ABORT of an answer also ends the attempt of the
    /// request waiting for it.
    fn rmpp_control(&mut self, now: Instant, agent: AgentId, meta: RecvMeta, buf: &[u8; MAD_SIZE]) {
        let step =
            self.rmpp_sends
                .control(&mut self.txns, &mut self.timers, now, agent, &meta.src, buf);
        if let Some((txn_id, step)) = step {
            self.send_step(now, txn_id, step);
            return;
        }
        let waiting = self.answer_awaited(agent, &meta.src, buf);
        let outcome = self.recv.control(&mut self.timers, now, agent, &meta, buf);
        let session_status = match &outcome {
            Some(RecvOutcome {
                end: RecvEnd::Aborted { status, .. },
                ..
            }) => Some(*status),
            _ => None,
        };
        match outcome {
            Some(outcome) => self.recv_outcome(now, outcome),
            None if waiting.is_none() => self.stats.dropped_rmpp_unknown += 1,
            None => {}
        }
        let Some(txn_id) = waiting else {
            return;
        };
        // The answer will not come: end this attempt now rather than at its
        // timer (a departure, see the engine's docs). The abort is recorded
        // before the timeout report goes out, so that a reader of that report
        // finds it in `last_rmpp_abort`.
        if session_status.is_none() {
            let tid = mad::Packet::new_unchecked(&buf[..]).tid();
            self.rmpp_aborted(agent, tid, answer_abort_status(buf), false);
        }
        let hdr = mad::Packet::new_unchecked(&buf[..]);
        let key = TxnKey::new(agent, hdr.tid(), u8::from(hdr.mgmt_class()));
        if self.txns.end_attempt(&mut self.timers, &key).is_some() {
            self.txn_expired(now, txn_id);
        }
    }

    /// The request a STOP or ABORT from `src` is about, when that is the
    /// answer's sender giving up: a response-method STOP/ABORT with the TID,
    /// class and peer of a request whose own sends are over and which waits
    /// for its answer. The kernel ignores such a MAD (`abort_send` finds the
    /// request "already done") and lets the request run to its timeout.
    fn answer_awaited(&self, agent: AgentId, src: &MadAddr, buf: &[u8; MAD_SIZE]) -> Option<TxnId> {
        let hdr = mad::Packet::new_unchecked(&buf[..]);
        let rmpp_type = crate::wire::rmpp::Packet::new_unchecked(&buf[..]).rmpp_type();
        if !hdr.is_response() || !matches!(rmpp_type, RmppType::Stop | RmppType::Abort) {
            return None;
        }
        let id = self
            .txns
            .match_response(agent, hdr.tid(), u8::from(hdr.mgmt_class()), src)?;
        let txn = self.txns.get(id)?;
        (txn.state == TxnState::Waiting).then_some(id)
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

/// The status a STOP or ABORT that found no receive session ends its request
/// with: its own when an ABORT (118..=127) or STOP (ResourcesExhausted) may
/// carry it, else BadStatus (as the receiver, and the kernel's `abort_send`,
/// take a malformed one).
fn answer_abort_status(buf: &[u8; MAD_SIZE]) -> RmppStatus {
    let p = crate::wire::rmpp::Packet::new_unchecked(&buf[..]);
    let status = p.rmpp_status();
    match p.rmpp_type() {
        RmppType::Abort if is_abort_status(status) => status,
        RmppType::Stop if status == RmppStatus::ResourcesExhausted => status,
        _ => RmppStatus::BadStatus,
    }
}
