//! The transaction table: requests that expect a response (and RMPP sends)
//! from the moment they are sent until answered, timed out or dropped, with
//! their response index, per-agent outstanding counts and backlogs. Each
//! method returns what the engine must do next; the table never calls back.

use alloc::boxed::Box;
use alloc::collections::VecDeque;
use alloc::format;
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;
use core::time::Duration;

use super::agent::MAX_AGENTS;
use super::ids::{AgentSerial, TxnId};
use super::peer::same_peer;
use super::rmpp::sender::Sender;
use super::slab::Slab;
use super::timers::{TimerKey, Timers};
use super::txn_index::{Keyed, TxnIndex, Vacancy};
use super::{AgentId, EngineStats, Transmit};
use crate::time::Instant;
use crate::types::{MadAddr, Qp};
use crate::wire::mad::MgmtClass;
use crate::wire::MAD_SIZE;

pub(crate) use super::txn_index::TxnKey;

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

impl Keyed for Txn {
    fn key(&self) -> TxnKey {
        TxnKey::new(self.agent, self.tid, self.class)
    }
}

impl Txn {
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
        agent: Option<(AgentId, AgentSerial)>,
        qp: Qp,
        dest: MadAddr,
        mad: Box<[u8; MAD_SIZE]>,
    },
}

/// What [`TxnTable::admit`] did with a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Admitted {
    /// Its agent is at its limit: it waits in the backlog.
    Backlogged,
    /// Ready to send: the engine queues it for `poll_transmit`.
    Queued,
    /// An RMPP send: the engine starts its sender.
    Rmpp,
}

/// What an expired request timer asks of the engine ([`TxnTable::expire`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Expired {
    /// Nothing waited on that timer any more.
    Nothing,
    /// A retry is due: the engine queues it for `poll_transmit`.
    Retry,
    /// Every attempt expired: the engine times the request out.
    TimedOut,
    /// The RMPP sender's ACK timer: the engine lets the sender act.
    RmppSender,
}

/// What [`TxnTable::finish`] leaves of a request.
pub(crate) struct Finished {
    pub(crate) agent: AgentId,
    /// Its MAD as last sent, for the engine to recycle.
    pub(crate) mad: Box<[u8; MAD_SIZE]>,
    /// The next request of the agent's backlog, free to go now.
    pub(crate) next: Option<TxnId>,
}

/// A free place for a request, from [`TxnTable::vacancy`].
pub(crate) struct Place<'a> {
    vacancy: Vacancy<'a>,
    txns: &'a mut Slab<Txn, TxnId>,
}

impl Place<'_> {
    /// Store `txn` here (it has the key the place was found for).
    #[inline]
    pub(crate) fn insert(self, txn: Txn, stats: &mut EngineStats) -> TxnId {
        let id = self.txns.insert(txn);
        self.vacancy.fill(id);
        stats.outstanding += 1;
        id
    }
}

/// Outstanding requests, found by slab id (a stale id finds nothing) or by
/// what a response carries back (agent, TID, class), with each agent's
/// count in flight and its backlog. Deadlines live in the engine's
/// [`Timers`] under [`TimerKey::Txn`].
#[derive(Debug)]
pub(crate) struct TxnTable {
    txns: Slab<Txn, TxnId>,
    /// (agent, TID, class) -> txn id, for response matching and duplicate sends.
    index: TxnIndex,
    /// Per agent slot: requests waiting for the outstanding limit, in send order.
    backlogs: Vec<VecDeque<TxnId>>,
    /// Per agent slot: requests admitted and not finished.
    active: Vec<usize>,
    /// `max_outstanding_per_agent` (0: unlimited).
    limit: usize,
}

impl TxnTable {
    pub(crate) fn new(limit: usize) -> TxnTable {
        TxnTable {
            txns: Slab::default(),
            index: TxnIndex::default(),
            backlogs: vec![VecDeque::new(); MAX_AGENTS],
            active: vec![0; MAX_AGENTS],
            limit,
        }
    }

    #[inline]
    pub(crate) fn get(&self, id: TxnId) -> Option<&Txn> {
        self.txns.get(id)
    }

    #[inline]
    pub(crate) fn get_mut(&mut self, id: TxnId) -> Option<&mut Txn> {
        self.txns.get_mut(id)
    }

    /// The request with `key` (admitted or not).
    #[inline]
    pub(crate) fn find(&self, key: &TxnKey) -> Option<TxnId> {
        self.index.get(&self.txns, key)
    }

    /// Whether a request of `agent` admitted now would wait in its backlog.
    #[inline]
    pub(crate) fn at_limit(&self, agent: AgentId) -> bool {
        self.limit != 0 && self.active[agent.0 as usize] >= self.limit
    }

