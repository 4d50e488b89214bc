//! A request of any class as the client sends it, and its answer.

use crate::types::MadAddr;
use crate::wire::{mad, smp};

/// A request of any class, for [`super::Client::submit`]: the typed calls build these.
#[derive(Debug, Clone)]
pub struct Request {
    /// Management class (selects the agent; SMP classes go to QP0).
    pub class: u8,
    /// Class version.
    pub version: u8,
    /// Whether the class uses RMPP (the answer may be a reassembled multi-MAD message).
    pub rmpp: bool,
    /// Vendor OUI for vendor range 2 classes, else 0.
    pub oui: u32,
    /// Destination.
    pub addr: MadAddr,
    /// The MAD (256 bytes, or an RMPP class header and its data). Its TID is the
    /// client's: whatever is there is overwritten.
    pub mad: Vec<u8>,
    /// Per-attempt wait, ms; `None`: the client's.
    pub timeout_ms: Option<u32>,
    /// Resends; `None`: the client's.
    pub retries: Option<u32>,
}

/// An answer: who sent it, and the whole message (for RMPP classes, every segment's data).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    /// The source.
    pub addr: MadAddr,
    /// The message bytes.
    pub mad: Vec<u8>,
}

impl Response {
    /// The MAD status (without a directed-route SMP's D bit).
    pub fn status(&self) -> mad::MadStatus {
        let st =
            mad::Packet::new_checked(&self.mad[..]).map_or(mad::MadStatus(0xffff), |p| p.status());
        if self.mad.get(1) == Some(&mad::MgmtClass::SubnDirectedRoute.raw()) {
            mad::MadStatus(st.0 & !smp::DIRECTION_BIT)
        } else {
            st
        }
    }
}
