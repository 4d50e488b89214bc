//! PortCountersExtended (IBA 16.1.4.11): 64-bit traffic counters. A Set clears
//! the counters CounterSelect names.
//!
//! ```text
//!  1 PortSelect   2..4 CounterSelect   8..16 PortXmitData   16..24 PortRcvData
//! 24..32 PortXmitPkts   32..40 PortRcvPkts   40..48 PortUnicastXmitPkts
//! 48..56 PortUnicastRcvPkts   56..64 PortMulticastXmitPkts   64..72 PortMulticastRcvPkts
//! ```

use crate::wire::{be, Field};

mod field {
    use super::Field;
    pub(super) const PORT_SELECT: usize = 1;
    pub(super) const COUNTER_SELECT: Field = 2..4;
    pub(super) const XMIT_DATA: Field = 8..16;
    pub(super) const RCV_DATA: Field = 16..24;
    pub(super) const XMIT_PKTS: Field = 24..32;
    pub(super) const RCV_PKTS: Field = 32..40;
    pub(super) const UNICAST_XMIT_PKTS: Field = 40..48;
    pub(super) const UNICAST_RCV_PKTS: Field = 48..56;
    pub(super) const MULTICAST_RCV_PKTS: Field = 64..72;
}

/// Length of PortCountersExtended.
pub const LEN: usize = field::MULTICAST_RCV_PKTS.end;

/// CounterSelect bits.
pub mod select {
    /// PortXmitData.
    pub const XMIT_DATA: u16 = 1 << 0;
    /// PortRcvData.
    pub const RCV_DATA: u16 = 1 << 1;
    /// PortXmitPkts.
    pub const XMIT_PKTS: u16 = 1 << 2;
    /// PortRcvPkts.
    pub const RCV_PKTS: u16 = 1 << 3;
    /// PortUnicastXmitPkts.
    pub const UNICAST_XMIT_PKTS: u16 = 1 << 4;
    /// PortUnicastRcvPkts.
    pub const UNICAST_RCV_PKTS: u16 = 1 << 5;
}

/// A view over PortCountersExtended attribute data.
#[derive(Debug, Clone)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    crate::wire::view_constructors!(LEN, "the 72 bytes of PortCountersExtended");
    /// PortSelect (0xff: all ports).
    pub fn port_select(&self) -> u8 {
        self.buffer.as_ref()[field::PORT_SELECT]
    }
    /// CounterSelect.
    pub fn counter_select(&self) -> u16 {
        be::u16(self.buffer.as_ref(), field::COUNTER_SELECT)
    }
    /// PortXmitData (words).
    pub fn xmit_data(&self) -> u64 {
        be::u64(self.buffer.as_ref(), field::XMIT_DATA)
    }
    /// PortRcvData (words).
    pub fn rcv_data(&self) -> u64 {
        be::u64(self.buffer.as_ref(), field::RCV_DATA)
    }
    /// PortXmitPkts.
    pub fn xmit_pkts(&self) -> u64 {
        be::u64(self.buffer.as_ref(), field::XMIT_PKTS)
    }
    /// PortRcvPkts.
    pub fn rcv_pkts(&self) -> u64 {
        be::u64(self.buffer.as_ref(), field::RCV_PKTS)
    }
    /// PortUnicastXmitPkts.
    pub fn unicast_xmit_pkts(&self) -> u64 {
        be::u64(self.buffer.as_ref(), field::UNICAST_XMIT_PKTS)
    }
    /// PortUnicastRcvPkts.
    pub fn unicast_rcv_pkts(&self) -> u64 {
        be::u64(self.buffer.as_ref(), field::UNICAST_RCV_PKTS)
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
    /// Set PortXmitData.
    pub fn set_xmit_data(&mut self, v: u64) {
        be::set_u64(self.buffer.as_mut(), field::XMIT_DATA, v);
    }
    /// Set PortRcvData.
    pub fn set_rcv_data(&mut self, v: u64) {
        be::set_u64(self.buffer.as_mut(), field::RCV_DATA, v);
    }
    /// Set PortXmitPkts.
    pub fn set_xmit_pkts(&mut self, v: u64) {
        be::set_u64(self.buffer.as_mut(), field::XMIT_PKTS, v);
    }
    /// Set PortRcvPkts.
    pub fn set_rcv_pkts(&mut self, v: u64) {
        be::set_u64(self.buffer.as_mut(), field::RCV_PKTS, v);
    }
    /// Set PortUnicastXmitPkts.
    pub fn set_unicast_xmit_pkts(&mut self, v: u64) {
        be::set_u64(self.buffer.as_mut(), field::UNICAST_XMIT_PKTS, v);
    }
    /// Set PortUnicastRcvPkts.
    pub fn set_unicast_rcv_pkts(&mut self, v: u64) {
        be::set_u64(self.buffer.as_mut(), field::UNICAST_RCV_PKTS, v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_sit_where_iba_puts_them() {
        let mut bytes = [0u8; LEN];
        bytes[1] = 1;
        bytes[2..4].copy_from_slice(&[0x00, 0x3f]);
        for (i, at) in [8usize, 16, 24, 32, 40, 48].into_iter().enumerate() {
            bytes[at + 3] = i as u8 + 1; // counter i = (i + 1) << 32
        }
        let p = Packet::new_checked(&bytes[..]).unwrap();
        assert_eq!((p.port_select(), p.counter_select()), (1, 0x3f));
        let got = [
            p.xmit_data(),
            p.rcv_data(),
            p.xmit_pkts(),
            p.rcv_pkts(),
            p.unicast_xmit_pkts(),
            p.unicast_rcv_pkts(),
        ];
        assert_eq!(
            got,
            [1u64 << 32, 2 << 32, 3 << 32, 4 << 32, 5 << 32, 6 << 32]
        );
        let mut out = [0u8; LEN];
        let mut w = Packet::new_unchecked(&mut out[..]);
        w.set_port_select(1);
        w.set_counter_select(0x3f);
        w.set_xmit_data(1 << 32);
        w.set_rcv_data(2 << 32);
        w.set_xmit_pkts(3 << 32);
        w.set_rcv_pkts(4 << 32);
        w.set_unicast_xmit_pkts(5 << 32);
        w.set_unicast_rcv_pkts(6 << 32);
        assert_eq!(out, bytes);
        assert!(Packet::new_checked(&bytes[..71]).is_err());
    }
}
