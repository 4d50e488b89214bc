//! One open CA port of an in-process fabric: the [`SimTransport`].

use core::cmp::Reverse;
use core::time::Duration;
use std::collections::{BinaryHeap, VecDeque};
use std::io;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};

use crate::clock::Clock;
use crate::engine::{RecvMeta, Transmit};
use crate::time::Instant;
use crate::transport::{Arrivals, Caps, Parker, PortAttrs, Transport, Waker};
use crate::types::{GrhAddr, MadAddr, Qp, DEFAULT_PKEY, GSI_QKEY};
use crate::wire::MAD_SIZE;
use crate::Result;

use super::{Medium, Pkt, RawFrame, SendMemo};

/// A frame waiting in a port's queue.
#[derive(Debug, Clone)]
pub(crate) struct Frame {
    meta: RecvMeta,
    mad: [u8; MAD_SIZE],
    len: usize,
    /// When (on the fabric's clock) a delayed or reordered frame may be received.
    due: Option<Instant>,
}

/// What travels through a port's [`Mailbox`].
///
/// A frame travels inline, not boxed: a box per frame is a `malloc` on the sending
/// thread and a `free` on the receiving one, which glibc serves by locking the sender's
/// arena (18 % of the samples of `port/rmpp_gettable_1mib`).
#[derive(Debug)]
#[allow(clippy::large_enum_variant)] // see above: the size is the point
pub(crate) enum Msg {
    Frame(Frame),
    /// Nothing to receive: only ends a [`Transport::wait`].
    Wake,
}

impl Msg {
    pub(crate) fn frame(qp: Qp, pkt: &Pkt, delay: Duration, clock: &dyn Clock) -> Msg {
        let src = MadAddr {
            qpn: pkt.sqp,
            qkey: 0,
            lid: pkt.slid,
            sl: pkt.sl,
            path_bits: 0,
            grh: pkt.grh,
            pkey_index: pkt.pkey_index,
        };
        Msg::Frame(Frame {
            meta: RecvMeta {
                qp,
                src,
                local_qpn: None,
            },
            mad: pkt.mad,
            len: pkt.len,
            due: (!delay.is_zero()).then(|| clock.now() + delay),
        })
    }
}

/// Frames one open port holds for its owner at most: delivered to it and not yet
/// received (in its mailbox, held back until due, or ready). A frame that arrives
/// while the port holds this many is dropped and counted
/// ([`crate::subnet::PortCounters::rcv_queue_overflows`]), as an HCA drops a UD
/// packet that finds no posted receive (mlx5 counts it as `out_of_buffer`): the
/// sender never waits for a slow reader. 8,192 is the largest receive queue the
/// kernel's MAD layer posts per QP (`ib_mad`'s `recv_queue_size`, default 512):
/// room for the bursts legitimate peers send (an RMPP window is 64 segments) with
/// the reader some milliseconds behind, and at most about 3 MiB per port under a
/// flood (a frame takes some 370 bytes).
pub const RECV_QUEUE_DEPTH: usize = 8192;

/// Where the fabric's threads leave messages for one open port, and its owner takes
/// them: two queues that trade places. Senders append to the shared one under the
/// lock; the owner swaps it for its own, emptied, queue and reads what it got without
/// the lock. Both keep their buffers, so a frame is copied once in and read in place,
/// into memory used before. (A crossbeam channel allocated and zeroed a block of 31
/// slots per 31 frames, freed by the receiver: with the copy in, 18 % of the sending
/// thread's samples in `port/rmpp_gettable_1mib`.)
///
/// The count of frames the port holds lies in the same cache line as the lock: a
/// sender changes both for every frame, and the receiver both for every burst, so one
/// line travels between their cores, not two.
#[derive(Debug, Default)]
#[repr(C, align(64))]
struct Mailbox {
    /// Frames the port holds (see [`RECV_QUEUE_DEPTH`]): delivered and not yet
    /// received, here or in the owner's hands. Also its [`Arrivals`].
    held: AtomicUsize,
    inbox: Mutex<Inbox>,
    /// Signalled when a message arrives for an owner waiting in [`Transport::wait`].
    arrived: Condvar,
}

impl crate::transport::ArrivalCount for Mailbox {
    fn arrivals(&self) -> usize {
        self.held.load(Ordering::Acquire)
    }
}

#[derive(Debug, Default)]
struct Inbox {
    msgs: VecDeque<Msg>,
    /// The owner waits on `arrived`: only then does a sender signal it.
    waiting: bool,
}

