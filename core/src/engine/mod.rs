//! The sans-IO MAD engine: agents, transactions, timeouts, retries and RMPP.
//!
//! The engine does, for one port, what the Linux kernel's MAD layer (its
//! MAD core, RMPP and umad device) does for a umad user: it stamps
//! requests with the agent's TID high word, matches responses to requests,
//! retries and times out, routes unsolicited requests to the agent that
//! registered their method (answering unclaimed Get/Set itself), and runs
//! RMPP for agents that asked for it. It never reads a clock and never
//! touches a socket: the caller passes time in and moves bytes out.
//!
//! # Call order
//!
//! Inputs: [`Engine::register`], [`Engine::unregister`], [`Engine::send`],
//! [`Engine::handle_datagram`], [`Engine::handle_timeout`].
//! Outputs: [`Engine::poll_transmit`], [`Engine::poll_timeout`],
//! [`Engine::poll_event`] (and [`Engine::peek_event`]).
//!
//! After any input, call `poll_transmit` until it returns `None`, then
//! `poll_timeout` (arm a timer for it), then drain events. `now` must never
//! go backwards. Calling `handle_timeout` early does nothing.
//!
//! A request's response timer starts when `poll_transmit` hands the request
//! out (that is the engine's "send completion"), as the kernel starts it at
//! the send completion.
//!
//! # Inside
//!
//! State lives in the types that use it, each with methods that say what
//! happened instead of calling back: the transaction table (`txn.rs`:
//! requests, their response index, per-agent counts and backlogs), the
//! duplicate-request filter (`dedup.rs`), the RMPP send and receive sessions
//! (`rmpp/send_sessions.rs`, `rmpp/recv_sessions.rs`, around the state
//! machines of `rmpp/sender.rs` and `rmpp/receiver.rs`), the agents
//! (`agent.rs`) and the deadlines (`timers.rs`). The engine's own methods (this file, with the
//! inbound side in `dispatch.rs`, the send side in `outgoing.rs` and the RMPP
//! side in `sessions.rs`) sequence them, and [`Engine::handle_timeout`] is
//! the one place a deadline fires. Ids are newtypes (`ids.rs`).
//!
//! # What it does, as the kernel does it
//!
//! - **Requests out** get the agent's 24-bit TID high word (the low 32 bits
//!   are the caller's); responses keep their TID. A `timeout_ms` of 0
//!   expects nothing back: a response to it is dropped. Retries resend the
//!   same bytes. When every attempt expired, [`Event::SendTimedOut`] carries
//!   the first 24 bytes as sent.
//! - **Responses in** are routed by the TID high word, then matched by TID,
//!   class and peer (LID, or GID with a GRH; any peer for directed-route
//!   SMPs), also before their request was handed out (the kernel's
//!   EARLY_RESP). Unmatched or late ones are dropped and counted.
//! - **Requests in** go to the agent whose method mask has the method, for
//!   the class, class version (and OUI in vendor range 2). Unclaimed Get/Set
//!   are answered by the engine with GetResp(UNSUPPORTED_METHOD_ATTR), with
//!   the direction bit and return-path hop step for a DR SMP; other
//!   unclaimed MADs are dropped.
//! - **RMPP** runs in the engine for agents registered with RMPP version 1
//!   (and without `user_rmpp`) on an RMPP class when the user sets
//!   RMPPFlags.Active: segmentation, windows, ACKs, reassembly (delivered as
//!   one [`Event::Recv`]), dual-sided RMPP (GetMulti), ABORT/STOP (counted in
//!   [`EngineStats::rmpp_aborts`], the last one kept for
//!   [`Engine::last_rmpp_abort`]). Other agents see RMPP MADs untouched.
//! - **Limits** (see [`EngineConfig`]) are counted in [`EngineStats`].
//!
//! # Departures from the kernel
//!
//! Every place where the engine, with its default [`EngineConfig`], behaves
//! differently from the kernel's MAD layer, and why:
//!
//! - **TID high words** are drawn per engine from its seed (a
//!   `vmad::port::Port` seeds from the OS unless `rng_seed` is set), then
//!   allocated cyclically among its agents. The kernel's allocator is global
//!   to the machine: two vmad ports or processes differ only with high
//!   probability (2^-24 per pair of agents), not by construction.
//! - **Duplicate requests**: a request repeated by the same peer (QPN, GID or
//!   LID, TID, class) while the first copy still waits, unread, in a queue
//!   (the engine's, or the receiver's until it reports [`Engine::taken`]),
//!   within `duplicate_request_window` (10 s), is dropped; the kernel delivers
//!   every copy. A retry after the application read the first copy, after the
//!   answer went out, or of a request the full queue dropped, is delivered.
//!   Zero turns it off. Why: a busy SA or SM that has not yet read a query
//!   would otherwise find it twice in its queue and do it twice. Not longer:
//!   a responder that read a request and chose not to answer (OpenSM's SA
//!   ignores queries during its first sweep) must see the retry.
//! - **RMPP ACKs every half window**: a receiver ACKs the first segment, then
//!   each time the in-order tail is half a window short of NewWindowLast,
//!   moving it to tail + window. The kernel's receiver ACKs only at the
//!   window's end, where its sender (one segment per send completion, up to
//!   NewWindowLast) has nothing left to send until that ACK comes back: a
//!   stall of one round trip per window. Any sender takes the earlier ACKs
//!   (the kernel's accepts any ACK that does not move the window back). Under
//!   rxe, a 1 MiB Get from a kernel agent took 0.83× the time
//!   (`scripts/bench-hybrid` with `BENCH_BASELINE`, the hybrid client).
//! - **RMPP aborts are counted** ([`EngineStats::rmpp_aborts`],
//!   [`Engine::last_rmpp_abort`]); the kernel frees such sends and sessions
//!   silently.
//! - **RMPP receive lengths**: the kernel reads only the last segment's
//!   PayloadLength (an out-of-range pad counts as 0) and never sends ABORT
//!   BadLength (119) or STOP. vmad checks the length so that a hostile peer
//!   cannot make it hold unbounded memory, and answers:
//!   - ABORT BadLength when the first segment announces more than
//!     `rmpp.max_message` (16 MiB, headers included), or a length no sender
//!     can produce (a pad larger than one segment's data, or one segment
//!     without the Last flag); when a segment comes after the announced count,
//!     or Last comes before it; when the last PayloadLength differs from the
//!     one the first implies, or implies a pad larger than the segment's data
//!     or a message over `max_message`;
//!   - STOP ResourcesExhausted (1) when a transfer whose first segment
//!     announced no length (PayloadLength 0) grows beyond `max_message`.
//!
//!   Every PayloadLength and pad a kernel sender produces is accepted
//!   (`every_kernel_sender_payload_length_is_accepted`); only messages over
//!   16 MiB, which the kernel would take, are refused.
//! - **ABORT or STOP from the sender ends a receive session** at once (the
//!   kernel applies them to send sessions only and lets the receive session
//!   run into its 40 s ABORT T2L).
//! - **An ABORT or STOP of an answer ends the attempt of the request waiting
//!   for it** (a response-method ABORT/STOP with the TID, class and peer of a
//!   request whose own segments, if any, are all ACKed), as an undelivered
//!   report does: the retry goes out at once, or, with none left, the request
//!   ends with [`Event::SendTimedOut`] (the only failure umad reports; the
//!   abort is recorded in [`Engine::last_rmpp_abort`] first, with `sending:
//!   false`, for a reader that tells the two apart). The kernel's
//!   `abort_send` finds such a request "already done" (every segment of its
//!   send ACKed, none for a one-MAD request) and ignores the ABORT: the
//!   request waits out its timer for an answer that cannot come.
//! - **An ABORT or STOP that ends a request's own RMPP send ends the request**
//!   (one the receiver sent, or one our sender sends over a malformed ACK)
//!   when it expects a response (`timeout_ms != 0`): at once, retries or not,
//!   with [`Event::SendTimedOut`], the abort recorded in
//!   [`Engine::last_rmpp_abort`] first (`sending: true`). The kernel ends the
//!   send with `IB_WC_REM_ABORT_ERR`, which umad does not report, so its
//!   caller waits for ever for an answer that will not come. A send that
//!   expects none (a response, a fire-and-forget) ends silently, as in the
//!   kernel; every such abort is counted.
//! - **Reassembly limits**: at most `max_reassemblies_per_peer` (64) open
//!   reassemblies per peer and `max_reassemblies` (1024) in all; a first
//!   segment beyond them is dropped (the kernel has no limit).
//! - **Unmatched RMPP responses**: the first DATA segment of an RMPP
//!   response for an agent running RMPP in the engine starts a receive session
//!   before response matching, as the kernel's RMPP does (a recent patch
//!   to its MAD core, `is_kernel_rmpp_data_response`, drops such a segment
//!   first); the reassembled message is dropped as unmatched if no request
//!   waits for it.
//! - **RMPP headers never filled in**: a MAD with RMPPFlags.Active but
//!   RMPPVersion 0 reaches an agent running RMPP in the engine as an ordinary
//!   MAD (a response completes its request with these 256 bytes); the kernel
//!   answers ABORT UnsupportedVersion (125) and drops it. No RMPP sender
//!   writes version 0: it is what OpenSM's SA leaves for the kernel's RMPP to
//!   complete (it sets only the flag), seen raw where nothing segments it, as
//!   under umad2sim on ibsim, which carries the first 256 bytes of the table.
//!   The kernel would make every such GetTable time out.
//! - **A full receive queue** (`max_events`, 200,000) still takes responses
//!   to the agent's own outstanding requests: the kernel drops them, and the
//!   request then ends with neither its answer nor ETIMEDOUT.
//! - **Send errors**: more than 256 bytes without RMPP, or an RMPP message
//!   over `max_message`, is [`crate::Error::MessageTooLarge`] (EMSGSIZE); the
//!   kernel's `ib_umad_write` says EINVAL for the first and has no limit for
//!   the second.
//! - **Flow control**: `max_outstanding_per_agent` is 0 (unlimited) by
//!   default, as kernels before the 2025 solicited-MAD flow control; set it to
//!   get a backlog like theirs.
//! - **Undelivered reports** ([`Engine::handle_undelivered`], ibsim's drop
//!   echo) end the attempt early; the kernel has no such input.
//!
//! # Determinism
//!
//! Given the same inputs and a fixed `EngineConfig::rng_seed`, the engine
//! produces the same outputs: hash maps are used for lookups only, never
//! iterated to decide what is sent or delivered. An engine never reads the
//! OS; with `rng_seed: None` it starts from seed 0, and a port gives it a
//! seed from the OS.
//!
//! # Cost per MAD
//!
//! What a request costs does not depend on how many are outstanding: its
//! record lives in a slab (found by index, its slot reused warm), the
//! response index holds 8-byte entries (`txn_index.rs`), MAD buffers are
//! pooled, and deadlines that arrive in order (one timeout, requests sent
//! one after the other) are armed and expired in O(1) beside a B-tree for
//! the rest (`timers.rs`). `cargo bench --bench churn_ratio` measures send +
//! timeout at 10, 1,000 and 100,000 outstanding in one interleaved run: at
//! 100,000 a MAD costs what it costs at 10 plus what merely holding 100,000
//! requests' memory costs (the bench's "memory floor"); the test
//! `timers_work_per_mad_does_not_grow_with_100k_outstanding` pins the
//! structures.
//!
//! An RMPP segment allocates nothing but its window's ACK: the sender
//! writes each segment from the message straight into the caller's slot,
//! the receiver appends its data to the message buffer (which doubles, from
//! 64 KiB, as data arrives), and an ACK goes out at the first segment and
//! then every half window, moving the window on by a whole one (the kernel
//! ACKs only a window's last segment, so its sender stops for that ACK's
//! round trip every window; here it never runs out of window), the ACK's
//! buffer going to the transmit queue as it is. The receive session of the previous segment is
//! remembered, so a transfer's segments are found without hashing their key.
//! `cargo bench --bench rmpp_ratio` measures 1 MiB through two engines
//! against the memory-copy floor in the same run.

