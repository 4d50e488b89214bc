//! The subnet management agent every simulated node runs (IBA 14.2.5).
//!
//! It answers SubnGet and SubnSet of PortInfo and P_KeyTable, SubnGet of
//! NodeDescription and NodeInfo, SMInfo at the built-in SM's port while it is
//! master, and on switches SwitchInfo, LinearForwardingTable and
//! MulticastForwardingTable, all under the port's M_Key. A Set changes the
//! node's [`super::state::NodeConf`], which routing and every later answer
//! read. A CA's SMA leaves every other SMP to the port's owner; a switch
//! answers any other Get/Set with status 0x000c, as the kernel does for
//! unclaimed requests.

use super::access::MkeyVerdict;
use super::{write, FabricInner, Node, NodeKind};
use crate::transport::sim::Pkt;
use crate::types::GSI_QKEY;
use crate::wire::mad::{self, MadStatus, Method};
use crate::wire::smp::node_info::{self, NodeType};
use crate::wire::smp::port_info::{self, PhysState, PortState};
use crate::wire::smp::{self, lft, node_desc, pkey_table, switch_info, Direction, DATA_LEN};

/// PortInfo:CapabilityMask of every simulated port: IsTrapSupported,
/// IsSLMappingSupported, IsSystemImageGUIDSupported.
pub(crate) const CAPMASK: u32 = 0x0000_0848;

const ATTR_NODE_DESC: u16 = smp::AttrId::NodeDescription.raw();
const ATTR_NODE_INFO: u16 = smp::AttrId::NodeInfo.raw();
const ATTR_SWITCH_INFO: u16 = smp::AttrId::SwitchInfo.raw();
const ATTR_PORT_INFO: u16 = smp::AttrId::PortInfo.raw();
const ATTR_PKEY_TABLE: u16 = smp::AttrId::PKeyTable.raw();
const ATTR_LFT: u16 = smp::AttrId::LinearFwdTable.raw();
const ATTR_MFT: u16 = smp::AttrId::MulticastFwdTable.raw();
const ATTR_SM_INFO: u16 = smp::AttrId::SmInfo.raw();
const ATTR_SL_TO_VL: u16 = smp::AttrId::SlToVl.raw();
const ATTR_VL_ARB: u16 = smp::AttrId::VlArb.raw();

/// SLtoVLMappingTable as ibsim's SMA gives it for every port pair (read from ibsim
/// 0.10 with `smpquery sl2vl`, before any SM ran): SL n to VL n, SL 15 to VL 7.
pub(crate) const SL_TO_VL: [u8; 8] = [0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xe7];

/// VLArbitrationTable block `block` (1: low priority entries 0-31, 2: low 32-63,
/// 3: high 0-31, 4: high 32-63) as ibsim's SMA gives it (`smpquery vlarb`, 8 entries
/// shown for VLArbitration{Low,High}Cap 8): low VL 0 weight 0 and VLs 1-7 weight 4;
/// high VL 0 weight 4 and VLs 1-7 weight 0. Entries past the caps are zero.
pub(crate) fn vl_arb_block(block: u32) -> Option<[u8; DATA_LEN]> {
    let mut data = [0u8; DATA_LEN];
    match block {
        1 | 3 => {
            for vl in 0..8u8 {
                let weight = match (block, vl) {
                    (1, 0) | (3, 1..) => 0,
                    _ => 4,
                };
                data[usize::from(vl) * 2] = vl;
                data[usize::from(vl) * 2 + 1] = weight;
            }
        }
        2 | 4 => {}
        _ => return None,
    }
    Some(data)
}

/// LinearFDBCap: a switch's LFT covers every unicast LID.
const LFT_CAP: u16 = 0xc000;
/// MulticastFDBCap.
const MFT_CAP: u16 = 0x0400;
/// The most P_Keys a port's table holds (PartitionCap's ceiling here).
const PKEY_CAP: usize = 0x1_0000;

/// Unsupported method/attribute combination (MAD status code 3).
const STATUS_UNSUPPORTED: u16 = MadStatus::UNSUPPORTED_METHOD_ATTR.0;
/// Invalid attribute modifier or value (code 7).
const STATUS_INVALID_VALUE: u16 = MadStatus::INVALID_ATTR_VALUE.0;

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

