//! RMPP sender (as the kernel's RMPP: `send_next_seg`, `process_rmpp_ack`,
//! `abort_send`, `ib_retry_rmpp`).
//!
//! The message is cut into segments lazily: each `poll_transmit` writes the
//! next segment due straight from the message, so a 16 MiB send costs no
//! copy beyond the one into the caller's slot.

use alloc::boxed::Box;
use alloc::vec::Vec;
use core::time::Duration;

use super::{data_per_segment, format_reply, is_abort_status, Progress, RmppConfig};
use crate::time::Instant;
use crate::wire::rmpp::{self, Packet, RmppStatus, RmppType};
use crate::wire::MAD_SIZE;
use crate::{Error, Result};

/// Where the transfer stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Active,
    Complete,
    Failed(RmppStatus),
}

/// One outgoing RMPP transfer.
#[derive(Debug)]
pub(crate) struct Sender {
    message: Vec<u8>,
    hdr_len: usize,
    /// Segments in the transfer (at least 1).
    seg_count: u32,
    /// Unused data bytes of the last segment (kernel `get_pad_size`).
    pad: usize,
    resp_time: u8,
    /// Highest segment the receiver has ACKed.
    last_ack: u32,
    /// Highest segment the receiver allows (NewWindowLast).
    newwin: u32,
    /// Next segment `poll_transmit` writes.
    next: u32,
    retries_left: u32,
    max_retries: u32,
    ack_timeout: Duration,
    deadline: Option<Instant>,
    state: State,
    /// An ABORT waiting to go out (kernel `nack_recv`).
    abort: Option<Box<[u8; MAD_SIZE]>>,
}

impl Sender {
    /// A transfer of `message` (`hdr_len` header bytes, then the data) whose
    /// first window ends at `window_last` (1, or the peer's dual-sided ACK window).
    ///
    /// # Errors
    ///
    /// `InvalidArgument` (EINVAL) if `hdr_len` does not cover the RMPP header
    /// or leaves no room for data, or the message is shorter than `hdr_len`;
    /// `MessageTooLarge` (EMSGSIZE) if it is longer than `cfg.max_message`
    /// or needs more segments than a 32-bit segment number counts.
    pub(crate) fn new(
        now: Instant,
        message: Vec<u8>,
        hdr_len: usize,
        window_last: u32,
        ack_timeout: Duration,
        retries: u32,
        cfg: &RmppConfig,
    ) -> Result<Sender> {
        if !(rmpp::END..MAD_SIZE).contains(&hdr_len) {
            return Err(Error::InvalidArgument("RMPP header length out of range"));
        }
        if message.len() < hdr_len {
            return Err(Error::InvalidArgument(
                "RMPP message shorter than its headers",
            ));
        }
        let too_large = || Error::MessageTooLarge {
            len: message.len(),
            limit: cfg.max_message,
        };
        if message.len() > cfg.max_message {
            return Err(too_large());
        }
        let per_seg = data_per_segment(hdr_len);
        let data_len = message.len() - hdr_len;
        let pad = match data_len % per_seg {
            _ if data_len == 0 => per_seg,
            0 => 0,
            rem => per_seg - rem,
        };
        let seg_count = u32::try_from((data_len + pad) / per_seg).map_err(|_| too_large())?;
        // The first PayloadLength (segments × 220) must fit its 32-bit field.
        u32::try_from(seg_count as u64 * rmpp::SEGMENT_PAYLOAD as u64).map_err(|_| too_large())?;
        let user_time = Packet::new_unchecked(&message[..]).resp_time();
        let resp_time = if user_time == 0 {
            rmpp::RESP_TIME_NONE
        } else {
            user_time
        };
        Ok(Sender {
            message,
            hdr_len,
            seg_count,
            pad,
            resp_time,
            last_ack: 0,
            newwin: window_last.max(1),
            next: 1,
            retries_left: retries,
            max_retries: retries,
            ack_timeout,
            deadline: Some(now + ack_timeout),
            state: State::Active,
            abort: None,
        })
    }