pub mod rmpp;

mod agent;
mod audit;
mod config;
mod dedup;
mod dispatch;
mod hash;
mod ids;
mod outgoing;
mod peer;
mod sessions;
mod slab;
mod smi;
mod stats;
mod timers;
mod txn;
mod txn_index;

#[cfg(test)]
mod tests;

use alloc::boxed::Box;
use alloc::collections::VecDeque;
use alloc::vec::Vec;

#[doc(hidden)]
pub use audit::Footprint;
pub use config::EngineConfig;
pub use stats::{EngineStats, RmppAbort};

use crate::time::Instant;
use crate::types::{MadAddr, Qp};
use crate::wire::mad::MgmtClass;
use crate::wire::MAD_SIZE;
use crate::Result;
use timers::TimerKey;

/// An agent's id on its port (0..32), what `umad_register` returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct AgentId(pub u32);

/// What an agent registers for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AgentSpec {
    /// The QP: SMI for classes 0x01/0x81, GSI otherwise.
    pub qp: Qp,
    /// Management class.
    pub mgmt_class: MgmtClass,
    /// Class version.
    pub class_version: u8,
    /// 0 (no RMPP) or 1.
    pub rmpp_version: u8,
    /// Methods whose *requests* this agent serves (bit n = method n, 0..127).
    /// All zero: a client-only agent, which receives only responses to its own requests.
    pub method_mask: [u64; 2],
    /// OUI (24 bits) for vendor range 2 classes (0x30–0x4F); 0 otherwise.
    pub oui: u32,
    /// `UMAD_USER_RMPP`: the agent does RMPP itself; RMPP MADs pass through untouched.
    pub user_rmpp: bool,
}

