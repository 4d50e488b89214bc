//! Ids of what the engine tracks, one type per kind, so that a request's id
//! is never looked up as a session's. Each is the number its table hands out
//! (a slab id, or a counter); the timer index packs them (see `timers.rs`).

use core::fmt;

macro_rules! id {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub(crate) struct $name(pub(crate) u64);

        impl From<u64> for $name {
            fn from(raw: u64) -> $name {
                $name(raw)
            }
        }

        impl From<$name> for u64 {
            fn from(id: $name) -> u64 {
                id.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}", self.0)
            }
        }
    };
}

id!(
    /// A request in flight or an RMPP send: its slot in the transaction slab,
    /// with the slot's generation, so a stale id finds nothing.
    TxnId
);

id!(
    /// An RMPP receive session, counted from 1.
    RecvId
);

id!(
    /// A request the duplicate filter remembers, counted from 1.
    DedupId
);

id!(
    /// One registration of an agent, counted from 1: queued work of an agent
    /// that was unregistered (and whose slot was reused) carries an old one.
    AgentSerial
);
