//! The turn, and the port thread's loops (see the module docs of `port`).

use std::io;
use std::sync::PoisonError;
use std::time::{Instant as Clock, SystemTime};

use super::ready::{self, Ready};
use super::{spin, Core, Io, PortConfig, Shared};
use crate::engine::Transmit;
use crate::pcap::Direction;
use crate::time::Instant;
use crate::wire::MAD_SIZE;

/// Fails the port when the port thread ends while opens remain (a dead transport, or
/// a panic), so that no receiver waits forever on a port nobody drives.
struct ClosedOnExit<'a>(&'a Shared);

impl Drop for ClosedOnExit<'_> {
    fn drop(&mut self) {
        {
            let mut core = self.0.lock();
            if !core.closed {
                core.fail("the port thread ended".into());
            }
        }
        self.0.ready.notify_all();
        // Close the port for the fabric (a caller mid-turn finishes first).
        let io = self
            .0
            .io
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        drop(io);
    }
}

/// One turn (see the module docs) with the I/O lock held: returns whether it did any
/// work, and the engine's next deadline.
pub(super) fn turn(shared: &Shared, io: &mut Io, receive: bool) -> (bool, Option<Instant>) {
    turn_at(shared, io, receive, Clock::now())
}

/// [`turn`] at `os_now`, the OS's time the caller has just read (see
/// [`crate::clock::Clock::at`]).
pub(super) fn turn_at(
    shared: &Shared,
    io: &mut Io,
    receive: bool,
    os_now: Clock,
) -> (bool, Option<Instant>) {
    let (mut worked, mut deadline) = turn_pass(shared, io, receive, shared.clock.at(os_now));
    // A send that had to read to make room left MADs that the transport's descriptor no
    // longer shows: take them now, as nobody would be woken for them.
    for _ in 0..8 {
        if !io.transport.rx_held() {
            break;
        }
        let (w, d) = turn_pass(shared, io, true, shared.now());
        worked |= w;
        deadline = d;
    }
    if shared.parker.is_some() {
        shared.parked_deadline_moved(deadline);
    }
    (worked, deadline)
}

fn turn_pass(shared: &Shared, io: &mut Io, receive: bool, now: Instant) -> (bool, Option<Instant>) {
    {
        let core = shared.lock();
        if core.closed || core.failed.is_some() {
            return (false, None);
        }
    }
    // The port's lock is taken per MAD and never held across the transport's system
    // calls: a thread preempted in a send (the peer it wakes takes its core) would hold
    // up every caller looking at its queue, a convoy of futex waits on a small machine.
    let cap = &mut io.capture;
    let transport = &mut io.transport;
    let received = if !receive {
        Ok(0)
    } else {
        transport.recv_burst(shared.burst, &mut |meta, mad| {
            if let Some(c) = cap {
                c.record_via(
                    SystemTime::now(),
                    Direction::Received,
                    meta.qp,
                    meta.local_qpn,
                    &meta.src,
                    mad,
                );
            }
            shared.lock().engine.handle_datagram(now, meta, mad);
        })
    };
    let mut core = shared.lock();
    let received = match received {
        Ok(n) => n,
        Err(e) if is_transient(&e) => 0,
        Err(e) => {
            core.fail(format!("receive failed: {e}"));
            shared.ready.notify_all();
            return (false, None);
        }
    };
    let engine = &mut core.engine;
    transport.take_undelivered(&mut |header| engine.handle_undelivered(now, header));
    if transport.attrs_changed() {
        *shared.attrs.write().unwrap_or_else(PoisonError::into_inner) = transport.attrs().clone();
    }
    if engine.poll_timeout().is_some_and(|t| t <= now) {
        engine.handle_timeout(now);
    }
    drop(core);
    let (sent, failed) = transmit_queued(shared, io, now);
    let mut core = shared.lock();
    let deadline = core.engine.poll_timeout();
    if let Some(why) = failed {
        core.fail(why);
        shared.ready.notify_all();
        return (false, None);
    }
    // Delivered after the sends: what a message's arrival queued (the ACK of an RMPP
    // transfer's last segment) is on the wire before its receiver can close the port.
    // (What another thread's turn settled meanwhile it has told its waiters about.)
    if core.engine.pending_events() != 0 {
        settle(shared, &mut core);
    }
    (received + sent > 0, deadline)
}

