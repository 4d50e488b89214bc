//! Performance management (class 0x04, IBA 16.1): the PMA attributes vmad's
//! simulated nodes answer. Their data starts at MAD byte [`DATA_OFFSET`]
//! (after the 24-byte MAD header and 40 reserved bytes); the views wrap the
//! attribute data.

pub mod port_counters;
pub mod port_counters_ext;

/// Offset of a PerfMgt attribute in the MAD.
pub const DATA_OFFSET: usize = 64;
/// Attribute ID of PortCounters.
pub const ATTR_PORT_COUNTERS: u16 = 0x0012;
/// Attribute ID of PortCountersExtended.
pub const ATTR_PORT_COUNTERS_EXT: u16 = 0x001d;
/// PortSelect value meaning "every port of the node, summed".
pub const ALL_PORTS: u8 = 0xff;