impl Mailbox {
    fn lock(&self) -> MutexGuard<'_, Inbox> {
        self.inbox.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Until a message is posted (the next turn reads it), `limit`, or a spurious
    /// wake-up.
    fn park(&self, limit: Option<Duration>) {
        let mut inbox = self.lock();
        if !inbox.msgs.is_empty() {
            return;
        }
        inbox.waiting = true;
        inbox = match limit {
            Some(d) => {
                self.arrived
                    .wait_timeout(inbox, d)
                    .unwrap_or_else(PoisonError::into_inner)
                    .0
            }
            None => self
                .arrived
                .wait(inbox)
                .unwrap_or_else(PoisonError::into_inner),
        };
        inbox.waiting = false;
    }

    fn post(&self, msg: Msg) {
        let wake = {
            let mut inbox = self.lock();
            inbox.msgs.push_back(msg);
            inbox.waiting
        };
        if wake {
            self.arrived.notify_one();
        }
    }
}

/// The fabric's end of an open port's receive queue: where it delivers frames.
#[derive(Debug, Clone)]
pub(crate) struct RecvQueue {
    mailbox: Arc<Mailbox>,
}

/// A frame the port had no room for.
#[derive(Debug)]
pub(crate) struct Overflow;

impl RecvQueue {
    /// Queue a frame, unless the port holds [`RECV_QUEUE_DEPTH`] already. Never
    /// blocks. A port that is closing loses the frame, as a real one does.
    pub(crate) fn push(
        &self,
        qp: Qp,
        pkt: &Pkt,
        delay: Duration,
        clock: &dyn Clock,
    ) -> core::result::Result<(), Overflow> {
        self.mailbox
            .held
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < RECV_QUEUE_DEPTH).then_some(n + 1)
            })
            .map_err(|_| Overflow)?;
        self.mailbox.post(Msg::frame(qp, pkt, delay, clock));
        Ok(())
    }
}

/// A held-back frame, ordered by due time, then arrival.
#[derive(Debug)]
struct Held {
    due: Instant,
    seq: u64,
    frame: Frame,
}

impl PartialEq for Held {
    fn eq(&self, other: &Self) -> bool {
        (self.due, self.seq) == (other.due, other.seq)
    }
}
impl Eq for Held {}
impl PartialOrd for Held {
    fn partial_cmp(&self, other: &Self) -> Option<core::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Held {
    fn cmp(&self, other: &Self) -> core::cmp::Ordering {
        (self.due, self.seq).cmp(&(other.due, other.seq))
    }
}

/// An open port of a simulated CA, with its QP0 and QP1.
///
/// Only one transport per CA port is open at a time; dropping it closes
/// the port (frames sent to it are then lost, and its SMA keeps answering).
#[derive(Debug)]
pub struct SimTransport {
    fabric: Arc<dyn Medium>,
    node: usize,
    port: u8,
    attrs: PortAttrs,
    mailbox: Arc<Mailbox>,
    /// What this port took from the mailbox and has yet to read, oldest first.
    taken: VecDeque<Msg>,
    /// Held-back frames now due, oldest first.
    ready: VecDeque<Frame>,
    held: BinaryHeap<Reverse<Held>>,
    seq: u64,
    /// A wake arrived since the last `recv_burst`: the next `wait` must not block.
    woken: bool,
    /// This port's owner holds the SM role (`set_sm(true)`).
    holds_sm: bool,
    /// The frame [`Transport::transmit`] fills and hands to the fabric (every field
    /// written anew each time).
    out: Pkt,
    /// What the fabric remembers between this port's frames.
    memo: Option<SendMemo>,
}

impl SimTransport {
    /// Open `node`'s `port` of `fabric`.
    ///
    /// # Errors
    /// What [`Medium::attach`] refuses (EADDRINUSE: the port is already open).
    pub(crate) fn open(fabric: Arc<dyn Medium>, node: usize, port: u8) -> Result<SimTransport> {
        // Unbounded: the count in `held` bounds the frames, and wakes take no slot.
        let mailbox = Arc::new(Mailbox::default());
        let queue = RecvQueue {
            mailbox: mailbox.clone(),
        };
        fabric.attach(node, port, queue)?;
        let attrs = fabric.port_attrs(node, port);
        Ok(SimTransport {
            fabric,
            node,
            port,
            attrs,
            mailbox,
            taken: VecDeque::new(),
            ready: VecDeque::new(),
            held: BinaryHeap::new(),
            seq: 0,
            woken: false,
            holds_sm: false,
            out: Pkt::smp([0; MAD_SIZE], 0),
            memo: None,
        })
    }

    /// Read the port's attributes again (LID, SM LID, state, IsSM): an SM may have
    /// changed them since the port was opened.
    pub fn refresh_attrs(&mut self) -> &PortAttrs {
        self.attrs = self.fabric.port_attrs(self.node, self.port);
        &self.attrs
    }

    /// This port's GID (GID prefix + port GUID).
    pub fn gid(&self) -> [u8; 16] {
        let mut gid = [0u8; 16];
        gid[..8].copy_from_slice(&self.attrs.gid_prefix.to_be_bytes());
        gid[8..].copy_from_slice(&self.attrs.port_guid.to_be_bytes());
        gid
    }

