//! NodeInfo (IBA 14.2.5.3): 40 bytes of attribute data.
//!
//! The view wraps the attribute itself (offset 0 = BaseVersion): in an SMP
//! that is [`super::DATA_OFFSET`], in an SA NodeRecord byte 4 of the record.

use crate::wire::{be, enum_with_unknown, Field, Result};

mod field {
    use super::Field;
    pub(super) const BASE_VERSION: usize = 0;
    pub(super) const CLASS_VERSION: usize = 1;
    pub(super) const NODE_TYPE: usize = 2;
    pub(super) const NUM_PORTS: usize = 3;
    pub(super) const SYS_IMAGE_GUID: Field = 4..12;
    pub(super) const NODE_GUID: Field = 12..20;
    pub(super) const PORT_GUID: Field = 20..28;
    pub(super) const PARTITION_CAP: Field = 28..30;
    pub(super) const DEVICE_ID: Field = 30..32;
    pub(super) const REVISION: Field = 32..36;
    pub(super) const LOCAL_PORT_NUM: usize = 36;
    pub(super) const VENDOR_ID: Field = 37..40;
}

/// Length of NodeInfo.
pub const LEN: usize = field::VENDOR_ID.end;
const _: () = assert!(LEN == 40);

enum_with_unknown! {
    /// NodeType.
    pub enum NodeType(u8) {
        /// Channel adapter.
        Ca = 1,
        /// Switch.
        Switch = 2,
        /// Router.
        Router = 3,
    }
}

/// A view over NodeInfo attribute data.
#[derive(Debug, Clone)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    crate::wire::view_constructors!(LEN, "the 40 bytes of NodeInfo");
    /// BaseVersion.
    pub fn base_version(&self) -> u8 {
        self.buffer.as_ref()[field::BASE_VERSION]
    }
    /// ClassVersion.
    pub fn class_version(&self) -> u8 {
        self.buffer.as_ref()[field::CLASS_VERSION]
    }
    /// NodeType.
    pub fn node_type(&self) -> NodeType {
        NodeType::from(self.buffer.as_ref()[field::NODE_TYPE])
    }
    /// NumPorts.
    pub fn num_ports(&self) -> u8 {
        self.buffer.as_ref()[field::NUM_PORTS]
    }
    /// SystemImageGUID.
    pub fn sys_image_guid(&self) -> u64 {
        be::u64(self.buffer.as_ref(), field::SYS_IMAGE_GUID)
    }
    /// NodeGUID.
    pub fn node_guid(&self) -> u64 {
        be::u64(self.buffer.as_ref(), field::NODE_GUID)
    }
    /// PortGUID (of the port the SMP arrived on).
    pub fn port_guid(&self) -> u64 {
        be::u64(self.buffer.as_ref(), field::PORT_GUID)
    }
    /// PartitionCap.
    pub fn partition_cap(&self) -> u16 {
        be::u16(self.buffer.as_ref(), field::PARTITION_CAP)
    }
    /// DeviceID.
    pub fn device_id(&self) -> u16 {
        be::u16(self.buffer.as_ref(), field::DEVICE_ID)
    }
    /// Revision.
    pub fn revision(&self) -> u32 {
        be::u32(self.buffer.as_ref(), field::REVISION)
    }
    /// LocalPortNum (the port the SMP arrived on).
    pub fn local_port_num(&self) -> u8 {
        self.buffer.as_ref()[field::LOCAL_PORT_NUM]
    }
    /// VendorID (24 bits).
    pub fn vendor_id(&self) -> u32 {
        let b = &self.buffer.as_ref()[field::VENDOR_ID];
        u32::from_be_bytes([0, b[0], b[1], b[2]])
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Set BaseVersion.
    pub fn set_base_version(&mut self, v: u8) {
        self.buffer.as_mut()[field::BASE_VERSION] = v;
    }
    /// Set ClassVersion.
    pub fn set_class_version(&mut self, v: u8) {
        self.buffer.as_mut()[field::CLASS_VERSION] = v;
    }
    /// Set NodeType.
    pub fn set_node_type(&mut self, v: NodeType) {
        self.buffer.as_mut()[field::NODE_TYPE] = v.into();
    }
    /// Set NumPorts.
    pub fn set_num_ports(&mut self, v: u8) {
        self.buffer.as_mut()[field::NUM_PORTS] = v;
    }
    /// Set SystemImageGUID.
    pub fn set_sys_image_guid(&mut self, v: u64) {
        be::set_u64(self.buffer.as_mut(), field::SYS_IMAGE_GUID, v);
    }
    /// Set NodeGUID.
    pub fn set_node_guid(&mut self, v: u64) {
        be::set_u64(self.buffer.as_mut(), field::NODE_GUID, v);
    }
    /// Set PortGUID.
    pub fn set_port_guid(&mut self, v: u64) {
        be::set_u64(self.buffer.as_mut(), field::PORT_GUID, v);
    }
    /// Set PartitionCap.
    pub fn set_partition_cap(&mut self, v: u16) {
        be::set_u16(self.buffer.as_mut(), field::PARTITION_CAP, v);
    }
    /// Set DeviceID.
    pub fn set_device_id(&mut self, v: u16) {
        be::set_u16(self.buffer.as_mut(), field::DEVICE_ID, v);
    }
    /// Set Revision.
    pub fn set_revision(&mut self, v: u32) {
        be::set_u32(self.buffer.as_mut(), field::REVISION, v);
    }
    /// Set LocalPortNum.
    pub fn set_local_port_num(&mut self, v: u8) {
        self.buffer.as_mut()[field::LOCAL_PORT_NUM] = v;
    }
    /// Set VendorID (the low 24 bits are written).
    pub fn set_vendor_id(&mut self, v: u32) {
        self.buffer.as_mut()[field::VENDOR_ID].copy_from_slice(&v.to_be_bytes()[1..]);
    }
}

