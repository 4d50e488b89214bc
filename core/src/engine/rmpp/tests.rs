//! Shared test helpers, and the sender <-> receiver loop over a lossy link.

use core::time::Duration;
use std::collections::BTreeMap;

use super::receiver::Receiver;
use super::sender::Sender;
use super::{format_ds_ack, Progress, RmppConfig};
use crate::time::Instant;
use crate::wire::mad::MgmtClass;
use crate::wire::rmpp::{self, Packet, RmppStatus, RmppType};
use crate::wire::MAD_SIZE;

/// SA, vendor range 2, DM, and a header of MAD + RMPP only (hdr_len 36).
pub(super) const SA: u8 = 0x03;
pub(super) const VENDOR: u8 = 0x30;
pub(super) const DM: u8 = 0x06;
/// Performance management: no class header; RMPP segments carry 220 bytes.
pub(super) const NONE: u8 = 0x04;

pub(super) fn at(ms: u64) -> Instant {
    Instant::from_millis(ms)
}

pub(super) fn cfg() -> RmppConfig {
    RmppConfig::default()
}

/// A user message of class `class`: `hdr_len` header bytes (RMPP Active
/// set, as a user sets it) and `data_len` bytes of a position pattern.
pub(super) fn message(class: u8, hdr_len: usize, data_len: usize) -> Vec<u8> {
    let mut m = vec![0u8; hdr_len + data_len];
    m[..24].copy_from_slice(&[
        1, class, 2, 0x92, 0, 0, 0, 0, 0xaa, 0xbb, 0xcc, 0xdd, 1, 2, 3, 4, 0, 0x11, 0, 0, 0, 0, 0,
        0,
    ]);
    m[24] = rmpp::VERSION;
    m[26] = rmpp::FLAG_ACTIVE;
    for (i, b) in m[rmpp::END..hdr_len].iter_mut().enumerate() {
        *b = 0xc0 | (i as u8 & 0x3f);
    }
    for (i, b) in m[hdr_len..].iter_mut().enumerate() {
        *b = (i % 251) as u8;
    }
    m
}

/// The header length a class uses (36 for a class with no class header).
pub(super) fn hdr_of(class: u8) -> usize {
    MgmtClass::from(class).data_offset().max(rmpp::END)
}

pub(super) fn sender(class: u8, data_len: usize, window: u32, retries: u32) -> Sender {
    let hdr = hdr_of(class);
    Sender::new(
        at(0),
        message(class, hdr, data_len),
        hdr,
        window,
        Duration::from_secs(2),
        retries,
        &cfg(),
    )
    .unwrap()
}

/// Every MAD `poll_transmit` gives now.
pub(super) fn drain_sender(tx: &mut Sender, now: Instant) -> Vec<[u8; MAD_SIZE]> {
    let mut v = Vec::new();
    let mut out = [0u8; MAD_SIZE];
    while tx.poll_transmit(now, &mut out) {
        v.push(out);
    }
    v
}

pub(super) fn drain_receiver(rx: &mut Receiver, now: Instant) -> Vec<[u8; MAD_SIZE]> {
    let mut v = Vec::new();
    let mut out = [0u8; MAD_SIZE];
    while rx.poll_transmit(now, &mut out) {
        v.push(out);
    }
    v
}

/// An RMPP MAD of `rmpp_type` answering `src` (method flipped), as a peer writes it.
pub(super) fn reply(src: &[u8], t: RmppType, status: u8, seg: u32, newwin: u32) -> [u8; 256] {
    let mut m = [0u8; MAD_SIZE];
    let hdr = hdr_of(src[1]);
    m[..hdr].copy_from_slice(&src[..hdr]);
    m[3] ^= 0x80;
    let mut p = Packet::new_unchecked(&mut m[..]);
    p.set_rmpp_version(1);
    p.set_rmpp_type(t);
    p.set_resp_time_flags(0, rmpp::FLAG_ACTIVE);
    p.set_rmpp_status(status.into());
    p.set_seg_num(seg);
    p.set_paylen_newwin(newwin);
    m
}

/// (type, status, seg, paylen/newwin) of an RMPP MAD.
pub(super) fn rmpp_of(m: &[u8]) -> (RmppType, RmppStatus, u32, u32) {
    let p = Packet::new_unchecked(m);
    (
        p.rmpp_type(),
        p.rmpp_status(),
        p.seg_num(),
        p.paylen_newwin(),
    )
}

#[test]
fn ds_ack_answers_the_final_ack() {
    let mut tx = sender(SA, 10, 1, 0);
    let seg = drain_sender(&mut tx, at(0))[0];
    let ack = reply(&seg, RmppType::Ack, 0, 1, 1);
    let mut out = [0xffu8; MAD_SIZE];
    format_ds_ack(&ack, hdr_of(SA), &mut out);
    assert_eq!(out[3], 0x92, "method flipped back to the data's");
    assert_eq!(rmpp_of(&out), (RmppType::Ack, RmppStatus::Success, 0, 1));
    assert_eq!(out[26] & 7, rmpp::FLAG_ACTIVE);
    assert!(out[hdr_of(SA)..].iter().all(|&b| b == 0));
}