    /// Put `frame` on the fabric exactly as given (any source LID and QP, Q_Key,
    /// P_Key, bytes), bypassing any engine: a hostile or buggy node. Directed-route
    /// SMPs still follow the DR rules from this port.
    pub fn inject(&mut self, frame: &RawFrame) {
        let mut pkt = Pkt {
            mad: frame.mad,
            len: frame.len.min(MAD_SIZE),
            slid: frame.src_lid.unwrap_or(self.attrs.lid),
            dlid: frame.dest_lid,
            sqp: frame.src_qpn,
            dqp: frame.dest_qpn,
            sl: frame.sl,
            pkey_index: 0,
            pkey: frame.pkey,
            qkey: frame.qkey,
            spoofed: frame.src_lid.is_some(),
            grh: frame.grh,
            hops: 0,
            duplicate: false,
            from_sa: false,
        };
        self.fabric
            .send(self.node, self.port, &mut pkt, &mut self.memo);
    }

    /// Frames this port holds for its owner now: delivered, not yet received (at
    /// most [`RECV_QUEUE_DEPTH`]).
    pub fn queued(&self) -> usize {
        self.mailbox.held.load(Ordering::Acquire)
    }

    fn stash(&mut self, msg: Msg) {
        let Msg::Frame(frame) = msg else {
            self.woken = true;
            return;
        };
        match frame.due {
            None => self.ready.push_back(frame),
            Some(due) => hold(&mut self.held, &mut self.seq, due, frame),
        }
    }

    /// Swap the mailbox's queue for `taken` (empty): whether it held anything.
    fn take_mail(&mut self) -> bool {
        let mut inbox = self.mailbox.lock();
        if inbox.msgs.is_empty() {
            return false;
        }
        core::mem::swap(&mut inbox.msgs, &mut self.taken);
        true
    }

    /// Move everything that arrived, and every held frame now due, to `ready`.
    fn pump(&mut self) {
        loop {
            while let Some(msg) = self.taken.pop_front() {
                self.stash(msg);
            }
            if !self.take_mail() {
                break;
            }
        }
        if self.held.is_empty() {
            return;
        }
        let now = self.fabric.clock().now();
        while self.held.peek().is_some_and(|h| h.0.due <= now) {
            if let Some(Reverse(h)) = self.held.pop() {
                self.ready.push_back(h.frame);
            }
        }
    }
}

/// Hold `frame` back until `due`, after the frames held back before it with the same due time.
fn hold(held: &mut BinaryHeap<Reverse<Held>>, seq: &mut u64, due: Instant, frame: Frame) {
    *seq += 1;
    held.push(Reverse(Held {
        due,
        seq: *seq,
        frame,
    }));
}

impl Drop for SimTransport {
    fn drop(&mut self) {
        self.fabric.detach(self.node, self.port);
        if self.holds_sm {
            // Closing issm gives the role back (the fabric's own SM may take it again).
            let _ = self.fabric.set_sm(self.node, self.port, false);
        }
    }
}

impl Transport for SimTransport {
    fn caps(&self) -> Caps {
        Caps {
            smi: true,
            gsi: true,
        }
    }

    fn attrs(&self) -> &PortAttrs {
        &self.attrs
    }

    fn recv_burst(
        &mut self,
        max: usize,
        sink: &mut dyn FnMut(RecvMeta, &[u8]),
    ) -> io::Result<usize> {
        let mut n = 0;
        // With frames held back (or released and not yet read), everything goes
        // through `ready`, in the order it became due.
        if !self.ready.is_empty() || !self.held.is_empty() {
            self.pump();
            while n < max {
                let Some(frame) = self.ready.pop_front() else {
                    break;
                };
                sink(frame.meta, &frame.mad[..frame.len]);
                n += 1;
            }
        }
        // Then what arrived, read where it lies: a frame due now makes no stop in
        // `ready` (two copies of it fewer: 11 % of `port/one_way_send_1000` was copying).
        while n < max {
            if self.taken.is_empty() && !self.take_mail() {
                break;
            }
            let SimTransport {
                taken,
                held,
                seq,
                woken,
                ..
            } = self;
            let mut read = 0;
            for msg in taken.iter() {
                if n == max {
                    break;
                }
                read += 1;
                match msg {
                    Msg::Frame(frame) => match frame.due {
                        None => {
                            sink(frame.meta, &frame.mad[..frame.len]);
                            n += 1;
                        }
                        Some(due) => hold(held, seq, due, frame.clone()),
                    },
                    Msg::Wake => *woken = true,
                }
            }
            taken.drain(..read);
        }
        // Those frames left the queue: room for as many.
        self.mailbox.held.fetch_sub(n, Ordering::AcqRel);
        // The caller is taking its turn now: a wake that came before it is served.
        self.woken = false;
        Ok(n)
    }

