//! Wire codecs: zero-copy views and parsed representations of MAD formats.
//!
//! # Views and representations
//!
//! Each format has two halves, in the style of smoltcp:
//!
//! - `Packet<T: AsRef<[u8]>>` wraps a byte buffer and nothing else.
//!   `new_unchecked` only wraps; `check_len` verifies that the buffer holds
//!   every field the accessors read; `new_checked` does both. **Once
//!   `check_len` has passed, no getter or setter panics.** Setters need
//!   `T: AsMut<[u8]>`.
//! - `Repr` is a plain value: `Repr::parse(&Packet)` validates and copies the
//!   fields out, `Repr::emit(&mut Packet)` writes every field (reserved bytes
//!   as zero), `Repr::buffer_len()` says how many bytes `emit` needs. `emit`
//!   never panics on a buffer of at least `buffer_len()` bytes.
//!
//! Views over MAD headers take the **whole MAD** and use the absolute IBA
//! offsets (MAD header 0..24, RMPP 24..36, SA 36..56, vendor OUI 37..40, …),
//! so any view can be made from the same 256-byte buffer. Views over an
//! attribute or a record (NodeInfo, PortInfo, NodeDescription, NodeRecord,
//! PathRecord, ClassPortInfo) wrap that attribute's own bytes, because the
//! same attribute sits at different offsets (SMP data at 64, inside an SA
//! record, after a class header). Three modules are not MAD formats at all:
//! [`umad`] is libibumad's `ib_user_mad` C header (host-order words),
//! [`grh`] the 40-byte area in front of a UD receive buffer, and [`roce`] the
//! RoCE v2 frame around a MAD.
//!
//! # Modules
//!
//! | module | format |
//! |---|---|
//! | [`mad`] | common MAD header, 0..24 |
//! | [`rmpp`] | RMPP header, 24..36 |
//! | [`smp`] | LID-routed and directed-route SMPs; NodeInfo, PortInfo, NodeDescription, P_KeyTable, SwitchInfo, SMInfo, LinearForwardingTable; the directed-route rules ([`smp::dr`]) |
//! | [`sa`] | SA header 36..56, record iteration, ComponentMask layouts, NodeRecord, PathRecord, PortInfoRecord, LinkRecord, SwitchInfoRecord, GUIDInfoRecord, MCMemberRecord, ServiceRecord, InformInfo, InformInfoRecord, Notice |
//! | [`perf`] | performance management (class 0x04): PortCounters, PortCountersExtended |
//! | [`vendor`] | vendor range-2 OUI, 37..40 |
//! | [`class_port_info`] | ClassPortInfo (72 bytes) |
//! | [`umad`] | `struct ib_user_mad` header (64 bytes, or 56 on the old ABI) |
//! | [`grh`] | GRH / RoCE v2 IPv4 header area (40 bytes) |
//! | [`roce`] | RoCE v2 framing: IPv4/IPv6 + UDP 4791 + BTH + DETH + ICRC, and the LRH of link-type-247 captures |
//! | [`names`] | code names and a one-line display of any MAD ([`pretty`]) |
//!
//! Use `new_checked` when parsing received bytes. When emitting into a
//! reused buffer, use `new_unchecked` and check the length yourself: stale
//! bytes from an earlier packet must not decide whether a check passes.
//!
//! Code enums (management class, method, RMPP type and status, …) keep
//! values they have no name for in an `Unknown(x)` variant: nothing is lost
//! in a round trip and parsing never fails on an unfamiliar code.

use core::ops::{Range, RangeFrom};

pub mod class_port_info;
pub mod grh;
pub mod mad;
pub mod names;
pub mod perf;
pub mod rmpp;
pub mod roce;
pub mod sa;
pub mod smp;
pub mod umad;
pub mod vendor;

pub use names::{pretty, MadDisplay};

/// A fixed field: a byte range. (Public, hidden, for `vmad`'s own wire formats.)
#[doc(hidden)]
pub type Field = Range<usize>;
/// The rest of a buffer from an offset.
#[allow(dead_code)]
pub(crate) type Rest = RangeFrom<usize>;

/// The size of every IB MAD (and of every RMPP segment) on the wire.
pub const MAD_SIZE: usize = 256;

/// Errors of the wire layer. Small and `Copy`: parsing never allocates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The buffer is shorter than the format (or a length field) requires.
    #[error("truncated: buffer shorter than the format requires")]
    Truncated,
    /// A version field holds a value this format cannot be parsed under.
    #[error("unsupported version")]
    BadVersion,
    /// The RMPP header is inconsistent (e.g. type/flags combination).
    #[error("malformed RMPP header")]
    BadRmppHeader,
    /// An SA attribute offset of zero with data present, or records that overrun.
    #[error("bad SA attribute offset")]
    BadAttrOffset,
    /// A length field disagrees with the buffer.
    #[error("bad length field")]
    BadLength,
    /// Any other structural violation.
    #[error("malformed")]
    Malformed,
}

