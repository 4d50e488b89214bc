//! Waiting on a transport that has a ready descriptor ([`Transport::ready_fd`]).
//!
//! Such a transport is never held by a parked thread. Every thread that waits polls
//! descriptors instead, without the I/O lock:
//!
//! - a **caller** waiting to receive ([`Port::recv_with`], [`Port::poll`], the C
//!   library's `umad_recv`) polls its open's descriptor *and the transport's*, and
//!   when the transport's turns readable it runs the turn itself: a MAD wakes only
//!   the thread that wants it, as a read on the kernel's umad device (or umad2sim's
//!   socket) does. Callers waiting this way are counted ([`WaitGuard`]);
//! - the **port thread** polls the transport's descriptor only while no caller reads
//!   it (none polls it, and none was at work on the port since its last look: else
//!   every MAD would wake two threads), or when someone polls an open's descriptor
//!   from outside ([`Port::fd`]), and otherwise looks again after [`CALLER_GRACE`], so
//!   the transport is never left unread for long once callers stop coming (ibsim
//!   stalls its whole fabric on a client that does not read). While callers keep
//!   reading it that look comes ever later (doubling up to [`BLIND_WAKE`] while none
//!   polls at that moment, up to [`BLIND_MAX`] while one stays blocked: an idle port
//!   with a blocked caller does not wake a thousand times a second, nor a port with a
//!   caller in a loop of round trips at each of them), and the last caller to stop
//!   polling wakes the port thread when it sleeps blind longer than [`BLIND_WAKE`], to
//!   look again (not to turn: that caller turns itself). It
//!   alone runs the engine's timers, and turns at least every
//!   [`Transport::idle_limit`] (read at each turn);
//! - a **sender** runs its turn at once (the lock is only ever held for a turn) and
//!   wakes the port thread only when the engine's next deadline moved before the one
//!   the port thread sleeps towards.
//!
//! [`Transport::ready_fd`]: crate::transport::Transport::ready_fd
//! [`Transport::idle_limit`]: crate::transport::Transport::idle_limit
//! [`Port::recv_with`]: super::Port::recv_with
//! [`Port::poll`]: super::Port::poll
//! [`Port::fd`]: super::Port::fd

use std::io::{self, Read, Write};
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use nix::poll::{PollFd, PollFlags, PollTimeout};

use super::{Core, Shared};
use crate::time::Instant;
use crate::{Error, Result};

/// How often the port thread looks whether callers still wait on the transport while
/// they do (its longest absence from the transport after they stop).
pub(super) const CALLER_GRACE: Duration = Duration::from_millis(1);

/// The longest the port thread sleeps without watching the transport while callers
/// poll it (see `park`); the engine's deadlines and the transport's idle limit still
/// wake it sooner.
const BLIND_MAX: Duration = Duration::from_secs(1);

/// A caller that stops polling the transport wakes the port thread only when it sleeps
/// blind longer than this (else the port thread looks soon enough by itself): a
/// caller in a loop of round trips then wakes it once in many, not at each.
const BLIND_WAKE: Duration = Duration::from_millis(16);

/// What a byte on the wake socket says: run a turn ...
const WAKE_TURN: u8 = 1;
/// ... or only look again whether callers still read the transport (the last caller
/// stopped polling it while the port thread slept blind).
const WAKE_LOOK: u8 = 2;