    fn transmit(
        &mut self,
        fill: &mut dyn FnMut(&mut [u8; MAD_SIZE]) -> Option<Transmit>,
    ) -> io::Result<bool> {
        // Written in place in the frame the walk then reads (by value, the frame was
        // copied twice more on its way to the walk). Zeroed first: the engine may leave
        // a MAD's tail unwritten (an RMPP segment's padding).
        let pkt = &mut self.out;
        pkt.mad = [0; MAD_SIZE];
        let Some(t) = fill(&mut pkt.mad) else {
            return Ok(false);
        };
        let own_gid = self.gid();
        let pkey = self
            .attrs
            .pkeys
            .get(usize::from(t.dest.pkey_index))
            .or(self.attrs.pkeys.first())
            .copied()
            .unwrap_or(DEFAULT_PKEY);
        let pkt = &mut self.out;
        pkt.len = t.len.min(MAD_SIZE);
        pkt.slid = self.attrs.lid;
        pkt.dlid = t.dest.lid;
        pkt.sqp = t.qp.qpn();
        pkt.dqp = t.dest.qpn;
        pkt.sl = t.dest.sl;
        pkt.pkey_index = t.dest.pkey_index;
        pkt.pkey = pkey;
        // As the kernel's QP1, every GMP leaves with the GSI Q_Key, whatever the
        // caller put in the address; QP0 has no Q_Key.
        pkt.qkey = if t.qp == Qp::Gsi { GSI_QKEY } else { 0 };
        pkt.spoofed = false;
        pkt.grh = t.dest.grh.map(|g| GrhAddr {
            gid: own_gid,
            gid_index: 0,
            hop_limit: g.hop_limit,
            traffic_class: g.traffic_class,
            flow_label: g.flow_label,
        });
        pkt.hops = 0;
        pkt.duplicate = false;
        pkt.from_sa = false;
        self.fabric.send(self.node, self.port, pkt, &mut self.memo);
        Ok(true)
    }

    fn wait(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        if let Some(limit) = self.park_limit(timeout) {
            self.mailbox.park(limit);
        }
        Ok(())
    }

    fn parker(&self) -> Option<Parker> {
        let mailbox = self.mailbox.clone();
        Some(Parker::new(move |limit| mailbox.park(limit)))
    }

    fn park_limit(&mut self, timeout: Option<Duration>) -> Option<Option<Duration>> {
        self.pump();
        if !self.ready.is_empty() || core::mem::take(&mut self.woken) {
            return None;
        }
        let until_held = self
            .held
            .peek()
            .and_then(|h| self.fabric.clock().park_limit(h.0.due));
        Some(match (timeout, until_held) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        })
    }

    fn register_agent(&mut self, spec: &crate::engine::AgentSpec, hi_tid: u32) -> Result<()> {
        self.fabric
            .register_agent(self.node, self.port, spec, hi_tid);
        Ok(())
    }

    fn unregister_agent(&mut self, hi_tid: u32) {
        self.fabric.unregister_agent(self.node, self.port, hi_tid);
    }

    /// `on`: this port's owner takes the SM role, as opening `issm` does: IsSM is set in
    /// its PortInfo and the fabric's built-in SM steps aside (with its SA): SMInfo and SA
    /// requests then reach this port's owner, and its own SubnSets configure the fabric.
    /// `off` (or closing the port): the built-in SM takes the role back and sweeps.
    fn set_sm(&mut self, on: bool) -> Result<()> {
        self.fabric.set_sm(self.node, self.port, on)?;
        self.holds_sm = on;
        self.refresh_attrs();
        Ok(())
    }

    fn clock(&self) -> Option<Arc<dyn Clock>> {
        Some(self.fabric.clock().clone())
    }

    fn arrivals(&self) -> Option<Arrivals> {
        // Counted when the fabric queues a frame, uncounted when a turn receives it.
        Some(Arrivals::new(self.mailbox.clone()))
    }

    fn waker(&self) -> Option<Waker> {
        let mailbox = self.mailbox.clone();
        Some(Waker::new(move || mailbox.post(Msg::Wake)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mailbox_count_and_lock_and_queue_share_one_cache_line() {
        // What a sender writes for every frame, besides the frame: the count, the lock,
        // the queue's header (see `Mailbox`).
        let end = core::mem::offset_of!(Mailbox, inbox) + core::mem::size_of::<Mutex<Inbox>>();
        assert_eq!(core::mem::offset_of!(Mailbox, held), 0);
        assert!(end <= 64, "the lock and queue end at byte {end}");
        assert_eq!(core::mem::align_of::<Mailbox>(), 64);
    }
}
