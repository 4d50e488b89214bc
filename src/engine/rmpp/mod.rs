//! RMPP (IBA 13.6) sender and receiver state machines.
//!
//! CONTRACT between the engine core (`engine/mod.rs` and friends, which owns
//! session tables, addressing, agents and delivery) and this module (which
//! owns segmentation, windows, ACK/STOP/ABORT and per-session timers).
//! Pure state machines: no addresses, no agents, no clock reads.
//!
//! Terms: a *message* is what the user hands to `send` (or gets from `recv`):
//! `hdr_len` bytes of headers (MAD 24 + RMPP 12 + class header; `hdr_len` =
//! [`crate::wire::mad::MgmtClass::data_offset`]) followed by the data.
//! Each 256-byte *segment* repeats those `hdr_len` header bytes and carries
//! `256 - hdr_len` data bytes. PayloadLength counts 220 bytes a segment
//! (kernel rule: first = segments × 220 − pad, middle 0, last = 220 − pad).
//!
//! Both machines write whole 256-byte MADs (DATA segments, ACK, ABORT, STOP)
//! into a caller slot; the engine core addresses them.

pub(crate) mod recv;
pub(crate) mod send;

use core::time::Duration;

use crate::wire::rmpp::RmppStatus;

/// RMPP tunables. Defaults match the Linux kernel (`mad_rmpp.c`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RmppConfig {
    /// Receive window in segments (kernel: recv queue 512 >> 3 = 64).
    pub window: u32,
    /// Sender's wait for an ACK before resending the window (kernel: 2 s,
    /// or the send timeout when it is shorter and non-zero).
    pub ack_timeout: Duration,
    /// Receiver's limit on a whole transfer before ABORT T2L (kernel: 40 s).
    pub total_timeout: Duration,
    /// How long a completed receive session is kept to re-ACK retransmits (kernel: 10 s).
    pub linger: Duration,
    /// Largest message (headers + data) accepted or sent, in bytes.
    pub max_message: usize,
}

impl Default for RmppConfig {
    fn default() -> Self {
        RmppConfig {
            window: 64,
            ack_timeout: Duration::from_secs(2),
            total_timeout: Duration::from_secs(40),
            linger: Duration::from_secs(10),
            max_message: 16 << 20,
        }
    }
}

/// How a session stands after an input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Progress {
    /// Still running; poll for MADs to send and re-read the deadline.
    Pending,
    /// Finished successfully (sender: every segment ACKed; receiver: message reassembled,
    /// take it with `recv::Receiver::take_message`).
    Complete,
    /// Finished with an error. `notify_peer`: an ABORT (or STOP) MAD with this status
    /// is waiting in `poll_transmit`.
    Failed {
        /// The RMPP status (sent to the peer, or received from it).
        status: RmppStatus,
        /// Whether this side still has an ABORT/STOP to send.
        notify_peer: bool,
    },
}