    /// Segments in the transfer.
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) fn seg_count(&self) -> u32 {
        self.seg_count
    }

    /// Highest segment ACKed so far.
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) fn last_ack(&self) -> u32 {
        self.last_ack
    }

    /// Write the next MAD to send into `out`: the pending ABORT, else the
    /// next DATA segment inside the window. Sending arms the ACK timer.
    pub(crate) fn poll_transmit(&mut self, now: Instant, out: &mut [u8; MAD_SIZE]) -> bool {
        if let Some(abort) = self.abort.take() {
            *out = *abort;
            return true;
        }
        if self.state != State::Active || self.next > self.newwin.min(self.seg_count) {
            return false;
        }
        self.write_segment(self.next, out);
        self.next += 1;
        self.deadline = Some(now + self.ack_timeout);
        true
    }

    /// Segment `seg` (1-based) with every RMPP field filled (kernel `send_next_seg`).
    fn write_segment(&self, seg: u32, out: &mut [u8; MAD_SIZE]) {
        let per_seg = data_per_segment(self.hdr_len);
        let start = self.hdr_len + (seg as usize - 1) * per_seg;
        let end = (start + per_seg).min(self.message.len());
        out[..self.hdr_len].copy_from_slice(&self.message[..self.hdr_len]);
        out[self.hdr_len..self.hdr_len + (end - start)].copy_from_slice(&self.message[start..end]);
        out[self.hdr_len + (end - start)..].fill(0);

        let mut flags = rmpp::FLAG_ACTIVE;
        let mut paylen = 0;
        if seg == 1 {
            flags |= rmpp::FLAG_FIRST;
            paylen = self.seg_count * rmpp::SEGMENT_PAYLOAD as u32 - self.pad as u32;
        }
        if seg == self.seg_count {
            flags |= rmpp::FLAG_LAST;
            paylen = (rmpp::SEGMENT_PAYLOAD - self.pad) as u32;
        }
        let mut p = Packet::new_unchecked(&mut out[..]);
        p.set_rmpp_version(rmpp::VERSION);
        p.set_rmpp_type(RmppType::Data);
        p.set_resp_time_flags(self.resp_time, flags);
        p.set_rmpp_status(RmppStatus::Success);
        p.set_seg_num(seg);
        p.set_paylen_newwin(paylen);
    }

    /// An ACK, STOP or ABORT of this transfer arrived (kernel
    /// `ib_process_rmpp_recv_wc` for the sending side).
    pub(crate) fn handle_rmpp(&mut self, _now: Instant, mad: &[u8]) -> Progress {
        if self.state != State::Active {
            return self.progress();
        }
        let Ok(p) = Packet::new_checked(mad) else {
            return Progress::Pending;
        };
        if !p.is_active() {
            return Progress::Pending;
        }
        if p.rmpp_version() != rmpp::VERSION {
            return self.abort(mad, RmppStatus::UnsupportedVersion, true);
        }
        let status = p.rmpp_status();
        match p.rmpp_type() {
            // A DATA segment is for a receive session, not for us.
            RmppType::Data => Progress::Pending,
            RmppType::Ack => self.handle_ack(mad, status, p.seg_num(), p.paylen_newwin()),
            RmppType::Stop if status == RmppStatus::ResourcesExhausted => {
                self.abort(mad, status, false)
            }
            RmppType::Abort if is_abort_status(status) => self.abort(mad, status, false),
            RmppType::Stop | RmppType::Abort => self.abort(mad, RmppStatus::BadStatus, true),
            _ => self.abort(mad, RmppStatus::BadType, true),
        }
    }

    /// Kernel `process_rmpp_ack`.
    fn handle_ack(&mut self, mad: &[u8], status: RmppStatus, seg: u32, newwin: u32) -> Progress {
        if status != RmppStatus::Success {
            return self.abort(mad, RmppStatus::BadStatus, true);
        }
        if newwin < seg {
            return self.abort(mad, RmppStatus::WindowTooSmall, true);
        }
        if seg > self.seg_count || seg > self.newwin {
            return self.abort(mad, RmppStatus::SegmentTooBig, true);
        }
        if newwin < self.newwin || seg < self.last_ack {
            return Progress::Pending; // an old ACK
        }
        if seg > self.last_ack {
            self.last_ack = seg;
            self.retries_left = self.max_retries;
            // Never resend what the receiver already has.
            self.next = self.next.max(seg + 1);
        }
        self.newwin = newwin;
        if self.last_ack == self.seg_count {
            self.state = State::Complete;
            self.deadline = None;
            return Progress::Complete;
        }
        Progress::Pending
    }

    /// End the transfer with `status`; with `notify_peer`, queue an ABORT
    /// answering `mad` (kernel `abort_send` + `nack_recv`).
    fn abort(&mut self, mad: &[u8], status: RmppStatus, notify_peer: bool) -> Progress {
        self.state = State::Failed(status);
        self.deadline = None;
        if notify_peer {
            let mut out = Box::new([0u8; MAD_SIZE]);
            format_reply(mad, self.hdr_len, &mut out, RmppType::Abort, status, 0, 0);
            self.abort = Some(out);
        }
        self.progress()
    }

    /// Time passed. When the ACK timer has expired: resend the window from
    /// the segment after the last ACKed one, or, with no retries left for this
    /// window, fail with TooManyRetries and no ABORT (kernel: ETIMEDOUT).
    pub(crate) fn handle_timeout(&mut self, now: Instant) -> Progress {
        match self.deadline {
            Some(deadline) if self.state == State::Active && now >= deadline => {}
            _ => return self.progress(),
        }
        if self.retries_left == 0 {
            self.state = State::Failed(RmppStatus::TooManyRetries);
            self.deadline = None;
            return self.progress();
        }
        self.retries_left -= 1;
        self.next = self.last_ack + 1;
        self.deadline = Some(now + self.ack_timeout);
        Progress::Pending
    }

    /// When `handle_timeout` next has work; `None` once the transfer ended.
    pub(crate) fn deadline(&self) -> Option<Instant> {
        self.deadline
    }

    fn progress(&self) -> Progress {
        match self.state {
            State::Active => Progress::Pending,
            State::Complete => Progress::Complete,
            State::Failed(status) => Progress::Failed {
                status,
                notify_peer: self.abort.is_some(),
            },
        }
    }
}

#[cfg(test)]
mod tests;