/// A MAD to send.
#[derive(Debug, Clone, Copy)]
pub struct SendRequest<'a> {
    /// Destination.
    pub addr: MadAddr,
    /// The MAD: 256 bytes, or for an RMPP agent the class header followed by
    /// any amount of data (segmented by the engine).
    pub mad: &'a [u8],
    /// Milliseconds to wait for a response per attempt; 0 = no response expected.
    pub timeout_ms: u32,
    /// Extra attempts after the first.
    pub retries: u32,
}

/// Where a received MAD came from, as the transport saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecvMeta {
    /// The local QP it arrived on.
    pub qp: Qp,
    /// The source: QPN, LID, SL, path bits, P_Key index, GRH.
    pub src: MadAddr,
    /// The local QP number it arrived at, where that is not `qp`'s own (0 or 1):
    /// vmad's UD QP standing in for QP1 (the verbs transport, the hybrid one's
    /// client path). For captures (`vmad::pcap`); the engine does not read it.
    pub local_qpn: Option<u32>,
}

/// A MAD the engine wants sent: written into the caller's slot by [`Engine::poll_transmit`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transmit {
    /// The local QP to send from.
    pub qp: Qp,
    /// Destination.
    pub dest: MadAddr,
    /// Bytes written into the slot (256 for IB MADs).
    pub len: usize,
    /// For a request that expects a response: the engine's wait for it, in ms (per
    /// attempt; for RMPP, after the last segment's ACK). 0 otherwise. A transport
    /// whose fabric matches responses itself (the kernel's umad) must keep its own
    /// match at least this long.
    pub timeout_ms: u32,
}

