//! The port's one spin-then-park policy, for every waiting caller (the Rust API's
//! receive and poll, and the C library's `umad_recv`).
//!
//! Spinning (running turns, yielding the CPU between them) picks up a reply that is on
//! its way without the sleep and wake-up, which on an idle machine is most of a round
//! trip. When the CPU is scarce it is the opposite: the spinner takes time slices from
//! the threads it waits for (the peer, the application's own workers), and a fixed
//! spin made OpenSM's sweep several times slower on a loaded machine. So the spin is
//! earned: a caller spins only while the port's recent waits were short enough that a
//! spin would have caught them (an average of how long waiting callers waited for
//! their message, however they waited), and stops at once when a yield shows another
//! thread wanted its core.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant as Clock};

use super::Shared;
use crate::transport::Arrivals;

/// How long a spinning caller watches the transport's arrivals between turns (a
/// message another thread's turn queued for it, or a timer that fell due, waits that
/// long at most): a round trip on the embedded fabric is a few microseconds.
const WATCH: Duration = Duration::from_micros(5);
/// Looks at the arrivals between two clock reads.
const WATCH_LOOKS: u32 = 32;

/// How long the port thread stands by while callers spin, before it looks again.
pub(super) const STAND_BY: Duration = Duration::from_millis(1);

/// A yield that kept the caller off the CPU this long means other threads wanted the
/// core: spinning now would only delay them.
const YIELD_LOADED: Duration = Duration::from_micros(50);

/// How waiting callers of one port spin.
#[derive(Debug)]
pub(super) struct SpinPolicy {
    /// The longest spin ([`super::PortConfig::caller_spin`]); zero: never spin.
    max: Duration,
    /// A moving average of recent waits, in microseconds.
    recent_us: AtomicU64,
}

impl SpinPolicy {
    pub(super) fn new(max: Duration) -> SpinPolicy {
        SpinPolicy {
            max,
            recent_us: AtomicU64::new(0),
        }
    }

    /// Whether the port's callers ever spin.
    pub(super) fn spins(&self) -> bool {
        !self.max.is_zero()
    }

    /// How long a caller that found nothing should spin now.
    pub(super) fn budget(&self) -> Duration {
        self.budget_up_to(self.max)
    }

    /// As [`SpinPolicy::budget`] for a caller whose longest spin is `max`.
    pub(super) fn budget_up_to(&self, max: Duration) -> Duration {
        let recent = Duration::from_micros(self.recent_us.load(Ordering::Relaxed));
        if recent <= max {
            max
        } else {
            Duration::ZERO
        }
    }

    /// A caller waited `waited` for its message (from finding nothing to getting it).
    /// Noted even where the port's callers do not spin: a caller that brings its own
    /// spin ([`super::Port::recv_spinning`]) reads the same average.
    pub(super) fn note_wait(&self, waited: Duration) {
        let w = u64::try_from(waited.as_micros()).unwrap_or(u64::MAX);
        // Racing updates may lose one sample: an average does not mind.
        let old = self.recent_us.load(Ordering::Relaxed);
        let new = old - old / 8 + w / 8;
        self.recent_us.store(new, Ordering::Relaxed);
    }
}

/// A waiting caller's bounded spell of driving the port itself.
///
/// Where the port thread parks holding the transport (no ready descriptor), a spell
/// is announced to it ([`Shared::spinners`]): it stands by for the spell's length
/// instead of spinning on the same locks, and is called back when the spell ends
/// without a message (the caller then blocks and the port thread must drive again).
pub(super) struct Spin<'a> {
    shared: &'a Shared,
    /// How long the spell lasts once the first turn found nothing (zero: no spell beyond
    /// the first turn; it also ends so when a yield shows the machine loaded).
    spell: Duration,
    /// When the spell ends: read only once the first turn found nothing (a receive
    /// that finds its message queued reads no clock).
    until: Option<Clock>,
    /// The first turn is always taken, even with a zero timeout (a non-blocking
    /// receive still makes progress).
    once: bool,
    /// When the caller first found nothing (its wait is then noted on success).
    empty_since: Option<Clock>,
    /// Counted in `shared.spinners` (while `Some`).
    announced: Option<StandBy<'a>>,
    /// The first turn reads the transport too. Not for a caller that will poll the
    /// transport's descriptor next (and does not spin): the poll tells whether a read
    /// would find anything, one system call fewer per message.
    read_first: bool,
    /// The caller will not wait (a zero timeout): a turn that found the transport
    /// held yields once, so that the holder (the port thread, mid-turn) can hand
    /// over what it is receiving before the caller looks again. A caller that will
    /// wait has no use for the yield (it blocks next), and on a busy machine it costs
    /// a context switch per MAD.
    will_wait: bool,
}

