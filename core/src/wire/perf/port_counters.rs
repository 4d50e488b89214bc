//! PortCounters (IBA 16.1.3.5): a port's error and traffic counters, 16- and
//! 32-bit, saturating. A Set clears the counters CounterSelect names.
//!
//! ```text
//!  1 PortSelect   2..4 CounterSelect   4..6 SymbolErrorCounter
//!  6 LinkErrorRecoveryCounter   7 LinkDownedCounter   8..10 PortRcvErrors
//! 10..12 PortRcvRemotePhysicalErrors   12..14 PortRcvSwitchRelayErrors
//! 14..16 PortXmitDiscards   16 PortXmitConstraintErrors   17 PortRcvConstraintErrors
//! 18 CounterSelect2   19 LocalLinkIntegrityErrors(4) ExcessiveBufferOverrunErrors(4)
//! 22..24 VL15Dropped   24..28 PortXmitData   28..32 PortRcvData
//! 32..36 PortXmitPkts   36..40 PortRcvPkts   40..44 PortXmitWait
//! ```
//! Data counters count 32-bit words.

use crate::wire::{be, Field};

mod field {
    use super::Field;
    pub(super) const PORT_SELECT: usize = 1;
    pub(super) const COUNTER_SELECT: Field = 2..4;
    pub(super) const RCV_ERRORS: Field = 8..10;
    pub(super) const XMIT_DISCARDS: Field = 14..16;
    pub(super) const VL15_DROPPED: Field = 22..24;
    pub(super) const XMIT_DATA: Field = 24..28;
    pub(super) const RCV_DATA: Field = 28..32;
    pub(super) const XMIT_PKTS: Field = 32..36;
    pub(super) const RCV_PKTS: Field = 36..40;
    pub(super) const XMIT_WAIT: Field = 40..44;
}

/// Length of PortCounters.
pub const LEN: usize = field::XMIT_WAIT.end;

/// CounterSelect bits of the counters vmad's PMA keeps.
pub mod select {
    /// PortRcvErrors.
    pub const RCV_ERRORS: u16 = 1 << 3;
    /// PortXmitDiscards.
    pub const XMIT_DISCARDS: u16 = 1 << 6;
    /// VL15Dropped.
    pub const VL15_DROPPED: u16 = 1 << 11;
    /// PortXmitData.
    pub const XMIT_DATA: u16 = 1 << 12;
    /// PortRcvData.
    pub const RCV_DATA: u16 = 1 << 13;
    /// PortXmitPkts.
    pub const XMIT_PKTS: u16 = 1 << 14;
    /// PortRcvPkts.
    pub const RCV_PKTS: u16 = 1 << 15;
}