/// Something for the application.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// A MAD, or a reassembled RMPP message (first segment's headers + all data), for `agent`.
    Recv {
        /// The receiving agent.
        agent: AgentId,
        /// The source.
        addr: MadAddr,
        /// The message bytes.
        mad: Vec<u8>,
    },
    /// Every attempt of a request expired, or an RMPP sender ran out of ACK
    /// retries: the `umad_status(3)` ETIMEDOUT completion.
    SendTimedOut {
        /// The agent that sent it.
        agent: AgentId,
        /// The original destination.
        addr: MadAddr,
        /// The first 24 bytes of the request as sent (TID with the agent's high word).
        header: [u8; 24],
    },
}

/// The MAD engine of one port (both its QP0 and QP1 sides).
#[derive(Debug)]
pub struct Engine {
    config: EngineConfig,
    agents: agent::AgentTable,
    /// Outstanding requests and RMPP sends.
    txns: txn::TxnTable,
    timers: timers::Timers,
    tx_queue: VecDeque<txn::Out>,
    events: VecDeque<Event>,
    /// Delivered requests awaiting their response.
    dedup: dedup::DuplicateFilter,
    /// RMPP send sessions (their senders live in `txns`).
    rmpp_sends: rmpp::send_sessions::RmppSends,
    /// RMPP receive sessions.
    recv: rmpp::recv_sessions::RecvSessions,
    stats: EngineStats,
    last_rmpp_abort: Option<RmppAbort>,
    /// MAD buffers of finished sends, reused so that the send path does not allocate.
    /// Boxes on purpose: they move in and out of requests and the transmit queue.
    #[allow(clippy::vec_box)]
    mad_pool: Vec<Box<[u8; MAD_SIZE]>>,
}

