//! The subnet management agent every simulated node runs (IBA 14.2.5).
//!
//! It answers SubnGet of NodeDescription, NodeInfo, PortInfo (and SwitchInfo
//! on switches). A CA's SMA leaves every other SMP to the port's owner; a
//! switch answers any other Get/Set with status 0x000c (unsupported
//! method/attribute), as the kernel does for unclaimed requests.

use super::route::{dr, Pkt, CLASS_DR};
use super::{FabricInner, NodeKind};

/// PortInfo:CapabilityMask of every simulated port: IsTrapSupported,
/// IsSLMappingSupported, IsSystemImageGUIDSupported.
pub(crate) const CAPMASK: u32 = 0x0000_0848;

const METHOD_GET: u8 = 0x01;
const METHOD_SET: u8 = 0x02;
const METHOD_GET_RESP: u8 = 0x81;

const ATTR_NODE_DESC: u16 = 0x0010;
const ATTR_NODE_INFO: u16 = 0x0011;
const ATTR_SWITCH_INFO: u16 = 0x0012;
const ATTR_PORT_INFO: u16 = 0x0015;

/// Unsupported method/attribute combination (MAD status code 3).
const STATUS_UNSUPPORTED: u16 = 0x000c;
/// Invalid attribute modifier or value (code 7).
const STATUS_INVALID_VALUE: u16 = 0x001c;

/// The SMP data area (64 bytes), the same in LID-routed and DR SMPs.
const DATA: usize = 64;
const DATA_LEN: usize = 64;

/// Field offsets inside the data area.
mod node_info {
    pub(super) const BASE_VERSION: usize = 0;
    pub(super) const CLASS_VERSION: usize = 1;
    pub(super) const NODE_TYPE: usize = 2;
    pub(super) const NUM_PORTS: usize = 3;
    pub(super) const SYSTEM_GUID: usize = 4;
    pub(super) const NODE_GUID: usize = 12;
    pub(super) const PORT_GUID: usize = 20;
    pub(super) const PARTITION_CAP: usize = 28;
    pub(super) const DEVICE_ID: usize = 30;
    pub(super) const REVISION: usize = 32;
    pub(super) const LOCAL_PORT: usize = 36;
    pub(super) const VENDOR_ID: usize = 37;
}

mod port_info {
    pub(super) const GID_PREFIX: usize = 8;
    pub(super) const LID: usize = 16;
    pub(super) const SM_LID: usize = 18;
    pub(super) const CAPMASK: usize = 20;
    pub(super) const LOCAL_PORT: usize = 28;
    pub(super) const WIDTH_ENABLED: usize = 29;
    pub(super) const WIDTH_SUPPORTED: usize = 30;
    pub(super) const WIDTH_ACTIVE: usize = 31;
    pub(super) const SPEED_SUP_STATE: usize = 32;
    pub(super) const PHYS_DOWNDEF: usize = 33;
    pub(super) const MKEYPROT_LMC: usize = 34;
    pub(super) const SPEED_ACT_EN: usize = 35;
    pub(super) const NMTU_SMSL: usize = 36;
    pub(super) const VLCAP_INIT: usize = 37;
    pub(super) const MTUCAP: usize = 41;
    pub(super) const OPVLS: usize = 43;
    pub(super) const GUID_CAP: usize = 50;
    pub(super) const SUBNET_TIMEOUT: usize = 51;
    pub(super) const RESP_TIME: usize = 52;
}

mod switch_info {
    pub(super) const LINEAR_FDB_CAP: usize = 0;
    pub(super) const LINEAR_FDB_TOP: usize = 6;
}

