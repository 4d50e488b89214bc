//! The one error type of vmad's public API, and its errno mapping.
//!
//! Every variant maps to exactly one errno ([`Error::errno`]); the C ABI
//! crate turns that into each libibumad function's own sign convention.
//! Per-send outcomes (a request that timed out, an RMPP transfer the peer
//! aborted) are not errors of a call: they arrive through the receive queue,
//! as the kernel reports them.

use crate::wire;

/// Linux errno values used by vmad (x86-64 and aarch64 share them).
pub mod errno {
    /// Operation not permitted.
    pub const EPERM: i32 = 1;
    /// I/O error.
    pub const EIO: i32 = 5;
    /// Resource temporarily unavailable (== EWOULDBLOCK on Linux).
    pub const EAGAIN: i32 = 11;
    /// Alias of [`EAGAIN`] on Linux.
    pub const EWOULDBLOCK: i32 = EAGAIN;
    /// Out of memory, or a table is full.
    pub const ENOMEM: i32 = 12;
    /// No such device.
    pub const ENODEV: i32 = 19;
    /// Invalid argument.
    pub const EINVAL: i32 = 22;
    /// No space left (the caller's buffer is too small).
    pub const ENOSPC: i32 = 28;
    /// Protocol error (a MAD answered with an error status).
    pub const EPROTO: i32 = 71;
    /// Message too long.
    pub const EMSGSIZE: i32 = 90;
    /// Protocol not supported.
    pub const EPROTONOSUPPORT: i32 = 93;
    /// Operation not supported.
    pub const EOPNOTSUPP: i32 = 95;
    /// Address already in use.
    pub const EADDRINUSE: i32 = 98;
    /// Connection aborted (an RMPP transfer was aborted).
    pub const ECONNABORTED: i32 = 103;
    /// Connection timed out.
    pub const ETIMEDOUT: i32 = 110;
}