    /// Where a request that expects a response, with `key`, goes; `None`
    /// when one with that key is outstanding.
    #[inline]
    pub(crate) fn vacancy(&mut self, key: &TxnKey) -> Option<Place<'_>> {
        let vacancy = self.index.vacancy(&self.txns, key)?;
        Some(Place {
            vacancy,
            txns: &mut self.txns,
        })
    }

    /// Store an RMPP send (the caller checked for duplicates); indexed only
    /// when it expects a response.
    #[inline]
    pub(crate) fn insert_rmpp(&mut self, txn: Txn, stats: &mut EngineStats) -> TxnId {
        let (key, wants_response) = (txn.key(), txn.wants_response);
        let id = self.txns.insert(txn);
        if wants_response {
            self.index.insert(&key, id);
            stats.outstanding += 1;
        }
        id
    }

    /// Let a new request of `agent` go, or park it in the agent's backlog when the agent is at its limit.
    #[inline]
    pub(crate) fn admit(&mut self, agent: AgentId, id: TxnId, stats: &mut EngineStats) -> Admitted {
        let slot = agent.0 as usize;
        if self.limit != 0 && self.active[slot] >= self.limit {
            self.backlogs[slot].push_back(id);
            stats.backlogged += 1;
            stats.backlog_depth += 1;
            return Admitted::Backlogged;
        }
        self.active[slot] += 1;
        let Some(txn) = self.txns.get_mut(id) else {
            return Admitted::Backlogged;
        };
        if txn.rmpp.is_some() {
            return Admitted::Rmpp;
        }
        txn.state = TxnState::Queued;
        Admitted::Queued
    }

    /// End a request (answered, timed out, its RMPP send over): out of the
    /// table, its index entry and its timer. Its MAD buffer comes back, and the
    /// next request of its agent's backlog, which the engine admits, and what
    /// `read` took from the record before it went.
    ///
    /// One lookup, and the record is read where it lies: this runs once per
    /// request, on a record gone cold since it was sent (`benches/engine.rs`,
    /// `send_timeout_churn` measured moving it out whole 5-10 % slower).
    #[inline]
    pub(crate) fn finish<R>(
        &mut self,
        timers: &mut Timers,
        stats: &mut EngineStats,
        id: TxnId,
        read: impl FnOnce(&Txn) -> R,
    ) -> Option<(Finished, R)> {
        let txn = self.txns.get(id)?;
        let read = read(txn);
        timers.set(TimerKey::Txn(id), txn.deadline, None);
        let agent = txn.agent;
        let slot = agent.0 as usize;
        let mut next = None;
        if txn.wants_response {
            self.index.remove(&txn.key(), id);
            stats.outstanding -= 1;
            if txn.state == TxnState::Backlog {
                self.backlogs[slot].retain(|&t| t != id);
                stats.backlog_depth -= 1;
            } else {
                // No longer counted against the agent's limit.
                self.active[slot] = self.active[slot].saturating_sub(1);
                next = self.backlogs[slot].pop_front();
                if next.is_some() {
                    stats.backlog_depth -= 1;
                }
            }
        }
        let Txn { mad, .. } = self.txns.remove(id)?;
        Some((Finished { agent, mad, next }, read))
    }

    /// A queued request handed out: into `out`, its response timer started.
    pub(crate) fn transmit(
        &mut self,
        timers: &mut Timers,
        now: Instant,
        id: TxnId,
        out: &mut [u8; MAD_SIZE],
    ) -> Option<Transmit> {
        let txn = self.txns.get_mut(id)?;
        if txn.state != TxnState::Queued {
            return None;
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
        timers.set(TimerKey::Txn(id), old, Some(deadline));
        Some(tx)
    }

    /// `id`'s timer fired (or its attempt was reported undelivered).
    #[inline]
    pub(crate) fn expire(&mut self, stats: &mut EngineStats, id: TxnId) -> Expired {
        let Some(txn) = self.txns.get_mut(id) else {
            return Expired::Nothing;
        };
        txn.deadline = None;
        if txn.state == TxnState::RmppSending {
            return Expired::RmppSender;
        }
        if txn.state != TxnState::Waiting {
            return Expired::Nothing;
        }
        // An RMPP request whose segments were all ACKed is not resent (kernel
        // ib_retry_rmpp answers PROCESSED, so the retry fails and the send times out).
        if txn.retries_left > 0 && txn.rmpp.is_none() {
            txn.retries_left -= 1;
            txn.state = TxnState::Queued;
            stats.retries += 1;
            return Expired::Retry;
        }
        Expired::TimedOut
    }

    /// The request whose attempt in flight a MAD with `key` is, its timer
    /// stopped: for an undelivered report.
    #[inline]
    pub(crate) fn end_attempt(&mut self, timers: &mut Timers, key: &TxnKey) -> Option<TxnId> {
        let id = self.index.get(&self.txns, key)?;
        let txn = self.txns.get(id)?;
        if txn.state != TxnState::Waiting {
            return None;
        }
        timers.set(TimerKey::Txn(id), txn.deadline, None);
        Some(id)
    }

    /// The outstanding request (sent or still queued: the kernel's EARLY_RESP)
    /// a response answers: same TID and class, and the same peer unless DR.
    #[inline]
    pub(crate) fn match_response(
        &self,
        agent: AgentId,
        tid: u64,
        class: u8,
        src: &MadAddr,
    ) -> Option<TxnId> {
        let id = self
            .index
            .get(&self.txns, &TxnKey::new(agent, tid, class))?;
        let txn = self.txns.get(id)?;
        if txn.state == TxnState::Backlog {
            return None;
        }
        let dr = MgmtClass::from(class) == MgmtClass::SubnDirectedRoute;
        (dr || same_peer(&txn.dest, src)).then_some(id)
    }

    /// Drop every request of `agent` (it unregistered); what was dropped.
    pub(crate) fn purge_agent(
        &mut self,
        timers: &mut Timers,
        stats: &mut EngineStats,
        agent: AgentId,
    ) -> Vec<Txn> {
        let mut doomed: Vec<_> = self
            .txns
            .iter()
            .filter(|(_, t)| t.agent == agent)
            .map(|(k, _)| k)
            .collect();
        doomed.sort_unstable();
        let mut dropped = Vec::with_capacity(doomed.len());
        for id in doomed {
            if let Some(txn) = self.txns.remove(id) {
                timers.set(TimerKey::Txn(id), txn.deadline, None);
                if txn.wants_response {
                    self.index.remove(&txn.key(), id);
                    stats.outstanding -= 1;
                }
                dropped.push(txn);
            }
        }
        let slot = agent.0 as usize;
        stats.backlog_depth -= self.backlogs[slot].len() as u64;
        self.backlogs[slot].clear();
        self.active[slot] = 0;
        dropped
    }

    /// Requests stored (in flight, RMPP sends, backlog).
    pub(crate) fn len(&self) -> usize {
        self.txns.len()
    }

    /// Requests with their ids, in slot order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (TxnId, &Txn)> {
        self.txns.iter()
    }

    /// Whether nothing is stored or indexed.
    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.txns.is_empty() && self.index.is_empty()
    }

    /// Slab slots allocated, live or free.
    #[cfg(test)]
    pub(crate) fn slots(&self) -> usize {
        self.txns.slots()
    }

    /// Bytes the response index holds.
    #[cfg(test)]
    pub(crate) fn index_bytes(&self) -> usize {
        self.index.bytes()
    }

    /// Requests indexed (those that expect a response).
    #[cfg(test)]
    pub(crate) fn indexed(&self) -> usize {
        self.index.len()
    }

    /// Whether the index, the table, the counts in flight and the backlogs
    /// agree with each other, with the timers and with `stats`' gauges.
    pub(crate) fn check(&self, timers: &Timers, stats: &EngineStats) -> Result<(), String> {
        let mut wanting = 0u64;
        let mut active = vec![0usize; MAX_AGENTS];
        for (id, txn) in self.txns.iter() {
            if txn.wants_response {
                wanting += 1;
                if self.index.get(&self.txns, &txn.key()) != Some(id) {
                    return Err(format!("txn {id} missing from txn_index"));
                }
                if txn.state != TxnState::Backlog {
                    active[txn.agent.0 as usize] += 1;
                }
            }
            if txn.deadline.is_some() != timers.contains(TimerKey::Txn(id)) {
                return Err(format!("txn {id} deadline and timer disagree"));
            }
        }
        if self.index.len() as u64 != wanting || stats.outstanding != wanting {
            return Err(format!(
                "txn_index {} / outstanding {} / txns wanting a response {wanting}",
                self.index.len(),
                stats.outstanding
            ));
        }
        for (slot, (&have, &want)) in self.active.iter().zip(&active).enumerate() {
            if have != want {
                return Err(format!(
                    "agent {slot}: active {have} but {want} txns in flight"
                ));
            }
        }
        let depth: usize = self.backlogs.iter().map(|b| b.len()).sum();
        if depth as u64 != stats.backlog_depth {
            return Err(format!(
                "backlog depth {depth} != gauge {}",
                stats.backlog_depth
            ));
        }
        for id in self.backlogs.iter().flatten() {
            if !self
                .txns
                .get(*id)
                .is_some_and(|t| t.state == TxnState::Backlog)
            {
                return Err(format!("backlog holds txn {id} not in Backlog state"));
            }
        }
        Ok(())
    }
}
