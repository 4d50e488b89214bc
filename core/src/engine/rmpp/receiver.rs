//! RMPP receiver (as the kernel's RMPP: `start_rmpp`, `continue_rmpp`,
//! `complete_rmpp`, `get_mad_len`, the 40 s timeout and 10 s cleanup work).
//!
//! Segments are coalesced as they arrive in order: the first one whole, then
//! the data of each later one. Segments ahead of the next expected one but
//! inside the window wait in a small map (the kernel keeps them too), so
//! reordering costs no retransmission.
//!
//! Memory stays bounded by `cfg.max_message`: a first segment claiming more
//! is answered with ABORT BadLength, and a transfer of unannounced length
//! that outgrows it with STOP ResourcesExhausted.

use alloc::boxed::Box;
use alloc::collections::BTreeMap;
use alloc::vec;
use alloc::vec::Vec;

use super::{data_per_segment, format_reply, is_abort_status, Progress, RmppConfig};
use crate::time::Instant;
use crate::wire::mad::MgmtClass;
use crate::wire::rmpp::{self, Packet, RmppStatus, RmppType};
use crate::wire::MAD_SIZE;

/// Counters of one receive session (for tests and diagnostics).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct RecvStats {
    /// Segments taken into the message (in order, or held and then used).
    pub(crate) accepted: u64,
    /// Segments that arrived ahead of order inside the window and were held.
    pub(crate) held: u64,
    /// Copies of segments received already and not yet ACKed: dropped.
    pub(crate) duplicates: u64,
    /// Segments already ACKed (or arriving after completion): answered with an ACK.
    pub(crate) reacked: u64,
    /// Segments beyond the advertised window: dropped silently.
    pub(crate) out_of_window: u64,
}

/// Where the session stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Receiving; ABORT T2L at the deadline.
    Active { deadline: Instant },
    /// Whole; kept until `until` to re-ACK retransmits.
    Lingering { until: Instant },
    /// Ended by an ABORT/STOP (sent or received), or no session at all.
    Failed(RmppStatus),
}

/// A segment held until the ones before it arrive.
#[derive(Debug)]
struct Held {
    data: Box<[u8]>,
    last: bool,
    paylen: u32,
}

/// One incoming RMPP transfer.
#[derive(Debug)]
pub(crate) struct Receiver {
    hdr_len: usize,
    per_seg: usize,
    window: u32,
    linger: core::time::Duration,
    max_message: usize,
    /// The first segment's header bytes: the source of T2L ABORTs and final ACKs.
    first_hdr: Box<[u8]>,
    /// The message so far: the first segment whole, then each later segment's data.
    message: Vec<u8>,
    /// Segments the first PayloadLength announces (0: not announced).
    announced_segs: u32,
    /// The last segment's PayloadLength the first one implies.
    announced_last_paylen: u32,
    /// Last segment received in order.
    seg_num: u32,
    /// Last segment ACKed.
    last_ack: u32,
    /// Advertised window end (NewWindowLast).
    newwin: u32,
    /// The window a dual-sided ACK gave for our response (kernel `repwin`).
    repwin: u32,
    held: BTreeMap<u32, Held>,
    state: State,
    taken: bool,
    /// The ACK, ABORT or STOP to send next.
    reply: Option<Box<[u8; MAD_SIZE]>>,
    stats: RecvStats,
}

