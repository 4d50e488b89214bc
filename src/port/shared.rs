//! What a port's threads share (the transport under the I/O lock, the core, the
//! machinery of waiting) and how a thread takes a turn at the transport (see the
//! module docs of `port`).

use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;

use super::driver::{flush, turn, turn_at};
use super::opens::Core;
use super::ready::Ready;
use super::spin::{SpinPolicy, StandBy};
use crate::clock::{Clock as TimeSource, Tick};
use crate::pcap::Capture;
use crate::time::Instant;
use crate::transport::{Caps, PortAttrs, Transport, Waker};

/// The transport side, under the I/O lock (taken before the core's lock).
pub(super) struct Io {
    pub(super) transport: Box<dyn Transport>,
    pub(super) capture: Option<Capture>,
}

/// What the port's threads share: one per port, behind every open's handle.
pub(super) struct Shared {
    /// `None` once the port thread has ended (the transport is dropped).
    pub(super) io: Mutex<Option<Io>>,
    pub(super) core: Mutex<Core>,
    pub(super) burst: usize,
    /// How waiting callers spin.
    pub(super) spin: SpinPolicy,
    /// Callers in a spin spell (counted only without a ready descriptor; see
    /// [`Spin`](super::spin::Spin)).
    pub(super) spinners: std::sync::atomic::AtomicUsize,
    /// The port thread is parked: in [`Transport::wait`], holding the transport, or with
    /// the transport's [`Parker`](crate::transport::Parker), without it. A caller's spin
    /// wakes it to stand by.
    pub(super) parked: std::sync::atomic::AtomicBool,
    /// Where the transport has a [`Transport::parker`], the port thread parks with it,
    /// without the transport; `planned` is then the engine deadline it will wake for,
    /// in the port clock's microseconds (0 while it is not parked so, `u64::MAX`: none),
    /// so that a caller's turn that moves the deadline before it wakes the thread.
    pub(super) parker: Option<crate::transport::Parker>,
    pub(super) planned: std::sync::atomic::AtomicU64,
    /// Signalled when events are queued or the port closes.
    pub(super) ready: Condvar,
    pub(super) waker: Option<Waker>,
    /// What a spinning caller watches between turns ([`Transport::arrivals`]).
    pub(super) arrivals: Option<crate::transport::Arrivals>,
    /// Where the transport has a ready descriptor: how the port's threads wait on it
    /// (see the `ready` module); `None`: the port thread parks in [`Transport::wait`].
    pub(super) fdwait: Option<Ready>,
    pub(super) clock: Arc<dyn TimeSource>,
    /// The transport's view of the port, refreshed when it says it changed.
    pub(super) attrs: std::sync::RwLock<PortAttrs>,
    pub(super) caps: Caps,
    /// The port thread, joined when the last open closes.
    pub(super) thread: Mutex<Option<JoinHandle<()>>>,
}

impl Shared {
    pub(super) fn lock(&self) -> MutexGuard<'_, Core> {
        self.core.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The engine's clock.
    pub(super) fn now(&self) -> Instant {
        self.clock.now()
    }

    /// Wake the port thread from standing by (see [`Spin`](super::spin::Spin)).
    pub(super) fn call_port_thread(&self) {
        if let Some(t) = self
            .thread
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
        {
            t.thread().unpark();
        }
    }

    /// After a turn by a thread other than a port thread parked with the transport's
    /// parker: wake that thread if the engine's next deadline now comes before it
    /// would wake.
    pub(super) fn parked_deadline_moved(&self, deadline: Option<Instant>) {
        let planned = self.planned.load(std::sync::atomic::Ordering::SeqCst);
        if planned != 0 && deadline.is_some_and(|d| d.as_micros() < planned) {
            self.wake();
        }
    }

    pub(super) fn wake(&self) {
        if let Some(r) = &self.fdwait {
            r.wake();
        } else if let Some(w) = &self.waker {
            w.wake();
        }
    }

