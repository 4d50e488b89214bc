//! The subnet management agent every simulated node runs (IBA 14.2.5).
//!
//! It answers SubnGet of NodeDescription, NodeInfo, PortInfo (and SwitchInfo
//! on switches). A CA's SMA leaves every other SMP to the port's owner; a
//! switch answers any other Get/Set with status 0x000c (unsupported
//! method/attribute), as the kernel does for unclaimed requests.

use super::access::MkeyVerdict;
use super::route::{dr, Pkt, CLASS_DR};
use super::{FabricInner, NodeKind};
use crate::types::GSI_QKEY;
use crate::wire::smp::node_info::{self, NodeType};
use crate::wire::smp::port_info::{self, PhysState, PortState};
use crate::wire::smp::{node_desc, DATA_LEN, DATA_OFFSET as DATA};

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

/// SwitchInfo field offsets (IBA 14.2.5.4); vmad has no SwitchInfo view.
mod switch_info {
    pub(super) const LINEAR_FDB_CAP: usize = 0;
    pub(super) const LINEAR_FDB_TOP: usize = 6;
}

/// What the SMA does with an SMP request.
#[derive(Debug)]
pub(crate) enum Answer {
    /// Send this response.
    Reply(Box<Pkt>),
    /// Drop it: it failed the M_Key check (counted).
    Discard,
    /// Not an SMP this SMA answers (a CA hands it to the port's owner).
    NotMine,
}

/// Offset of the M_Key in an SMP (IBA 14.2.1.1).
const SMP_MKEY: usize = 24;