impl Receiver {
    /// A session started by `first`, which should be DATA segment 1 with
    /// the First flag; otherwise the session is born failed (see the module
    /// docs of `rmpp` for which failures owe the peer an ABORT).
    pub(crate) fn new(now: Instant, first: &[u8], cfg: &RmppConfig) -> (Receiver, Progress) {
        let hdr_len = first.get(1).map_or(rmpp::END, |&c| {
            MgmtClass::from(c).data_offset().max(rmpp::END)
        });
        let mut rx = Receiver {
            hdr_len,
            per_seg: data_per_segment(hdr_len),
            window: cfg.window.max(1),
            linger: cfg.linger,
            max_message: cfg.max_message,
            first_hdr: pad_to(first, hdr_len).into(),
            message: Vec::new(),
            announced_segs: 0,
            announced_last_paylen: 0,
            seg_num: 0,
            last_ack: 0,
            newwin: 1,
            repwin: 1,
            held: BTreeMap::new(),
            state: State::Active {
                deadline: now + cfg.total_timeout,
            },
            taken: false,
            reply: None,
            stats: RecvStats::default(),
        };
        let Ok(p) = Packet::new_checked(first) else {
            let progress = rx.fail_silently(RmppStatus::BadLength);
            return (rx, progress);
        };
        if matches!(
            p.rmpp_type(),
            RmppType::Ack | RmppType::Stop | RmppType::Abort
        ) {
            let progress = rx.fail_silently(RmppStatus::BadType);
            return (rx, progress);
        }
        if let Some(status) = check_data(&p) {
            let progress = rx.fail(first, status, RmppType::Abort);
            return (rx, progress);
        }
        if p.seg_num() != 1 {
            // A middle segment of a session we do not have: the kernel drops it.
            let progress = rx.fail_silently(RmppStatus::BadSegment);
            return (rx, progress);
        }
        let paylen = p.paylen_newwin();
        if !p.is_last() && paylen != 0 {
            match rx.announce(paylen) {
                Some((segs, last)) if segs >= 2 => {
                    rx.announced_segs = segs;
                    rx.announced_last_paylen = last;
                }
                _ => {
                    let progress = rx.fail(first, RmppStatus::BadLength, RmppType::Abort);
                    return (rx, progress);
                }
            }
        }
        let claimed = rx.announced_segs as usize * rx.per_seg + hdr_len;
        // What a first segment claims is only reserved up to 64 KiB: a hostile
        // peer's claim must not cost memory it never sends.
        rx.message.reserve(claimed.clamp(MAD_SIZE, 64 << 10));
        rx.message.extend_from_slice(&pad_to(first, MAD_SIZE));
        rx.seg_num = 1;
        rx.stats.accepted = 1;
        let progress = rx.after_in_order(now, first, p.is_last(), paylen);
        (rx, progress)
    }

    /// What a first PayloadLength announces: (segments, last PayloadLength),
    /// or `None` if no message of that size fits `max_message` or the class.
    fn announce(&self, paylen: u32) -> Option<(u32, u32)> {
        let unit = rmpp::SEGMENT_PAYLOAD as u64;
        let segs = (paylen as u64).div_ceil(unit);
        let pad = segs * unit - paylen as u64;
        if pad > self.per_seg as u64 {
            return None;
        }
        let len = self.hdr_len as u64 + segs * self.per_seg as u64 - pad;
        if len > self.max_message as u64 {
            return None;
        }
        Some((u32::try_from(segs).ok()?, (unit - pad) as u32))
    }

    /// Bytes this session holds: the message buffer and the held segments.
    pub(crate) fn buffered(&self) -> usize {
        self.message.capacity() + self.held.values().map(|h| h.data.len()).sum::<usize>()
    }

    /// A DATA segment of this session arrived (kernel `continue_rmpp`).
    pub(crate) fn handle_data(&mut self, now: Instant, mad: &[u8]) -> Progress {
        let Ok(p) = Packet::new_checked(mad) else {
            return self.progress();
        };
        if matches!(
            p.rmpp_type(),
            RmppType::Ack | RmppType::Stop | RmppType::Abort
        ) {
            return self.handle_rmpp(now, mad);
        }
        match self.state {
            State::Failed(_) => return self.progress(),
            State::Lingering { .. } if check_data(&p).is_some() => return self.progress(),
            State::Active { .. } => {
                if let Some(status) = check_data(&p) {
                    return self.fail(mad, status, RmppType::Abort);
                }
            }
            State::Lingering { .. } => {}
        }
        let seg = p.seg_num();
        if seg > self.newwin {
            self.stats.out_of_window += 1;
            return self.progress();
        }
        if seg <= self.last_ack || self.is_lingering() {
            self.stats.reacked += 1;
            self.queue_ack(mad);
            return self.progress();
        }
        if seg <= self.seg_num || self.held.contains_key(&seg) {
            self.stats.duplicates += 1;
            return Progress::Pending;
        }
        let padded;
        let whole = match mad.get(..MAD_SIZE) {
            Some(whole) => whole,
            None => {
                padded = pad_to(mad, MAD_SIZE);
                &padded[..]
            }
        };
        let data = &whole[self.hdr_len..];
        if seg > self.seg_num + 1 {
            self.stats.held += 1;
            let held = Held {
                data: data.into(),
                last: p.is_last(),
                paylen: p.paylen_newwin(),
            };
            self.held.insert(seg, held);
            return Progress::Pending;
        }
        if let Some(progress) = self.accept(mad, data, p.is_last(), p.paylen_newwin()) {
            return progress;
        }
        let mut last = p.is_last();
        let mut paylen = p.paylen_newwin();
        while !last {
            let Some(held) = self.held.remove(&(self.seg_num + 1)) else {
                break;
            };
            if let Some(progress) = self.accept(mad, &held.data, held.last, held.paylen) {
                return progress;
            }
            (last, paylen) = (held.last, held.paylen);
        }
        self.after_in_order(now, mad, last, paylen)
    }