impl<'a> Spin<'a> {
    /// `will_wait`: the caller waits for a message if the first turn finds none.
    /// `max`: the caller's own longest spin, in place of the port's.
    pub(super) fn new(
        shared: &'a Shared,
        timeout: Option<Duration>,
        will_wait: bool,
        max: Option<Duration>,
    ) -> Spin<'a> {
        let budget = max.map_or_else(|| shared.spin.budget(), |m| shared.spin.budget_up_to(m));
        let spin = timeout.map_or(budget, |t| t.min(budget));
        let announced =
            (!spin.is_zero() && shared.fdwait.is_none()).then(|| StandBy::announce(shared));
        Spin {
            shared,
            spell: spin,
            until: None,
            once: true,
            empty_since: None,
            announced,
            read_first: !(will_wait && spin.is_zero() && shared.fdwait.is_some()),
            will_wait,
        }
    }

    pub(super) fn active(&mut self) -> bool {
        if self.once {
            return true;
        }
        if !self.spell.is_zero() {
            let Some(until) = self.until else {
                // The spell starts: the clock as `found_nothing` just read it, if it did.
                let start = self.empty_since.unwrap_or_else(Clock::now);
                self.until = Some(start + self.spell);
                return true;
            };
            if Clock::now() < until {
                return true;
            }
        }
        // The spell is over and the caller will block: the port thread drives again.
        if let Some(stand_by) = self.announced.take() {
            drop(stand_by);
            self.shared.call_port_thread();
        }
        false
    }

    /// The caller found nothing queued.
    pub(super) fn found_nothing(&mut self) {
        self.empty_since.get_or_insert_with(Clock::now);
    }

    /// The caller got its message: a wait, if it had to, counts in the policy.
    pub(super) fn done(&self, shared: &Shared) {
        if let Some(since) = self.empty_since {
            shared.spin.note_wait(since.elapsed());
        }
    }

    pub(super) fn turn(&mut self, shared: &Shared) {
        let first = std::mem::replace(&mut self.once, false);
        if first && !self.read_first {
            shared.try_turn(false);
            return;
        }
        if let Some(r) = &shared.fdwait {
            r.caller_active();
        }
        // Nothing came in: while spinning, watch for an arrival a while (where the
        // transport counts them), then let the thread that will send it run; and yield
        // once for a caller that will not wait (see `will_wait`). A caller that found
        // the transport held yields at once: the holder is receiving.
        let before = shared.arrivals.as_ref().map(|a| (a, a.count()));
        let turned = shared.receiver_turn();
        if turned != Some(true) && (!self.spell.is_zero() || !self.will_wait) {
            let watching = turned == Some(false) && !self.spell.is_zero();
            if watching && before.is_some_and(|(a, count)| watch(a, count)) {
                return;
            }
            let before = Clock::now();
            std::thread::yield_now();
            if before.elapsed() >= YIELD_LOADED {
                self.spell = Duration::ZERO;
            }
        }
    }
}

/// Watch `arrivals` for up to [`WATCH`]: whether the count moved from `before` (what
/// it was before the turn that found nothing: a MAD that arrived during that turn
/// counts; one held back until a due time does not, and the next turn takes it). A
/// turn (the port's locks, the clock) and a yield (a system call) between two looks
/// made a spinning caller see an arrival a microsecond or more after it came; the
/// count is one load.
fn watch(arrivals: &Arrivals, before: usize) -> bool {
    let start = Clock::now();
    loop {
        for _ in 0..WATCH_LOOKS {
            if arrivals.count() != before {
                return true;
            }
            std::hint::spin_loop();
        }
        if start.elapsed() >= WATCH {
            return false;
        }
    }
}

