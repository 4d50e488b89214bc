//! The engine's RMPP send sessions. A [`Sender`] lives inside its
//! transaction (`Txn::rmpp`, in the [`TxnTable`]); this finds it by
//! (agent, TID, peer), as the kernel's `ib_find_send_mad` finds the send an
//! ACK, STOP or ABORT belongs to, and polls the senders that may have a
//! segment due, in order, so a window of segments is never copied ahead of
//! the transport.
//!
//! Every input returns a [`SendStep`] for the engine (send a dual-sided ACK
//! or an ABORT, finish or time out the request); this never calls back into
//! the engine.

use alloc::boxed::Box;
use alloc::collections::VecDeque;

use super::sender::Sender;
use super::{format_ds_ack, Progress, RmppConfig};
use crate::engine::hash::IdMap;
use crate::engine::ids::TxnId;
use crate::engine::peer::{same_peer, send_key, SendKey};
use crate::engine::timers::{TimerKey, Timers};
use crate::engine::txn::{PendingRmpp, RmppTx, Txn, TxnState, TxnTable};
use crate::engine::{AgentId, Transmit};
use crate::time::Instant;
use crate::types::{MadAddr, Qp};
use crate::wire::mad::{self, MgmtClass};
use crate::wire::rmpp::{RmppStatus, RmppType};
use crate::wire::MAD_SIZE;

/// A MAD a send session wants sent for `agent`.
#[derive(Debug)]
pub(crate) struct Reply {
    pub(crate) agent: AgentId,
    pub(crate) qp: Qp,
    pub(crate) dest: MadAddr,
    pub(crate) mad: Box<[u8; MAD_SIZE]>,
}

/// What the engine does after a sender's input. A `reply` goes out first.
#[derive(Debug)]
pub(crate) enum SendStep {
    /// Nothing more: still running, or waiting for the response.
    Continue(Option<Reply>),
    /// Every segment ACKed and no response expected: finish the request.
    Finished,
    /// Ended with `status` (`reply`: the ABORT to send): finish the request,
    /// or time it out when the ACK retries ran out.
    Failed {
        agent: AgentId,
        tid: u64,
        status: RmppStatus,
        reply: Option<Reply>,
    },
}

/// An ACK with status 0 whose NewWindowLast is not below its segment (what
/// the kernel's `process_rmpp_ack` takes further than its ABORTs).
fn is_plain_ack(buf: &[u8; MAD_SIZE]) -> bool {
    let p = crate::wire::rmpp::Packet::new_unchecked(&buf[..]);
    p.rmpp_type() == RmppType::Ack
        && p.rmpp_status() == RmppStatus::Success
        && p.paylen_newwin() >= p.seg_num()
}

/// The RMPP send sessions of one engine.
#[derive(Debug, Default)]
pub(crate) struct RmppSends {
    /// (agent, TID, peer) -> the transaction holding the sender.
    index: IdMap<SendKey, TxnId>,
    /// Senders that may have a segment due, polled in order.
    ready: VecDeque<TxnId>,
}

impl RmppSends {
    /// Whether `agent` has a send with `tid` to `peer`.
    pub(crate) fn contains(&self, agent: AgentId, tid: u64, peer: &MadAddr) -> bool {
        self.index.contains_key(&send_key(agent, tid, peer))
    }

    /// Index the RMPP send `id`.
    pub(crate) fn insert(&mut self, agent: AgentId, tid: u64, peer: &MadAddr, id: TxnId) {
        self.index.insert(send_key(agent, tid, peer), id);
    }

    /// Forget the send of `txn` (it finished or was dropped).
    pub(crate) fn remove(&mut self, txn: &Txn) {
        self.index.remove(&send_key(txn.agent, txn.tid, &txn.dest));
    }

    /// The transaction of the send `key` names.
    pub(crate) fn get(&self, key: &SendKey) -> Option<TxnId> {
        self.index.get(key).copied()
    }

    /// Sends indexed.
    #[cfg(feature = "tracing")]
    pub(crate) fn len(&self) -> usize {
        self.index.len()
    }