    /// Run `f` under the I/O lock (the core's lock must not be held); `None` once the
    /// port thread has ended (the transport is gone).
    pub(super) fn with_io<R>(&self, f: impl FnOnce(&mut Io) -> R) -> Option<R> {
        if self.fdwait.is_some() {
            // Nobody holds the transport but for a turn.
            let mut io = self.io.lock().unwrap_or_else(PoisonError::into_inner);
            let out = io.as_mut().map(f);
            drop(io);
            self.turn_if_asked();
            return out;
        }
        // The port thread holds the I/O lock while it is parked in the transport (not with
        // a parker, when this only costs a wake). Announced as a spinning
        // caller is, this thread makes it let go and stand by (it parks no more while
        // anyone is announced), so blocking on the lock ends. Taking it in a gap between
        // the thread's turns instead could wait forever: a thread that parks again at
        // once (`PortConfig::spin` zero) leaves no gap a sleeper hits.
        let stand_by = StandBy::announce(self);
        // Whatever `announce` saw, a wake costs little here (no MAD path calls this),
        // and a parked thread that has yet to see the count lets go sooner.
        self.wake();
        let out = {
            let mut io = self.io.lock().unwrap_or_else(PoisonError::into_inner);
            io.as_mut().map(f)
        };
        drop(stand_by);
        self.call_port_thread();
        out
    }

    /// Put every MAD the engine has queued on the wire now, waiting for the transport if
    /// another thread holds it (see [`flush`]).
    pub(super) fn flush(&self) {
        let deadline = self.with_io(|io| flush(self, io)).flatten();
        if let Some(r) = &self.fdwait {
            r.deadline_moved(deadline);
        }
    }

    /// After holding the I/O lock outside `try_turn`: run the turns others left to us.
    pub(super) fn turn_if_asked(&self) {
        if self.fdwait.as_ref().is_some_and(Ready::asked) {
            self.try_turn(false);
        }
    }

    /// A turn with a receive, for a caller that waits for a message: with a ready
    /// descriptor it waits for the I/O lock instead of leaving its turn to the holder,
    /// as it has nothing else to do; left to the holder, it would poll a descriptor
    /// that stays readable until the holder reads it (one poll(2) after another: on
    /// OpenSM's sweep, nearly two per MAD). Else as [`Shared::try_turn`].
    pub(super) fn receiver_turn(&self) -> Option<bool> {
        let Some(r) = &self.fdwait else {
            return self.try_turn(true);
        };
        let (worked, deadline) = {
            let mut io = self.io.lock().unwrap_or_else(PoisonError::into_inner);
            r.take_asked();
            turn(self, io.as_mut()?, true)
        };
        r.deadline_moved(deadline);
        self.turn_if_asked();
        Some(worked)
    }

    /// Run one turn on the calling thread if the I/O lock is free. `None`: it was not
    /// (or the transport is gone); else whether the turn did any work.
    ///
    /// With a ready descriptor nobody holds the lock but for a turn, and nobody waits
    /// for it: a thread that finds it taken leaves what it wanted (`receive`, and always
    /// a transmit) to the holder, which looks for such requests after it lets go and
    /// turns again for them. So a sender never sleeps on a receiver's turn, nor the
    /// other way round.
    pub(super) fn try_turn(&self, receive: bool) -> Option<bool> {
        self.try_turn_at(receive, std::time::Instant::now())
    }

    /// [`Shared::try_turn`] whose first turn runs at `os_now`, the OS's time the caller
    /// has just read (a sender reads the clock once for its send and its turn: where the
    /// clock source has no vDSO each read is a system call).
    pub(super) fn try_turn_at(&self, receive: bool, os_now: std::time::Instant) -> Option<bool> {
        let Some(r) = &self.fdwait else {
            let mut io = match self.io.try_lock() {
                Ok(io) => io,
                Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner(),
                Err(std::sync::TryLockError::WouldBlock) => return None,
            };
            return Some(turn_at(self, io.as_mut()?, receive, os_now).0);
        };
        let mut os_now = Some(os_now);
        r.ask(receive);
        let mut worked = None;
        loop {
            let mut io = match self.io.try_lock() {
                Ok(io) => io,
                Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner(),
                // The holder turns again for what we asked.
                Err(std::sync::TryLockError::WouldBlock) => return worked,
            };
            let receive = r.take_asked();
            let held = io.as_mut()?;
            let (w, deadline) = match os_now.take() {
                Some(at) => turn_at(self, held, receive, at),
                None => turn(self, held, receive),
            };
            drop(io);
            r.deadline_moved(deadline);
            worked = Some(worked.unwrap_or(false) | w);
            if !r.asked() {
                return worked;
            }
        }
    }
}

impl Tick for Shared {
    /// The port's clock jumped: run a turn now, so that what fell due (a resend, a
    /// timeout report) is done when the jump returns.
    fn tick(&self) {
        self.with_io(|io| turn(self, io, true));
        // Callers blocked on the condition variable with a deadline on this clock look
        // at it again. (Virtual clocks drive transports without a ready descriptor.)
        self.ready.notify_all();
    }
}