/// Hand the engine's queued MADs to the transport until it has no free slot or the
/// engine nothing to send: how many it took, and why the transport failed, if it did.
fn transmit_queued(shared: &Shared, io: &mut Io, now: Instant) -> (usize, Option<String>) {
    let cap = &mut io.capture;
    let transport = &mut io.transport;
    let mut sent = 0usize;
    // With a capture, a MAD is recorded once the transport has taken it: it then says
    // which QP it left from (the hybrid transport picks one per MAD).
    let capturing = cap.is_some();
    let mut taken: Option<(Transmit, [u8; MAD_SIZE])> = None;
    loop {
        let more = transport.transmit(&mut |slot| {
            let tx = shared.lock().engine.poll_transmit(now, slot);
            if let (Some(t), true) = (&tx, capturing) {
                taken = Some((*t, *slot));
            }
            tx
        });
        if let (Some((t, mad)), Some(c)) = (taken.take(), cap.as_mut()) {
            c.record_via(
                SystemTime::now(),
                Direction::Sent,
                t.qp,
                transport.sent_via(),
                &t.dest,
                &mad[..t.len.min(MAD_SIZE)],
            );
        }
        match more {
            Ok(true) => sent += 1,
            Ok(false) => return (sent, None),
            Err(e) if is_transient(&e) => {
                vmad_debug!(target: "vmad::transport", error = %e, "transmit failed");
                return (sent, None);
            }
            Err(e) => return (sent, Some(format!("send failed: {e}"))),
        }
    }
}

/// Before an open closes: put what its sends queued on the wire (the kernel's `write()`
/// posts a MAD before it returns, so a close after it never loses it). Only transmits:
/// nothing is received, no timer runs, no event is handed out. Returns the engine's
/// next deadline (a request's timer starts when it is sent).
pub(super) fn flush(shared: &Shared, io: &mut Io) -> Option<Instant> {
    {
        let core = shared.lock();
        if core.closed || core.failed.is_some() {
            return None;
        }
    }
    let (_, failed) = transmit_queued(shared, io, shared.now());
    let mut core = shared.lock();
    if let Some(why) = failed {
        core.fail(why);
        shared.ready.notify_all();
        return None;
    }
    core.engine.poll_timeout()
}

/// Hand the engine's new events to the opens and tell their waiters.
fn settle(shared: &Shared, core: &mut Core) {
    core.settle();
    // With a ready descriptor callers block on descriptors, which settle marks;
    // nobody waits on the condition variable. Nor do the C library's callers, which
    // poll their open's descriptor. A notify is a system call: only for a waiter.
    if shared.fdwait.is_none() && core.cv_waiters > 0 {
        shared.ready.notify_all();
    }
}