/// Errors returned by vmad's API. Every variant maps to exactly one errno.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A parameter is out of range (bad class, QPN over 24 bits, `*length` < 256…). EINVAL.
    #[error("invalid argument: {0}")]
    InvalidArgument(&'static str),
    /// The port handle is not open (never opened, or already closed). EINVAL, as `umad_poll(3)`.
    #[error("invalid port handle")]
    InvalidPort,
    /// The agent id is not registered on this port. EINVAL.
    #[error("agent {0} is not registered")]
    UnknownAgent(u32),
    /// A registration overlaps one that already owns the same class, version (OUI) and method. EINVAL (as the kernel).
    #[error("method already in use: class {class:#04x} version {version} method {method:#04x}")]
    MethodInUse {
        /// Management class.
        class: u8,
        /// Class version.
        version: u8,
        /// The first conflicting method.
        method: u8,
    },
    /// A send duplicates an outstanding request (same TID and class). EINVAL (as the kernel).
    #[error("duplicate of an outstanding request (TID {0:#018x})")]
    DuplicateRequest(u64),
    /// The MAD given to send is malformed. EINVAL.
    #[error("malformed MAD: {0}")]
    Malformed(#[from] wire::Error),
    /// No such CA or port; says which, and why when known. ENODEV.
    #[error("no such device or port: {0}")]
    NoDevice(String),
    /// Nothing to receive and the call was non-blocking. EAGAIN (== EWOULDBLOCK).
    #[error("operation would block")]
    WouldBlock,
    /// A blocking wait expired. ETIMEDOUT.
    #[error("timed out")]
    TimedOut,
    /// The caller's buffer cannot hold the (coalesced RMPP) message; `needed` is the data length. ENOSPC.
    #[error("buffer too small: {needed} bytes of data needed")]
    BufferTooSmall {
        /// The data length (after the 64-byte header) the message needs.
        needed: usize,
    },
    /// The message exceeds what can be sent (256 bytes without RMPP, or the RMPP limit). EMSGSIZE.
    #[error("message too large: {len} bytes, limit {limit}")]
    MessageTooLarge {
        /// Length given.
        len: usize,
        /// Limit in force.
        limit: usize,
    },
    /// A table or queue is full (32 agents per port, a configured cap). ENOMEM.
    #[error("resource limit reached: {0}")]
    LimitReached(&'static str),
    /// The operation needs a privilege the caller lacks (e.g. Q_Key 0x80010000 needs CAP_NET_RAW). EPERM.
    #[error("not permitted: {0}")]
    NotPermitted(&'static str),
    /// The transport cannot do this (QP0 on verbs, SMPs on RoCE). EOPNOTSUPP.
    #[error("not supported by this transport: {0}")]
    Unsupported(&'static str),
    /// The address (e.g. UDP 4791) is already owned by someone else. EADDRINUSE.
    #[error("address in use: {0}")]
    AddressInUse(String),
    /// A request was answered with a non-zero MAD status (typed calls of
    /// [`crate::client`]). EPROTO.
    #[error("{name} (MAD status {status:#06x}, class {class:#04x}, attribute {attr:#06x})")]
    MadStatus {
        /// Management class of the answer.
        class: u8,
        /// Its attribute id.
        attr: u16,
        /// The status word (a directed-route SMP's D bit removed).
        status: u16,
        /// The status's name (the SA's code for the SA class, else the common bits').
        name: &'static str,
    },
    /// The RMPP transfer of an answer was aborted or stopped. ECONNABORTED.
    #[error("RMPP transfer aborted (RMPP status {status})")]
    RmppAborted {
        /// The RMPP status of the ABORT or STOP.
        status: u8,
    },
    /// A transport or OS failure. EIO; the source keeps the OS error.
    #[error("transport I/O error: {0}")]
    Io(#[from] std::io::Error),
}

impl Error {
    /// The errno this error stands for (positive).
    pub fn errno(&self) -> i32 {
        use errno::*;
        match self {
            Error::InvalidArgument(_)
            | Error::InvalidPort
            | Error::UnknownAgent(_)
            | Error::MethodInUse { .. }
            | Error::DuplicateRequest(_)
            | Error::Malformed(_) => EINVAL,
            Error::NoDevice(_) => ENODEV,
            Error::WouldBlock => EWOULDBLOCK,
            Error::TimedOut => ETIMEDOUT,
            Error::BufferTooSmall { .. } => ENOSPC,
            Error::MessageTooLarge { .. } => EMSGSIZE,
            Error::LimitReached(_) => ENOMEM,
            Error::NotPermitted(_) => EPERM,
            Error::Unsupported(_) => EOPNOTSUPP,
            Error::AddressInUse(_) => EADDRINUSE,
            Error::MadStatus { .. } => EPROTO,
            Error::RmppAborted { .. } => ECONNABORTED,
            Error::Io(_) => EIO,
        }
    }
}

/// The engine's errors (vmad-core), each as the variant of the same name.
impl From<vmad_core::Error> for Error {
    fn from(err: vmad_core::Error) -> Error {
        use vmad_core::Error as Core;
        match err {
            Core::InvalidArgument(what) => Error::InvalidArgument(what),
            Core::UnknownAgent(agent) => Error::UnknownAgent(agent),
            Core::MethodInUse {
                class,
                version,
                method,
            } => Error::MethodInUse {
                class,
                version,
                method,
            },
            Core::DuplicateRequest(tid) => Error::DuplicateRequest(tid),
            Core::MessageTooLarge { len, limit } => Error::MessageTooLarge { len, limit },
            Core::LimitReached(what) => Error::LimitReached(what),
        }
    }
}

/// `Result` with vmad's [`Error`].
pub type Result<T, E = Error> = core::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::errno::*;
    use super::*;

    #[test]
    fn errno_mapping_table() {
        let table: Vec<(Error, i32)> = vec![
            (Error::InvalidArgument("x"), EINVAL),
            (Error::InvalidPort, EINVAL),
            (Error::UnknownAgent(3), EINVAL),
            (
                Error::MethodInUse {
                    class: 3,
                    version: 2,
                    method: 1,
                },
                EINVAL,
            ),
            (Error::DuplicateRequest(7), EINVAL),
            (Error::Malformed(wire::Error::Truncated), EINVAL),
            (Error::NoDevice("mlx5_0".into()), ENODEV),
            (Error::WouldBlock, EAGAIN),
            (Error::TimedOut, ETIMEDOUT),
            (Error::BufferTooSmall { needed: 1000 }, ENOSPC),
            (
                Error::MessageTooLarge {
                    len: 300,
                    limit: 256,
                },
                EMSGSIZE,
            ),
            (Error::LimitReached("agents"), ENOMEM),
            (Error::NotPermitted("qkey"), EPERM),
            (Error::Unsupported("qp0"), EOPNOTSUPP),
            (Error::AddressInUse("[::1]:4791".into()), EADDRINUSE),
            (
                Error::MadStatus {
                    class: 3,
                    attr: 0x11,
                    status: 0x0300,
                    name: "No records",
                },
                EPROTO,
            ),
            (Error::RmppAborted { status: 118 }, ECONNABORTED),
            (Error::Io(std::io::Error::other("x")), EIO),
        ];
        for (err, want) in table {
            assert_eq!(err.errno(), want, "{err}");
        }
        assert_eq!(EWOULDBLOCK, EAGAIN);
    }

    /// Every engine error becomes the variant of the same name: same errno, same message.
    #[test]
    fn engine_errors_convert_one_to_one() {
        use vmad_core::Error as Core;
        let table = [
            (Core::InvalidArgument("x"), EINVAL),
            (Core::UnknownAgent(3), EINVAL),
            (
                Core::MethodInUse {
                    class: 3,
                    version: 2,
                    method: 1,
                },
                EINVAL,
            ),
            (Core::DuplicateRequest(7), EINVAL),
            (
                Core::MessageTooLarge {
                    len: 300,
                    limit: 256,
                },
                EMSGSIZE,
            ),
            (Core::LimitReached("agents"), ENOMEM),
        ];
        for (core, want) in table {
            let err = Error::from(core);
            assert_eq!(err.errno(), want, "{err}");
            assert_eq!(err.to_string(), core.to_string());
            let same = match (core, &err) {
                (Core::InvalidArgument(a), Error::InvalidArgument(b)) => a == *b,
                (Core::UnknownAgent(a), Error::UnknownAgent(b)) => a == *b,
                (
                    Core::MethodInUse {
                        class,
                        version,
                        method,
                    },
                    Error::MethodInUse {
                        class: c,
                        version: v,
                        method: m,
                    },
                ) => (class, version, method) == (*c, *v, *m),
                (Core::DuplicateRequest(a), Error::DuplicateRequest(b)) => a == *b,
                (
                    Core::MessageTooLarge { len, limit },
                    Error::MessageTooLarge { len: l, limit: m },
                ) => (len, limit) == (*l, *m),
                (Core::LimitReached(a), Error::LimitReached(b)) => a == *b,
                _ => false,
            };
            assert!(same, "{core:?} became {err:?}");
        }
    }
}
