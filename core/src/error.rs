//! The engine's errors.
//!
//! A small `Copy` enum with no I/O and nothing allocated. vmad's public API
//! has one error type, `vmad::Error`; each variant here converts into the
//! variant of the same name there (`From`), which says its errno.

/// Errors of the engine's calls (register, send, …).
///
/// Exhaustive on purpose: a new variant must break `vmad`'s conversion until
/// it is given its errno there.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// A parameter is out of range (bad class, a MAD shorter than its header…).
    #[error("invalid argument: {0}")]
    InvalidArgument(&'static str),
    /// The agent id is not registered.
    #[error("agent {0} is not registered")]
    UnknownAgent(u32),
    /// A registration overlaps one that already owns the same class, version (OUI) and method.
    #[error("method already in use: class {class:#04x} version {version} method {method:#04x}")]
    MethodInUse {
        /// Management class.
        class: u8,
        /// Class version.
        version: u8,
        /// The first conflicting method.
        method: u8,
    },
    /// A send duplicates an outstanding request (same TID and class).
    #[error("duplicate of an outstanding request (TID {0:#018x})")]
    DuplicateRequest(u64),
    /// The message exceeds what can be sent (256 bytes without RMPP, or the RMPP limit).
    #[error("message too large: {len} bytes, limit {limit}")]
    MessageTooLarge {
        /// Length given.
        len: usize,
        /// Limit in force.
        limit: usize,
    },
    /// A table is full (32 agents, a configured cap).
    #[error("resource limit reached: {0}")]
    LimitReached(&'static str),
}

/// `Result` with the engine's [`Error`].
pub type Result<T, E = Error> = core::result::Result<T, E>;