/// The response to `req` (an SMP request that reached `node` on `port`), or `None`
/// when this SMA does not answer it (a CA then hands it to the port's owner).
pub(crate) fn answer(fabric: &FabricInner, node: usize, port: u8, req: &Pkt) -> Option<Pkt> {
    let n = &fabric.nodes[node];
    let method = req.mad[3];
    let attr = u16::from_be_bytes([req.mad[16], req.mad[17]]);
    let attr_mod = u32::from_be_bytes([req.mad[20], req.mad[21], req.mad[22], req.mad[23]]);
    let mut data = [0u8; DATA_LEN];
    let status = match (method, attr) {
        (METHOD_GET, ATTR_NODE_DESC) => {
            let name = n.name.as_bytes();
            data[..name.len()].copy_from_slice(name);
            0
        }
        (METHOD_GET, ATTR_NODE_INFO) => {
            node_info(fabric, node, port, &mut data);
            0
        }
        (METHOD_GET, ATTR_PORT_INFO) => {
            // A CA reports the port the SMP arrived on when the modifier is 0.
            let which = match (n.kind, attr_mod) {
                (NodeKind::Ca, 0) => Some(port),
                (_, m) if m <= u32::from(n.num_ports) => u8::try_from(m).ok(),
                _ => None,
            };
            match which {
                Some(p) if !(n.kind == NodeKind::Ca && p == 0) => {
                    port_info(fabric, node, p, port, &mut data);
                    0
                }
                _ => STATUS_INVALID_VALUE,
            }
        }
        (METHOD_GET, ATTR_SWITCH_INFO) if n.is_switch() => {
            data[switch_info::LINEAR_FDB_CAP..][..2].copy_from_slice(&0xc000u16.to_be_bytes());
            let top = fabric.lid_map.keys().next_back().copied().unwrap_or(0);
            data[switch_info::LINEAR_FDB_TOP..][..2].copy_from_slice(&top.to_be_bytes());
            0
        }
        (METHOD_GET | METHOD_SET, _) if n.is_switch() => STATUS_UNSUPPORTED,
        _ => return None,
    };
    let mut resp = req.clone();
    resp.mad[3] = METHOD_GET_RESP;
    let mut status_word = status;
    if req.class() == CLASS_DR {
        status_word |= dr::DIRECTION;
    }
    resp.mad[dr::STATUS].copy_from_slice(&status_word.to_be_bytes());
    if status == 0 {
        resp.mad[DATA..DATA + DATA_LEN].copy_from_slice(&data);
    }
    resp.len = crate::wire::MAD_SIZE;
    resp.slid = n.lid(port);
    resp.dlid = req.slid;
    resp.sqp = 0;
    resp.dqp = req.sqp;
    resp.grh = None;
    resp.hops = req.hops;
    Some(resp)
}

fn node_info(fabric: &FabricInner, node: usize, port: u8, d: &mut [u8; DATA_LEN]) {
    use node_info::*;
    let n = &fabric.nodes[node];
    d[BASE_VERSION] = 1;
    d[CLASS_VERSION] = 1;
    d[NODE_TYPE] = n.kind.node_type();
    d[NUM_PORTS] = n.num_ports;
    d[SYSTEM_GUID..][..8].copy_from_slice(&n.guid.to_be_bytes());
    d[NODE_GUID..][..8].copy_from_slice(&n.guid.to_be_bytes());
    d[PORT_GUID..][..8].copy_from_slice(&n.port_guid(port).to_be_bytes());
    d[PARTITION_CAP..][..2].copy_from_slice(&1u16.to_be_bytes());
    d[DEVICE_ID..][..2].copy_from_slice(&0x7664u16.to_be_bytes());
    d[REVISION..][..4].copy_from_slice(&1u32.to_be_bytes());
    d[LOCAL_PORT] = port;
    d[VENDOR_ID..][..3].copy_from_slice(&[0x00, 0x14, 0x05]);
}

/// PortInfo of `which`, asked on `in_port`.
fn port_info(fabric: &FabricInner, node: usize, which: u8, in_port: u8, d: &mut [u8; DATA_LEN]) {
    use port_info::*;
    let n = &fabric.nodes[node];
    // A switch's management port 0 is always up; other ports are up when linked.
    let linked = which == 0 || n.links.get(usize::from(which)).is_some_and(Option::is_some);
    d[GID_PREFIX..][..8].copy_from_slice(&super::GID_PREFIX.to_be_bytes());
    d[LID..][..2].copy_from_slice(&n.lid(which).to_be_bytes());
    d[SM_LID..][..2].copy_from_slice(&fabric.sm_lid.to_be_bytes());
    d[port_info::CAPMASK..][..4].copy_from_slice(&super::sma::CAPMASK.to_be_bytes());
    d[LOCAL_PORT] = in_port;
    d[WIDTH_ENABLED] = 0x03;
    d[WIDTH_SUPPORTED] = 0x03;
    d[WIDTH_ACTIVE] = 0x02; // 4x
    let state = if linked { 4 } else { 1 }; // Active / Down
    d[SPEED_SUP_STATE] = 0x10 | state;
    let phys = if linked { 5 } else { 2 }; // LinkUp / Polling
    d[PHYS_DOWNDEF] = (phys << 4) | 0x02;
    d[MKEYPROT_LMC] = 0;
    d[SPEED_ACT_EN] = 0x11;
    d[NMTU_SMSL] = 0x50; // neighbour MTU 4096, SM SL 0
    d[VLCAP_INIT] = 0x40; // VL0-7
    d[MTUCAP] = 0x05;
    d[OPVLS] = 0x40;
    d[GUID_CAP] = 1;
    d[SUBNET_TIMEOUT] = 18;
    d[RESP_TIME] = 8;
}
