//! A directed-route sweep, as ibnetdiscover and an SM do it: NodeInfo,
//! NodeDescription and PortInfo of every node reachable from the local port.

use std::collections::{BTreeMap, VecDeque};

use vmad::engine::AgentId;
use vmad::port::Port;

use vmad::wire::smp::{self, node_info, port_info};

use crate::mads::{self, ATTR_NODE_DESC, ATTR_NODE_INFO, ATTR_PORT_INFO};
use crate::Failure;

/// Longest directed route (IBA: 63 hops).
const MAX_HOPS: usize = 63;
/// PortInfo:PortState Init or better: the link is up.
const STATE_INIT: u8 = 2;

/// One port of a node.
#[derive(Debug, Clone, Default)]
pub(crate) struct PortRec {
    pub(crate) lid: u16,
    pub(crate) state: u8,
    pub(crate) gid_prefix: u64,
    /// The node and port at the other end of the link.
    pub(crate) remote: Option<(u64, u8)>,
}

/// One node of the fabric.
#[derive(Debug, Clone)]
pub(crate) struct Node {
    /// NodeInfo, the 40 bytes as read.
    pub(crate) node_info: [u8; 40],
    /// NodeDescription, the 64 bytes as read.
    pub(crate) node_desc: [u8; 64],
    /// The directed route it was first reached by.
    pub(crate) path: Vec<u8>,
    /// Ports by number (0 = a switch's management port).
    pub(crate) ports: BTreeMap<u8, PortRec>,
}

impl Node {
    /// The NodeInfo view.
    pub(crate) fn info(&self) -> node_info::Packet<&[u8]> {
        node_info::Packet::new_unchecked(&self.node_info[..])
    }
    pub(crate) fn node_type(&self) -> u8 {
        u8::from(self.info().node_type())
    }
    pub(crate) fn num_ports(&self) -> u8 {
        self.info().num_ports()
    }
    pub(crate) fn guid(&self) -> u64 {
        self.info().node_guid()
    }
    pub(crate) fn port_guid(&self) -> u64 {
        self.info().port_guid()
    }
    pub(crate) fn desc(&self) -> String {
        mads::desc_text(&self.node_desc)
    }
    pub(crate) fn is_switch(&self) -> bool {
        self.node_type() == 2
    }
    /// The LID that addresses the node: port 0 of a switch, else the lowest CA port's.
    pub(crate) fn lid(&self) -> u16 {
        self.ports.values().next().map_or(0, |p| p.lid)
    }
    /// The GID of an end port of this node (port GUIDs of CA ports differ per port;
    /// vmad's sim and this sweep use the NodeInfo PortGUID of the port entered).
    pub(crate) fn gid(&self, port: u8) -> [u8; 16] {
        let mut g = [0u8; 16];
        let prefix = self.ports.get(&port).map_or(0, |p| p.gid_prefix);
        g[..8].copy_from_slice(&prefix.to_be_bytes());
        g[8..].copy_from_slice(&self.port_guid().to_be_bytes());
        g
    }
}

/// The fabric as the sweep found it, nodes in discovery order.
#[derive(Debug, Clone, Default)]
pub(crate) struct Topology {
    pub(crate) nodes: Vec<Node>,
    /// SMPs sent.
    pub(crate) smps: u64,
}

impl Topology {
    pub(crate) fn by_guid(&self, guid: u64) -> Option<&Node> {
        self.nodes.iter().find(|n| n.guid() == guid)
    }
}

/// A route still to walk, and the node index and port it leaves from.
type Hop = (Vec<u8>, Option<(usize, u8)>);

struct Sweeper<'a> {
    port: &'a Port,
    agent: AgentId,
    timeout_ms: u32,
    retries: u32,
    tid: u32,
    smps: u64,
}

