//! Subnet management packets (IBA 14.2.1): LID-routed (class 0x01) and
//! directed-route (class 0x81) SMPs, and the SMP attributes the simulated
//! SMA and discovery use ([`node_info`], [`port_info`], [`node_desc`]); the
//! directed-route rules of IBA 14.2.2 are in [`dr`].
//!
//! ```text
//!            LID-routed                 directed route
//!   0..24    MAD header                 MAD header; status bit 15 = D,
//!                                       byte 6 = hop pointer, byte 7 = hop count
//!  24..32    M_Key                      M_Key
//!  32..64    reserved                   DrSLID 32..34, DrDLID 34..36, reserved
//!  64..128   SMP data (64 bytes)        SMP data (64 bytes)
//! 128..256   reserved                   InitialPath 128..192, ReturnPath 192..256
//! ```
//!
//! The SMP view wraps the whole 256-byte MAD, like every header view here.
//! The attribute views ([`node_info::Packet`], …) wrap the attribute data
//! itself (offset 0 = first byte of the attribute), because the same
//! attribute appears at different offsets: at 64 in an SMP, inside an SA
//! record in a GetTable response.

use super::{be, enum_with_unknown, mad, Field, Result, MAD_SIZE};

pub mod dr;
pub mod lft;
pub mod node_desc;
pub mod node_info;
pub mod pkey_table;
pub mod port_info;
pub mod sm_info;
pub mod switch_info;

mod field {
    use super::Field;
    pub(super) const STATUS: Field = 4..6;
    pub(super) const HOP_POINTER: usize = 6;
    pub(super) const HOP_COUNT: usize = 7;
    pub(super) const M_KEY: Field = 24..32;
    pub(super) const DR_SLID: Field = 32..34;
    pub(super) const DR_DLID: Field = 34..36;
    pub(super) const LID_RESERVED: Field = 32..64;
    pub(super) const DR_RESERVED: Field = 36..64;
    pub(super) const DATA: Field = 64..128;
    pub(super) const INITIAL_PATH: Field = 128..192;
    pub(super) const RETURN_PATH: Field = 192..256;
    pub(super) const LID_TRAILER: Field = 128..256;
}

/// Offset of the SMP data in the MAD.
pub const DATA_OFFSET: usize = field::DATA.start;
/// Length of the SMP data (`UMAD_LEN_SMP_DATA`).
pub const DATA_LEN: usize = field::DATA.end - field::DATA.start;
/// Length of each directed-route path (one byte per hop, 0 unused).
pub const PATH_LEN: usize = field::INITIAL_PATH.end - field::INITIAL_PATH.start;
/// The SMP class version (both forms).
pub const CLASS_VERSION: u8 = 1;
/// The most hops a directed route can take (IBA 14.2.2: paths index 1..=63).
pub const MAX_HOPS: u8 = 63;
/// The permissive LID: DrSLID/DrDLID value meaning "directed-route section".
pub const PERMISSIVE_LID: u16 = 0xffff;
/// The D (direction) bit of a directed-route SMP's status word.
pub const DIRECTION_BIT: u16 = 0x8000;
const _: () = assert!(DATA_OFFSET == 64 && DATA_LEN == 64 && PATH_LEN == 64);
const _: () = assert!(field::RETURN_PATH.end == MAD_SIZE);
const _: () = assert!(field::LID_TRAILER.end == MAD_SIZE && field::DR_RESERVED.end == DATA_OFFSET);

