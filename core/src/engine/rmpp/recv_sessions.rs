//! The engine's RMPP receive sessions: one [`Receiver`] per incoming
//! transfer, keyed as the kernel's `find_rmpp_recv` keys it (agent, TID,
//! source QPN, LID/GID, class, class version, method), with the per-peer and
//! total reassembly limits. Each session's deadline lives in the engine's
//! [`Timers`] under [`TimerKey::Recv`].
//!
//! Every input returns a [`RecvOutcome`] when the engine has something to do
//! (send a reply, deliver a message, report an abort); the table never calls
//! back into the engine.

use alloc::boxed::Box;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

use super::receiver::Receiver;
use super::{Progress, RmppConfig};
use crate::engine::hash::{IdMap, PeerMap, SipKeys};
use crate::engine::ids::RecvId;
use crate::engine::peer::PeerKey;
use crate::engine::timers::{TimerKey, Timers};
use crate::engine::{AgentId, EngineConfig, EngineStats, RecvMeta};
use crate::time::Instant;
use crate::types::{MadAddr, Qp};
use crate::wire::mad;
use crate::wire::rmpp::RmppStatus;
use crate::wire::MAD_SIZE;

/// What identifies a receive session (kernel `find_rmpp_recv`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct RecvKey {
    agent: u32,
    tid: u64,
    qpn: u32,
    lid: u16,
    gid: Option<[u8; 16]>,
    class: u8,
    version: u8,
    method: u8,
}

impl RecvKey {
    fn new(agent: AgentId, peer: &MadAddr, hdr: &[u8], method: u8) -> RecvKey {
        let pkt = mad::Packet::new_unchecked(hdr);
        RecvKey {
            agent: agent.0,
            tid: pkt.tid(),
            qpn: peer.qpn,
            lid: peer.lid,
            gid: peer.grh.map(|g| g.gid),
            class: u8::from(pkt.mgmt_class()),
            version: pkt.class_version(),
            method,
        }
    }
}

/// One incoming RMPP transfer.
#[derive(Debug)]
struct RecvSession {
    agent: AgentId,
    key: RecvKey,
    qp: Qp,
    /// The sender, as the transport reported it.
    src: MadAddr,
    rx: Receiver,
    deadline: Option<Instant>,
    /// Counted against the peer's reassembly limit (still reassembling).
    counted: bool,
}

impl RecvSession {
    fn peer(&self) -> PeerKey {
        (self.src.lid, self.src.grh.map(|g| g.gid))
    }
}

/// What a receive session asks of the engine after an input.
#[derive(Debug)]
pub(crate) struct RecvOutcome {
    /// The agent the transfer is for.
    pub(crate) agent: AgentId,
    /// The local QP it arrived on.
    pub(crate) qp: Qp,
    /// The sender.
    pub(crate) src: MadAddr,
    /// An ACK, ABORT or STOP to send back to `src`.
    pub(crate) reply: Option<Box<[u8; MAD_SIZE]>>,
    /// How the transfer stands.
    pub(crate) end: RecvEnd,
}

/// Whether a transfer ended, and how.
#[derive(Debug)]
pub(crate) enum RecvEnd {
    /// Still running (or lingering after its message was delivered).
    Running,
    /// Reassembled: the message to deliver.
    Delivered(Vec<u8>),
    /// Ended by ABORT or STOP (sent or received); the session is gone.
    Aborted {
        /// The transfer's TID.
        tid: u64,
        /// The ABORT/STOP status.
        status: RmppStatus,
    },
}

/// The receive sessions of one engine.
#[derive(Debug)]
pub(crate) struct RecvSessions {
    config: RmppConfig,
    /// Reassemblies allowed per peer and in all.
    max_per_peer: usize,
    max_total: usize,
    sessions: IdMap<RecvId, RecvSession>,
    index: PeerMap<RecvKey, RecvId>,
    /// The session the last DATA segment went to: the next segment is almost
    /// always for it too, and an equal key skips `index`'s SipHash (keyed by
    /// what peers send), the largest cost of a segment.
    last: Option<(RecvKey, RecvId)>,
    /// Reassemblies in progress per peer.
    peer_active: PeerMap<PeerKey, usize>,
    next_id: u64,
}

impl RecvSessions {
    pub(crate) fn new(config: &EngineConfig, keys: SipKeys) -> RecvSessions {
        RecvSessions {
            config: config.rmpp,
            max_per_peer: config.max_reassemblies_per_peer,
            max_total: config.max_reassemblies,
            sessions: IdMap::default(),
            index: PeerMap::with_hasher(keys),
            last: None,
            peer_active: PeerMap::with_hasher(keys),
            next_id: 0,
        }
    }