/// The port's side of a transport with a ready descriptor.
pub(super) struct Ready {
    /// The transport's descriptor, duplicated (the same open file, so the same
    /// readiness) so that it stays valid as long as anyone may poll it.
    fd: OwnedFd,
    /// Wakes the port thread from its poll.
    wake_tx: UnixStream,
    wake_rx: UnixStream,
    /// Callers polling `fd` now.
    waiters: AtomicUsize,
    /// An open's descriptor is polled from outside: the port thread then reads the
    /// transport even while callers wait.
    watched: AtomicBool,
    /// When the parked port thread will next run a turn, in the port clock's
    /// microseconds; 0 while it is not parked, `u64::MAX` for never.
    planned: AtomicU64,
    /// A thread found the I/O lock taken and left its turn to the holder: 1 for a
    /// transmit, 2 for a receive too (see `Shared::try_turn`).
    asked: AtomicU8,
    /// The port thread sleeps longer than [`BLIND_WAKE`] without watching the
    /// transport: the last caller to stop polling it must wake the port thread.
    blind_long: AtomicBool,
    /// A caller was at work on the port (ran a turn, or just stopped polling to run one)
    /// since the port thread last looked: callers count as reading the transport
    /// themselves although none polls it right now (one that just returned a message is
    /// likely back before the next look). A flag, not a time: a caller reads no clock
    /// for it (a system call on some hosts).
    callers_active: AtomicBool,
}

impl Ready {
    pub(super) fn new(fd: OwnedFd) -> io::Result<Ready> {
        let (wake_tx, wake_rx) = UnixStream::pair()?;
        wake_tx.set_nonblocking(true)?;
        wake_rx.set_nonblocking(true)?;
        Ok(Ready {
            fd,
            wake_tx,
            wake_rx,
            waiters: AtomicUsize::new(0),
            watched: AtomicBool::new(false),
            blind_long: AtomicBool::new(false),
            planned: AtomicU64::new(0),
            asked: AtomicU8::new(0),
            callers_active: AtomicBool::new(false),
        })
    }

    /// A caller is at work on the port (a turn, a receive): the port thread leaves the
    /// transport to callers until its next look at least.
    pub(super) fn caller_active(&self) {
        if !self.callers_active.load(Ordering::Relaxed) {
            self.callers_active.store(true, Ordering::Relaxed);
        }
    }

    /// Whether callers read the transport themselves (polling it now, or at work since
    /// the last look); the port thread asks once per look.
    fn callers_read(&self) -> bool {
        self.callers_active.swap(false, Ordering::Relaxed)
            | (self.waiters.load(Ordering::SeqCst) != 0)
    }

    /// Ask for a turn (with a receive, or only a transmit): whoever holds the I/O lock
    /// next, or now, runs it.
    pub(super) fn ask(&self, receive: bool) {
        self.asked
            .fetch_max(if receive { 2 } else { 1 }, Ordering::SeqCst);
    }

    /// Take the requests for a turn: whether one wanted a receive.
    pub(super) fn take_asked(&self) -> bool {
        self.asked.swap(0, Ordering::SeqCst) == 2
    }

    /// Whether a turn was asked for since the last [`Ready::take_asked`].
    pub(super) fn asked(&self) -> bool {
        self.asked.load(Ordering::SeqCst) != 0
    }

    /// Make the port thread's poll return, for a turn.
    pub(super) fn wake(&self) {
        // A full buffer already means "wake up".
        let _ = (&self.wake_tx).write(&[WAKE_TURN]);
    }

    /// Make the port thread look again whether callers still read the transport.
    fn wake_to_look(&self) {
        let _ = (&self.wake_tx).write(&[WAKE_LOOK]);
    }

    /// Someone outside polls an open's descriptor: keep the transport read for them.
    pub(super) fn watch(&self) {
        if !self.watched.swap(true, Ordering::SeqCst) {
            self.wake();
        }
    }

    /// After a turn on a thread other than the port thread: wake the port thread if
    /// the engine's next deadline is now before the time it sleeps towards.
    pub(super) fn deadline_moved(&self, deadline: Option<Instant>) {
        let planned = self.planned.load(Ordering::SeqCst);
        if planned != 0 && deadline.is_some_and(|d| d.as_micros() < planned) {
            self.wake();
        }
    }

    /// Callers polling the transport's descriptor now.
    pub(super) fn waiters(&self) -> usize {
        self.waiters.load(Ordering::SeqCst)
    }