/// A view over PortCounters attribute data.
#[derive(Debug, Clone)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    crate::wire::view_constructors!(LEN, "the 44 bytes of PortCounters");
    /// PortSelect (0xff: all ports).
    pub fn port_select(&self) -> u8 {
        self.buffer.as_ref()[field::PORT_SELECT]
    }
    /// CounterSelect: which counters a Set clears.
    pub fn counter_select(&self) -> u16 {
        be::u16(self.buffer.as_ref(), field::COUNTER_SELECT)
    }
    /// PortRcvErrors.
    pub fn rcv_errors(&self) -> u16 {
        be::u16(self.buffer.as_ref(), field::RCV_ERRORS)
    }
    /// PortXmitDiscards.
    pub fn xmit_discards(&self) -> u16 {
        be::u16(self.buffer.as_ref(), field::XMIT_DISCARDS)
    }
    /// VL15Dropped.
    pub fn vl15_dropped(&self) -> u16 {
        be::u16(self.buffer.as_ref(), field::VL15_DROPPED)
    }
    /// PortXmitData (words).
    pub fn xmit_data(&self) -> u32 {
        be::u32(self.buffer.as_ref(), field::XMIT_DATA)
    }
    /// PortRcvData (words).
    pub fn rcv_data(&self) -> u32 {
        be::u32(self.buffer.as_ref(), field::RCV_DATA)
    }
    /// PortXmitPkts.
    pub fn xmit_pkts(&self) -> u32 {
        be::u32(self.buffer.as_ref(), field::XMIT_PKTS)
    }
    /// PortRcvPkts.
    pub fn rcv_pkts(&self) -> u32 {
        be::u32(self.buffer.as_ref(), field::RCV_PKTS)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Set PortSelect.
    pub fn set_port_select(&mut self, v: u8) {
        self.buffer.as_mut()[field::PORT_SELECT] = v;
    }
    /// Set CounterSelect.
    pub fn set_counter_select(&mut self, v: u16) {
        be::set_u16(self.buffer.as_mut(), field::COUNTER_SELECT, v);
    }
    /// Set PortRcvErrors.
    pub fn set_rcv_errors(&mut self, v: u16) {
        be::set_u16(self.buffer.as_mut(), field::RCV_ERRORS, v);
    }
    /// Set PortXmitDiscards.
    pub fn set_xmit_discards(&mut self, v: u16) {
        be::set_u16(self.buffer.as_mut(), field::XMIT_DISCARDS, v);
    }
    /// Set VL15Dropped.
    pub fn set_vl15_dropped(&mut self, v: u16) {
        be::set_u16(self.buffer.as_mut(), field::VL15_DROPPED, v);
    }
    /// Set PortXmitData.
    pub fn set_xmit_data(&mut self, v: u32) {
        be::set_u32(self.buffer.as_mut(), field::XMIT_DATA, v);
    }
    /// Set PortRcvData.
    pub fn set_rcv_data(&mut self, v: u32) {
        be::set_u32(self.buffer.as_mut(), field::RCV_DATA, v);
    }
    /// Set PortXmitPkts.
    pub fn set_xmit_pkts(&mut self, v: u32) {
        be::set_u32(self.buffer.as_mut(), field::XMIT_PKTS, v);
    }
    /// Set PortRcvPkts.
    pub fn set_rcv_pkts(&mut self, v: u32) {
        be::set_u32(self.buffer.as_mut(), field::RCV_PKTS, v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_sit_where_iba_puts_them() {
        let mut bytes = [0u8; LEN];
        bytes[1] = 3;
        bytes[2..4].copy_from_slice(&[0xf0, 0x08]);
        bytes[8..10].copy_from_slice(&[0, 7]);
        bytes[14..16].copy_from_slice(&[0, 2]);
        bytes[22..24].copy_from_slice(&[0, 1]);
        bytes[24..28].copy_from_slice(&[0, 0, 1, 0]);
        bytes[28..32].copy_from_slice(&[0, 0, 2, 0]);
        bytes[32..36].copy_from_slice(&[0, 0, 0, 4]);
        bytes[36..40].copy_from_slice(&[0, 0, 0, 8]);
        let p = Packet::new_checked(&bytes[..]).unwrap();
        assert_eq!((p.port_select(), p.counter_select()), (3, 0xf008));
        assert_eq!(
            (p.rcv_errors(), p.xmit_discards(), p.vl15_dropped()),
            (7, 2, 1)
        );
        assert_eq!((p.xmit_data(), p.rcv_data()), (256, 512));
        assert_eq!((p.xmit_pkts(), p.rcv_pkts()), (4, 8));
        let mut out = [0u8; LEN];
        let mut w = Packet::new_unchecked(&mut out[..]);
        w.set_port_select(3);
        w.set_counter_select(0xf008);
        w.set_rcv_errors(7);
        w.set_xmit_discards(2);
        w.set_vl15_dropped(1);
        w.set_xmit_data(256);
        w.set_rcv_data(512);
        w.set_xmit_pkts(4);
        w.set_rcv_pkts(8);
        assert_eq!(out, bytes);
        let all = select::XMIT_DATA | select::RCV_DATA | select::XMIT_PKTS | select::RCV_PKTS;
        assert_eq!(all | select::RCV_ERRORS, 0xf008);
    }
}
