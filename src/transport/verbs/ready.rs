//! The ready descriptor ([`Transport::ready_fd`]): how a caller waiting for a MAD
//! polls the CQ itself ([`VerbsConfig::caller_driven`]).
//!
//! The port's threads poll one descriptor, an epoll fd, level-triggered, over:
//!
//! - the completion channel (non-blocking; both CQs signal it),
//! - the context's async-event fd,
//! - an eventfd this transport sets when a turn left completions in the CQ,
//! - (hybrid) the kernel's umad device ([`VerbsTransport::also_wake_on`]).
//!
//! A completion channel is not a level: it gives one event per arm
//! (`ibv_req_notify_cq`), and arming does not raise one for completions already
//! queued. Whoever waits sleeps on the epoll fd without the transport, so the
//! descriptor must stay truthful after every turn. The rules that make it so (each
//! broken once in a prototype that hung; `../shared/research/verbs-caller-driven.md`):
//!
//! 1. Every draining turn ([`Transport::recv_burst`]) leaves the receive CQ armed, not
//!    only a turn that found nothing: a turn that received and left it unarmed lets
//!    the next waiter sleep on a channel that never fires.
//! 2. After arming, the CQ is polled once more: a completion that landed between the
//!    last poll and the arm raises no event. What that poll cannot take (the burst is
//!    full) sets the eventfd, so the descriptor shows it.
//! 3. An event on the channel is taken (`ibv_get_cq_event`) and acked at once, in the
//!    turn: an event left there keeps every poller awake, and an unacked one makes
//!    `ibv_destroy_cq` wait forever at close.
//! 4. Arming and taking events happen only inside a turn, under the port's I/O lock
//!    (the `armed` flags are the turn's; waiters hold no lock while they poll).
//!    Several waiters may wake for one event: the I/O lock serialises their turns,
//!    and the later ones find the CQ empty and armed.
//! 5. No edge triggering (no `EPOLLET`, no `EPOLLONESHOT`): a poller that missed an
//!    edge would sleep forever.
//! 6. Async events are drained in the turn that sees their fd readable (else the
//!    descriptor stays readable: a livelock of empty turns).
//! 7. [`Transport::idle_limit`] brings a turn at least every
//!    [`events::LIVENESS_EVERY`](super::events), and a turn that found the descriptor
//!    quiet looks at the clock: a removed device (no event on rxe) is still seen.
//! 8. Reposts held back for batching are flushed by a turn that received nothing.
//! 9. While sends wait for a slot, the send CQ is armed (in `transmit`, then reaped
//!    once more): a send completion then makes the descriptor readable.
//!
//! One `epoll_wait` with a zero timeout at the start of a turn says which of the four
//! is readable: the hybrid transport reads the umad device only when it is.

use std::io;
use std::os::fd::{AsFd, BorrowedFd};

use nix::sys::epoll::{Epoll, EpollCreateFlags, EpollEvent, EpollFlags, EpollTimeout};
use nix::sys::eventfd::{EfdFlags, EventFd};

/// What `look` found readable.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Seen {
    pub(super) channel: bool,
    pub(super) async_fd: bool,
    pub(super) leftover: bool,
    pub(super) extra: bool,
}

impl Seen {
    pub(super) fn quiet(&self) -> bool {
        *self == Seen::default()
    }
}

const CHANNEL: u64 = 0;
const ASYNC: u64 = 1;
const LEFTOVER: u64 = 2;
const EXTRA: u64 = 3;

/// The epoll fd and the leftover eventfd.
pub(super) struct ReadyFd {
    epoll: Epoll,
    leftover: EventFd,
    /// The eventfd holds a count (not read back yet).
    leftover_set: bool,
}

impl ReadyFd {
    pub(super) fn new(channel: BorrowedFd<'_>, async_fd: BorrowedFd<'_>) -> io::Result<ReadyFd> {
        let epoll = Epoll::new(EpollCreateFlags::EPOLL_CLOEXEC)?;
        let leftover = EventFd::from_flags(EfdFlags::EFD_NONBLOCK | EfdFlags::EFD_CLOEXEC)?;
        // Level-triggered: EPOLLIN alone (rule 5).
        epoll.add(channel, EpollEvent::new(EpollFlags::EPOLLIN, CHANNEL))?;
        epoll.add(async_fd, EpollEvent::new(EpollFlags::EPOLLIN, ASYNC))?;
        epoll.add(&leftover, EpollEvent::new(EpollFlags::EPOLLIN, LEFTOVER))?;
        Ok(ReadyFd {
            epoll,
            leftover,
            leftover_set: false,
        })
    }

