//! How a caller waits for its open's queue: the one loop of receive and poll (turns,
//! a spin, then a block on the descriptors or the condition variable).

use std::sync::{MutexGuard, PoisonError};
use std::time::Duration;

use super::opens::{Core, Open};
use super::ready::WaitGuard;
use super::spin::Spin;
use super::Port;
use crate::engine::{Engine, Event};
use crate::time::Instant;
use crate::{Error, Result};

impl Port {
    /// Wait as [`Port::recv_with`] (`will_wait`: as the caller will wait, whatever
    /// `timeout`; `spin`: as [`Port::wait_queued`]) and offer the head of the queue to
    /// `take`.
    pub(super) fn recv_inner<R>(
        &self,
        timeout: Option<Duration>,
        will_wait: bool,
        spin: Option<Duration>,
        mut take: impl FnMut(&Event) -> Result<R>,
    ) -> Result<R> {
        self.wait_queued(timeout, will_wait, spin, |open, engine| {
            let taken = take(open.queue.front()?);
            if taken.is_ok() {
                if let Some(event) = open.queue.pop_front() {
                    // Read by the application: from now on a retry of it is delivered.
                    engine.taken(&event);
                }
            }
            Some(taken)
        })
    }

    /// Run turns, spin and block until `found` says what this open's queue gives (the
    /// one loop of receive and poll); `timeout` and the errors as [`Port::recv_with`].
    /// `spin`: the longest spin for this wait, in place of the port's
    /// [`PortConfig::caller_spin`](super::PortConfig::caller_spin) (`None`: the port's).
    pub(super) fn wait_queued<R>(
        &self,
        timeout: Option<Duration>,
        will_wait: bool,
        spin: Option<Duration>,
        mut found: impl FnMut(&mut Open, &mut Engine) -> Option<Result<R>>,
    ) -> Result<R> {
        // On the port's clock, so that a virtual one moves callers' timeouts too. A zero
        // timeout needs none (and a clock read is a system call on some hosts: the rxe
        // VM's HPET).
        let deadline = timeout
            .filter(|t| !t.is_zero())
            .map(|t| self.shared.now() + t);
        let mut spin = Spin::new(&self.shared, timeout, will_wait, spin);
        let mut core = self.open_core()?;
        loop {
            // What a turn queued in the engine since its last settle (a turn settles
            // what it receives: mostly nothing is left here).
            if core.engine.pending_events() != 0 {
                core.settle();
            }
            let failed = core.failed.is_some();
            let Core { opens, engine, .. } = &mut *core;
            let Some(open) = opens.get_mut(&self.key) else {
                return Err(Error::InvalidPort);
            };
            if let Some(got) = found(open, engine) {
                // Only this open's queue changed: its descriptor tells.
                open.show(failed);
                let got = got?;
                spin.done(&self.shared);
                return Ok(got);
            }
            if let Some(e) = core.failure() {
                return Err(e);
            }
            if timeout != Some(Duration::ZERO) {
                spin.found_nothing();
            }
            if spin.active() {
                drop(core);
                spin.turn(&self.shared);
                core = self.open_core()?;
                continue;
            }
            core = self.block(core, timeout, deadline)?;
        }
    }

    /// Block until a message may be queued, the deadline, or close: on the transport's
    /// and the open's descriptors where the transport has a ready descriptor (running
    /// the turn when the transport's turns readable), else on the condition variable.
    pub(super) fn block<'a>(
        &'a self,
        core: MutexGuard<'a, Core>,
        timeout: Option<Duration>,
        deadline: Option<Instant>,
    ) -> Result<MutexGuard<'a, Core>> {
        let left = self.time_left(timeout, deadline)?;
        if self.shared.fdwait.is_none() {
            return self.wait_ready(core, left);
        }
        let mut core = core;
        let guard = WaitGuard::new(self.shared.clone(), self.key, &mut core)?;
        drop(core);
        let readable = guard.wait(left)?;
        drop(guard);
        if readable {
            self.shared.receiver_turn();
        }
        self.open_core()
    }

    /// How long, in real time, a caller with `deadline` (on the port's clock) may block
    /// now: `None` for no limit (no deadline, or a virtual clock, whose jumps wake it).
    ///
    /// # Errors
    /// EWOULDBLOCK (a zero `timeout`) or ETIMEDOUT once the deadline has passed.
    pub(super) fn time_left(
        &self,
        timeout: Option<Duration>,
        deadline: Option<Instant>,
    ) -> Result<Option<Duration>> {
        if timeout == Some(Duration::ZERO) {
            return Err(Error::WouldBlock);
        }
        let Some(d) = deadline else { return Ok(None) };
        if self.shared.now() >= d {
            return Err(if timeout == Some(Duration::ZERO) {
                Error::WouldBlock
            } else {
                Error::TimedOut
            });
        }
        Ok(self.shared.clock.park_limit(d))
    }

    /// Block on the condition variable until woken, `left` passes, or close.
    pub(super) fn wait_ready<'a>(
        &self,
        core: MutexGuard<'a, Core>,
        left: Option<Duration>,
    ) -> Result<MutexGuard<'a, Core>> {
        let mut core = core;
        // Counted under the core's lock, which the wait gives up atomically: a turn that
        // queues a message (under the same lock) sees the count and notifies.
        core.cv_waiters += 1;
        let mut core = match left {
            None => self
                .shared
                .ready
                .wait(core)
                .unwrap_or_else(PoisonError::into_inner),
            Some(left) => {
                self.shared
                    .ready
                    .wait_timeout(core, left)
                    .unwrap_or_else(PoisonError::into_inner)
                    .0
            }
        };
        core.cv_waiters -= 1;
        if core.closed || !core.opens.contains_key(&self.key) {
            return Err(Error::InvalidPort);
        }
        Ok(core)
    }
}