    /// Append segment `seg_num + 1`, or fail if it breaks the announced length or the size limit.
    fn accept(&mut self, mad: &[u8], data: &[u8], last: bool, paylen: u32) -> Option<Progress> {
        let seg = self.seg_num + 1;
        if self.announced_segs != 0
            && (seg > self.announced_segs || (last && seg != self.announced_segs))
        {
            return Some(self.fail(mad, RmppStatus::BadLength, RmppType::Abort));
        }
        // A segment that is not the last one implies a message of at least
        // this much (the last segment's own limit is checked by `last_pad`).
        let least = self.hdr_len + seg as usize * self.per_seg;
        if !last && least > self.max_message {
            return Some(self.fail(mad, RmppStatus::ResourcesExhausted, RmppType::Stop));
        }
        if last && self.last_pad(seg, paylen).is_none() {
            return Some(self.fail(mad, RmppStatus::BadLength, RmppType::Abort));
        }
        self.message.extend_from_slice(data);
        self.seg_num = seg;
        self.stats.accepted += 1;
        None
    }

    /// The pad a last segment `seg` with `paylen` implies, if consistent.
    fn last_pad(&self, seg: u32, paylen: u32) -> Option<usize> {
        if self.announced_segs != 0 && paylen != self.announced_last_paylen {
            return None;
        }
        let pad = rmpp::SEGMENT_PAYLOAD.checked_sub(paylen as usize)?;
        let len = (self.hdr_len + seg as usize * self.per_seg).checked_sub(pad)?;
        (pad <= self.per_seg && len <= self.max_message).then_some(pad)
    }

    /// After the in-order tail advanced to `seg_num`: complete on Last, ACK half-way
    /// through the window (and at its end, where the window is 1).
    fn after_in_order(&mut self, now: Instant, mad: &[u8], last: bool, paylen: u32) -> Progress {
        if last {
            let Some(pad) = self.last_pad(self.seg_num, paylen) else {
                return self.fail(mad, RmppStatus::BadLength, RmppType::Abort);
            };
            self.message.truncate(self.message.len() - pad);
            self.held.clear();
            self.state = State::Lingering {
                until: now + self.linger,
            };
            let first = self.first_hdr.clone();
            self.queue_ack(&first);
            return Progress::Complete;
        }
        // The kernel's receiver ACKs only a window's last segment, so its sender
        // (which sends one segment per completion, up to the window) stops for an ACK
        // round trip each window. An ACK half-way that moves the window on keeps it
        // sending; the first segment's ACK opens the first window.
        let half_way = self.window >= 2 && self.seg_num + self.window / 2 == self.newwin;
        if self.seg_num == self.newwin || half_way {
            self.newwin = self.seg_num.saturating_add(self.window);
            self.queue_ack(mad);
        }
        Progress::Pending
    }

    /// Queue an ACK of the in-order tail in reply to `src` (kernel `format_ack`).
    fn queue_ack(&mut self, src: &[u8]) {
        self.last_ack = self.seg_num;
        let mut out = self.reply.take().unwrap_or_else(|| Box::new([0; MAD_SIZE]));
        format_reply(
            src,
            self.hdr_len,
            &mut out,
            RmppType::Ack,
            RmppStatus::Success,
            self.seg_num,
            self.newwin,
        );
        self.reply = Some(out);
    }

    /// End the session and queue an ABORT or STOP with `status` answering `src`.
    fn fail(&mut self, src: &[u8], status: RmppStatus, kind: RmppType) -> Progress {
        let mut out = self.reply.take().unwrap_or_else(|| Box::new([0; MAD_SIZE]));
        format_reply(src, self.hdr_len, &mut out, kind, status, 0, 0);
        self.reply = Some(out);
        self.end(status)
    }

    /// End the session with `status` and nothing to tell the peer.
    fn fail_silently(&mut self, status: RmppStatus) -> Progress {
        self.reply = None;
        self.end(status)
    }

    fn end(&mut self, status: RmppStatus) -> Progress {
        self.state = State::Failed(status);
        self.held.clear();
        self.message = Vec::new();
        self.progress()
    }