    /// Watch `fd` too (the hybrid transport's umad device). The caller keeps `fd` open
    /// as long as this.
    pub(super) fn add_extra(&self, fd: BorrowedFd<'_>) -> io::Result<()> {
        self.epoll
            .add(fd, EpollEvent::new(EpollFlags::EPOLLIN, EXTRA))?;
        Ok(())
    }

    pub(super) fn fd(&self) -> BorrowedFd<'_> {
        self.epoll.0.as_fd()
    }

    /// What is readable now (one `epoll_wait`, no waiting); the leftover count, if
    /// set, is read back (the turn is taking what it stood for).
    pub(super) fn look(&mut self) -> io::Result<Seen> {
        let mut events = [EpollEvent::empty(); 4];
        let n = match self.epoll.wait(&mut events, EpollTimeout::ZERO) {
            Ok(n) => n,
            Err(nix::errno::Errno::EINTR) => 0,
            Err(e) => return Err(e.into()),
        };
        let mut seen = Seen::default();
        // Any event counts, EPOLLERR and EPOLLHUP too (a device gone shows as those).
        for e in &events[..n] {
            match e.data() {
                CHANNEL => seen.channel = true,
                ASYNC => seen.async_fd = true,
                LEFTOVER => seen.leftover = true,
                _ => seen.extra = true,
            }
        }
        if seen.leftover || self.leftover_set {
            // EAGAIN when already zero: nothing to undo.
            let _ = self.leftover.read();
            self.leftover_set = false;
        }
        Ok(seen)
    }

    /// A turn left completions it could not take: keep the descriptor readable.
    pub(super) fn set_leftover(&mut self) -> io::Result<()> {
        if !self.leftover_set {
            self.leftover.write(1)?;
            self.leftover_set = true;
        }
        Ok(())
    }

    pub(super) fn leftover_pending(&self) -> bool {
        self.leftover_set
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nix::poll::{PollFd, PollFlags, PollTimeout};
    use std::io::Write;
    use std::os::unix::net::UnixStream;

    fn readable(fd: BorrowedFd<'_>) -> bool {
        let mut p = [PollFd::new(fd, PollFlags::POLLIN)];
        nix::poll::poll(&mut p, PollTimeout::ZERO).unwrap() == 1
    }

    /// Level-triggered: the descriptor stays readable until what made it so is taken,
    /// however many times it is polled; the leftover count is taken by the next look.
    #[test]
    fn the_descriptor_is_a_level_of_its_sources() {
        let (ch_rx, mut ch_tx) = UnixStream::pair().unwrap();
        let (as_rx, _as_tx) = UnixStream::pair().unwrap();
        let (ex_rx, mut ex_tx) = UnixStream::pair().unwrap();
        let mut r = ReadyFd::new(ch_rx.as_fd(), as_rx.as_fd()).unwrap();
        r.add_extra(ex_rx.as_fd()).unwrap();
        assert!(!readable(r.fd()));
        assert!(r.look().unwrap().quiet());

        ch_tx.write_all(&[1]).unwrap();
        for _ in 0..3 {
            assert!(readable(r.fd()), "still readable: nobody took the byte");
        }
        let seen = r.look().unwrap();
        assert!(seen.channel && !seen.extra && !seen.leftover && !seen.async_fd);
        let mut b = [0u8; 1];
        std::io::Read::read(&mut &ch_rx, &mut b).unwrap();
        assert!(!readable(r.fd()));

        r.set_leftover().unwrap();
        r.set_leftover().unwrap();
        assert!(r.leftover_pending() && readable(r.fd()));
        assert_eq!(
            r.look().unwrap(),
            Seen {
                leftover: true,
                ..Seen::default()
            }
        );
        assert!(!r.leftover_pending() && !readable(r.fd()));

        ex_tx.write_all(&[1]).unwrap();
        assert!(r.look().unwrap().extra);
        assert!(r.look().unwrap().extra, "a level, not an edge");
    }
}
