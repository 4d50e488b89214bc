//! The ibsim client protocol: the two fixed-size datagrams ibsim speaks.
//!
//! ibsim (the OFED fabric simulator; structs as its protocol header has them) has a control channel
//! carrying 80-byte [`sim_ctl`](CtlRepr) messages and a data channel carrying
//! 288-byte [`sim_request`](Request) messages, one MAD each. ibsim discards
//! any datagram of another size without a word, so both codecs work on
//! exact-size arrays.
//!
//! Byte order is ibsim's, which is mixed:
//!
//! - `sim_ctl` and the structs in its `data` are in **host** order (ibsim and
//!   its clients share a host, or in remote mode must share an endianness);
//! - `sim_request.dqp`, `.sqp`, `.status` and `.length` are big-endian;
//! - `sim_request.dlid` and `.slid` hold `htons(lid)` widened to a host `u32`
//!   (what umad2sim stores), so on x86 the LID sits big-endian in bytes 0..2.

use crate::wire::enum_with_unknown;
use crate::wire::MAD_SIZE;

/// `SIM_MAGIC`: the first word of every control message.
pub const SIM_MAGIC: u32 = 0xdead_beef;
/// Size of a control message (`struct sim_ctl`).
pub const CTL_LEN: usize = 80;
/// Size of a control message's payload.
pub const CTL_DATA_LEN: usize = 64;
/// Size of a data message (`struct sim_request`).
pub const REQUEST_LEN: usize = 288;
/// `IBSIM_MAX_CLIENTS`: ibsim's number of client slots.
pub const MAX_CLIENTS: u32 = 10;
/// The LID that means "directed route" (permissive LID).
pub const PERMISSIVE_LID: u16 = 0xffff;
/// The `status` ibsim puts on a packet it returns undelivered (ETIMEDOUT).
pub const STATUS_DROPPED: u32 = 110;
/// Length of `sim_client_info.nodeid`, NUL included.
pub const NODE_ID_LEN: usize = 32;

enum_with_unknown! {
    /// `enum SIM_CTL_TYPES`: what a control message asks for.
    pub enum CtlType(u32) {
        /// The server's answer to a request it refused.
        Error = 0,
        /// Take a client slot (data: [`ClientInfo`]).
        Connect = 1,
        /// Free the client slot.
        Disconnect = 2,
        /// `{u16 lid; u8 state}` in host order.
        GetPort = 3,
        /// `{u32 vendor_id, part_id, hw_ver; u64 fw_ver}` in host order.
        GetVendor = 4,
        /// GID prefix (big-endian) then the node GUID in host order (an ibsim bug).
        GetGid = 5,
        /// Node GUID as a host-order `u64`.
        GetGuid = 6,
        /// Raw 64-byte NodeInfo (IBA layout).
        GetNodeInfo = 7,
        /// Raw 64-byte PortInfo (IBA layout) of port `data[0]` (0: the client's own).
        GetPortInfo = 8,
        /// Set or clear PortInfo:CapabilityMask.IsSM (`int` 0 or 1).
        SetIssm = 9,
        /// Up to 32 big-endian P_Keys.
        GetPkeys = 10,
    }
}

/// A control message (`struct sim_ctl`): request and reply share the layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CtlRepr {
    /// The client's slot (anything for [`CtlType::Connect`]).
    pub client_id: u32,
    /// What is asked, or [`CtlType::Error`] in a refusal.
    pub ctl_type: CtlType,
    /// Bytes of `data` that matter (informational: ibsim ignores it).
    pub len: u32,
    /// The payload.
    pub data: [u8; CTL_DATA_LEN],
}

mod ctl_field {
    use crate::wire::Field;
    pub(super) const MAGIC: Field = 0..4;
    pub(super) const CLIENT_ID: Field = 4..8;
    pub(super) const TYPE: Field = 8..12;
    pub(super) const LEN: Field = 12..16;
    pub(super) const DATA: Field = 16..80;
}

fn ne_u32(b: &[u8], f: crate::wire::Field) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[f]);
    u32::from_ne_bytes(a)
}