/// Result of wire parsing.
pub type Result<T> = core::result::Result<T, Error>;

/// The constructors every view has, expanded inside its `impl<T: AsRef<[u8]>>
/// Packet<T>` (a view's one field is `buffer`): `new_unchecked`,
/// `new_checked` and `check_len` ([`Error::Truncated`] below `$min` bytes,
/// which hold `$what`), and `into_inner`.
macro_rules! view_constructors {
    ($min:expr, $what:literal) => {
        /// Wrap a buffer without checking its length.
        pub const fn new_unchecked(buffer: T) -> Packet<T> {
            Packet { buffer }
        }
        #[doc = concat!("Wrap a buffer and check that it holds ", $what, ".")]
        pub fn new_checked(buffer: T) -> $crate::wire::Result<Packet<T>> {
            let p = Self::new_unchecked(buffer);
            p.check_len()?;
            Ok(p)
        }
        #[doc = concat!("Check that the buffer holds ", $what, ".")]
        pub fn check_len(&self) -> $crate::wire::Result<()> {
            if self.buffer.as_ref().len() < $min {
                Err($crate::wire::Error::Truncated)
            } else {
                Ok(())
            }
        }
        /// The wrapped buffer.
        pub fn into_inner(self) -> T {
            self.buffer
        }
    };
}
pub(crate) use view_constructors;

/// Defines an open code enum: named variants plus `Unknown(raw)`, with `From` both ways.
/// (Exported, hidden, for `vmad`'s own wire formats.)
#[doc(hidden)]
#[macro_export]
macro_rules! enum_with_unknown {
    (
        $(#[$enum_attr:meta])*
        pub enum $name:ident($ty:ty) {
            $( $(#[$variant_attr:meta])* $variant:ident = $value:expr ),+ $(,)?
        }
    ) => {
        $(#[$enum_attr])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum $name {
            $( $(#[$variant_attr])* $variant, )+
            /// A value with no name in vmad's tables; kept as is.
            Unknown($ty),
        }

        impl $name {
            /// The raw value (a `const fn`, so constants and match patterns can be made of it).
            #[inline]
            #[allow(dead_code)]
            pub const fn raw(self) -> $ty {
                match self {
                    $( $name::$variant => $value, )+
                    $name::Unknown(other) => other,
                }
            }
        }

        impl From<$ty> for $name {
            #[inline]
            fn from(value: $ty) -> Self {
                match value {
                    $( $value => $name::$variant, )+
                    other => $name::Unknown(other),
                }
            }
        }

        impl From<$name> for $ty {
            #[inline]
            fn from(value: $name) -> Self {
                match value {
                    $( $name::$variant => $value, )+
                    $name::Unknown(other) => other,
                }
            }
        }
    };
}
#[doc(hidden)]
pub use enum_with_unknown;

/// Big-endian readers and writers over checked ranges (helpers of the views,
/// and of `vmad`'s own wire formats). Inline: the views are generic and so built in
/// the crate that reads a MAD, which without the hint would call across crates for
/// every field (`set_u16` took 0.8 % of the SA GetTable bench as a call).
#[doc(hidden)]
pub mod be {
    use super::Field;

    #[inline]
    pub fn u16(b: &[u8], f: Field) -> u16 {
        let mut a = [0u8; 2];
        a.copy_from_slice(&b[f]);
        u16::from_be_bytes(a)
    }
    #[inline]
    pub fn u32(b: &[u8], f: Field) -> u32 {
        let mut a = [0u8; 4];
        a.copy_from_slice(&b[f]);
        u32::from_be_bytes(a)
    }
    #[inline]
    pub fn u64(b: &[u8], f: Field) -> u64 {
        let mut a = [0u8; 8];
        a.copy_from_slice(&b[f]);
        u64::from_be_bytes(a)
    }
    #[inline]
    pub fn set_u16(b: &mut [u8], f: Field, v: u16) {
        b[f].copy_from_slice(&v.to_be_bytes());
    }
    #[inline]
    pub fn set_u32(b: &mut [u8], f: Field, v: u32) {
        b[f].copy_from_slice(&v.to_be_bytes());
    }
    #[inline]
    pub fn set_u64(b: &mut [u8], f: Field, v: u64) {
        b[f].copy_from_slice(&v.to_be_bytes());
    }
}