    /// Indexed sends with their transactions.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&SendKey, &TxnId)> {
        self.index.iter()
    }

    /// Whether nothing is indexed or waiting to be polled.
    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.index.is_empty() && self.ready.is_empty()
    }

    /// Start the admitted RMPP send `id` (building its sender if it waited in
    /// the backlog) and offer it to `poll_transmit`; false if its sender
    /// could not be built (the engine finishes the request).
    pub(crate) fn start(
        &mut self,
        txns: &mut TxnTable,
        timers: &mut Timers,
        config: &RmppConfig,
        now: Instant,
        id: TxnId,
    ) -> bool {
        let Some(txn) = txns.get_mut(id) else {
            return true;
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
                config,
            ) {
                Ok(sender) => txn.rmpp = Some(RmppTx::Running(Box::new(sender))),
                // Validated when sent; never leak the transaction all the same.
                Err(_) => {
                    txn.rmpp = Some(RmppTx::Done);
                    return false;
                }
            }
        }
        txn.state = TxnState::RmppSending;
        self.ready.push_back(id);
        sync_timer(txns, timers, id);
        true
    }

    /// The next DATA segment (or ABORT) of a sender with something due.
    #[inline]
    pub(crate) fn poll_transmit(
        &mut self,
        txns: &mut TxnTable,
        timers: &mut Timers,
        now: Instant,
        out: &mut [u8; MAD_SIZE],
    ) -> Option<Transmit> {
        while let Some(&id) = self.ready.front() {
            let sent = match txns.get_mut(id) {
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
                    sync_timer(txns, timers, id);
                    return Some(tx);
                }
                None => {
                    self.ready.pop_front();
                }
            }
        }
        None
    }

    /// The sender's ACK timer expired.
    pub(crate) fn timeout(
        &mut self,
        txns: &mut TxnTable,
        timers: &mut Timers,
        now: Instant,
        id: TxnId,
    ) -> Option<SendStep> {
        let progress = match txns.get_mut(id) {
            Some(Txn {
                rmpp: Some(RmppTx::Running(sender)),
                ..
            }) => sender.handle_timeout(now),
            _ => return None,
        };
        self.progress(txns, timers, now, id, progress, None)
    }

    /// An ACK, STOP or ABORT from `src` for `agent`: to the send it belongs
    /// to, with that send's transaction (`None`: not for a send; the receive
    /// sessions may take it).
    pub(crate) fn control(
        &mut self,
        txns: &mut TxnTable,
        timers: &mut Timers,
        now: Instant,
        agent: AgentId,
        src: &MadAddr,
        buf: &[u8; MAD_SIZE],
    ) -> Option<(TxnId, SendStep)> {
        let hdr = mad::Packet::new_unchecked(&buf[..]);
        let (tid, class_of) = (hdr.tid(), hdr.mgmt_class());
        let id = self.get(&send_key(agent, tid, src))?;
        let progress = match txns.get_mut(id) {
            Some(Txn {
                rmpp: Some(RmppTx::Running(sender)),
                class,
                dest,
                ..
            }) if *class == u8::from(class_of) && same_peer(dest, src) => {
                sender.handle_rmpp(now, &buf[..])
            }
            Some(Txn {
                rmpp: Some(RmppTx::Done),
                state: TxnState::Waiting,
                class,
                qp,
                dest,
                ..
            }) if *class == u8::from(class_of) && is_plain_ack(buf) => {
                // kernel process_rmpp_ack, "Repeated ACK for DS RMPP
                // transaction": every segment is ACKed and the response is
                // awaited; our dual-sided ACK was lost, so send it again.
                let mut mad = Box::new([0u8; MAD_SIZE]);
                format_ds_ack(&buf[..], class_of.data_offset(), &mut mad);
                let reply = Reply {
                    agent,
                    qp: *qp,
                    dest: *dest,
                    mad,
                };
                return Some((id, SendStep::Continue(Some(reply))));
            }
            _ => return None,
        };
        let rmpp_type = crate::wire::rmpp::Packet::new_unchecked(&buf[..]).rmpp_type();
        let trigger = (rmpp_type == RmppType::Ack).then_some(&buf[..]);
        let step = self.progress(txns, timers, now, id, progress, trigger)?;
        Some((id, step))
    }

    /// Act on a sender's progress; `trigger` is the ACK/STOP/ABORT that caused it.
    fn progress(
        &mut self,
        txns: &mut TxnTable,
        timers: &mut Timers,
        now: Instant,
        id: TxnId,
        progress: Progress,
        trigger: Option<&[u8]>,
    ) -> Option<SendStep> {
        match progress {
            Progress::Pending => {
                sync_timer(txns, timers, id);
                self.ready.push_back(id);
                Some(SendStep::Continue(None))
            }
            Progress::Complete => {
                let txn = txns.get_mut(id)?;
                let hdr_len = MgmtClass::from(txn.class).data_offset();
                txn.rmpp = Some(RmppTx::Done);
                if !txn.wants_response {
                    return Some(SendStep::Finished);
                }
                // Every segment ACKed: wait for the response with the user's timeout.
                txn.state = TxnState::Waiting;
                let deadline = now + txn.timeout;
                let old = txn.deadline.replace(deadline);
                let (qp, dest, agent) = (txn.qp, txn.dest, txn.agent);
                timers.set(TimerKey::Txn(id), old, Some(deadline));
                // Dual-sided RMPP: tell the responder the window for its response.
                let reply = trigger.map(|ack| {
                    let mut mad = Box::new([0u8; MAD_SIZE]);
                    format_ds_ack(ack, hdr_len, &mut mad);
                    Reply {
                        agent,
                        qp,
                        dest,
                        mad,
                    }
                });
                Some(SendStep::Continue(reply))
            }
            Progress::Failed { status, .. } => {
                let txn = txns.get_mut(id)?;
                let (agent, tid, qp, dest) = (txn.agent, txn.tid, txn.qp, txn.dest);
                let mut abort = Box::new([0u8; MAD_SIZE]);
                let notify = match &mut txn.rmpp {
                    Some(RmppTx::Running(s)) => s.poll_transmit(now, &mut abort),
                    _ => false,
                };
                txn.rmpp = Some(RmppTx::Done);
                let reply = notify.then_some(Reply {
                    agent,
                    qp,
                    dest,
                    mad: abort,
                });
                Some(SendStep::Failed {
                    agent,
                    tid,
                    status,
                    reply,
                })
            }
        }
    }
}

/// Point the transaction's timer at its sender's deadline.
fn sync_timer(txns: &mut TxnTable, timers: &mut Timers, id: TxnId) {
    let Some(txn) = txns.get_mut(id) else {
        return;
    };
    let new = match &txn.rmpp {
        Some(RmppTx::Running(s)) => s.deadline(),
        _ => return,
    };
    let old = core::mem::replace(&mut txn.deadline, new);
    timers.set(TimerKey::Txn(id), old, new);
}