/// The port thread.
pub(super) fn drive(shared: &Shared, config: &PortConfig) {
    if let Some(ready) = &shared.fdwait {
        return drive_ready(shared, ready);
    }
    let _closed_on_exit = ClosedOnExit(shared);
    let has_waker = shared.waker.is_some();
    let mut idle_since: Option<Clock> = None;
    loop {
        if shared.spinners.load(std::sync::atomic::Ordering::SeqCst) > 0 {
            // Callers spin and run the turns themselves: stand by rather than take
            // the same locks (a caller whose spell ends without a message calls us).
            std::thread::park_timeout(spin::STAND_BY);
            if shared.lock().closed {
                break;
            }
            idle_since = None;
            continue;
        }
        let mut guard = shared.io.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(io) = guard.as_mut() else { break };
        {
            let core = shared.lock();
            if core.closed || core.failed.is_some() {
                break;
            }
        }
        // One clock read per spin: the turn's time is the spin's.
        let now = Clock::now();
        let (worked, deadline) = turn_at(shared, io, true, now);
        if worked {
            idle_since = None;
            continue;
        }
        let since = *idle_since.get_or_insert(now);
        if now.duration_since(since) < config.spin {
            // Yield rather than burn (and without the I/O lock, so callers can drive):
            // on a busy machine the thread that will send us the next frame may need this core.
            drop(guard);
            std::thread::yield_now();
            continue;
        }
        // Park until the engine's next deadline (or a wake / arrival). The deadline was read
        // under the I/O lock, still held: a later send cannot take it, so it wakes us.
        let until = deadline.and_then(|d| shared.clock.park_limit(d));
        let limit = if has_waker {
            until
        } else {
            Some(until.map_or(config.park_slice, |u| u.min(config.park_slice)))
        };
        if limit.is_some_and(|l| l.is_zero()) {
            continue;
        }
        if let Some(parker) = &shared.parker {
            // Parked without the transport: a caller that sends or receives meanwhile
            // runs its own turn instead of leaving it to this thread (a handoff per MAD
            // on a burst of sends, the core's lock contended between the two threads).
            use std::sync::atomic::Ordering::SeqCst;
            let Some(limit) = io.transport.park_limit(limit) else {
                continue;
            };
            // Published under the I/O lock, which every turn takes: a turn that moves the
            // deadline comes after it and wakes us (`Shared::parked_deadline_moved`).
            let planned = deadline.map_or(u64::MAX, |d| d.as_micros().max(1));
            shared.planned.store(planned, SeqCst);
            // Parked, so that a caller's spin wakes us to stand by: else each arrival
            // during the spin would wake us (a system call on the sender's path) to race
            // the spinning caller for it.
            shared.parked.store(true, SeqCst);
            if shared.spinners.load(SeqCst) == 0 {
                drop(guard);
                parker.park(limit);
            }
            shared.parked.store(false, SeqCst);
            shared.planned.store(0, SeqCst);
            idle_since = None;
            continue;
        }
        shared
            .parked
            .store(true, std::sync::atomic::Ordering::SeqCst);
        // A spell announced before `parked` was set did not wake us: look again.
        if shared.spinners.load(std::sync::atomic::Ordering::SeqCst) > 0 {
            shared
                .parked
                .store(false, std::sync::atomic::Ordering::SeqCst);
            continue;
        }
        let waited = io.transport.wait(limit);
        shared
            .parked
            .store(false, std::sync::atomic::Ordering::SeqCst);
        match waited {
            Ok(()) => {}
            Err(e) if is_transient(&e) => std::thread::sleep(config.park_slice),
            Err(e) => {
                shared.lock().fail(format!("wait failed: {e}"));
                shared.ready.notify_all();
            }
        }
        idle_since = None;
    }
}

/// The port thread of a transport with a ready descriptor (see the `ready` module):
/// it never holds the transport between turns.
fn drive_ready(shared: &Shared, ready: &Ready) {
    let _closed_on_exit = ClosedOnExit(shared);
    loop {
        {
            let core = shared.lock();
            if core.closed || core.failed.is_some() {
                break;
            }
        }
        let (worked, idle_limit) = {
            let mut guard = shared.io.lock().unwrap_or_else(PoisonError::into_inner);
            let Some(io) = guard.as_mut() else { break };
            (turn(shared, io, true).0, io.transport.idle_limit())
        };
        shared.turn_if_asked();
        // No spin here ([`PortConfig::spin`] does not apply): callers that wait spin
        // themselves (see the `spin` module); one more spinning thread only takes
        // their CPU.
        if !worked {
            ready::park(shared, ready, idle_limit);
        }
    }
}

/// Whether a transport error may pass (a retry can succeed); any other means the
/// transport is gone (see [`Transport`]'s contract).
fn is_transient(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted | io::ErrorKind::TimedOut
    )
}