/// What to do with `req`, an SMP request that reached `node` on `port`.
pub(crate) fn answer(fabric: &FabricInner, node: usize, port: u8, req: &Pkt) -> Answer {
    let n = &fabric.nodes[node];
    let header = req.header();
    let (method, attr, attr_mod) = (header.method(), header.attr_id(), header.attr_mod());
    let sm_info = (method == Method::Get && attr == ATTR_SM_INFO)
        .then(|| fabric.sm.sm_info(fabric, node, port))
        .flatten();
    let answers = match (method, attr) {
        (Method::Get, ATTR_NODE_DESC | ATTR_NODE_INFO | ATTR_SL_TO_VL | ATTR_VL_ARB) => true,
        (Method::Get | Method::Set, ATTR_PORT_INFO | ATTR_PKEY_TABLE) => true,
        (Method::Get, ATTR_SM_INFO) => sm_info.is_some() || n.is_switch(),
        (Method::Get | Method::Set, _) => n.is_switch(),
        _ => false,
    };
    if !answers {
        return Answer::NotMine;
    }
    let mkey = n.conf.read().ports[n.mgmt_port(port)].mkey;
    let verdict = mkey.check(req.smp_view().m_key(), method == Method::Get);
    if verdict == MkeyVerdict::Fail {
        n.count(port, |c| c.mkey_violations += 1);
        return Answer::Discard;
    }
    let show_mkey = verdict == MkeyVerdict::Pass;
    let mut data = [0u8; DATA_LEN];
    let mut given = [0u8; DATA_LEN];
    given.copy_from_slice(req.smp_view().data());
    let set = method == Method::Set;
    let status = match attr {
        ATTR_NODE_DESC => {
            node_desc::Repr::from_text(n.name.as_bytes())
                .emit(&mut node_desc::Packet::new_unchecked(&mut data[..]));
            0
        }
        ATTR_NODE_INFO => {
            node_info(fabric, node, port, &mut data);
            0
        }
        ATTR_SM_INFO => match sm_info {
            Some(d) => {
                data = d;
                0
            }
            None => STATUS_UNSUPPORTED,
        },
        ATTR_PORT_INFO => {
            // A CA reports the port the SMP arrived on when the modifier is 0.
            let which = match (n.kind, attr_mod) {
                (NodeKind::Ca, 0) => Some(port),
                (_, m) if m <= u32::from(n.num_ports) => u8::try_from(m).ok(),
                _ => None,
            };
            match which {
                Some(p) if !(n.kind == NodeKind::Ca && p == 0) => {
                    let status = if set {
                        set_port_info(fabric, node, p, &given)
                    } else {
                        0
                    };
                    port_info(fabric, node, p, port, show_mkey || set, &mut data);
                    status
                }
                _ => STATUS_INVALID_VALUE,
            }
        }
        ATTR_PKEY_TABLE => pkey_table(n, port, attr_mod, set.then_some(&given), &mut data),
        ATTR_SWITCH_INFO => {
            // A Get takes the read lock: a write moves the fabric's routing epoch on.
            if set {
                let top = switch_info::Packet::new_unchecked(&given[..]).linear_fdb_top();
                n.conf.write().lft_top = top.min(LFT_CAP - 1);
            }
            let mut p = switch_info::Packet::new_unchecked(&mut data[..]);
            p.set_linear_fdb_cap(LFT_CAP);
            p.set_multicast_fdb_cap(MFT_CAP);
            p.set_linear_fdb_top(n.conf.read().lft_top);
            p.set_life_time_value(18);
            0
        }
        ATTR_LFT if attr_mod < u32::from(LFT_CAP) / lft::LEN as u32 => {
            if set {
                n.conf.write().set_lft_block(attr_mod, &given);
            }
            data = n.conf.read().lft_block(attr_mod);
            0
        }
        ATTR_MFT => {
            if set {
                n.conf.write().mft.insert(attr_mod, given);
            }
            data = n
                .conf
                .read()
                .mft
                .get(&attr_mod)
                .copied()
                .unwrap_or([0; DATA_LEN]);
            0
        }
        ATTR_LFT => STATUS_INVALID_VALUE,
        // Read-only here: the built-in SM never writes them, and a Set would be
        // kept by nothing, so it is refused rather than pretended.
        ATTR_SL_TO_VL | ATTR_VL_ARB if set => STATUS_UNSUPPORTED,
        ATTR_SL_TO_VL => {
            data[..SL_TO_VL.len()].copy_from_slice(&SL_TO_VL);
            0
        }
        ATTR_VL_ARB => match vl_arb_block(attr_mod >> 16) {
            Some(d) => {
                data = d;
                0
            }
            None => STATUS_INVALID_VALUE,
        },
        _ => STATUS_UNSUPPORTED,
    };
    Answer::Reply(Box::new(respond(fabric, node, port, req, status, &data)))
}