enum_with_unknown! {
    /// SMP attribute IDs (IBA 14.2.5, table 145).
    pub enum AttrId(u16) {
        /// ClassPortInfo.
        ClassPortInfo = 0x0001,
        /// Notice (traps).
        Notice = 0x0002,
        /// NodeDescription.
        NodeDescription = 0x0010,
        /// NodeInfo.
        NodeInfo = 0x0011,
        /// SwitchInfo.
        SwitchInfo = 0x0012,
        /// GUIDInfo.
        GuidInfo = 0x0014,
        /// PortInfo.
        PortInfo = 0x0015,
        /// P_KeyTable.
        PKeyTable = 0x0016,
        /// SLtoVLMappingTable.
        SlToVl = 0x0017,
        /// VLArbitrationTable.
        VlArb = 0x0018,
        /// LinearForwardingTable.
        LinearFwdTable = 0x0019,
        /// RandomForwardingTable.
        RandomFwdTable = 0x001a,
        /// MulticastForwardingTable.
        MulticastFwdTable = 0x001b,
        /// SMInfo.
        SmInfo = 0x0020,
        /// VendorDiag.
        VendorDiag = 0x0030,
        /// LedInfo.
        LedInfo = 0x0031,
    }
}

/// The direction of a directed-route SMP (the D bit).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Direction {
    /// D = 0: travelling from the requester along the initial path.
    #[default]
    Outbound,
    /// D = 1: the response, travelling back along the return path.
    Inbound,
}

/// A view over a 256-byte SMP.
#[derive(Debug, Clone)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    crate::wire::view_constructors!(MAD_SIZE, "a whole SMP (SMPs are always 256 bytes)");

    /// Whether the management class is SubnDirectedRoute (0x81).
    pub fn is_directed_route(&self) -> bool {
        self.buffer.as_ref()[1] == u8::from(mad::MgmtClass::SubnDirectedRoute)
    }
    /// The D bit (meaningful in directed-route SMPs only).
    pub fn direction(&self) -> Direction {
        if be::u16(self.buffer.as_ref(), field::STATUS) & DIRECTION_BIT != 0 {
            Direction::Inbound
        } else {
            Direction::Outbound
        }
    }
    /// The status without the D bit in a directed-route SMP (15 bits), the
    /// whole status word otherwise.
    pub fn smp_status(&self) -> mad::MadStatus {
        let s = be::u16(self.buffer.as_ref(), field::STATUS);
        mad::MadStatus(if self.is_directed_route() {
            s & !DIRECTION_BIT
        } else {
            s
        })
    }
    /// Hop pointer (directed route; the high byte of ClassSpecific).
    pub fn hop_pointer(&self) -> u8 {
        self.buffer.as_ref()[field::HOP_POINTER]
    }
    /// Hop count (directed route; the low byte of ClassSpecific).
    pub fn hop_count(&self) -> u8 {
        self.buffer.as_ref()[field::HOP_COUNT]
    }
    /// M_Key.
    pub fn m_key(&self) -> u64 {
        be::u64(self.buffer.as_ref(), field::M_KEY)
    }
    /// DrSLID (directed route).
    pub fn dr_slid(&self) -> u16 {
        be::u16(self.buffer.as_ref(), field::DR_SLID)
    }
    /// DrDLID (directed route).
    pub fn dr_dlid(&self) -> u16 {
        be::u16(self.buffer.as_ref(), field::DR_DLID)
    }
    /// The 64 bytes of SMP data (the attribute).
    pub fn data(&self) -> &[u8] {
        &self.buffer.as_ref()[field::DATA]
    }
    /// InitialPath (directed route): port numbers, index 1..=hop count.
    pub fn initial_path(&self) -> &[u8] {
        &self.buffer.as_ref()[field::INITIAL_PATH]
    }
    /// ReturnPath (directed route): filled in hop by hop.
    pub fn return_path(&self) -> &[u8] {
        &self.buffer.as_ref()[field::RETURN_PATH]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Set the D bit, keeping the other 15 status bits.
    pub fn set_direction(&mut self, d: Direction) {
        let b = self.buffer.as_mut();
        let s = be::u16(b, field::STATUS) & !DIRECTION_BIT;
        let bit = match d {
            Direction::Outbound => 0,
            Direction::Inbound => DIRECTION_BIT,
        };
        be::set_u16(b, field::STATUS, s | bit);
    }
    /// Set the hop pointer.
    pub fn set_hop_pointer(&mut self, v: u8) {
        self.buffer.as_mut()[field::HOP_POINTER] = v;
    }
    /// Set the hop count.
    pub fn set_hop_count(&mut self, v: u8) {
        self.buffer.as_mut()[field::HOP_COUNT] = v;
    }
    /// Set M_Key.
    pub fn set_m_key(&mut self, v: u64) {
        be::set_u64(self.buffer.as_mut(), field::M_KEY, v);
    }
    /// Set DrSLID.
    pub fn set_dr_slid(&mut self, v: u16) {
        be::set_u16(self.buffer.as_mut(), field::DR_SLID, v);
    }
    /// Set DrDLID.
    pub fn set_dr_dlid(&mut self, v: u16) {
        be::set_u16(self.buffer.as_mut(), field::DR_DLID, v);
    }
    /// The SMP data, mutably.
    pub fn data_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::DATA]
    }
    /// InitialPath, mutably.
    pub fn initial_path_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::INITIAL_PATH]
    }
    /// ReturnPath, mutably.
    pub fn return_path_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::RETURN_PATH]
    }
    /// Zero the reserved bytes of the LID-routed form (32..64 and 128..256).
    pub fn clear_lid_reserved(&mut self) {
        let b = self.buffer.as_mut();
        b[field::LID_RESERVED].fill(0);
        b[field::LID_TRAILER].fill(0);
    }
    /// Zero the reserved bytes of the directed-route form (36..64).
    pub fn clear_dr_reserved(&mut self) {
        self.buffer.as_mut()[field::DR_RESERVED].fill(0);
    }
}