/// A thread that wants the transport where the port thread parks holding it (no ready
/// descriptor): counted in [`Shared::spinners`] while it lives, so that the port thread
/// lets go of the transport and stands by instead of parking in it again. Dropping it
/// ends the announcement; the port thread takes over at its next look
/// ([`STAND_BY`]), or at once after [`Shared::call_port_thread`].
pub(super) struct StandBy<'a>(&'a Shared);

impl<'a> StandBy<'a> {
    pub(super) fn announce(shared: &'a Shared) -> StandBy<'a> {
        // The first to announce wakes a parked port thread; one parking now sees the
        // count after it sets `parked` (see `drive`).
        if shared.spinners.fetch_add(1, Ordering::SeqCst) == 0
            && shared.parked.load(Ordering::SeqCst)
        {
            shared.wake();
        }
        StandBy(shared)
    }
}

impl Drop for StandBy<'_> {
    fn drop(&mut self) {
        self.0.spinners.fetch_sub(1, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use std::sync::Arc;

    #[test]
    fn the_watch_ends_on_a_count_that_moved_from_before_the_turn_or_after_its_spell() {
        // One frame held back until a due time: counted, and not news.
        let count = Arc::new(AtomicUsize::new(1));
        let arrivals = Arrivals::new(count.clone());
        assert!(!watch(&arrivals, 1));
        // One that arrived during the turn, or during the watch.
        assert!(watch(&arrivals, 0));
        count.fetch_add(1, Ordering::SeqCst);
        assert!(watch(&arrivals, 1));
        // Another thread's turn took them: this caller's message may be queued now.
        count.store(0, Ordering::SeqCst);
        assert!(watch(&arrivals, 2));
    }

    #[test]
    fn an_embedded_fabric_port_counts_what_a_turn_would_receive() {
        use crate::transport::Transport;
        let fabric = crate::subnet::Fabric::builder()
            .ca("spw0")
            .ca("spw1")
            .link("spw0", 1, "spw1", 1)
            .build_private()
            .unwrap();
        let mut a = fabric.open("spw0", 1).unwrap();
        let mut b = fabric.open("spw1", 1).unwrap();
        let arrivals = b.arrivals().expect("counted");
        assert_eq!(arrivals.count(), 0);
        let dest = crate::types::MadAddr {
            qpn: 1,
            qkey: crate::types::GSI_QKEY,
            lid: fabric.lid("spw1", 1).unwrap(),
            ..Default::default()
        };
        a.transmit(&mut |buf| {
            buf[..4].copy_from_slice(&[1, 0x09, 1, 0x01]);
            Some(crate::engine::Transmit {
                qp: crate::types::Qp::Gsi,
                dest,
                len: crate::wire::MAD_SIZE,
                timeout_ms: 0,
            })
        })
        .unwrap();
        assert_eq!(arrivals.count(), 1);
        assert_eq!(b.recv_burst(8, &mut |_, _| {}).unwrap(), 1);
        assert_eq!(arrivals.count(), 0);
    }

    #[test]
    fn a_callers_own_spin_is_earned_by_the_ports_waits_even_where_the_port_never_spins() {
        let us = Duration::from_micros;
        // A transport that gains nothing by spinning: the port's callers never do.
        let p = SpinPolicy::new(Duration::ZERO);
        assert_eq!(p.budget(), Duration::ZERO);
        // A caller with its own spin gets it while the waits stay short...
        assert_eq!(p.budget_up_to(us(100)), us(100));
        for _ in 0..8 {
            p.note_wait(us(20));
        }
        assert_eq!(p.budget_up_to(us(100)), us(100));
        // ...and not once they are longer than the spin could cover.
        for _ in 0..32 {
            p.note_wait(us(5_000));
        }
        assert_eq!(p.budget_up_to(us(100)), Duration::ZERO);
        assert_eq!(p.budget(), Duration::ZERO);
        // Short waits earn it back.
        for _ in 0..64 {
            p.note_wait(us(10));
        }
        assert_eq!(p.budget_up_to(us(100)), us(100));
    }
}