impl CtlRepr {
    /// A request of `ctl_type` from slot `client_id` carrying `payload` (at most 64 bytes).
    ///
    /// # Panics
    ///
    /// If `payload` is longer than 64 bytes (a bug in the caller).
    pub fn request(client_id: u32, ctl_type: CtlType, payload: &[u8]) -> CtlRepr {
        let mut data = [0u8; CTL_DATA_LEN];
        data[..payload.len()].copy_from_slice(payload);
        CtlRepr {
            client_id,
            ctl_type,
            // Always below 64, so the cast cannot truncate.
            len: payload.len() as u32,
            data,
        }
    }

    /// Parse a received control message: exactly 80 bytes with the magic.
    pub fn parse(buf: &[u8]) -> Option<CtlRepr> {
        if buf.len() != CTL_LEN || ne_u32(buf, ctl_field::MAGIC) != SIM_MAGIC {
            return None;
        }
        let mut data = [0u8; CTL_DATA_LEN];
        data.copy_from_slice(&buf[ctl_field::DATA]);
        Some(CtlRepr {
            client_id: ne_u32(buf, ctl_field::CLIENT_ID),
            ctl_type: CtlType::from(ne_u32(buf, ctl_field::TYPE)),
            len: ne_u32(buf, ctl_field::LEN),
            data,
        })
    }

    /// The 80 bytes to send.
    pub fn emit(&self) -> [u8; CTL_LEN] {
        let mut b = [0u8; CTL_LEN];
        b[ctl_field::MAGIC].copy_from_slice(&SIM_MAGIC.to_ne_bytes());
        b[ctl_field::CLIENT_ID].copy_from_slice(&self.client_id.to_ne_bytes());
        b[ctl_field::TYPE].copy_from_slice(&u32::from(self.ctl_type).to_ne_bytes());
        b[ctl_field::LEN].copy_from_slice(&self.len.to_ne_bytes());
        b[ctl_field::DATA].copy_from_slice(&self.data);
        b
    }
}

/// `struct sim_client_info`: the payload of [`CtlType::Connect`] (44 bytes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientInfo {
    /// Request: the client's id (the `<id>` of its `in<id>` socket; in remote
    /// mode its data UDP port). Never 0: ibsim marks free slots with id 0.
    /// Reply: the slot ibsim gave.
    pub id: u32,
    /// A QP above 1 this client serves (requests to it come here); 0 for none.
    pub qp: u32,
    /// Whether the client is the port's SM: only such a client receives
    /// unsolicited QP0/QP1 requests, one per node.
    pub issm: bool,
    /// Request: node id or NodeDescription to attach to ("" = the default node).
    /// Reply: the node attached to. At most 31 bytes.
    pub node_id: String,
}

/// Size of [`ClientInfo`] on the wire.
pub const CLIENT_INFO_LEN: usize = 12 + NODE_ID_LEN;

impl ClientInfo {
    /// The 44 bytes of the struct; a longer node id is cut to 31 bytes (as umad2sim does).
    pub fn emit(&self) -> [u8; CLIENT_INFO_LEN] {
        let mut b = [0u8; CLIENT_INFO_LEN];
        b[0..4].copy_from_slice(&self.id.to_ne_bytes());
        b[4..8].copy_from_slice(&self.qp.to_ne_bytes());
        b[8..12].copy_from_slice(&u32::from(self.issm).to_ne_bytes());
        let name = self.node_id.as_bytes();
        let n = name.len().min(NODE_ID_LEN - 1);
        b[12..12 + n].copy_from_slice(&name[..n]);
        b
    }

    /// Parse from a control payload (at least 44 bytes).
    pub fn parse(data: &[u8]) -> Option<ClientInfo> {
        if data.len() < CLIENT_INFO_LEN {
            return None;
        }
        let name = &data[12..CLIENT_INFO_LEN];
        let end = name.iter().position(|&c| c == 0).unwrap_or(name.len());
        Some(ClientInfo {
            id: ne_u32(data, 0..4),
            qp: ne_u32(data, 4..8),
            issm: ne_u32(data, 8..12) != 0,
            node_id: String::from_utf8_lossy(&name[..end]).into_owned(),
        })
    }
}

