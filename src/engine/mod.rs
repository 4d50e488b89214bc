//! The sans-IO MAD engine: agents, transactions, timeouts, retries and RMPP.
//!
//! SKELETON: the public shape below is the contract the port and transports
//! code against. The engine helper fills in the bodies (and may add, not
//! change, public items without telling the team).
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

pub mod rmpp;

use crate::time::Instant;
use crate::types::{MadAddr, Qp};
use crate::wire::MAD_SIZE;
use crate::Result;

/// An agent's id on its port (0..32), what `umad_register` returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct AgentId(pub u32);

/// What an agent registers for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AgentSpec {
    /// The QP: SMI for classes 0x01/0x81, GSI otherwise.
    pub qp: Qp,
    /// Management class.
    pub mgmt_class: u8,
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
    /// Every attempt of a request expired: the `umad_status(3)` ETIMEDOUT completion.
    SendTimedOut {
        /// The agent that sent it.
        agent: AgentId,
        /// The original destination.
        addr: MadAddr,
        /// The first 24 bytes of the request as sent (TID with the agent's high word).
        header: [u8; 24],
    },
    /// An RMPP transfer of `agent` ended in ABORT or STOP (sent or received).
    /// The kernel reports this to nobody; vmad reports it here, and the umad
    /// layer counts it (and surfaces it only when asked to).
    RmppAborted {
        /// The agent whose transfer it was.
        agent: AgentId,
        /// The transfer's TID.
        tid: u64,
        /// The RMPP status of the ABORT/STOP.
        status: crate::wire::rmpp::RmppStatus,
        /// True if this side was sending, false if receiving.
        sending: bool,
    },
}

/// Engine configuration. Defaults match the Linux kernel's MAD layer.
#[derive(Debug, Clone, Default)]
pub struct EngineConfig {
    /// Seed for the engine's randomness (TID high-word start).
    pub rng_seed: u64,
}

/// The MAD engine of one port (both its QP0 and QP1 sides).
#[derive(Debug)]
pub struct Engine {
    _config: EngineConfig,
}

impl Engine {
    /// A new engine.
    pub fn new(config: EngineConfig) -> Engine {
        Engine { _config: config }
    }

    /// Register an agent.
    pub fn register(&mut self, _spec: AgentSpec) -> Result<AgentId> {
        todo!("engine helper")
    }

    /// Unregister an agent; its outstanding sends are dropped silently.
    pub fn unregister(&mut self, _agent: AgentId) -> Result<()> {
        todo!("engine helper")
    }

    /// Queue a MAD for sending.
    pub fn send(&mut self, _now: Instant, _agent: AgentId, _req: SendRequest<'_>) -> Result<()> {
        todo!("engine helper")
    }

    /// A MAD arrived.
    pub fn handle_datagram(&mut self, _now: Instant, _meta: RecvMeta, _mad: &[u8]) {
        todo!("engine helper")
    }

    /// Time passed; fire expired timers.
    pub fn handle_timeout(&mut self, _now: Instant) {
        todo!("engine helper")
    }

    /// Write the next MAD to send into `out`.
    pub fn poll_transmit(&mut self, _now: Instant, _out: &mut [u8; MAD_SIZE]) -> Option<Transmit> {
        todo!("engine helper")
    }

    /// The earliest deadline, if any.
    pub fn poll_timeout(&self) -> Option<Instant> {
        todo!("engine helper")
    }

    /// The next event, removed from the queue.
    pub fn poll_event(&mut self) -> Option<Event> {
        todo!("engine helper")
    }

    /// The next event, left in the queue (for ENOSPC: the message stays queued).
    pub fn peek_event(&self) -> Option<&Event> {
        todo!("engine helper")
    }
}
