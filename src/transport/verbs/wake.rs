//! Waking a parked port thread: a flag for the busy-polling wait, and a
//! socket pair whose read end is polled next to the completion channel.
//!
//! The socket is written only while the transport sleeps in `poll(2)`: a port
//! thread that busy-polls sees the flag, so a sender that wakes it makes no
//! system call, nor does the thread to take the wake.

use std::io::{self, Read, Write};
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use nix::errno::Errno;
use nix::poll::{PollFd, PollFlags, PollTimeout};

use crate::transport::Waker;

pub(super) struct Wake {
    /// A wake came and was not taken.
    flag: Arc<AtomicBool>,
    /// The transport is in (or about to enter) `poll(2)`: a wake must write.
    asleep: Arc<AtomicBool>,
    rx: UnixStream,
    tx: Arc<UnixStream>,
}

impl Wake {
    pub(super) fn new() -> io::Result<Wake> {
        let (rx, tx) = UnixStream::pair()?;
        rx.set_nonblocking(true)?;
        tx.set_nonblocking(true)?;
        Ok(Wake {
            flag: Arc::new(AtomicBool::new(false)),
            asleep: Arc::new(AtomicBool::new(false)),
            rx,
            tx: Arc::new(tx),
        })
    }

    pub(super) fn waker(&self) -> Waker {
        let (flag, asleep, tx) = (self.flag.clone(), self.asleep.clone(), self.tx.clone());
        Waker::new(move || {
            // SeqCst on both sides: either the sleeper sees the flag before it sleeps
            // (`sleep`), or this sees it asleep and writes.
            if !flag.swap(true, Ordering::SeqCst) && asleep.load(Ordering::SeqCst) {
                // A full socket buffer already means "wake up": ignore WouldBlock.
                let _ = (&*tx).write(&[1]);
            }
        })
    }

    /// Whether a wake came since the last call (and consume it).
    pub(super) fn take(&self) -> bool {
        self.flag.swap(false, Ordering::SeqCst)
    }

    /// About to sleep on [`Wake::fd`]: `None` if a wake came first (taken), else a
    /// guard for the sleep, during which wakes write the socket.
    pub(super) fn sleep(&self) -> Option<Asleep<'_>> {
        self.asleep.store(true, Ordering::SeqCst);
        let guard = Asleep(self);
        if self.take() {
            return None;
        }
        Some(guard)
    }

    pub(super) fn fd(&self) -> BorrowedFd<'_> {
        self.rx.as_fd()
    }
}

/// A sleep on the wake socket; [`Asleep::woken`] after `poll(2)` said it is readable.
pub(super) struct Asleep<'a>(&'a Wake);

impl Asleep<'_> {
    /// The socket was readable: drain it, and take the wake.
    pub(super) fn woken(self) {
        let mut buf = [0u8; 64];
        while matches!((&self.0.rx).read(&mut buf), Ok(n) if n > 0) {}
        self.0.take();
    }
}

impl Drop for Asleep<'_> {
    fn drop(&mut self) {
        self.0.asleep.store(false, Ordering::SeqCst);
    }
}

/// Wait until one of `fds` is readable or `timeout` passes; which ones are (`None`
/// entries are not polled, and are never readable).
pub(super) fn readable<const N: usize>(
    fds: [Option<BorrowedFd<'_>>; N],
    timeout: Option<Duration>,
) -> io::Result<[bool; N]> {
    let ms = match timeout {
        None => PollTimeout::NONE,
        // Round up: a sub-millisecond wait must not become a busy loop of zero waits.
        Some(t) => {
            let ms = t.as_micros().div_ceil(1000).min(i32::MAX as u128) as i32;
            PollTimeout::try_from(ms).unwrap_or(PollTimeout::MAX)
        }
    };
    let mut polled: Vec<PollFd<'_>> = fds
        .iter()
        .flatten()
        .map(|fd| PollFd::new(*fd, PollFlags::POLLIN))
        .collect();
    match nix::poll::poll(&mut polled, ms) {
        Ok(_) => {}
        Err(Errno::EINTR) => return Ok([false; N]),
        Err(e) => return Err(e.into()),
    }
    // Flags nix does not know (`None`) are still an event, as any non-zero revents.
    let mut ready = polled.iter().map(|p| p.any().unwrap_or(true));
    Ok(fds.map(|fd| fd.is_some() && ready.next().unwrap_or(false)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wake_ends_the_wait_once() {
        let w = Wake::new().unwrap();
        assert!(!w.take());
        let waker = w.waker();
        let asleep = w.sleep().expect("no wake came yet");
        waker.wake();
        waker.wake();
        let r = readable(
            [Some(w.fd()), None, Some(w.fd())],
            Some(Duration::from_secs(5)),
        );
        assert_eq!(r.unwrap(), [true, false, true]);
        asleep.woken();
        assert!(!w.take());
        let r = readable([Some(w.fd()), Some(w.fd())], Some(Duration::ZERO)).unwrap();
        assert_eq!(r, [false, false]);
    }

    #[test]
    fn a_wake_while_busy_polling_is_only_the_flag() {
        let w = Wake::new().unwrap();
        let waker = w.waker();
        waker.wake();
        // Nothing written: the busy-polling thread sees the flag.
        let r = readable([Some(w.fd())], Some(Duration::ZERO)).unwrap();
        assert_eq!(r, [false]);
        assert!(w.take());
        assert!(!w.take());
        // A wake before a sleep ends it before it starts.
        waker.wake();
        assert!(w.sleep().is_none());
        assert!(w.sleep().is_some());
    }
}
