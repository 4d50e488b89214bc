//! SwitchInfo (IBA 14.2.5.4): a switch's forwarding capabilities and the SM's
//! settings for them. The view wraps the attribute data.
//!
//! ```text
//!  0..2 LinearFDBCap   2..4 RandomFDBCap   4..6 MulticastFDBCap   6..8 LinearFDBTop
//!  8 DefaultPort  9 DefaultMulticastPrimaryPort  10 DefaultMulticastNotPrimaryPort
//! 11 LifeTimeValue(5) PortStateChange(1) OptimizedSLtoVLMappingProgrammable(2)
//! 12..14 LIDsPerPort  14..16 PartitionEnforcementCap  16 flags  17 reserved
//! 18..20 MulticastFDBTop
//! ```

use crate::wire::{be, Field};

mod field {
    use super::Field;
    pub(super) const LINEAR_FDB_CAP: Field = 0..2;
    pub(super) const MULTICAST_FDB_CAP: Field = 4..6;
    pub(super) const LINEAR_FDB_TOP: Field = 6..8;
    pub(super) const LIFE_TIME: usize = 11;
    pub(super) const PARTITION_ENFORCEMENT_CAP: Field = 14..16;
    pub(super) const MULTICAST_FDB_TOP: Field = 18..20;
}

/// Length of SwitchInfo as vmad keeps it (through MulticastFDBTop).
pub const LEN: usize = field::MULTICAST_FDB_TOP.end;

/// A view over SwitchInfo attribute data.
#[derive(Debug, Clone)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    crate::wire::view_constructors!(LEN, "the 20 bytes of SwitchInfo");
    /// LinearFDBCap: LFT entries the switch has.
    pub fn linear_fdb_cap(&self) -> u16 {
        be::u16(self.buffer.as_ref(), field::LINEAR_FDB_CAP)
    }
    /// MulticastFDBCap.
    pub fn multicast_fdb_cap(&self) -> u16 {
        be::u16(self.buffer.as_ref(), field::MULTICAST_FDB_CAP)
    }
    /// LinearFDBTop: the highest LID the LFT holds.
    pub fn linear_fdb_top(&self) -> u16 {
        be::u16(self.buffer.as_ref(), field::LINEAR_FDB_TOP)
    }
    /// LifeTimeValue (5 bits).
    pub fn life_time_value(&self) -> u8 {
        self.buffer.as_ref()[field::LIFE_TIME] >> 3
    }
    /// PortStateChange: some port changed state since the SM last cleared it.
    pub fn port_state_change(&self) -> bool {
        self.buffer.as_ref()[field::LIFE_TIME] & 0x04 != 0
    }
    /// PartitionEnforcementCap.
    pub fn partition_enforcement_cap(&self) -> u16 {
        be::u16(self.buffer.as_ref(), field::PARTITION_ENFORCEMENT_CAP)
    }
    /// MulticastFDBTop.
    pub fn multicast_fdb_top(&self) -> u16 {
        be::u16(self.buffer.as_ref(), field::MULTICAST_FDB_TOP)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Set LinearFDBCap.
    pub fn set_linear_fdb_cap(&mut self, v: u16) {
        be::set_u16(self.buffer.as_mut(), field::LINEAR_FDB_CAP, v);
    }
    /// Set MulticastFDBCap.
    pub fn set_multicast_fdb_cap(&mut self, v: u16) {
        be::set_u16(self.buffer.as_mut(), field::MULTICAST_FDB_CAP, v);
    }
    /// Set LinearFDBTop.
    pub fn set_linear_fdb_top(&mut self, v: u16) {
        be::set_u16(self.buffer.as_mut(), field::LINEAR_FDB_TOP, v);
    }
    /// Set LifeTimeValue (the low 5 bits of `v`), keeping the other bits of its byte.
    pub fn set_life_time_value(&mut self, v: u8) {
        let b = &mut self.buffer.as_mut()[field::LIFE_TIME];
        *b = (*b & 0x07) | (v << 3);
    }
    /// Set PartitionEnforcementCap.
    pub fn set_partition_enforcement_cap(&mut self, v: u16) {
        be::set_u16(self.buffer.as_mut(), field::PARTITION_ENFORCEMENT_CAP, v);
    }
    /// Set MulticastFDBTop.
    pub fn set_multicast_fdb_top(&mut self, v: u16) {
        be::set_u16(self.buffer.as_mut(), field::MULTICAST_FDB_TOP, v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_sit_where_iba_puts_them() {
        let bytes: [u8; LEN] = [
            0xc0, 0x00, 0, 0, 0x04, 0x00, 0x00, 0xea, 0, 0, 0, 0x9c, 0, 0, 0x00, 0x20, 0, 0, 0xc0,
            0x10,
        ];
        let p = Packet::new_checked(&bytes[..]).unwrap();
        assert_eq!(p.linear_fdb_cap(), 0xc000);
        assert_eq!(p.multicast_fdb_cap(), 0x400);
        assert_eq!(p.linear_fdb_top(), 234);
        assert_eq!(p.life_time_value(), 19);
        assert!(p.port_state_change());
        assert_eq!(p.partition_enforcement_cap(), 32);
        assert_eq!(p.multicast_fdb_top(), 0xc010);
        let mut out = [0u8; LEN];
        let mut w = Packet::new_unchecked(&mut out[..]);
        w.set_linear_fdb_cap(0xc000);
        w.set_multicast_fdb_cap(0x400);
        w.set_linear_fdb_top(234);
        w.set_life_time_value(19);
        w.set_partition_enforcement_cap(32);
        w.set_multicast_fdb_top(0xc010);
        out[11] |= 0x04;
        assert_eq!(out, bytes);
        assert!(Packet::new_checked(&bytes[..19]).is_err());
    }
}