impl Sweeper<'_> {
    fn get(&mut self, attr: u16, attr_mod: u32, path: &[u8]) -> Result<Vec<u8>, Failure> {
        self.tid = self.tid.wrapping_add(1);
        self.smps += 1;
        let req = mads::dr_get(attr, attr_mod, path, self.tid);
        let resp = mads::transact(
            self.port,
            self.agent,
            mads::smi_dr(),
            &req,
            self.timeout_ms,
            self.retries,
        )?;
        match mads::status(&resp) {
            0 => Ok(resp),
            s => Err(Failure::protocol(format!(
                "SubnGet(0x{attr:04x}) along {path:?}: status 0x{s:04x}"
            ))),
        }
    }

    fn port_info(&mut self, path: &[u8], port: u8) -> Result<PortRec, Failure> {
        let r = self.get(ATTR_PORT_INFO, u32::from(port), path)?;
        let smp = smp::Packet::new_unchecked(&r[..]);
        let d = port_info::Packet::new_unchecked(smp.data());
        Ok(PortRec {
            lid: d.lid(),
            state: d.port_state_raw(),
            gid_prefix: d.gid_prefix(),
            remote: None,
        })
    }
}

/// Sweep the fabric from `port`'s own node. `progress(found, pending)` is
/// called after each node.
pub(crate) fn sweep(
    port: &Port,
    agent: AgentId,
    timeout_ms: u32,
    retries: u32,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<Topology, Failure> {
    let mut s = Sweeper {
        port,
        agent,
        timeout_ms,
        retries,
        tid: 0x5000_0000,
        smps: 0,
    };
    let mut topo = Topology::default();
    let mut index: BTreeMap<u64, usize> = BTreeMap::new();
    let mut queue: VecDeque<Hop> = VecDeque::new();
    queue.push_back((Vec::new(), None));
    while let Some((path, parent)) = queue.pop_front() {
        let ni = s.get(ATTR_NODE_INFO, 0, &path)?;
        let mut node_info = [0u8; 40];
        node_info.copy_from_slice(&smp::Packet::new_unchecked(&ni[..]).data()[..node_info::LEN]);
        let info = node_info::Packet::new_unchecked(&node_info[..]);
        let (guid, entry) = (info.node_guid(), info.local_port_num());
        let known = index.get(&guid).copied();
        let idx = match known {
            Some(i) => i,
            None => {
                let nd = s.get(ATTR_NODE_DESC, 0, &path)?;
                let mut node_desc = [0u8; 64];
                node_desc.copy_from_slice(smp::Packet::new_unchecked(&nd[..]).data());
                let mut node = Node {
                    node_info,
                    node_desc,
                    path: path.clone(),
                    ports: BTreeMap::new(),
                };
                if node.is_switch() {
                    let p0 = s.port_info(&path, 0)?;
                    node.ports.insert(0, p0);
                    for p in 1..=node.num_ports() {
                        let mut rec = s.port_info(&path, p)?;
                        // Switch ports other than 0 carry no LID of their own.
                        rec.lid = node.ports[&0].lid;
                        let up = rec.state >= STATE_INIT;
                        node.ports.insert(p, rec);
                        let back = parent.is_some() && p == entry;
                        if up && !back && path.len() < MAX_HOPS {
                            let mut next = path.clone();
                            next.push(p);
                            queue.push_back((next, Some((topo.nodes.len(), p))));
                        }
                    }
                } else {
                    node.ports.insert(entry, s.port_info(&path, 0)?);
                    if path.is_empty() {
                        queue.push_back((vec![entry], Some((0, entry))));
                    }
                }
                index.insert(guid, topo.nodes.len());
                topo.nodes.push(node);
                topo.nodes.len() - 1
            }
        };
        if known.is_some() && !topo.nodes[idx].is_switch() {
            // Another port of a known CA: record it.
            let rec = s.port_info(&path, 0)?;
            topo.nodes[idx].ports.entry(entry).or_insert(rec);
        }
        if let Some((from, out)) = parent {
            let from_guid = topo.nodes[from].guid();
            if let Some(p) = topo.nodes[from].ports.get_mut(&out) {
                p.remote = Some((guid, entry));
            }
            if let Some(p) = topo.nodes[idx].ports.get_mut(&entry) {
                p.remote = Some((from_guid, out));
            }
        }
        progress(topo.nodes.len(), queue.len());
    }
    topo.smps = s.smps;
    Ok(topo)
}
