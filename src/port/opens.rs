//! The opens of a port and the state they share with the port thread (the core).

use std::collections::{BTreeMap, VecDeque};
use std::io::{self, Read, Write};
use std::os::unix::net::UnixStream;
use std::sync::Arc;

use crate::engine::{AgentId, Engine, Event};
use crate::Error;

/// One open of the port: what one `open()` of the kernel's umad device holds.
#[derive(Debug)]
pub(super) struct Open {
    /// Messages for this open's agents, oldest first.
    pub(super) queue: VecDeque<Event>,
    /// The readable end handed out by [`Port::fd`] holds one byte iff a message is
    /// queued (or the port has failed). Shared with callers polling it, so that it
    /// outlives a close under their poll (which then sees `fd_write` hang up).
    pub(super) fd_read: Arc<UnixStream>,
    pub(super) fd_write: UnixStream,
    pub(super) fd_ready: bool,
    /// Callers polling `fd_read` now ([`WaitGuard`](super::ready::WaitGuard)s); with
    /// `handed_out`, whether anyone can be polling it: else the descriptor is left alone
    /// (two system calls per message saved when the thread that runs the turn takes the
    /// message itself).
    pub(super) pollers: usize,
    /// [`Port::fd`] gave the descriptor out: it must always tell.
    pub(super) handed_out: bool,
}

impl Open {
    pub(super) fn new() -> io::Result<Open> {
        let (fd_read, fd_write) = UnixStream::pair()?;
        fd_read.set_nonblocking(true)?;
        fd_write.set_nonblocking(true)?;
        Ok(Open {
            queue: VecDeque::new(),
            fd_read: Arc::new(fd_read),
            fd_write,
            fd_ready: false,
            pollers: 0,
            handed_out: false,
        })
    }

    /// Make the descriptor's readability say whether a message is queued (or the
    /// port failed), where anyone can be polling it.
    pub(super) fn show(&mut self, failed: bool) {
        let polled = self.pollers > 0 || self.handed_out;
        self.signal(polled && (failed || !self.queue.is_empty()));
    }

    /// Make the descriptor's readability say `want`.
    pub(super) fn signal(&mut self, want: bool) {
        if want && !self.fd_ready {
            // A non-blocking one-byte write to an empty socket buffer cannot fail short.
            self.fd_ready = self.fd_write.write(&[1]).is_ok();
        } else if !want && self.fd_ready {
            let mut b = [0u8; 1];
            self.fd_ready = (&*self.fd_read).read(&mut b).is_err();
        }
    }
}

/// What application threads and the port thread share, under one lock.
pub(super) struct Core {
    pub(super) engine: Engine,
    /// Every open is closed: the port is gone.
    pub(super) closed: bool,
    /// Why the transport stopped for good; then receives (once queues are empty),
    /// polls and sends fail with EIO.
    pub(super) failed: Option<String>,
    /// The opens, by key (0: the first).
    pub(super) opens: BTreeMap<u32, Open>,
    pub(super) next_open: u32,
    /// The open that registered each agent, by agent id.
    pub(super) owners: Vec<Option<u32>>,
    /// Most messages one open's queue holds (the engine's `max_events`).
    pub(super) max_queued: usize,
    /// Threads blocked on the condition variable ([`Port::wait_ready`](super::Port)):
    /// a turn that queued messages notifies it only when some wait.
    pub(super) cv_waiters: usize,
}

impl Core {
    /// Hand the engine's events to the opens whose agents they are for, then make each
    /// descriptor's readability match its queue.
    pub(super) fn settle(&mut self) {
        while let Some(event) = self.engine.poll_event() {
            let (Event::Recv { agent, .. } | Event::SendTimedOut { agent, .. }) = &event;
            let agent = *agent;
            let owner = self.owners.get(agent.0 as usize).copied().flatten();
            let Some(open) = owner.and_then(|k| self.opens.get_mut(&k)) else {
                // Its open closed after the engine queued it: nobody can receive it.
                continue;
            };
            // As the engine's own limit: never a timeout report, nor an answer to one of
            // the open's requests (a response); a dropped request is forgotten by the
            // duplicate filter, so its retry gets through.
            let keep = match &event {
                Event::SendTimedOut { .. } => true,
                Event::Recv { mad, .. } => {
                    crate::wire::mad::Packet::new_checked(&mad[..]).is_ok_and(|m| m.is_response())
                }
            };
            if !keep && open.queue.len() >= self.max_queued {
                self.engine.undeliver(&event);
                continue;
            }
            open.queue.push_back(event);
        }
        let failed = self.failed.is_some();
        for open in self.opens.values_mut() {
            open.show(failed);
        }
    }

    /// The error for a caller once the transport has failed.
    pub(super) fn failure(&self) -> Option<Error> {
        self.failed.as_ref().map(|why| {
            Error::Io(io::Error::new(
                io::ErrorKind::BrokenPipe,
                format!("the port's transport failed: {why}"),
            ))
        })
    }

    /// Record that the transport stopped for good (the first reason is kept), and
    /// drop what nobody will ever drive again: every request, RMPP session, unsent
    /// MAD and timer ([`Engine::abandon`]); the queued messages can still be taken.
    pub(super) fn fail(&mut self, why: String) {
        if self.failed.is_none() {
            vmad_debug!(target: "vmad::port", reason = %why, "transport failed");
            self.failed = Some(why);
        }
        // Not while the port thread unwinds from a panic: the engine may be
        // half-updated then, and a second panic in its bookkeeping would abort the
        // process. The port fails all the same (EIO); its state goes when it closes.
        if !std::thread::panicking() {
            self.engine.abandon();
        }
        self.settle();
    }

    pub(super) fn owns(&self, key: u32, agent: AgentId) -> bool {
        self.owners.get(agent.0 as usize).copied().flatten() == Some(key)
    }
}