/// The directed-route part of an SMP.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DirectedRoute {
    /// The D bit.
    pub direction: Direction,
    /// Hop pointer.
    pub hop_pointer: u8,
    /// Hop count.
    pub hop_count: u8,
    /// DrSLID.
    pub dr_slid: u16,
    /// DrDLID.
    pub dr_dlid: u16,
    /// InitialPath.
    pub initial_path: [u8; PATH_LEN],
    /// ReturnPath.
    pub return_path: [u8; PATH_LEN],
}

impl Default for DirectedRoute {
    /// A route of zero hops from a permissive-LID source to a permissive-LID destination.
    fn default() -> Self {
        DirectedRoute {
            direction: Direction::Outbound,
            hop_pointer: 0,
            hop_count: 0,
            dr_slid: PERMISSIVE_LID,
            dr_dlid: PERMISSIVE_LID,
            initial_path: [0; PATH_LEN],
            return_path: [0; PATH_LEN],
        }
    }
}

/// The SMP-specific part of a MAD as a value: everything after the common
/// header, plus the directed-route bits that live inside it.
///
/// The common header itself is [`mad::Repr`]'s: emit it first, then this
/// (which rewrites ClassSpecific and the D bit of a directed-route SMP).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// M_Key.
    pub m_key: u64,
    /// The SMP data (the attribute).
    pub data: [u8; DATA_LEN],
    /// `Some` for class 0x81, `None` for LID-routed.
    pub dr: Option<DirectedRoute>,
}

impl Repr {
    /// Parse a checked SMP; directed-route fields are read iff the class is 0x81.
    ///
    /// # Errors
    ///
    /// [`Error::Truncated`](crate::wire::Error::Truncated) if the buffer is shorter than 256 bytes.
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Result<Repr> {
        packet.check_len()?;
        let mut data = [0u8; DATA_LEN];
        data.copy_from_slice(packet.data());
        let dr = packet.is_directed_route().then(|| {
            let mut dr = DirectedRoute {
                direction: packet.direction(),
                hop_pointer: packet.hop_pointer(),
                hop_count: packet.hop_count(),
                dr_slid: packet.dr_slid(),
                dr_dlid: packet.dr_dlid(),
                ..DirectedRoute::default()
            };
            dr.initial_path.copy_from_slice(packet.initial_path());
            dr.return_path.copy_from_slice(packet.return_path());
            dr
        });
        Ok(Repr {
            m_key: packet.m_key(),
            data,
            dr,
        })
    }

