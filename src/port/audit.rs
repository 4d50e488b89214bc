//! A port's self-checks, **for tests, the soak and fuzzing, with no stability
//! promise** (hidden from the documentation, like the engine's own
//! [`Engine::footprint`](crate::engine::Engine::footprint) and
//! [`Engine::check_invariants`](crate::engine::Engine::check_invariants) they extend):
//! what the port holds, whether its tables agree, and who is blocked on it. They
//! answer "does it stay bounded, is it consistent" about internals whose shape
//! changes with the engine; an application reads [`Port::stats`] instead.

use super::ready::Ready;
use super::Port;
use crate::engine::{Event, Footprint};

/// A [`Port`]'s self-checks (see the module docs). Implemented for [`Port`] only.
pub trait PortAudit {
    /// What the engine and the opens' queues hold now (tests and the soak watch it
    /// stay bounded).
    fn footprint(&self) -> Footprint;

    /// The engine's self-check
    /// ([`Engine::check_invariants`](crate::engine::Engine::check_invariants)).
    ///
    /// # Errors
    ///
    /// A description of the first broken invariant.
    fn check_invariants(&self) -> Result<(), String>;

    /// How many callers are blocked on this port's descriptors now (where the transport
    /// has a ready descriptor; else 0).
    fn callers_waiting(&self) -> usize;
}

impl PortAudit for Port {
    fn footprint(&self) -> Footprint {
        let core = self.shared.lock();
        let mut f = core.engine.footprint();
        for open in core.opens.values() {
            f.events += open.queue.len();
            f.event_bytes += open
                .queue
                .iter()
                .map(|e| match e {
                    Event::Recv { mad, .. } => mad.capacity(),
                    _ => 0,
                })
                .sum::<usize>();
        }
        f
    }

    fn check_invariants(&self) -> Result<(), String> {
        self.shared.lock().engine.check_invariants()
    }

    fn callers_waiting(&self) -> usize {
        self.shared.fdwait.as_ref().map_or(0, Ready::waiters)
    }
}