/// P_KeyTable Get or Set (`given`) of the block `attr_mod` names, at `port` (a CA: the
/// port it arrived on; a switch keeps one table, port 0's, for all its ports).
fn pkey_table(
    n: &Node,
    port: u8,
    attr_mod: u32,
    given: Option<&[u8; DATA_LEN]>,
    d: &mut [u8; DATA_LEN],
) -> u16 {
    let block = (attr_mod & 0xffff) as usize;
    let start = block * pkey_table::ENTRIES;
    if start >= PKEY_CAP {
        return STATUS_INVALID_VALUE;
    }
    // A Get takes the read lock: a write moves the fabric's routing epoch on.
    if let Some(given) = given {
        let mut conf = n.conf.write();
        let table = &mut conf.ports[n.mgmt_port(port)].pkeys;
        let b = pkey_table::Packet::new_unchecked(&given[..]);
        if table.len() < start + pkey_table::ENTRIES {
            table.resize(start + pkey_table::ENTRIES, 0);
        }
        for i in 0..pkey_table::ENTRIES {
            table[start + i] = b.pkey(i);
        }
        // Unused entries are 0; the table keeps at least one.
        while table.len() > 1 && table.last() == Some(&0) {
            table.pop();
        }
    }
    let conf = n.conf.read();
    let table = &conf.ports[n.mgmt_port(port)].pkeys;
    let mut out = pkey_table::Packet::new_unchecked(&mut d[..]);
    for i in 0..pkey_table::ENTRIES {
        out.set_pkey(i, table.get(start + i).copied().unwrap_or(0));
    }
    0
}

/// PortInfo Set of `which` (IBA 14.2.5.6): M_Key and its protection, LID and
/// MasterSMLID (of a CA port, or a switch's port 0), and PortState, which moves
/// Init → Armed → Active (Down retrains the link back to Init). An invalid
/// request changes nothing and returns status 0x001c.
fn set_port_info(fabric: &FabricInner, node: usize, which: u8, given: &[u8; DATA_LEN]) -> u16 {
    let n = &fabric.nodes[node];
    let p = port_info::Packet::new_unchecked(&given[..]);
    let mgmt = n.mgmt_port(which);
    let mut conf = n.conf.write();
    let current = conf.ports[usize::from(which)].state;
    let state = match p.port_state() {
        PortState::NoChange => current,
        PortState::Down if fabric.link_up(node, which) => PortState::Init,
        PortState::Down => PortState::Down,
        PortState::Armed if matches!(current, PortState::Init | PortState::Armed) => {
            PortState::Armed
        }
        PortState::Active if matches!(current, PortState::Armed | PortState::Active) => {
            PortState::Active
        }
        _ => return STATUS_INVALID_VALUE,
    };
    let lid = p.lid();
    let owns_lid = usize::from(which) == mgmt;
    if owns_lid && lid >= LFT_CAP {
        return STATUS_INVALID_VALUE;
    }
    if which != 0 || n.is_switch() {
        conf.ports[usize::from(which)].state = state;
    }
    if owns_lid {
        let pc = &mut conf.ports[mgmt];
        pc.mkey.key = p.m_key();
        pc.mkey.protect_bits = p.m_key_protect_bits();
        pc.sm_lid = p.master_sm_lid();
        if pc.lid != lid {
            let mut map = write(&fabric.lid_map);
            if map.get(&pc.lid) == Some(&(node, mgmt as u8)) {
                map.remove(&pc.lid);
            }
            if lid != 0 {
                map.insert(lid, (node, mgmt as u8));
            }
            pc.lid = lid;
        }
    }
    0
}

