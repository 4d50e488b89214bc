//! Attributes as types: each carries its class, its id, the methods it may be sent
//! with, its size and (SA records) its ComponentMask layout; `wire`'s views and
//! `Repr`s are the codecs.
//!
//! Where `wire` has a `Repr` (NodeInfo, PortInfo, NodeDescription, the SA records,
//! ClassPortInfo) that value is the attribute. Where it has a view only (SwitchInfo,
//! SMInfo, P_KeyTable, LinearForwardingTable, the counters) the attribute is its bytes
//! in a newtype whose `view()` reads them through that view.

use crate::wire::class_port_info;
use crate::wire::mad::Method;
use crate::wire::perf::{self, port_counters, port_counters_ext};
use crate::wire::sa::{self, comp::Component};
use crate::wire::smp::{
    self, lft, node_desc, node_info, pkey_table, port_info, sm_info, switch_info,
};

/// The class family an attribute belongs to (and so which agent and QP send it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Class {
    /// Subnet management (SMPs, QP0): LID-routed (0x01) or directed route (0x81).
    Smp,
    /// Subnet administration (0x03, QP1, RMPP).
    Sa,
    /// Performance management (0x04, QP1).
    Perf,
}

/// A MAD attribute as a type.
pub trait Attribute: Sized {
    /// Its class.
    const CLASS: Class;
    /// Its attribute id.
    const ID: u16;
    /// The request methods it may be sent with.
    const METHODS: &'static [Method];
    /// Bytes of the attribute (a record's fields, without its SA padding).
    const LEN: usize;
    /// Parse the attribute's bytes.
    ///
    /// # Errors
    /// As the wire view's parse (Truncated for short data).
    fn decode(data: &[u8]) -> crate::wire::Result<Self>;
    /// Write the attribute into `data` (at least [`Attribute::LEN`] bytes).
    fn encode(&self, data: &mut [u8]);
}

/// An SA record: an attribute of the SA class with its layout in a GetTable answer.
pub trait SaRecord: Attribute {
    /// Bytes one record takes in SA data (8-byte aligned).
    const RECORD_LEN: usize;
    /// The ComponentMask layout, by mask bit (empty where `wire` has none).
    const COMPONENTS: &'static [Component];
    /// A record of zeros, to fill in as a query's template.
    fn template() -> Self {
        // Every record view reads a zeroed buffer of its own length.
        Self::decode(&vec![0u8; Self::RECORD_LEN.max(Self::LEN)])
            .unwrap_or_else(|_| unreachable!("a zeroed record always parses"))
    }
}

const GET: &[Method] = &[Method::Get];
const GET_SET: &[Method] = &[Method::Get, Method::Set];
const SA_READ: &[Method] = &[Method::Get, Method::GetTable];
const SA_ALL: &[Method] = &[Method::Get, Method::GetTable, Method::Set, Method::Delete];

/// Implements [`Attribute`] for a `wire` `Repr` (`$m` is its module).
macro_rules! repr_attr {
    ($ty:ty, $m:ident, $class:ident, $id:expr, $methods:expr) => {
        impl Attribute for $ty {
            const CLASS: Class = Class::$class;
            const ID: u16 = $id;
            const METHODS: &'static [Method] = $methods;
            const LEN: usize = $m::LEN;
            fn decode(data: &[u8]) -> crate::wire::Result<Self> {
                <$ty>::parse(&$m::Packet::new_checked(data)?)
            }
            fn encode(&self, data: &mut [u8]) {
                self.emit(&mut $m::Packet::new_unchecked(data));
            }
        }
    };
}

/// NodeInfo (`wire::smp::node_info::Repr`).
pub type NodeInfo = node_info::Repr;
/// NodeDescription (`wire::smp::node_desc::Repr`).
pub type NodeDesc = node_desc::Repr;
/// PortInfo (`wire::smp::port_info::Repr`).
pub type PortInfo = port_info::Repr;
/// ClassPortInfo of any GMP class (`wire::class_port_info::Repr`).
pub type ClassPortInfo = class_port_info::Repr;

repr_attr!(NodeInfo, node_info, Smp, smp::AttrId::NodeInfo.raw(), GET);
repr_attr!(
    NodeDesc,
    node_desc,
    Smp,
    smp::AttrId::NodeDescription.raw(),
    GET
);
repr_attr!(
    PortInfo,
    port_info,
    Smp,
    smp::AttrId::PortInfo.raw(),
    GET_SET
);
repr_attr!(
    ClassPortInfo,
    class_port_info,
    Perf,
    perf::AttrId::ClassPortInfo.raw(),
    GET_SET
);

/// Implements [`Attribute`] and [`SaRecord`] for an SA record's `Repr`.
macro_rules! sa_record {
    ($m:ident, $id:ident, $methods:expr, $comps:expr) => {
        repr_attr!($m::Repr, $m, Sa, sa::AttrId::$id.raw(), $methods);
        impl SaRecord for $m::Repr {
            const RECORD_LEN: usize = $m::LEN.div_ceil(8) * 8;
            const COMPONENTS: &'static [Component] = $comps;
        }
    };
}