/// Spare MAD buffers kept (64 KiB): enough for any burst a port thread moves per turn.
const MAD_POOL: usize = 256;

impl Engine {
    /// A new engine.
    pub fn new(config: EngineConfig) -> Engine {
        let mut rng = config::SplitMix::new(config.rng_seed.unwrap_or(0));
        let agents = agent::AgentTable::new(&mut rng);
        let keys = hash::SipKeys::draw(&mut rng);
        let dedup =
            dedup::DuplicateFilter::new(config.duplicate_request_window, config.max_events, keys);
        let recv = rmpp::recv_sessions::RecvSessions::new(&config, keys);
        Engine {
            agents,
            txns: txn::TxnTable::new(config.max_outstanding_per_agent),
            config,
            timers: timers::Timers::default(),
            tx_queue: VecDeque::new(),
            events: VecDeque::new(),
            dedup,
            rmpp_sends: rmpp::send_sessions::RmppSends::default(),
            recv,
            stats: EngineStats::default(),
            last_rmpp_abort: None,
            mad_pool: Vec::new(),
        }
    }

    /// The configuration this engine runs with.
    pub fn config(&self) -> &EngineConfig {
        &self.config
    }

    /// Register an agent. Its id is the lowest free slot (0..32).
    ///
    /// # Errors
    ///
    /// As the kernel's `ib_register_mad_agent`: [`crate::Error::InvalidArgument`]
    /// (EINVAL) for an RMPP version other than 0/1, a class version of 0x83 or
    /// more, class 0 or out of range, a vendor range 2 class without OUI, RMPP
    /// on a class without RMPP, or a class on the wrong QP;
    /// [`crate::Error::MethodInUse`] (EINVAL) when another agent already serves
    /// one of the methods for the same class, version (and OUI);
    /// [`crate::Error::LimitReached`] (ENOMEM) when 32 agents are registered.
    pub fn register(&mut self, spec: AgentSpec) -> Result<AgentId> {
        self.agents.register(spec)
    }

    /// The TID high word the engine stamps on `agent`'s requests (24 bits).
    pub fn hi_tid(&self, agent: AgentId) -> Option<u32> {
        self.agents.get(agent).map(|a| a.hi_tid)
    }

    /// Unregister an agent; its outstanding sends are dropped silently.
    ///
    /// # Errors
    ///
    /// [`crate::Error::UnknownAgent`] (EINVAL) if `agent` is not registered.
    pub fn unregister(&mut self, agent: AgentId) -> Result<()> {
        self.agents.unregister(agent)?;
        self.purge_agent(agent);
        Ok(())
    }