    /// A DATA segment: to its session, or the first one starts a session
    /// (within the reassembly limits).
    #[inline]
    pub(crate) fn data(
        &mut self,
        timers: &mut Timers,
        stats: &mut EngineStats,
        now: Instant,
        agent: AgentId,
        meta: &RecvMeta,
        buf: &[u8; MAD_SIZE],
    ) -> Option<RecvOutcome> {
        let key = RecvKey::new(
            agent,
            &meta.src,
            &buf[..],
            u8::from(mad::Packet::new_unchecked(&buf[..]).method()),
        );
        let found = match self.last {
            Some((last, sid)) if last == key => Some(sid),
            _ => self.index.get(&key).copied(),
        };
        if let Some(sid) = found {
            self.last = Some((key, sid));
            let session = self.sessions.get_mut(&sid)?;
            let dropped = |rx: &Receiver| {
                let s = rx.stats();
                s.out_of_window + s.duplicates
            };
            let before = dropped(&session.rx);
            let progress = session.rx.handle_data(now, &buf[..]);
            stats.dropped_rmpp_segments += dropped(&session.rx) - before;
            // Most segments change nothing the engine acts on: still
            // running, no reply due, the same deadline.
            if progress == Progress::Pending
                && !session.rx.has_reply()
                && session.deadline == session.rx.deadline()
            {
                return None;
            }
            return self.progress(timers, sid, progress);
        }
        let peer: PeerKey = (meta.src.lid, meta.src.grh.map(|g| g.gid));
        let active = self.peer_active.get(&peer).copied().unwrap_or(0);
        let total: usize = self.peer_active.values().sum();
        if active >= self.max_per_peer || total >= self.max_total {
            stats.dropped_rmpp_limit += 1;
            return None;
        }
        let (rx, progress) = Receiver::new(now, &buf[..], &self.config);
        if let Progress::Failed {
            notify_peer: false, ..
        } = progress
        {
            stats.dropped_rmpp_unknown += 1;
            return None;
        }
        self.next_id += 1;
        let sid = RecvId(self.next_id);
        self.index.insert(key, sid);
        self.last = Some((key, sid));
        self.sessions.insert(
            sid,
            RecvSession {
                agent,
                key,
                qp: meta.qp,
                src: meta.src,
                rx,
                deadline: None,
                counted: true,
            },
        );
        *self.peer_active.entry(peer).or_insert(0) += 1;
        self.progress(timers, sid, progress)
    }

    /// An ACK, STOP or ABORT no send session took: for the receive session of
    /// its transfer (a requester's dual-sided ACK, a sender's STOP/ABORT).
    /// `None` when no session has its key (the caller counts it).
    pub(crate) fn control(
        &mut self,
        timers: &mut Timers,
        now: Instant,
        agent: AgentId,
        meta: &RecvMeta,
        buf: &[u8; MAD_SIZE],
    ) -> Option<RecvOutcome> {
        let key = RecvKey::new(
            agent,
            &meta.src,
            &buf[..],
            u8::from(mad::Packet::new_unchecked(&buf[..]).method()),
        );
        let sid = *self.index.get(&key)?;
        let session = self.sessions.get_mut(&sid)?;
        let progress = session.rx.handle_rmpp(now, &buf[..]);
        self.progress(timers, sid, progress)
    }

    /// `sid`'s deadline passed (its timer fired).
    pub(crate) fn timeout(
        &mut self,
        timers: &mut Timers,
        now: Instant,
        sid: RecvId,
    ) -> Option<RecvOutcome> {
        let session = self.sessions.get_mut(&sid)?;
        session.deadline = None;
        let lingering = session.rx.is_lingering();
        let progress = session.rx.handle_timeout(now);
        if lingering && progress == Progress::Complete {
            self.remove(timers, sid);
            return None;
        }
        self.progress(timers, sid, progress)
    }

    /// The window a response to the request `agent` received from `peer`
    /// starts from (kernel `init_newwin`): what the requester's dual-sided
    /// ACK gave that request's session, else 1. `response` is the response's
    /// first bytes.
    pub(crate) fn reply_window(&self, agent: AgentId, peer: &MadAddr, response: &[u8]) -> u32 {
        let key = RecvKey::new(agent, peer, response, response[3] & !mad::METHOD_RESP);
        self.index
            .get(&key)
            .and_then(|sid| self.sessions.get(sid))
            .map_or(1, |s| s.rx.reply_window())
    }

