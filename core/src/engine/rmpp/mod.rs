//! RMPP (IBA 13.6): the sender and receiver state machines (`sender`,
//! `receiver`), and the engine's session tables around them
//! (`send_sessions`, `recv_sessions`).
//!
//! CONTRACT between the engine core (`engine/mod.rs` and friends, which owns
//! addressing, agents and delivery) and the state machines (which own
//! segmentation, windows, ACK/STOP/ABORT and per-session timers). The state
//! machines are pure: no addresses, no agents, no clock reads. The session
//! tables find a machine for a MAD (keyed as the kernel keys sessions) and
//! return what the engine must do; they never call into the engine.
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
//!
//! # Progress, as the engine reads it
//!
//! - Sender: `Complete` once the last segment is ACKed (the engine then
//!   waits for the response with the user's timeout, or completes the send);
//!   `Failed { TooManyRetries, notify_peer: false }` when the ACK retries of a
//!   window ran out (the kernel reports ETIMEDOUT and sends no ABORT). After
//!   the end every input is ignored and the final progress is repeated (with
//!   `notify_peer` false once the ABORT has been polled).
//! - Receiver: `Complete` from `new`/`handle_data` the moment the message is
//!   whole (take it with `take_message`, which yields it once); the session
//!   then lingers (`is_lingering`), re-ACKing retransmits and answering
//!   `Complete` to them, until `handle_timeout` past `deadline` returns
//!   `Complete` again: drop it then. `Failed { notify_peer: false }` from
//!   `Receiver::new` means the MAD starts no session (a stray middle segment,
//!   as the kernel drops it silently) or is not a DATA segment: drop it.
//! - Dual-sided RMPP: a requester whose last segment is ACKed and which
//!   expects a response answers with `format_ds_ack` (kernel `ack_ds_ack`);
//!   the responder's completed receive session takes that ACK (segment 0)
//!   through `Receiver::handle_rmpp` and offers its window as
//!   `Receiver::reply_window` (1 unless such an ACK said otherwise), which is
//!   the `window_last` for the response's `Sender` (kernel `init_newwin`).

pub(crate) mod receiver;
pub(crate) mod recv_sessions;
pub(crate) mod send_sessions;
pub(crate) mod sender;

use alloc::vec::Vec;
use core::time::Duration;

use crate::wire::mad::{Method, METHOD_RESP};
use crate::wire::rmpp::{self, Packet, RmppStatus, RmppType};
use crate::wire::MAD_SIZE;

/// RMPP tunables. Defaults match the Linux kernel's RMPP.
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
    /// Largest message (headers + data) accepted or sent, in bytes (default
    /// 16 MiB). The kernel has no such limit: a larger message is refused
    /// with EMSGSIZE when sent and aborted (BadLength, or STOP when its length
    /// was not announced) when received; see the engine's departures.
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

/// Whether `mad` is an RMPP MAD with RMPPFlags.Active set (the class has RMPP).
#[inline]
pub(crate) fn is_rmpp_active(mad: &[u8]) -> bool {
    crate::wire::mad::Packet::new_unchecked(mad)
        .mgmt_class()
        .is_rmpp_class()
        && rmpp::Packet::new_unchecked(mad).is_active()
}

/// Whether an incoming `mad` belongs to an RMPP transfer: Active, and an
/// RMPPVersion some RMPP sender wrote. Active with version 0 is a header left
/// for a kernel to fill in (OpenSM sets only the flag on a GetTableResp and
/// lets the kernel's RMPP write version, type and segments): seen raw where no
/// kernel segments it (umad2sim), it is a whole MAD, taken as an ordinary one.
/// The kernel answers ABORT UnsupportedVersion and drops it; see the engine's
/// departures.
#[inline]
pub(crate) fn is_rmpp_transfer(mad: &[u8]) -> bool {
    is_rmpp_active(mad) && rmpp::Packet::new_unchecked(mad).rmpp_version() != 0
}

/// Lowest RMPPStatus an ABORT may carry (T2L).
const ABORT_MIN: u8 = 118;
/// Highest RMPPStatus an ABORT may carry (unspecified).
const ABORT_MAX: u8 = 127;

/// Whether `status` is one an ABORT may carry (kernel `process_rmpp_abort`).
pub(crate) fn is_abort_status(status: RmppStatus) -> bool {
    (ABORT_MIN..=ABORT_MAX).contains(&u8::from(status))
}