    /// Bytes `emit` needs: a whole MAD.
    pub const fn buffer_len(&self) -> usize {
        MAD_SIZE
    }

    /// Write bytes 24..256 (reserved as zero) and, for a directed-route
    /// SMP, the hop pointer, hop count and D bit. The class byte is not
    /// written: it is [`mad::Repr`]'s.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        packet.set_m_key(self.m_key);
        packet.data_mut().copy_from_slice(&self.data);
        match &self.dr {
            None => packet.clear_lid_reserved(),
            Some(dr) => {
                packet.set_direction(dr.direction);
                packet.set_hop_pointer(dr.hop_pointer);
                packet.set_hop_count(dr.hop_count);
                packet.set_dr_slid(dr.dr_slid);
                packet.set_dr_dlid(dr.dr_dlid);
                packet.clear_dr_reserved();
                packet.initial_path_mut().copy_from_slice(&dr.initial_path);
                packet.return_path_mut().copy_from_slice(&dr.return_path);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::Error;
    use proptest::prelude::*;

    /// A directed-route Get(NodeInfo) on its way out, at the second of three
    /// hops (path 1 → 3 → 7), M_Key 0x0102030405060708, D = 0.
    fn dr_get_nodeinfo() -> [u8; 256] {
        let mut b = [0u8; 256];
        b[..24].copy_from_slice(&[
            0x01, 0x81, 0x01, 0x01, // base 1, SubnDirectedRoute, v1, Get
            0x00, 0x00, 0x02, 0x03, // status 0 (D=0), hop pointer 2, hop count 3
            0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x2a, // TID 42
            0x00, 0x11, 0x00, 0x00, // NodeInfo, reserved
            0x00, 0x00, 0x00, 0x00, // attribute modifier
        ]);
        b[24..36].copy_from_slice(&[
            0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, // M_Key
            0xff, 0xff, 0xff, 0xff, // DrSLID, DrDLID permissive
        ]);
        b[128 + 1] = 1;
        b[128 + 2] = 3;
        b[128 + 3] = 7;
        b[192 + 1] = 9; // the first hop's return port
        b
    }

    fn dr_repr() -> Repr {
        let mut dr = DirectedRoute {
            hop_pointer: 2,
            hop_count: 3,
            ..DirectedRoute::default()
        };
        dr.initial_path[1..4].copy_from_slice(&[1, 3, 7]);
        dr.return_path[1] = 9;
        Repr {
            m_key: 0x0102_0304_0506_0708,
            data: [0; 64],
            dr: Some(dr),
        }
    }

    #[test]
    fn test_deconstruct() {
        let b = dr_get_nodeinfo();
        let p = Packet::new_checked(&b[..]).unwrap();
        assert!(p.is_directed_route());
        assert_eq!(p.direction(), Direction::Outbound);
        assert_eq!((p.hop_pointer(), p.hop_count()), (2, 3));
        assert_eq!(p.m_key(), 0x0102_0304_0506_0708);
        assert_eq!((p.dr_slid(), p.dr_dlid()), (PERMISSIVE_LID, PERMISSIVE_LID));
        assert_eq!(&p.initial_path()[..4], &[0, 1, 3, 7]);
        assert_eq!(p.return_path()[1], 9);
        assert_eq!(
            AttrId::from(mad::Packet::new_unchecked(&b[..]).attr_id()),
            AttrId::NodeInfo
        );
    }

    #[test]
    fn direction_bit_is_not_status() {
        let mut b = dr_get_nodeinfo();
        b[4] = 0x80;
        b[5] = 0x1c;
        let p = Packet::new_checked(&b[..]).unwrap();
        assert_eq!(p.direction(), Direction::Inbound);
        assert_eq!(p.smp_status(), mad::MadStatus::INVALID_ATTR_VALUE);
        // LID-routed: bit 15 is plain status.
        b[1] = 0x01;
        let p = Packet::new_checked(&b[..]).unwrap();
        assert!(!p.is_directed_route());
        assert_eq!(p.smp_status(), mad::MadStatus(0x801c));

        let mut p = Packet::new_unchecked(&mut b[..]);
        p.set_direction(Direction::Outbound);
        assert_eq!(&b[4..6], &[0x00, 0x1c], "the other 15 bits are kept");
    }

    #[test]
    fn test_construct_over_garbage() {
        let want = dr_get_nodeinfo();
        let mut b = [0xa5u8; 256];
        let hdr = mad::Repr::parse(&mad::Packet::new_checked(&want[..]).unwrap()).unwrap();
        hdr.emit(&mut mad::Packet::new_unchecked(&mut b[..]));
        dr_repr().emit(&mut Packet::new_unchecked(&mut b[..]));
        assert_eq!(b, want);
    }

    #[test]
    fn lid_routed_emit_zeroes_reserved() {
        let mut b = [0xa5u8; 256];
        b[1] = 0x01;
        let r = Repr {
            m_key: 7,
            data: [0x11; 64],
            dr: None,
        };
        r.emit(&mut Packet::new_unchecked(&mut b[..]));
        assert_eq!(&b[..24], &{
            let mut h = [0xa5u8; 24];
            h[1] = 0x01;
            h
        });
        assert_eq!(&b[24..32], &7u64.to_be_bytes());
        assert_eq!(&b[32..64], &[0u8; 32]);
        assert_eq!(&b[64..128], &[0x11u8; 64]);
        assert_eq!(&b[128..], &[0u8; 128]);
        assert_eq!(
            Repr::parse(&Packet::new_checked(&b[..]).unwrap()).unwrap(),
            r
        );
    }

    #[test]
    fn test_parse() {
        let b = dr_get_nodeinfo();
        assert_eq!(
            Repr::parse(&Packet::new_checked(&b[..]).unwrap()).unwrap(),
            dr_repr()
        );
    }

    #[test]
    fn test_truncated() {
        let b = dr_get_nodeinfo();
        assert_eq!(
            Packet::new_checked(&b[..255]).unwrap_err(),
            Error::Truncated
        );
        assert_eq!(
            Repr::parse(&Packet::new_unchecked(&b[..100])).unwrap_err(),
            Error::Truncated
        );
    }

    prop_compose! {
        fn arb_dr()(d in any::<bool>(), hp in any::<u8>(), hc in any::<u8>(), s in any::<u16>(),
                    dl in any::<u16>(), ip in proptest::collection::vec(any::<u8>(), 64),
                    rp in proptest::collection::vec(any::<u8>(), 64)) -> DirectedRoute {
            let mut dr = DirectedRoute {
                direction: if d { Direction::Inbound } else { Direction::Outbound },
                hop_pointer: hp, hop_count: hc, dr_slid: s, dr_dlid: dl,
                ..DirectedRoute::default()
            };
            dr.initial_path.copy_from_slice(&ip);
            dr.return_path.copy_from_slice(&rp);
            dr
        }
    }

    proptest! {
        #[test]
        fn roundtrip(m in any::<u64>(), data in proptest::collection::vec(any::<u8>(), 64),
                     dr in proptest::option::of(arb_dr())) {
            let mut r = Repr { m_key: m, data: [0; 64], dr };
            r.data.copy_from_slice(&data);
            let mut buf = vec![0xa5u8; r.buffer_len()];
            buf[1] = if dr.is_some() { 0x81 } else { 0x01 };
            r.emit(&mut Packet::new_unchecked(&mut buf[..]));
            prop_assert_eq!(Repr::parse(&Packet::new_checked(&buf[..]).unwrap()).unwrap(), r);
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
            if let Ok(p) = Packet::new_checked(&bytes[..]) {
                let _ = Repr::parse(&p);
                let _ = (p.smp_status(), p.direction());
            }
        }
    }
}
