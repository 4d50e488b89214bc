//! Performance management (class 0x04, IBA 16.1): the PMA attributes vmad's
//! simulated nodes answer. Their data starts at MAD byte [`DATA_OFFSET`]
//! (after the 24-byte MAD header and 40 reserved bytes); the views wrap the
//! attribute data.

use super::enum_with_unknown;

pub mod port_counters;
pub mod port_counters_ext;

/// The PerfMgt class version.
pub const CLASS_VERSION: u8 = 1;

enum_with_unknown! {
    /// PerfMgt attribute IDs (IBA 16.1.2, table 226) that vmad knows.
    pub enum AttrId(u16) {
        /// ClassPortInfo.
        ClassPortInfo = 0x0001,
        /// PortSamplesControl.
        PortSamplesControl = 0x0010,
        /// PortSamplesResult.
        PortSamplesResult = 0x0011,
        /// PortCounters.
        PortCounters = 0x0012,
        /// PortCountersExtended.
        PortCountersExtended = 0x001d,
    }
}

/// Offset of a PerfMgt attribute in the MAD.
pub const DATA_OFFSET: usize = 64;
/// Attribute ID of PortCounters.
pub const ATTR_PORT_COUNTERS: u16 = AttrId::PortCounters.raw();
/// Attribute ID of PortCountersExtended.
pub const ATTR_PORT_COUNTERS_EXT: u16 = AttrId::PortCountersExtended.raw();
/// PortSelect value meaning "every port of the node, summed".
pub const ALL_PORTS: u8 = 0xff;