    pub(super) fn raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

/// A caller counted as waiting on the transport while it lives: what the C library's
/// `umad_recv` holds around its poll(2), so that a cancelled wait still ends the count.
pub struct WaitGuard {
    shared: Arc<Shared>,
    key: u32,
    /// The open's descriptor, kept open until the wait ends.
    open: Arc<UnixStream>,
}

impl WaitGuard {
    /// Count a caller of open `key` as polling its descriptor (and the transport's);
    /// the descriptor shows a message already queued. `core` is the port's, locked.
    pub(super) fn new(shared: Arc<Shared>, key: u32, core: &mut Core) -> Result<WaitGuard> {
        let failed = core.failed.is_some();
        let Some(o) = core.opens.get_mut(&key) else {
            return Err(Error::InvalidPort);
        };
        o.pollers += 1;
        o.show(failed);
        let open = o.fd_read.clone();
        if let Some(r) = &shared.fdwait {
            r.waiters.fetch_add(1, Ordering::SeqCst);
        }
        Ok(WaitGuard { shared, key, open })
    }

    /// The descriptors to poll for reading: the open's, then the transport's (-1 where
    /// the transport has none; then the open's alone tells).
    pub fn fds(&self) -> [RawFd; 2] {
        [
            self.open.as_raw_fd(),
            self.shared.fdwait.as_ref().map_or(-1, Ready::raw_fd),
        ]
    }

    /// Poll both descriptors for up to `timeout` (`None`: no limit); returns whether
    /// the transport's turned readable (the caller then runs a turn).
    pub(super) fn wait(&self, timeout: Option<Duration>) -> io::Result<bool> {
        let Some(ready) = &self.shared.fdwait else {
            return Ok(false);
        };
        let mut fds = [
            PollFd::new(self.open.as_fd(), PollFlags::POLLIN),
            PollFd::new(ready.fd.as_fd(), PollFlags::POLLIN),
        ];
        match nix::poll::poll(&mut fds, poll_timeout(timeout)) {
            Ok(_) => {}
            Err(nix::errno::Errno::EINTR) => return Ok(false),
            Err(e) => return Err(e.into()),
        }
        Ok(fds[1].any().unwrap_or(false))
    }
}

impl std::fmt::Debug for WaitGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WaitGuard")
            .field("open", &self.key)
            .field("fds", &self.fds())
            .finish()
    }
}

impl Drop for WaitGuard {
    fn drop(&mut self) {
        if let Some(r) = &self.shared.fdwait {
            // The caller runs its own turn next: it still reads the transport.
            r.caller_active();
            // SeqCst both here and in `park`: either the port thread sees no waiter
            // before a long sleep, or this sees it asleep and wakes it.
            if r.waiters.fetch_sub(1, Ordering::SeqCst) == 1
                && r.blind_long.swap(false, Ordering::SeqCst)
            {
                r.wake_to_look();
            }
        }
        let mut core = self.shared.lock();
        let failed = core.failed.is_some();
        if let Some(o) = core.opens.get_mut(&self.key) {
            o.pollers -= 1;
            o.show(failed);
        }
    }
}