#[test]
fn loopback_returns_the_message() {
    let msg = message(SA, 56, 1 << 20);
    let got = super::loopback(msg.clone(), 56).unwrap();
    assert_eq!((&got[..24], &got[36..]), (&msg[..24], &msg[36..]));
    assert!(super::loopback(vec![0; 10], 56).is_err());
}

/// A tiny seeded PRNG (xorshift64*): no dependency, reproducible.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    /// True with probability `pct` percent.
    fn chance(&mut self, pct: u64) -> bool {
        self.next() % 100 < pct
    }
}

/// A link that loses, duplicates and reorders (by random delay) MADs.
struct Link {
    rng: Rng,
    loss: u64,
    dup: u64,
    jitter_us: u64,
    /// (arrival, sequence) -> (to receiver?, bytes); the sequence breaks ties.
    queue: BTreeMap<(Instant, u64), (bool, [u8; MAD_SIZE])>,
    seq: u64,
}

impl Link {
    fn send(&mut self, now: Instant, to_rx: bool, mad: [u8; MAD_SIZE]) {
        let copies = 1 + usize::from(self.rng.chance(self.dup));
        for _ in 0..copies {
            if self.rng.chance(self.loss) {
                continue;
            }
            let delay = 100 + self.rng.next() % self.jitter_us.max(1);
            self.seq += 1;
            self.queue
                .insert((now + Duration::from_micros(delay), self.seq), (to_rx, mad));
        }
    }
}

/// Outcome of one transfer.
#[derive(Debug, PartialEq, Eq)]
enum Outcome {
    Delivered,
    SenderFailed(RmppStatus),
}

/// MADs the link carried and ACK timeouts the sender took, over a test.
static RESENDS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Run one transfer over the link until both sides are done; bounded.
fn run(class: u8, data_len: usize, seed: u64, loss: u64, dup: u64, jitter_us: u64) -> Outcome {
    let hdr = hdr_of(class);
    let msg = message(class, hdr, data_len);
    let cfg = cfg();
    let mut tx = Sender::new(at(0), msg.clone(), hdr, 1, Duration::from_secs(2), 10, &cfg).unwrap();
    let mut rx: Option<Receiver> = None;
    let mut delivered: Option<Vec<u8>> = None;
    let mut sender_end: Option<Progress> = None;
    let mut link = Link {
        rng: Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1),
        loss,
        dup,
        jitter_us,
        queue: BTreeMap::new(),
        seq: 0,
    };
    let mut now = at(0);
    let mut out = [0u8; MAD_SIZE];
    for _ in 0..1_000_000 {
        while tx.poll_transmit(now, &mut out) {
            link.send(now, true, out);
        }
        if let Some(r) = rx.as_mut() {
            while r.poll_transmit(now, &mut out) {
                link.send(now, false, out);
            }
        }
        if sender_end.is_some() && rx.is_none() && link.queue.is_empty() {
            break;
        }
        // Next event: a delivery or a timer.
        let next_timer = [tx.deadline(), rx.as_ref().and_then(Receiver::deadline)]
            .into_iter()
            .flatten()
            .min();
        let next_mad = link.queue.keys().next().map(|k| k.0);
        let Some(next) = [next_timer, next_mad].into_iter().flatten().min() else {
            break;
        };
        now = now.max(next);
        if next_mad == Some(next) {
            let (_, (to_rx, mad)) = link.queue.pop_first().unwrap();
            if to_rx {
                let progress = match rx.as_mut() {
                    Some(r) => r.handle_data(now, &mad),
                    None => {
                        let (r, p) = Receiver::new(now, &mad, &cfg);
                        rx = Some(r);
                        p
                    }
                };
                let r = rx.as_mut().unwrap();
                if progress == Progress::Complete {
                    if let Some(m) = r.take_message() {
                        assert!(delivered.is_none(), "delivered twice");
                        delivered = Some(m);
                    }
                }
                if let Progress::Failed { notify_peer, .. } = progress {
                    while r.poll_transmit(now, &mut out) {
                        link.send(now, false, out);
                    }
                    assert!(!notify_peer || delivered.is_none());
                    rx = None;
                }
            } else {
                let p = tx.handle_rmpp(now, &mad);
                if p != Progress::Pending && sender_end.is_none() {
                    sender_end = Some(p);
                }
            }
        } else {
            if tx.deadline() == Some(now) {
                RESENDS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
            let p = tx.handle_timeout(now);
            if p != Progress::Pending && sender_end.is_none() {
                sender_end = Some(p);
            }
            if let Some(r) = rx.as_mut() {
                match r.handle_timeout(now) {
                    Progress::Pending => {}
                    Progress::Complete => rx = None,
                    Progress::Failed { .. } => {
                        while r.poll_transmit(now, &mut out) {
                            link.send(now, false, out);
                        }
                        rx = None;
                    }
                }
            }
        }
    }
    assert!(
        rx.is_none(),
        "receiver still alive at the end (seed {seed})"
    );
    assert!(now < at(600_000), "transfer ran past 10 virtual minutes");
    match sender_end.expect("the sender never finished") {
        Progress::Complete => {
            let m = delivered.expect("sender complete but nothing delivered");
            assert_eq!(m.len(), msg.len());
            assert_eq!(&m[..24], &msg[..24]);
            assert_eq!(&m[rmpp::END..], &msg[rmpp::END..], "seed {seed}");
            Outcome::Delivered
        }
        Progress::Failed { status, .. } => {
            if let Some(m) = delivered {
                // The message got through; only the final ACKs were lost.
                assert_eq!(&m[rmpp::END..], &msg[rmpp::END..]);
            }
            Outcome::SenderFailed(status)
        }
        Progress::Pending => unreachable!("filtered above"),
    }
}