/// Data bytes a segment carries after the `hdr_len` header bytes.
fn data_per_segment(hdr_len: usize) -> usize {
    MAD_SIZE - hdr_len
}

/// Write into `out` a reply to `src` in the kernel's `format_ack` /
/// `nack_recv` shape: `src`'s first `hdr_len` bytes (missing bytes as zero),
/// the method's response bit flipped, RMPP version 1, `rmpp_type`, flags
/// Active alone (RRespTime kept), `status`, `seg_num`, `newwin`; the rest zero.
fn format_reply(
    src: &[u8],
    hdr_len: usize,
    out: &mut [u8; MAD_SIZE],
    rmpp_type: RmppType,
    status: RmppStatus,
    seg_num: u32,
    newwin: u32,
) {
    out.fill(0);
    let n = hdr_len.min(src.len()).min(MAD_SIZE);
    out[..n].copy_from_slice(&src[..n]);
    let mut hdr = crate::wire::mad::Packet::new_unchecked(&mut out[..]);
    hdr.set_method(Method::from(u8::from(hdr.method()) ^ METHOD_RESP));
    let mut p = Packet::new_unchecked(&mut out[..]);
    let resp_time = p.resp_time();
    p.set_rmpp_version(rmpp::VERSION);
    p.set_rmpp_type(rmpp_type);
    p.set_resp_time_flags(resp_time, rmpp::FLAG_ACTIVE);
    p.set_rmpp_status(status);
    p.set_seg_num(seg_num);
    p.set_paylen_newwin(newwin);
}

/// Write into `out` the dual-sided RMPP ACK a requester sends when `ack`
/// (the receiver's final ACK of its request) arrives and a response is
/// expected (kernel `ack_ds_ack`): `ack`'s first `hdr_len` bytes, method
/// flipped back, type ACK, segment 0, NewWindowLast 1.
pub(crate) fn format_ds_ack(ack: &[u8], hdr_len: usize, out: &mut [u8; MAD_SIZE]) {
    format_reply(ack, hdr_len, out, RmppType::Ack, RmppStatus::Success, 0, 1);
}

/// Segment `message` (`hdr_len` header bytes, then data) with a sender and
/// reassemble it with a receiver joined back to back over a perfect link,
/// with the default [`RmppConfig`]; returns what the receiver delivers.
///
/// For benchmarks and smoke tests of the state machines; not a stable API.
///
/// # Errors
///
/// What `Sender::new` refuses: `InvalidArgument` (EINVAL) for a bad
/// `hdr_len` or a message shorter than it, `MessageTooLarge` (EMSGSIZE);
/// `InvalidArgument` if the transfer does not complete.
#[doc(hidden)]
pub fn loopback(message: Vec<u8>, hdr_len: usize) -> crate::Result<Vec<u8>> {
    let cfg = RmppConfig::default();
    let now = crate::time::Instant::ZERO;
    let mut tx = sender::Sender::new(now, message, hdr_len, 1, cfg.ack_timeout, 0, &cfg)?;
    let mut rx: Option<receiver::Receiver> = None;
    let mut delivered = None;
    let (mut seg, mut ack) = ([0u8; MAD_SIZE], [0u8; MAD_SIZE]);
    let stalled = crate::Error::InvalidArgument("RMPP loopback did not complete");
    while tx.poll_transmit(now, &mut seg) {
        let progress = match rx.as_mut() {
            Some(r) => r.handle_data(now, &seg),
            None => {
                let (r, p) = receiver::Receiver::new(now, &seg, &cfg);
                rx = Some(r);
                p
            }
        };
        let r = rx
            .as_mut()
            .ok_or(crate::Error::InvalidArgument("no receiver"))?;
        match progress {
            Progress::Pending => {}
            Progress::Complete => delivered = delivered.or_else(|| r.take_message()),
            Progress::Failed { .. } => return Err(stalled),
        }
        while r.poll_transmit(now, &mut ack) {
            match tx.handle_rmpp(now, &ack) {
                Progress::Pending => {}
                Progress::Complete => return delivered.ok_or(stalled),
                Progress::Failed { .. } => return Err(stalled),
            }
        }
    }
    Err(stalled)
}

#[cfg(test)]
mod tests;