/// Park the port thread until it should run a turn: the transport readable (when it
/// watches it), a wake, the engine's deadline, or `idle_limit` (the transport's, read
/// at the turn before). Returns at once when the port is closed.
pub(super) fn park(shared: &Shared, ready: &Ready, idle_limit: Option<Duration>) {
    let started = std::time::Instant::now();
    // How long to sleep without watching the transport while callers poll it.
    let mut blind = CALLER_GRACE;
    // Asked once per look (the answer consumes the callers' activity flag).
    let mut reading = ready.callers_read();
    loop {
        let deadline = next_deadline(shared);
        let watch = !reading || ready.watched.load(Ordering::SeqCst);
        // While callers read the transport this thread looks again after `blind`
        // anyway: a later deadline needs no wake (a send arming a request's timer would
        // otherwise wake it, for nothing, at nearly every MAD of a lightly loaded port).
        let mut planned = deadline.map_or(u64::MAX, |t| t.as_micros().max(1));
        if !watch {
            let look = shared.now() + blind;
            planned = planned.min(look.as_micros().max(1));
        }
        ready.planned.store(planned, Ordering::SeqCst);
        // A turn elsewhere that moved the deadline before `planned` was published did
        // not wake us: look once more now that it is.
        let (closed, deadline) = {
            let core = shared.lock();
            (core.closed, core.engine.poll_timeout())
        };
        if closed {
            ready.planned.store(0, Ordering::SeqCst);
            return;
        }
        // Real time to wait: to the engine's deadline on the port's clock (a virtual
        // clock says none: it runs the port itself), and the transport's idle limit.
        let idle_left = idle_limit.map(|l| l.saturating_sub(started.elapsed()));
        let limit = match (deadline.and_then(|d| shared.clock.park_limit(d)), idle_left) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let due = |limit: Option<Duration>| limit.is_some_and(|l| l.is_zero());
        if due(limit) {
            ready.planned.store(0, Ordering::SeqCst);
            return;
        }
        let limit = if watch {
            limit
        } else {
            Some(limit.map_or(blind, |l| l.min(blind)))
        };
        if !watch && blind > BLIND_WAKE {
            ready.blind_long.store(true, Ordering::SeqCst);
            // No caller polls now to see the flag (one between two polls, or gone): sleep
            // no longer than a caller's leaving may go unnoticed.
            if ready.waiters() == 0 {
                ready.blind_long.store(false, Ordering::SeqCst);
                blind = BLIND_WAKE;
                continue;
            }
        }
        let mut fds = [
            PollFd::new(ready.wake_rx.as_fd(), PollFlags::POLLIN),
            PollFd::new(ready.fd.as_fd(), PollFlags::POLLIN),
        ];
        let n = if watch { 2 } else { 1 };
        let polled = nix::poll::poll(&mut fds[..n], poll_timeout(limit));
        ready.planned.store(0, Ordering::SeqCst);
        ready.blind_long.store(false, Ordering::SeqCst);
        let readable = watch && fds[1].any().unwrap_or(false);
        let mut woken = false;
        let mut look = false;
        if fds[0].any().unwrap_or(false) {
            let mut drain = [0u8; 64];
            while let Ok(n @ 1..) = (&ready.wake_rx).read(&mut drain) {
                for &b in &drain[..n] {
                    if b == WAKE_LOOK {
                        look = true;
                    } else {
                        woken = true;
                    }
                }
            }
        }
        let timed_out = deadline.is_some_and(|d| shared.now() >= d)
            || idle_limit.is_some_and(|l| started.elapsed() >= l);
        if woken || readable || timed_out || polled.is_err() {
            return;
        }
        // `blind` passed, or the last caller stopped polling (`look`; no turn: that
        // caller runs its own): watch the transport if no caller reads it any more.
        // Else look again, later each time while they keep reading it (polling it, or
        // at work between two polls: a caller in a loop of round trips often is when
        // this looks), but soon after a `look`. A sleep past `BLIND_WAKE` is taken only
        // while one polls (above).
        reading = ready.callers_read();
        blind = if reading && !look {
            (blind * 2).min(BLIND_MAX)
        } else {
            CALLER_GRACE
        };
    }
}

fn next_deadline(shared: &Shared) -> Option<Instant> {
    shared.lock().engine.poll_timeout()
}

/// poll(2)'s timeout for `t`, rounded up to whole milliseconds (`None`: no limit).
fn poll_timeout(t: Option<Duration>) -> PollTimeout {
    match t {
        None => PollTimeout::NONE,
        Some(t) => {
            let ms = t.as_micros().div_ceil(1000).min(i32::MAX as u128) as i32;
            PollTimeout::try_from(ms).unwrap_or(PollTimeout::MAX)
        }
    }
}