mod req_field {
    use crate::wire::Field;
    pub(super) const DLID: Field = 0..4;
    pub(super) const SLID: Field = 4..8;
    pub(super) const DQP: Field = 8..12;
    pub(super) const SQP: Field = 12..16;
    pub(super) const STATUS: Field = 16..20;
    // 20..24: padding before the u64.
    pub(super) const LENGTH: Field = 24..32;
    pub(super) const MAD: Field = 32..288;
}

/// A view of a data message (`struct sim_request`, 288 bytes): one MAD and its addressing.
///
/// As the wire views: once [`Request::check_len`] has passed, no accessor panics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Request<T: AsRef<[u8]>> {
    buffer: T,
}

fn lid_get(b: &[u8], f: crate::wire::Field) -> u16 {
    // The u32 holds htons(lid): its value's low 16 bits are the LID, big-endian.
    u16::from_be(ne_u32(b, f) as u16)
}

fn lid_put(b: &mut [u8], f: crate::wire::Field, lid: u16) {
    b[f].copy_from_slice(&u32::from(lid.to_be()).to_ne_bytes());
}

impl<T: AsRef<[u8]>> Request<T> {
    /// Wrap a buffer without checking it.
    pub fn new_unchecked(buffer: T) -> Request<T> {
        Request { buffer }
    }

    /// Wrap a buffer and check it is exactly 288 bytes (ibsim sends and accepts nothing else).
    ///
    /// # Errors
    ///
    /// [`crate::wire::Error::Truncated`] if shorter, [`crate::wire::Error::BadLength`] if longer.
    pub fn new_checked(buffer: T) -> crate::wire::Result<Request<T>> {
        let r = Request::new_unchecked(buffer);
        r.check_len()?;
        Ok(r)
    }

    /// Check the buffer is exactly 288 bytes.
    ///
    /// # Errors
    ///
    /// As [`Request::new_checked`].
    pub fn check_len(&self) -> crate::wire::Result<()> {
        match self.buffer.as_ref().len() {
            REQUEST_LEN => Ok(()),
            n if n < REQUEST_LEN => Err(crate::wire::Error::Truncated),
            _ => Err(crate::wire::Error::BadLength),
        }
    }

    /// The buffer back.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    fn b(&self) -> &[u8] {
        self.buffer.as_ref()
    }

    /// Destination LID (0xffff: directed route).
    pub fn dlid(&self) -> u16 {
        lid_get(self.b(), req_field::DLID)
    }

    /// Source LID (on send: 0 = "my LID", 0xffff for directed route).
    pub fn slid(&self) -> u16 {
        lid_get(self.b(), req_field::SLID)
    }

    /// Destination QP.
    pub fn dqp(&self) -> u32 {
        crate::wire::be::u32(self.b(), req_field::DQP)
    }

    /// Source QP.
    pub fn sqp(&self) -> u32 {
        crate::wire::be::u32(self.b(), req_field::SQP)
    }

    /// 0, or [`STATUS_DROPPED`] on a packet ibsim returns undelivered.
    pub fn status(&self) -> u32 {
        crate::wire::be::u32(self.b(), req_field::STATUS)
    }

    /// MAD length as the sender gave it (informational; ibsim ignores it).
    pub fn length(&self) -> u64 {
        crate::wire::be::u64(self.b(), req_field::LENGTH)
    }

    /// The MAD.
    pub fn mad(&self) -> &[u8] {
        &self.b()[req_field::MAD]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Request<T> {
    fn bm(&mut self) -> &mut [u8] {
        self.buffer.as_mut()
    }

    /// Set the destination LID.
    pub fn set_dlid(&mut self, lid: u16) {
        lid_put(self.bm(), req_field::DLID, lid);
    }

    /// Set the source LID.
    pub fn set_slid(&mut self, lid: u16) {
        lid_put(self.bm(), req_field::SLID, lid);
    }

    /// Set the destination QP.
    pub fn set_dqp(&mut self, qp: u32) {
        crate::wire::be::set_u32(self.bm(), req_field::DQP, qp);
    }

    /// Set the source QP.
    pub fn set_sqp(&mut self, qp: u32) {
        crate::wire::be::set_u32(self.bm(), req_field::SQP, qp);
    }

    /// Set the status.
    pub fn set_status(&mut self, status: u32) {
        crate::wire::be::set_u32(self.bm(), req_field::STATUS, status);
    }

    /// Set the MAD length.
    pub fn set_length(&mut self, len: u64) {
        crate::wire::be::set_u64(self.bm(), req_field::LENGTH, len);
    }

    /// The MAD, writable.
    pub fn mad_mut(&mut self) -> &mut [u8] {
        &mut self.bm()[req_field::MAD]
    }

    /// Zero the padding (bytes 20..24), which ibsim echoes back as it got them.
    pub fn clear_padding(&mut self) {
        self.bm()[20..24].fill(0);
    }
}

/// A received data message, copied out of its datagram.
pub type RequestBuf = Box<[u8; REQUEST_LEN]>;

const _: () = assert!(REQUEST_LEN == 32 + MAD_SIZE);

/// The fields of PortInfo (IBA 14.2.5.6) the transport reports, parsed from
/// the raw 64 bytes of [`CtlType::GetPortInfo`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PortInfoLite {
    /// GID prefix.
    pub gid_prefix: u64,
    /// Base LID.
    pub lid: u16,
    /// Master SM LID.
    pub sm_lid: u16,
    /// CapabilityMask.
    pub capmask: u32,
    /// LocalPortNum.
    pub local_port: u8,
    /// LinkWidthActive (1 = 1x, 2 = 4x, 4 = 8x, 8 = 12x, 16 = 2x).
    pub width_active: u8,
    /// PortState (4 = Active).
    pub state: u8,
    /// PortPhysicalState (5 = LinkUp).
    pub phys_state: u8,
    /// LMC.
    pub lmc: u8,
    /// LinkSpeedActive (1 = 2.5, 2 = 5, 4 = 10 Gb/s per lane).
    pub speed_active: u8,
    /// MasterSMSL.
    pub sm_sl: u8,
}

