//! Where a port (and the embedded fabric) reads the time: the OS's monotonic clock,
//! or a virtual clock that moves only when a test advances it.
//!
//! The engine takes `now` as an argument; the port reads it from its [`Clock`]
//! ([`crate::port::PortConfig::clock`], else the transport's
//! [`crate::transport::Transport::clock`], else a [`SystemClock`]). On a
//! [`VirtualClock`] behaviour in time — response timeouts, retries, RMPP timers,
//! the sim fabric's link delays — happens when the test says so:
//!
//! ```
//! # use std::time::Duration;
//! use vmad::clock::VirtualClock;
//! let clock = VirtualClock::new();
//! let fabric = vmad::subnet::Fabric::default_builder()
//!     .clock(clock.clone())
//!     .build_private()?;
//! // Ports opened on `fabric` read `clock`. Each advance runs every such port's
//! // work due by then (a timed-out request's resend, its timeout report) before
//! // it returns.
//! clock.advance(Duration::from_millis(100));
//! # Ok::<(), vmad::Error>(())
//! ```

use core::fmt;
use core::time::Duration;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};

use crate::time::Instant;

/// A source of [`Instant`]s for ports.
pub trait Clock: Send + Sync + fmt::Debug {
    /// The time now.
    fn now(&self) -> Instant;

    /// The time at `os_now`, an instant of the OS's monotonic clock the caller has just
    /// read, so that a loop that needs both reads the clock once (the port's spin: where
    /// the clock source has no vDSO, as a TCG guest's HPET, each read is a system call
    /// and an emulated device access). A clock the OS does not drive (a virtual one)
    /// ignores `os_now` and says [`Clock::now`].
    fn at(&self, os_now: std::time::Instant) -> Instant {
        let _ = os_now;
        self.now()
    }

    /// How long, in real time, a port with nothing to do before `deadline` may park.
    /// `None`: until something wakes it (a clock that moves only when told runs the
    /// ports it drives itself: see [`Clock::attach`]).
    fn park_limit(&self, deadline: Instant) -> Option<Duration> {
        Some(deadline.saturating_duration_since(self.now()))
    }

    /// A port starts on this clock: a clock whose time jumps runs `port`'s due work
    /// after each jump. Default: nothing (real time wakes parked ports by itself).
    fn attach(&self, _port: Weak<dyn Tick>) {}
}

/// Something driven on a [`Clock`] that must look at its timers when the time jumps.
pub trait Tick: Send + Sync {
    /// Do what is due now (for a port: one turn of its driver loop).
    fn tick(&self);
}

/// The OS's monotonic clock, counted from when this value was made.
#[derive(Debug, Clone, Copy)]
pub struct SystemClock {
    epoch: std::time::Instant,
}

impl SystemClock {
    /// A clock whose zero is now.
    pub fn new() -> SystemClock {
        SystemClock {
            epoch: std::time::Instant::now(),
        }
    }
}

impl Default for SystemClock {
    fn default() -> Self {
        SystemClock::new()
    }
}

impl Clock for SystemClock {
    fn now(&self) -> Instant {
        self.at(std::time::Instant::now())
    }

    fn at(&self, os_now: std::time::Instant) -> Instant {
        let since = os_now.saturating_duration_since(self.epoch);
        Instant::from_micros(u64::try_from(since.as_micros()).unwrap_or(u64::MAX))
    }
}

/// A clock that stands still until [`VirtualClock::advance`]d. Clones share the time.
#[derive(Clone, Default)]
pub struct VirtualClock(Arc<Shared>);

#[derive(Default)]
struct Shared {
    micros: AtomicU64,
    /// The ports on this clock, run after each advance; gone ones are dropped then.
    ports: Mutex<Vec<Weak<dyn Tick>>>,
    /// Serializes advances, so that each one's runs see its own time.
    advancing: Mutex<()>,
}

impl fmt::Debug for VirtualClock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("VirtualClock").field(&self.now()).finish()
    }
}

impl VirtualClock {
    /// A clock at [`Instant::ZERO`].
    pub fn new() -> VirtualClock {
        VirtualClock::default()
    }

