//! The receiver thread: it always reads ibsim, so ibsim never waits on us.

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use crossbeam_channel::Sender;

use super::proto::{RequestBuf, REQUEST_LEN};
use super::sock::Sock;

/// What the receiver hands the transport.
#[derive(Debug)]
pub(crate) enum Msg {
    /// A datagram from ibsim.
    Packet(RequestBuf),
    /// Nothing: end a `wait` (from the port's waker, or after a receiver error).
    Wake,
}

/// Shared between the transport and its threads.
#[derive(Debug, Default)]
pub(crate) struct Shared {
    pub(crate) stop: AtomicBool,
    /// The first I/O error a thread hit; reported by the next call.
    error: Mutex<Option<io::Error>>,
}

impl Shared {
    pub(crate) fn fail(&self, e: io::Error) {
        let mut slot = self.error.lock().unwrap_or_else(|p| p.into_inner());
        slot.get_or_insert(e);
    }

    pub(crate) fn check(&self) -> io::Result<()> {
        let mut slot = self.error.lock().unwrap_or_else(|p| p.into_inner());
        match slot.take() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

pub(crate) fn receiver(sock: Sock, out: Sender<Msg>, shared: Arc<Shared>) {
    let mut buf = [0u8; REQUEST_LEN + 1];
    while !shared.stop.load(Ordering::Relaxed) {
        match sock.recv(&mut buf) {
            Ok(REQUEST_LEN) => {
                let mut pkt: RequestBuf = Box::new([0u8; REQUEST_LEN]);
                pkt.copy_from_slice(&buf[..REQUEST_LEN]);
                if out.send(Msg::Packet(pkt)).is_err() {
                    return;
                }
            }
            // Shut down for reading (the transport is dropping), or a stray datagram.
            Ok(0) if shared.stop.load(Ordering::Relaxed) => return,
            Ok(_) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock
                        | io::ErrorKind::TimedOut
                        | io::ErrorKind::Interrupted
                ) => {}
            Err(e) => {
                shared.fail(e);
                // A blocked `wait` must see the error now, not at its timeout.
                let _ = out.send(Msg::Wake);
                return;
            }
        }
    }
}