impl PortInfoLite {
    /// Parse the first 37 bytes of a PortInfo attribute.
    pub fn parse(d: &[u8; CTL_DATA_LEN]) -> PortInfoLite {
        use crate::wire::be;
        PortInfoLite {
            gid_prefix: be::u64(d, 8..16),
            lid: be::u16(d, 16..18),
            sm_lid: be::u16(d, 18..20),
            capmask: be::u32(d, 20..24),
            local_port: d[28],
            width_active: d[31],
            state: d[32] & 0x0f,
            phys_state: d[33] >> 4,
            lmc: d[34] & 0x07,
            speed_active: d[35] >> 4,
            sm_sl: d[36] & 0x0f,
        }
    }

    /// The link rate in Gb/s, as sysfs `rate` rounds it (1x SDR: 2).
    pub fn rate_gbps(&self) -> u32 {
        let lanes = match self.width_active {
            1 => 1,
            2 => 4,
            4 => 8,
            8 => 12,
            16 => 2,
            _ => 0,
        };
        // Lane speed in units of 0.5 Gb/s.
        let half_gbps = match self.speed_active {
            1 => 5,
            2 => 10,
            4 => 20,
            _ => 0,
        };
        lanes * half_gbps / 2
    }
}

/// The fields of NodeInfo (IBA 14.2.5.3) the transport reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct NodeInfoLite {
    /// NodeType (1 CA, 2 switch, 3 router).
    pub node_type: u8,
    /// NumPorts.
    pub num_ports: u8,
    /// SystemImageGUID.
    pub sys_guid: u64,
    /// NodeGUID.
    pub node_guid: u64,
    /// LocalPortNum.
    pub local_port: u8,
}

impl NodeInfoLite {
    /// Parse the first 40 bytes of a NodeInfo attribute.
    pub fn parse(d: &[u8; CTL_DATA_LEN]) -> NodeInfoLite {
        use crate::wire::be;
        NodeInfoLite {
            node_type: d[2],
            num_ports: d[3],
            sys_guid: be::u64(d, 4..12),
            node_guid: be::u64(d, 12..20),
            local_port: d[36],
        }
    }
}

/// Parse the payload of [`CtlType::GetPkeys`]: 32 big-endian P_Keys.
pub fn parse_pkeys(d: &[u8; CTL_DATA_LEN]) -> Vec<u16> {
    d.chunks_exact(2)
        .map(|c| u16::from_be_bytes([c[0], c[1]]))
        .collect()
}

#[cfg(test)]
mod tests;