use sa::{
    guid_info_record, inform_info, inform_info_record, link_record, mcmember_record, node_record,
    path_record, port_info_record, service_record, switch_info_record,
};
sa_record!(node_record, NodeRecord, SA_READ, &node_record::COMPONENTS);
sa_record!(path_record, PathRecord, SA_READ, &[]);
sa_record!(
    port_info_record,
    PortInfoRecord,
    SA_READ,
    &port_info_record::COMPONENTS
);
sa_record!(link_record, LinkRecord, SA_READ, &link_record::COMPONENTS);
sa_record!(
    switch_info_record,
    SwitchInfoRecord,
    SA_READ,
    &switch_info_record::COMPONENTS
);
sa_record!(
    guid_info_record,
    GuidInfoRecord,
    SA_ALL,
    &guid_info_record::COMPONENTS
);
sa_record!(
    mcmember_record,
    McMemberRecord,
    SA_ALL,
    &mcmember_record::COMPONENTS
);
sa_record!(
    service_record,
    ServiceRecord,
    SA_ALL,
    &service_record::COMPONENTS
);
sa_record!(
    inform_info_record,
    InformInfoRecord,
    SA_READ,
    &inform_info_record::COMPONENTS
);
sa_record!(inform_info, InformInfo, GET_SET, &[]);

/// Declares an attribute held as its bytes, read through a `wire` view.
macro_rules! bytes_attr {
    ($(#[$doc:meta])* $name:ident, $len:expr, $class:ident, $id:expr, $methods:expr) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub struct $name {
            /// The attribute's bytes.
            pub bytes: [u8; $len],
        }
        impl Default for $name {
            fn default() -> Self {
                $name { bytes: [0; $len] }
            }
        }
        impl Attribute for $name {
            const CLASS: Class = Class::$class;
            const ID: u16 = $id;
            const METHODS: &'static [Method] = $methods;
            const LEN: usize = $len;
            fn decode(data: &[u8]) -> crate::wire::Result<Self> {
                let mut bytes = [0; $len];
                bytes.copy_from_slice(data.get(..$len).ok_or(crate::wire::Error::Truncated)?);
                Ok($name { bytes })
            }
            fn encode(&self, data: &mut [u8]) {
                data[..$len].copy_from_slice(&self.bytes);
            }
        }
    };
    ($(#[$doc:meta])* $name:ident, $m:ident, $class:ident, $id:expr, $methods:expr, view) => {
        bytes_attr!($(#[$doc])* $name, $m::LEN, $class, $id, $methods);
        impl $name {
            /// The bytes through `wire`'s view.
            pub fn view(&self) -> $m::Packet<&[u8]> {
                $m::Packet::new_unchecked(&self.bytes[..])
            }
            /// The bytes through `wire`'s view, to change them (for a Set).
            pub fn view_mut(&mut self) -> $m::Packet<&mut [u8]> {
                $m::Packet::new_unchecked(&mut self.bytes[..])
            }
        }
    };
}

bytes_attr!(
    /// SwitchInfo (read through `wire::smp::switch_info`).
    SwitchInfo, switch_info, Smp, smp::AttrId::SwitchInfo.raw(), GET_SET, view
);
bytes_attr!(
    /// SMInfo (read through `wire::smp::sm_info`).
    SmInfo, sm_info, Smp, smp::AttrId::SmInfo.raw(), GET_SET, view
);
bytes_attr!(
    /// One block of 32 P_Keys; the attribute modifier is the block number
    /// (read through `wire::smp::pkey_table`).
    PKeyTable, pkey_table, Smp, smp::AttrId::PKeyTable.raw(), GET_SET, view
);
bytes_attr!(
    /// One block of 64 LinearForwardingTable entries; the modifier is the block
    /// number (`wire::smp::lft::block_of` gives a LID's).
    Lft, lft, Smp, smp::AttrId::LinearFwdTable.raw(), GET_SET, view
);
bytes_attr!(
    /// One block of MulticastForwardingTable: 32 port masks of 16 bits, big-endian
    /// (modifier: bits 0..8 the block of 32 MLIDs, bits 28..32 the position of the mask).
    Mft, 64, Smp, smp::AttrId::MulticastFwdTable.raw(), GET_SET
);
bytes_attr!(
    /// One block of 8 port GUIDs, big-endian (modifier: the block number).
    GuidInfo, 64, Smp, smp::AttrId::GuidInfo.raw(), GET_SET
);
bytes_attr!(
    /// PortCounters (read through `wire::perf::port_counters`).
    PortCounters, port_counters, Perf, perf::AttrId::PortCounters.raw(), GET_SET, view
);
bytes_attr!(
    /// PortCountersExtended (read through `wire::perf::port_counters_ext`).
    PortCountersExt, port_counters_ext, Perf, perf::AttrId::PortCountersExtended.raw(), GET_SET, view
);

impl Mft {
    /// The port mask of entry `i` (0..32).
    pub fn mask(&self, i: usize) -> u16 {
        u16::from_be_bytes([self.bytes[2 * i], self.bytes[2 * i + 1]])
    }
}

impl GuidInfo {
    /// GUID `i` (0..8) of the block.
    pub fn guid(&self, i: usize) -> u64 {
        let mut b = [0u8; 8];
        b.copy_from_slice(&self.bytes[8 * i..8 * i + 8]);
        u64::from_be_bytes(b)
    }
}

const _: () = assert!(smp::DATA_LEN >= port_info::LEN && sa::DATA_LEN >= node_record::LEN);
