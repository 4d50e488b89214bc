//! The C ABI's hooks into a port: **for `vmad-capi` only, with no stability promise**
//! (hidden from the documentation; may change with any release).
//!
//! The C library's `umad_recv` and `umad_poll` must block in poll(2) themselves, a
//! cancellation point, where [`Port::recv_with`] and [`Port::poll`] block inside the
//! port. So `vmad-capi`'s `src/wait.c` needs what those waits do internally: the
//! descriptors to poll and a count of the callers reading the transport
//! ([`WaitHooks::begin_wait`]), a receive that leaves unread a transport it is about to
//! poll ([`WaitHooks::recv_before_wait_with`]), and the spin policy's budget and record
//! ([`WaitHooks::caller_spin`], [`WaitHooks::note_wait`]). A Rust caller waits with
//! [`Port::recv_with`] / [`Port::poll`] and needs none of it.

use std::time::Duration;

pub use super::ready::WaitGuard;
use super::Port;
use crate::engine::Event;
use crate::Result;

/// What a caller that blocks in its own poll(2) needs of a [`Port`] (see the module
/// docs). Implemented for [`Port`] only.
pub trait WaitHooks {
    /// [`Port::recv_with`] with a zero timeout, for a caller that, finding nothing,
    /// will wait on the descriptors [`WaitHooks::begin_wait`] gives (the C library's
    /// blocking `umad_recv`): where the transport has a descriptor of its own, its
    /// turn sends but does not read the transport, as the poll(2) that follows tells
    /// whether a read would find anything (a read that finds nothing is a system call
    /// per message for nothing).
    ///
    /// # Errors
    /// As [`Port::recv_with`] with a zero timeout.
    fn recv_before_wait_with<R>(&self, take: impl FnMut(&Event) -> Result<R>) -> Result<R>;

    /// Start a wait in poll(2) by the caller itself: the guard says which descriptors
    /// to poll ([`WaitGuard::fds`]) and, while it lives, counts the caller as reading
    /// the transport. Readable: run a receive or poll with a zero timeout (which runs a
    /// turn) and look again.
    ///
    /// # Errors
    /// EINVAL if this open is closed.
    fn begin_wait(&self) -> Result<WaitGuard>;

    /// How long a waiting caller that found nothing should drive the port itself now,
    /// before it blocks: [`PortConfig::caller_spin`](super::PortConfig::caller_spin)
    /// while the port's recent waits were that short, else zero (see the `spin` module;
    /// always zero where the transport gains nothing by it).
    fn caller_spin(&self) -> Duration;

    /// Whether this port's callers ever spin (its
    /// [`PortConfig::caller_spin`](super::PortConfig::caller_spin) is not zero): where
    /// they never do, a caller need not time its waits for [`WaitHooks::note_wait`].
    fn caller_spins(&self) -> bool;

    /// A caller outside the port (the C library's `umad_recv`) waited `waited` for a
    /// message it then got: counts in [`WaitHooks::caller_spin`]'s policy.
    fn note_wait(&self, waited: Duration);
}

impl WaitHooks for Port {
    fn recv_before_wait_with<R>(&self, take: impl FnMut(&Event) -> Result<R>) -> Result<R> {
        self.recv_inner(Some(Duration::ZERO), true, None, take)
    }

    fn begin_wait(&self) -> Result<WaitGuard> {
        let mut core = self.open_core()?;
        WaitGuard::new(self.shared.clone(), self.key, &mut core)
    }

    fn caller_spin(&self) -> Duration {
        self.shared.spin.budget()
    }

    fn caller_spins(&self) -> bool {
        self.shared.spin.spins()
    }

    fn note_wait(&self, waited: Duration) {
        self.shared.spin.note_wait(waited);
    }
}