    /// A STOP or ABORT from the sender, or a dual-sided ACK after completion.
    pub(crate) fn handle_rmpp(&mut self, _now: Instant, mad: &[u8]) -> Progress {
        let Ok(p) = Packet::new_checked(mad) else {
            return self.progress();
        };
        match self.state {
            State::Lingering { .. } => {
                if p.rmpp_type() == RmppType::Ack
                    && p.seg_num() == 0
                    && p.rmpp_status() == RmppStatus::Success
                {
                    self.repwin = p.paylen_newwin().max(1);
                }
                Progress::Complete
            }
            State::Failed(_) => self.progress(),
            State::Active { .. } => {
                let status = p.rmpp_status();
                match p.rmpp_type() {
                    RmppType::Abort if is_abort_status(status) => self.fail_silently(status),
                    RmppType::Stop if status == RmppStatus::ResourcesExhausted => {
                        self.fail_silently(status)
                    }
                    RmppType::Abort | RmppType::Stop => {
                        self.fail(mad, RmppStatus::BadStatus, RmppType::Abort)
                    }
                    _ => Progress::Pending,
                }
            }
        }
    }

    /// Write the ACK, ABORT or STOP due into `out`.
    pub(crate) fn poll_transmit(&mut self, _now: Instant, out: &mut [u8; MAD_SIZE]) -> bool {
        match self.reply.take() {
            Some(reply) => {
                *out = *reply;
                true
            }
            None => false,
        }
    }

    /// The ACK, ABORT or STOP due, as its buffer (what `poll_transmit` would
    /// copy out): the engine queues it as it is, and a segment that owes
    /// nothing costs no buffer.
    pub(crate) fn take_reply(&mut self) -> Option<Box<[u8; MAD_SIZE]>> {
        self.reply.take()
    }

    /// Whether an ACK, ABORT or STOP is due.
    pub(crate) fn has_reply(&self) -> bool {
        self.reply.is_some()
    }

    /// The reassembled message (headers of the first segment, then all the
    /// data), once, after `Complete`.
    pub(crate) fn take_message(&mut self) -> Option<Vec<u8>> {
        if self.taken || !self.is_lingering() {
            return None;
        }
        self.taken = true;
        Some(core::mem::take(&mut self.message))
    }

    /// Time passed: past the total-time limit an active session ends with
    /// ABORT T2L; past the linger a completed one is done (`Complete`: drop it).
    pub(crate) fn handle_timeout(&mut self, now: Instant) -> Progress {
        match self.state {
            State::Active { deadline } if now >= deadline => {
                let first = self.first_hdr.clone();
                self.fail(&first, RmppStatus::TotalTimeTooLong, RmppType::Abort)
            }
            State::Lingering { until } if now >= until => Progress::Complete,
            State::Lingering { .. } | State::Active { .. } => Progress::Pending,
            State::Failed(_) => self.progress(),
        }
    }

    /// When `handle_timeout` next has work; `None` once failed.
    pub(crate) fn deadline(&self) -> Option<Instant> {
        match self.state {
            State::Active { deadline } => Some(deadline),
            State::Lingering { until } => Some(until),
            State::Failed(_) => None,
        }
    }

    /// Whether the message is whole and the session only re-ACKs retransmits.
    pub(crate) fn is_lingering(&self) -> bool {
        matches!(self.state, State::Lingering { .. })
    }

    /// The advertised window end (NewWindowLast of the latest ACK).
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) fn window_last(&self) -> u32 {
        self.newwin
    }

    /// The first window of a response to this message (dual-sided RMPP,
    /// kernel `repwin`): 1 unless a dual-sided ACK said otherwise.
    pub(crate) fn reply_window(&self) -> u32 {
        self.repwin
    }

    /// This session's counters.
    pub(crate) fn stats(&self) -> RecvStats {
        self.stats
    }

    fn progress(&self) -> Progress {
        match self.state {
            State::Active { .. } => Progress::Pending,
            State::Lingering { .. } => Progress::Complete,
            State::Failed(status) => Progress::Failed {
                status,
                notify_peer: self.reply.is_some(),
            },
        }
    }
}

/// The kernel's per-DATA checks (`ib_process_rmpp_recv_wc`, `process_rmpp_data`):
/// the ABORT status a bad segment earns, or `None` for a good one.
fn check_data<T: AsRef<[u8]>>(p: &Packet<T>) -> Option<RmppStatus> {
    if p.rmpp_version() != rmpp::VERSION {
        return Some(RmppStatus::UnsupportedVersion);
    }
    if p.rmpp_type() != RmppType::Data {
        return Some(RmppStatus::BadType);
    }
    if p.rmpp_status() != RmppStatus::Success {
        return Some(RmppStatus::BadStatus);
    }
    if (p.seg_num() == 1) != p.is_first() {
        return Some(RmppStatus::BadSegment);
    }
    None
}

/// `mad`'s first `len` bytes, zero-filled if it is shorter.
fn pad_to(mad: &[u8], len: usize) -> Vec<u8> {
    let mut v = vec![0u8; len];
    let n = len.min(mad.len());
    v[..n].copy_from_slice(&mad[..n]);
    v
}

#[cfg(test)]
mod tests;