/// NodeInfo as a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// BaseVersion.
    pub base_version: u8,
    /// ClassVersion.
    pub class_version: u8,
    /// NodeType.
    pub node_type: NodeType,
    /// NumPorts.
    pub num_ports: u8,
    /// SystemImageGUID.
    pub sys_image_guid: u64,
    /// NodeGUID.
    pub node_guid: u64,
    /// PortGUID.
    pub port_guid: u64,
    /// PartitionCap.
    pub partition_cap: u16,
    /// DeviceID.
    pub device_id: u16,
    /// Revision.
    pub revision: u32,
    /// LocalPortNum.
    pub local_port_num: u8,
    /// VendorID (24 bits).
    pub vendor_id: u32,
}

impl Repr {
    /// Parse checked NodeInfo.
    ///
    /// # Errors
    ///
    /// [`Error::Truncated`](crate::wire::Error::Truncated) if the buffer is shorter than 40 bytes.
    pub fn parse<T: AsRef<[u8]>>(p: &Packet<T>) -> Result<Repr> {
        p.check_len()?;
        Ok(Repr {
            base_version: p.base_version(),
            class_version: p.class_version(),
            node_type: p.node_type(),
            num_ports: p.num_ports(),
            sys_image_guid: p.sys_image_guid(),
            node_guid: p.node_guid(),
            port_guid: p.port_guid(),
            partition_cap: p.partition_cap(),
            device_id: p.device_id(),
            revision: p.revision(),
            local_port_num: p.local_port_num(),
            vendor_id: p.vendor_id(),
        })
    }
    /// Bytes `emit` writes.
    pub const fn buffer_len(&self) -> usize {
        LEN
    }
    /// Write all 40 bytes (VendorID's low 24 bits).
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut Packet<T>) {
        p.set_base_version(self.base_version);
        p.set_class_version(self.class_version);
        p.set_node_type(self.node_type);
        p.set_num_ports(self.num_ports);
        p.set_sys_image_guid(self.sys_image_guid);
        p.set_node_guid(self.node_guid);
        p.set_port_guid(self.port_guid);
        p.set_partition_cap(self.partition_cap);
        p.set_device_id(self.device_id);
        p.set_revision(self.revision);
        p.set_local_port_num(self.local_port_num);
        p.set_vendor_id(self.vendor_id);
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::wire::Error;
    use proptest::prelude::*;

    /// A 1-port CA (ConnectX-3 style: device 0x1003, vendor Mellanox 0x0002c9),
    /// node GUID 0x0002c90300001234, port GUID 0x0002c90300001235.
    pub(crate) const CA_NODE_INFO: [u8; 40] = [
        0x01, 0x01, 0x01, 0x01, // base 1, class 1, CA, 1 port
        0x00, 0x02, 0xc9, 0x03, 0x00, 0x00, 0x12, 0x34, // system image GUID
        0x00, 0x02, 0xc9, 0x03, 0x00, 0x00, 0x12, 0x34, // node GUID
        0x00, 0x02, 0xc9, 0x03, 0x00, 0x00, 0x12, 0x35, // port GUID
        0x00, 0x80, 0x10, 0x03, // partition cap 128, device id 0x1003
        0x00, 0x00, 0x02, 0x00, // revision 0x200
        0x01, 0x00, 0x02, 0xc9, // local port 1, vendor 0x0002c9
    ];

    pub(crate) fn ca_repr() -> Repr {
        Repr {
            base_version: 1,
            class_version: 1,
            node_type: NodeType::Ca,
            num_ports: 1,
            sys_image_guid: 0x0002_c903_0000_1234,
            node_guid: 0x0002_c903_0000_1234,
            port_guid: 0x0002_c903_0000_1235,
            partition_cap: 128,
            device_id: 0x1003,
            revision: 0x200,
            local_port_num: 1,
            vendor_id: 0x0002c9,
        }
    }

    #[test]
    fn test_deconstruct() {
        let p = Packet::new_checked(&CA_NODE_INFO[..]).unwrap();
        assert_eq!(p.node_type(), NodeType::Ca);
        assert_eq!(p.num_ports(), 1);
        assert_eq!(p.node_guid(), 0x0002_c903_0000_1234);
        assert_eq!(p.port_guid(), 0x0002_c903_0000_1235);
        assert_eq!((p.partition_cap(), p.device_id()), (128, 0x1003));
        assert_eq!(p.local_port_num(), 1);
        assert_eq!(p.vendor_id(), 0x0002c9);
    }

    #[test]
    fn test_construct_parse() {
        let mut b = [0xa5u8; 40];
        ca_repr().emit(&mut Packet::new_unchecked(&mut b[..]));
        assert_eq!(b, CA_NODE_INFO);
        assert_eq!(
            Repr::parse(&Packet::new_checked(&b[..]).unwrap()).unwrap(),
            ca_repr()
        );
    }

    #[test]
    fn test_truncated() {
        assert_eq!(
            Packet::new_checked(&CA_NODE_INFO[..39]).unwrap_err(),
            Error::Truncated
        );
        assert_eq!(
            Repr::parse(&Packet::new_unchecked(&CA_NODE_INFO[..3])).unwrap_err(),
            Error::Truncated
        );
        assert_eq!(NodeType::from(9), NodeType::Unknown(9));
    }

    proptest! {
        #[test]
        fn roundtrip(bytes in proptest::collection::vec(any::<u8>(), 40)) {
            // Every 40-byte NodeInfo parses; emitting it gives the same bytes back.
            let r = Repr::parse(&Packet::new_checked(&bytes[..]).unwrap()).unwrap();
            let mut out = [0x5au8; 40];
            r.emit(&mut Packet::new_unchecked(&mut out[..]));
            prop_assert_eq!(&out[..], &bytes[..]);
            prop_assert_eq!(Repr::parse(&Packet::new_checked(&out[..]).unwrap()).unwrap(), r);
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            if let Ok(p) = Packet::new_checked(&bytes[..]) {
                let _ = Repr::parse(&p);
            }
        }
    }
}