/// What to do with `req`, an SMP request that reached `node` on `port`.
pub(crate) fn answer(fabric: &FabricInner, node: usize, port: u8, req: &Pkt) -> Answer {
    let n = &fabric.nodes[node];
    let method = req.mad[3];
    let attr = u16::from_be_bytes([req.mad[16], req.mad[17]]);
    let attr_mod = u32::from_be_bytes([req.mad[20], req.mad[21], req.mad[22], req.mad[23]]);
    let answers = match (method, attr) {
        (METHOD_GET, ATTR_NODE_DESC | ATTR_NODE_INFO | ATTR_PORT_INFO) => true,
        (METHOD_GET, ATTR_SWITCH_INFO) | (METHOD_GET | METHOD_SET, _) => n.is_switch(),
        _ => false,
    };
    if !answers {
        return Answer::NotMine;
    }
    let mut key = [0u8; 8];
    key.copy_from_slice(&req.mad[SMP_MKEY..SMP_MKEY + 8]);
    let verdict = n.mkeys[n.mgmt_port(port)].check(u64::from_be_bytes(key), method == METHOD_GET);
    if verdict == MkeyVerdict::Fail {
        n.count(port, |c| c.mkey_violations += 1);
        return Answer::Discard;
    }
    let show_mkey = verdict == MkeyVerdict::Pass;
    let mut data = [0u8; DATA_LEN];
    let status = match (method, attr) {
        (METHOD_GET, ATTR_NODE_DESC) => {
            node_desc::Repr::from_text(n.name.as_bytes())
                .emit(&mut node_desc::Packet::new_unchecked(&mut data[..]));
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
                    port_info(fabric, node, p, port, show_mkey, &mut data);
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
        _ => return Answer::NotMine,
    };
    Answer::Reply(Box::new(respond(fabric, node, port, req, status, &data)))
}

/// The answer a CA port nobody has open gives to an SMP or GMP Get/Set: GetResp with
/// status 0x000c, as the kernel's MAD layer answers requests no agent claims.
pub(crate) fn unclaimed(fabric: &FabricInner, node: usize, port: u8, req: &Pkt) -> Option<Pkt> {
    matches!(req.mad[3], METHOD_GET | METHOD_SET)
        .then(|| respond(fabric, node, port, req, STATUS_UNSUPPORTED, &[0; DATA_LEN]))
}

/// `req` turned into its GetResp with `status` (and `data` when the status is 0),
/// addressed back to its sender.
fn respond(
    fabric: &FabricInner,
    node: usize,
    port: u8,
    req: &Pkt,
    status: u16,
    data: &[u8; DATA_LEN],
) -> Pkt {
    let n = &fabric.nodes[node];
    let mut resp = req.clone();
    resp.mad[3] = METHOD_GET_RESP;
    let mut status_word = status;
    if req.class() == CLASS_DR {
        status_word |= dr::DIRECTION;
    }
    resp.mad[dr::STATUS].copy_from_slice(&status_word.to_be_bytes());
    if status == 0 {
        resp.mad[DATA..DATA + DATA_LEN].copy_from_slice(data);
    }
    resp.len = crate::wire::MAD_SIZE;
    resp.slid = n.lid(port);
    resp.dlid = req.slid;
    resp.sqp = req.dqp;
    resp.dqp = req.sqp;
    resp.qkey = if resp.sqp == 1 { GSI_QKEY } else { 0 };
    resp.spoofed = false;
    resp.grh = None;
    resp.hops = req.hops;
    resp
}

fn node_info(fabric: &FabricInner, node: usize, port: u8, d: &mut [u8; DATA_LEN]) {
    let n = &fabric.nodes[node];
    node_info::Repr {
        base_version: 1,
        class_version: 1,
        node_type: NodeType::from(n.kind.node_type()),
        num_ports: n.num_ports,
        sys_image_guid: n.guid,
        node_guid: n.guid,
        port_guid: n.port_guid(port),
        partition_cap: 1,
        device_id: 0x7664,
        revision: 1,
        local_port_num: port,
        vendor_id: 0x00_1405,
    }
    .emit(&mut node_info::Packet::new_unchecked(&mut d[..]));
}

/// PortInfo of `which`, asked on `in_port`; M_Key reads 0 unless `show_mkey`.
fn port_info(
    fabric: &FabricInner,
    node: usize,
    which: u8,
    in_port: u8,
    show_mkey: bool,
    d: &mut [u8; DATA_LEN],
) {
    let n = &fabric.nodes[node];
    let mgmt = n.mgmt_port(which);
    let mkey = n.mkeys[mgmt];
    let counters = *super::lock(&n.counters[mgmt]);
    let saturate = |v: u64| u16::try_from(v).unwrap_or(u16::MAX);
    // A switch's management port 0 is always up; other ports are up when linked.
    let linked = which == 0 || n.links.get(usize::from(which)).is_some_and(Option::is_some);
    let mut p = port_info::Packet::new_unchecked(&mut d[..]);
    p.set_m_key(if show_mkey { mkey.key } else { 0 });
    p.set_m_key_protect_bits(mkey.protect_bits);
    p.set_m_key_violations(saturate(counters.mkey_violations));
    p.set_p_key_violations(saturate(counters.pkey_violations));
    p.set_q_key_violations(saturate(counters.qkey_violations));
    p.set_gid_prefix(super::GID_PREFIX);
    p.set_lid(n.lid(which));
    p.set_master_sm_lid(fabric.sm_lid);
    p.set_capability_mask(CAPMASK);
    p.set_local_port_num(in_port);
    p.set_link_width_enabled(0x03);
    p.set_link_width_supported(0x03);
    p.set_link_width_active(0x02); // 4x
    p.set_link_speed_supported(1);
    p.set_port_state(if linked {
        PortState::Active
    } else {
        PortState::Down
    });
    p.set_phys_state(if linked {
        PhysState::LinkUp
    } else {
        PhysState::Polling
    });
    p.set_link_down_default_state(2); // Polling
    p.set_link_speed_active(1);
    p.set_link_speed_enabled(1);
    p.set_neighbor_mtu(5); // 4096
    p.set_vl_cap(4); // VL0-7
    p.set_mtu_cap(5);
    p.set_operational_vls(4);
    p.set_guid_cap(1);
    p.set_subnet_timeout(18);
    p.set_resp_time_value(8);
}