    /// Queue a MAD for sending.
    ///
    /// Requests (no R bit) get the agent's TID high word; responses keep the
    /// caller's TID. Non-RMPP MADs shorter than 256 bytes are zero-padded.
    ///
    /// # Errors
    ///
    /// [`crate::Error::UnknownAgent`] (EINVAL) for an unregistered agent;
    /// [`crate::Error::InvalidArgument`] (EINVAL) for a MAD shorter than 36
    /// bytes or a directed-route SMP an end node cannot send;
    /// [`crate::Error::MessageTooLarge`] (EMSGSIZE) for more than 256 bytes
    /// without RMPP, or more than the RMPP limit;
    /// [`crate::Error::DuplicateRequest`] (EINVAL) when a request with the
    /// same TID and class is still outstanding.
    pub fn send(&mut self, now: Instant, agent: AgentId, req: SendRequest<'_>) -> Result<()> {
        vmad_trace!(
            agent = agent.0,
            tid = format_args!(
                "{:#018x}",
                crate::wire::mad::Packet::new_checked(req.mad).map_or(0, |h| h.tid())
            ),
            class = format_args!(
                "{:#04x}",
                crate::wire::mad::Packet::new_checked(req.mad)
                    .map_or(0, |h| u8::from(h.mgmt_class()))
            ),
            method = format_args!(
                "{:#04x}",
                crate::wire::mad::Packet::new_checked(req.mad).map_or(0, |h| u8::from(h.method()))
            ),
            attr = format_args!(
                "{:#06x}",
                crate::wire::mad::Packet::new_checked(req.mad).map_or(0, |h| h.attr_id())
            ),
            len = req.mad.len(),
            timeout_ms = req.timeout_ms,
            retries = req.retries,
            "send"
        );
        vmad_observe!(self, "send", self.send_inner(now, agent, req))
    }

    /// A MAD arrived. Anything invalid or unclaimed is dropped and counted in [`Engine::stats`].
    pub fn handle_datagram(&mut self, now: Instant, meta: RecvMeta, mad: &[u8]) {
        vmad_trace!(qp = ?meta.qp, src_lid = meta.src.lid, src_qpn = meta.src.qpn, mad = %crate::wire::pretty(mad), "recv");
        vmad_observe!(self, "recv", self.datagram(now, meta, mad));
    }

    /// Time passed; fire expired timers.
    pub fn handle_timeout(&mut self, now: Instant) {
        vmad_observe!(self, "timeout", {
            while let Some(key) = self.timers.pop_due(now) {
                match key {
                    TimerKey::Txn(id) => self.txn_expired(now, id),
                    TimerKey::Recv(id) => {
                        if let Some(outcome) = self.recv.timeout(&mut self.timers, now, id) {
                            self.recv_outcome(now, outcome);
                        }
                    }
                    TimerKey::Dedup(id) => self.dedup.expire(id),
                }
            }
        })
    }

    /// The transport reports that a MAD it was handed never reached its
    /// destination (ibsim's status-110 echo: no route, link down, injected
    /// loss). `header` is that MAD's first 24 bytes, TID as the engine sent it.
    ///
    /// If it is an outstanding request's current attempt, that attempt ends
    /// now, as if its timer had fired: the next retry is queued, or, with no
    /// retries left, the send completes with [`Event::SendTimedOut`]. Reports
    /// of responses, of unknown or finished requests, or of malformed headers
    /// are ignored (counted in [`EngineStats::undelivered_ignored`]).
    pub fn handle_undelivered(&mut self, now: Instant, header: &[u8]) {
        vmad_observe!(self, "undelivered", {
            if !self.undelivered(now, header) {
                self.stats.undelivered_ignored += 1;
            }
        })
    }

    /// Write the next MAD to send into `out`.
    pub fn poll_transmit(&mut self, now: Instant, out: &mut [u8; MAD_SIZE]) -> Option<Transmit> {
        let tx = vmad_observe!(self, "transmit", self.transmit(now, out));
        vmad_trace!(tx = ?tx, "transmit");
        tx
    }