/// The answer a CA port nobody has open gives to an SMP or GMP Get/Set: GetResp with
/// status 0x000c, as the kernel's MAD layer answers requests no agent claims.
pub(crate) fn unclaimed(fabric: &FabricInner, node: usize, port: u8, req: &Pkt) -> Option<Pkt> {
    matches!(req.header().method(), Method::Get | Method::Set)
        .then(|| respond(fabric, node, port, req, STATUS_UNSUPPORTED, &[0; DATA_LEN]))
}

/// `req` turned into its GetResp with `status` (and `data` when the status is 0),
/// addressed back to its sender.
pub(crate) fn respond(
    fabric: &FabricInner,
    node: usize,
    port: u8,
    req: &Pkt,
    status: u16,
    data: &[u8; DATA_LEN],
) -> Pkt {
    let n = &fabric.nodes[node];
    let mut resp = req.clone();
    let mut header = mad::Packet::new_unchecked(&mut resp.mad[..]);
    header.set_method(Method::GetResp);
    header.set_status(MadStatus(status));
    let mut smp = smp::Packet::new_unchecked(&mut resp.mad[..]);
    if smp.is_directed_route() {
        smp.set_direction(Direction::Inbound);
    }
    if status == 0 {
        smp.data_mut().copy_from_slice(data);
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

pub(crate) fn node_info(fabric: &FabricInner, node: usize, port: u8, d: &mut [u8; DATA_LEN]) {
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
pub(crate) fn port_info(
    fabric: &FabricInner,
    node: usize,
    which: u8,
    in_port: u8,
    show_mkey: bool,
    d: &mut [u8; DATA_LEN],
) {
    let n = &fabric.nodes[node];
    let mgmt = n.mgmt_port(which);
    let counters = *super::lock(&n.counters[mgmt]);
    let conf = n.conf.read();
    let pc = &conf.ports[mgmt];
    let (mkey, state) = (pc.mkey, conf.ports[usize::from(which)].state);
    let capmask = CAPMASK | if pc.is_sm { port_info::CAP_IS_SM } else { 0 };
    let saturate = |v: u64| u16::try_from(v).unwrap_or(u16::MAX);
    // A switch's management port 0 is always up; other ports are up when linked.
    let linked = which == 0 || fabric.link_up(node, which);
    let mut p = port_info::Packet::new_unchecked(&mut d[..]);
    p.set_m_key(if show_mkey { mkey.key } else { 0 });
    p.set_m_key_protect_bits(mkey.protect_bits);
    p.set_m_key_violations(saturate(counters.mkey_violations));
    p.set_p_key_violations(saturate(counters.pkey_violations));
    p.set_q_key_violations(saturate(counters.qkey_violations));
    p.set_gid_prefix(super::GID_PREFIX);
    p.set_lid(pc.lid);
    p.set_master_sm_lid(pc.sm_lid);
    p.set_capability_mask(capmask);
    p.set_local_port_num(in_port);
    p.set_link_width_enabled(0x03);
    p.set_link_width_supported(0x03);
    p.set_link_width_active(0x02); // 4x
    p.set_link_speed_supported(1);
    p.set_port_state(state);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vl_arb_blocks_are_ibsims_defaults() {
        let low = vl_arb_block(1).unwrap();
        assert_eq!(
            &low[..16],
            &[0, 0, 1, 4, 2, 4, 3, 4, 4, 4, 5, 4, 6, 4, 7, 4]
        );
        let high = vl_arb_block(3).unwrap();
        assert_eq!(
            &high[..16],
            &[0, 4, 1, 0, 2, 0, 3, 0, 4, 0, 5, 0, 6, 0, 7, 0]
        );
        assert!(low[16..].iter().chain(&high[16..]).all(|&b| b == 0));
        assert_eq!(vl_arb_block(2), Some([0; DATA_LEN]));
        assert_eq!((vl_arb_block(0), vl_arb_block(5)), (None, None));
        // SL 15 maps to VL 7, every other SL to its own number.
        assert_eq!(SL_TO_VL[7] & 0x0f, 7);
    }
}