#[test]
fn loop_lossless_in_order_delivers_every_size() {
    for class in [SA, VENDOR, DM, NONE] {
        let per = MAD_SIZE - hdr_of(class);
        for segs in [1usize, 2, 63, 64, 65, 130] {
            for len in [segs * per, segs * per - 1, (segs - 1) * per + 1] {
                assert_eq!(run(class, len, 1, 0, 0, 1), Outcome::Delivered);
            }
        }
        assert_eq!(run(class, 0, 1, 0, 0, 1), Outcome::Delivered);
    }
}

#[test]
fn loop_lossy_duplicating_reordering_link_delivers_or_fails_cleanly() {
    let mut failed = 0;
    for seed in 0..40 {
        for (loss, dup, jitter) in [(1, 1, 50), (10, 5, 500), (0, 20, 2000), (20, 10, 3000)] {
            for data_len in [150, 200 * 64, 200 * 64 + 7, 200 * 300] {
                match run(SA, data_len, seed, loss, dup, jitter) {
                    Outcome::Delivered => {}
                    Outcome::SenderFailed(s) => {
                        assert_eq!(s, RmppStatus::TooManyRetries);
                        failed += 1;
                    }
                }
            }
        }
    }
    assert!(failed < 20, "{failed} transfers of 640 gave up");
    let resends = RESENDS.load(std::sync::atomic::Ordering::Relaxed);
    assert!(
        resends > 100,
        "the link hurt too little: {resends} ACK timeouts"
    );
    eprintln!("{failed} failed, {resends} ACK timeouts");
}

mod fuzz {
    use super::*;
    use proptest::prelude::*;

    /// A MAD that looks like RMPP: a real segment with fuzzed RMPP fields, or raw bytes.
    fn rmpp_like() -> impl Strategy<Value = Vec<u8>> {
        let shaped = (
            any::<u8>(),
            0u8..6,
            any::<u8>(),
            any::<u8>(),
            0u32..140,
            any::<u32>(),
        )
            .prop_map(|(v, t, fl, st, seg, len)| {
                let mut m = message(SA, 56, 200);
                m[24] = if v < 240 { 1 } else { v };
                m[25] = t;
                m[26] = fl;
                m[27] = if st < 200 { 0 } else { st };
                m[28..32].copy_from_slice(&seg.to_be_bytes());
                m[32..36].copy_from_slice(&len.to_be_bytes());
                m
            });
        prop_oneof![shaped, proptest::collection::vec(any::<u8>(), 0..300)]
    }

    proptest! {
        #[test]
        fn arbitrary_mads_never_panic_and_stay_bounded(
            first in rmpp_like(),
            rest in proptest::collection::vec(rmpp_like(), 0..40),
        ) {
            let cfg = RmppConfig { max_message: 4096, ..cfg() };
            let (mut rx, _) = Receiver::new(at(0), &first, &cfg);
            let mut tx = sender(SA, 200 * 20, 5, 1);
            drain_sender(&mut tx, at(0));
            let mut out = [0u8; MAD_SIZE];
            for (i, m) in rest.iter().enumerate() {
                let now = at(i as u64 * 1000);
                rx.handle_data(now, m);
                rx.handle_rmpp(now, m);
                rx.handle_timeout(now);
                while rx.poll_transmit(now, &mut out) {}
                tx.handle_rmpp(now, m);
                tx.handle_timeout(now);
                while tx.poll_transmit(now, &mut out) {}
            }
            if let Some(m) = rx.take_message() {
                prop_assert!(m.len() <= cfg.max_message);
            }
        }
    }
}