    /// The earliest deadline, if any.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.timers.next_deadline()
    }

    /// The next event, removed from the queue.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// The next event, left in the queue (for ENOSPC: the message stays queued).
    pub fn peek_event(&self) -> Option<&Event> {
        self.events.front()
    }

    /// The application side could not keep `event`, taken with [`Engine::poll_event`]
    /// (its receive queue was full): count it as a queue drop instead of a delivery,
    /// and forget a request for the duplicate filter, so that its retry is delivered.
    /// For a driver that queues events per receiver (the port does, per open).
    pub fn undeliver(&mut self, event: &Event) {
        if let Event::Recv { .. } = event {
            self.stats.delivered = self.stats.delivered.saturating_sub(1);
            self.stats.queue_drops += 1;
            self.forget_request(event);
        }
    }

    /// The application took `event`, polled with [`Engine::poll_event`]: if it is a
    /// request, the duplicate filter forgets it, so that the requester's retry is
    /// delivered, as the kernel delivers every copy. The filter drops a retry only
    /// while the first copy still waits in a queue: once the application has read a
    /// request, nothing says it will answer (OpenSM's SA reads and ignores the queries
    /// that come during its first sweep), and a retry that came seconds later must not
    /// share the first copy's fate. For a driver that queues events per receiver (the
    /// port does, per open) and hands them to the application later; a driver that
    /// hands each polled event straight over calls it at once.
    pub fn taken(&mut self, event: &Event) {
        self.forget_request(event);
    }

    fn forget_request(&mut self, event: &Event) {
        let Event::Recv { addr, mad, .. } = event else {
            return;
        };
        if self.dedup.is_empty() {
            return;
        }
        if let Ok(m) = crate::wire::mad::Packet::new_checked(&mad[..]) {
            if !m.is_response() {
                self.dedup
                    .forget(&mut self.timers, addr, m.tid(), u8::from(m.mgmt_class()));
            }
        }
    }

    /// Events waiting in the queue.
    pub fn pending_events(&self) -> usize {
        self.events.len()
    }

    /// The engine's counters.
    pub fn stats(&self) -> EngineStats {
        self.stats
    }

    /// The most recent RMPP transfer that ended in ABORT or STOP, if any (they are
    /// counted in [`EngineStats::rmpp_aborts`], never queued as events).
    pub fn last_rmpp_abort(&self) -> Option<RmppAbort> {
        self.last_rmpp_abort
    }

    /// RMPP sends and receives in progress (for the tracing probe).
    #[cfg(feature = "tracing")]
    pub(crate) fn rmpp_session_counts(&self) -> (usize, usize) {
        (self.rmpp_sends.len(), self.recv.len())
    }

    /// The `i`th queued event (for the tracing probe).
    #[cfg(feature = "tracing")]
    pub(crate) fn event_at(&self, i: usize) -> Option<&Event> {
        self.events.get(i)
    }

    /// Queue an event, dropping received data when full, as the kernel (never timeout
    /// reports, nor responses to outstanding requests: see `deliver_answer`).
    fn push_event(&mut self, event: Event) -> bool {
        let always = matches!(event, Event::SendTimedOut { .. });
        if !always && self.events.len() >= self.config.max_events {
            self.stats.queue_drops += 1;
            return false;
        }
        if matches!(event, Event::Recv { .. }) {
            self.stats.delivered += 1;
        }
        self.events.push_back(event);
        true
    }

    /// A MAD buffer holding `bytes`, zero-padded: a spare one when there is one.
    fn mad_buf(&mut self, bytes: &[u8]) -> Box<[u8; MAD_SIZE]> {
        let n = bytes.len().min(MAD_SIZE);
        let mut buf = self
            .mad_pool
            .pop()
            .unwrap_or_else(|| Box::new([0u8; MAD_SIZE]));
        buf[..n].copy_from_slice(&bytes[..n]);
        buf[n..].fill(0);
        buf
    }

    fn recycle(&mut self, buf: Box<[u8; MAD_SIZE]>) {
        if self.mad_pool.len() < MAD_POOL {
            self.mad_pool.push(buf);
        }
    }
}