    /// Run every port on this clock once (so that what they have queued is sent at the
    /// time it was queued, and what has reached them is handled), move the time on by
    /// `by`, then run every port once more: when it returns, each port has handled the
    /// timers due by now (a resend is on the fabric, a timeout report queued). A port
    /// thread may have done some of that work first; what is left of it is done by
    /// the next advance at the latest.
    pub fn advance(&self, by: Duration) {
        let _one_at_a_time = self
            .0
            .advancing
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        self.run_ports();
        let micros = u64::try_from(by.as_micros()).unwrap_or(u64::MAX);
        let _ = self
            .0
            .micros
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |m| {
                Some(m.saturating_add(micros))
            });
        self.run_ports();
    }

    fn run_ports(&self) {
        let ports: Vec<Arc<dyn Tick>> = {
            let mut ports = self.0.ports.lock().unwrap_or_else(PoisonError::into_inner);
            ports.retain(|p| p.strong_count() > 0);
            ports.iter().filter_map(Weak::upgrade).collect()
        };
        for port in ports {
            port.tick();
        }
    }
}

impl Clock for VirtualClock {
    fn now(&self) -> Instant {
        Instant::from_micros(self.0.micros.load(Ordering::Acquire))
    }

    fn park_limit(&self, _deadline: Instant) -> Option<Duration> {
        None
    }

    fn attach(&self, port: Weak<dyn Tick>) {
        self.0
            .ports
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(port);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    struct Counter {
        clock: VirtualClock,
        seen: Mutex<Vec<Instant>>,
        ticks: AtomicUsize,
    }

    impl Tick for Counter {
        fn tick(&self) {
            self.ticks.fetch_add(1, Ordering::Relaxed);
            self.seen.lock().unwrap().push(self.clock.now());
        }
    }

    #[test]
    fn the_time_at_an_os_instant_already_read() {
        let system = SystemClock::new();
        let epoch = system.epoch;
        assert_eq!(
            system.at(epoch + Duration::from_micros(1_500)),
            Instant::from_micros(1_500)
        );
        // An instant before the clock's zero is its zero, not a panic.
        let before = epoch.checked_sub(Duration::from_secs(1)).unwrap_or(epoch);
        assert_eq!(system.at(before), Instant::ZERO);
        // A virtual clock is not the OS's: the instant given changes nothing.
        let virt = VirtualClock::new();
        virt.advance(Duration::from_millis(2));
        assert_eq!(virt.at(std::time::Instant::now()), Instant::from_millis(2));
    }

    #[test]
    fn a_virtual_clock_moves_only_when_advanced_and_runs_its_ports() {
        let clock = VirtualClock::new();
        assert_eq!(clock.now(), Instant::ZERO);
        assert_eq!(clock.park_limit(Instant::from_millis(5)), None);
        let port = Arc::new(Counter {
            clock: clock.clone(),
            seen: Mutex::new(Vec::new()),
            ticks: AtomicUsize::new(0),
        });
        clock.attach(Arc::downgrade(&port) as Weak<dyn Tick>);
        assert_eq!(clock.now(), Instant::ZERO);
        clock.advance(Duration::from_millis(3));
        clock.advance(Duration::from_micros(250));
        assert_eq!(clock.now(), Instant::from_micros(3_250));
        let at = |micros| Instant::from_micros(micros);
        assert_eq!(
            *port.seen.lock().unwrap(),
            [at(0), at(3_000), at(3_000), at(3_250)],
            "each advance runs the ports before and after the jump"
        );
        // A port gone is no longer run.
        drop(port);
        clock.advance(Duration::from_millis(1));
        assert!(clock.0.ports.lock().unwrap().is_empty());
    }

    #[test]
    fn the_system_clock_parks_until_the_deadline() {
        let clock = SystemClock::new();
        let limit = clock
            .park_limit(clock.now() + Duration::from_secs(60))
            .unwrap();
        assert!(limit > Duration::from_secs(59) && limit <= Duration::from_secs(60));
        assert_eq!(clock.park_limit(Instant::ZERO), Some(Duration::ZERO));
    }
}