    /// Drop every session of `agent` (it unregistered).
    pub(crate) fn purge_agent(&mut self, timers: &mut Timers, agent: AgentId) {
        let mut doomed: Vec<_> = self
            .sessions
            .iter()
            .filter(|(_, s)| s.agent == agent)
            .map(|(&sid, _)| sid)
            .collect();
        doomed.sort_unstable();
        for sid in doomed {
            self.remove(timers, sid);
        }
    }

    /// Sessions open (reassembling or lingering).
    pub(crate) fn len(&self) -> usize {
        self.sessions.len()
    }

    /// Bytes the sessions hold.
    pub(crate) fn buffered(&self) -> usize {
        self.sessions.values().map(|s| s.rx.buffered()).sum()
    }

    /// Whether no session, index entry or reassembly count is left.
    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.sessions.is_empty() && self.index.is_empty() && self.peer_active.is_empty()
    }

    /// Whether the index, the table and the per-peer counts agree, and every
    /// session's memory and every peer's count is within the limits.
    pub(crate) fn check(&self) -> Result<(), String> {
        if self.index.len() != self.sessions.len() {
            return Err("recv_index and recv_sessions differ in size".into());
        }
        if let Some((key, sid)) = self.last {
            if self.index.get(&key) != Some(&sid) {
                return Err(format!("recv_last names session {sid}, not in recv_index"));
            }
        }
        let mut peers: PeerMap<PeerKey, usize> = PeerMap::with_hasher(*self.peer_active.hasher());
        let limit = self.config.max_message + self.config.window as usize * MAD_SIZE;
        for (&sid, s) in &self.sessions {
            if self.index.get(&s.key) != Some(&sid) {
                return Err(format!("recv session {sid} missing from recv_index"));
            }
            if s.counted {
                *peers.entry(s.peer()).or_default() += 1;
            }
            if s.rx.buffered() > limit {
                return Err(format!(
                    "recv session {sid} holds {} bytes (limit {limit})",
                    s.rx.buffered()
                ));
            }
        }
        if peers != self.peer_active {
            return Err(format!(
                "peer_active {:?} != counted sessions {peers:?}",
                self.peer_active
            ));
        }
        if let Some((peer, n)) = peers.iter().find(|(_, &n)| n > self.max_per_peer) {
            return Err(format!("peer {peer:?} has {n} reassemblies"));
        }
        Ok(())
    }

    /// After a receiver's input: move its timer, take its reply, take a
    /// finished message, end a failed session.
    fn progress(
        &mut self,
        timers: &mut Timers,
        sid: RecvId,
        progress: Progress,
    ) -> Option<RecvOutcome> {
        let session = self.sessions.get_mut(&sid)?;
        // A receiver holds at most one reply; most segments owe none.
        let reply = session.rx.take_reply();
        let end = match progress {
            Progress::Pending => RecvEnd::Running,
            Progress::Complete => session
                .rx
                .take_message()
                .map_or(RecvEnd::Running, RecvEnd::Delivered),
            Progress::Failed { status, .. } => RecvEnd::Aborted {
                tid: session.key.tid,
                status,
            },
        };
        let finished = !matches!(progress, Progress::Pending);
        let uncount = finished && core::mem::replace(&mut session.counted, false);
        let peer = session.peer();
        let new_deadline = session.rx.deadline();
        let old_deadline = core::mem::replace(&mut session.deadline, new_deadline);
        let outcome = RecvOutcome {
            agent: session.agent,
            qp: session.qp,
            src: session.src,
            reply,
            end,
        };
        timers.set(TimerKey::Recv(sid), old_deadline, new_deadline);
        if uncount {
            self.uncount(peer);
        }
        if matches!(outcome.end, RecvEnd::Aborted { .. }) {
            self.remove(timers, sid);
        }
        Some(outcome)
    }

    fn remove(&mut self, timers: &mut Timers, sid: RecvId) {
        let Some(session) = self.sessions.remove(&sid) else {
            return;
        };
        self.index.remove(&session.key);
        if self.last.is_some_and(|(_, last)| last == sid) {
            self.last = None;
        }
        timers.set(TimerKey::Recv(sid), session.deadline, None);
        if session.counted {
            self.uncount(session.peer());
        }
    }

    fn uncount(&mut self, peer: PeerKey) {
        if let Some(n) = self.peer_active.get_mut(&peer) {
            *n -= 1;
            if *n == 0 {
                self.peer_active.remove(&peer);
            }
        }
    }
}
