//! The in-process link layer: [`SimTransport`], one open CA port of a fabric that
//! lives in the process, and the frames it exchanges with that fabric.
//!
//! A [`SimTransport`] sends by handing a frame (`Pkt`, with the LRH/BTH/DETH values a
//! receiver would see) to the `Medium` behind the port; the medium delivers frames
//! for the port to its mailbox (one per open port), inline and possibly
//! held back until a due time on the fabric's clock. The port holds at most
//! [`RECV_QUEUE_DEPTH`] frames its owner has not received: beyond that the fabric
//! drops them and counts them, as an HCA whose receive queue is empty does. Nothing here knows what carries
//! the frames between ports: the managed subnet of [`crate::subnet`] (its graph of
//! nodes and links, its SM, SA, SMAs and PMAs) is the medium, and builds on this
//! module, never the reverse.
//!
//! A [`SimTransport`] comes from [`crate::subnet::Fabric::open`], or through the
//! registry (`umad::open_port`) for a fabric registered under its CAs' names.

mod endpoint;
mod packet;

use std::sync::Arc;

pub(crate) use endpoint::RecvQueue;
pub use endpoint::{SimTransport, RECV_QUEUE_DEPTH};
pub use packet::RawFrame;
pub(crate) use packet::{Pkt, PERMISSIVE};

use crate::clock::Clock;
use crate::engine::AgentSpec;
use crate::transport::PortAttrs;
use crate::Result;

/// What a [`Medium`] remembers for one sending port between its frames.
pub(crate) type SendMemo = Box<dyn core::any::Any + Send>;

/// What an open port sees of the fabric behind it: every call names the port by its
/// node index and port number, as the medium numbered them when it opened the port.
pub(crate) trait Medium: Send + Sync + core::fmt::Debug {
    /// Make `queue` the receive queue frames for this port go to.
    ///
    /// # Errors
    /// EADDRINUSE ([`crate::Error::AddressInUse`]) if the port is already open.
    fn attach(&self, node: usize, port: u8, queue: RecvQueue) -> Result<()>;

    /// The port was closed: frames for it are lost from now on, and whatever its
    /// owner registered with the fabric is forgotten.
    fn detach(&self, node: usize, port: u8);

    /// The port's attributes as the fabric holds them now.
    fn port_attrs(&self, node: usize, port: u8) -> PortAttrs;

    /// Put `pkt` on the fabric from this port (the walk may change it: it is the
    /// frame as the last hop saw it when this returns). `memo` is the medium's, kept
    /// by the port between its frames (read without a lock: one thread sends at a
    /// time); the port only holds it.
    fn send(&self, node: usize, port: u8, pkt: &mut Pkt, memo: &mut Option<SendMemo>);

    /// The fabric's time: when held-back frames become due.
    fn clock(&self) -> &Arc<dyn Clock>;

    /// The port's owner registered an engine agent (see
    /// [`crate::transport::Transport::register_agent`]).
    fn register_agent(&self, node: usize, port: u8, spec: &AgentSpec, hi_tid: u32);

    /// The agent with `hi_tid` was unregistered.
    fn unregister_agent(&self, node: usize, port: u8, hi_tid: u32);

    /// The port's owner takes (`on`) or gives up the SM role (see
    /// [`crate::transport::Transport::set_sm`]).
    ///
    /// # Errors
    /// What the fabric refuses.
    fn set_sm(&self, node: usize, port: u8, on: bool) -> Result<()>;
}
