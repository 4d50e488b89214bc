//! Read-only helpers over the [`SubnetDb`]: the end ports (a CA's ports, a
//! switch's port 0) with their LIDs and GUIDs, found through the wire views
//! over the bytes the SMAs answered.

use std::collections::HashMap;

use crate::subnet::subnet_db::{NodeEntry, PortEntry, SubnetDb};
use crate::wire::smp::node_info::{self, NodeType};
use crate::wire::smp::port_info;

/// The NodeInfo view of a node.
pub(super) fn node_info(n: &NodeEntry) -> node_info::Packet<&[u8]> {
    node_info::Packet::new_unchecked(&n.node_info[..])
}

/// The PortInfo view of a port.
pub(super) fn port_info(p: &PortEntry) -> port_info::Packet<&[u8]> {
    port_info::Packet::new_unchecked(&p.port_info[..])
}

/// Whether a node is a switch.
pub(super) fn is_switch(n: &NodeEntry) -> bool {
    node_info(n).node_type() == NodeType::Switch
}

/// A port that has a LID of its own: a CA or router port, a switch's port 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct EndPort {
    /// Index of the node in `SubnetDb::nodes`.
    pub(super) node: usize,
    /// Index of the port in the node's `ports`.
    pub(super) port: usize,
    /// Its base LID.
    pub(super) lid: u16,
    /// Its port GUID.
    pub(super) guid: u64,
}

/// Every end port of the subnet that the SM gave a LID, in node order (a
/// CA port that is down has none, and OpenSM lists no records for it).
pub(super) fn end_ports(db: &SubnetDb) -> impl Iterator<Item = EndPort> + '_ {
    db.nodes.iter().enumerate().flat_map(|(ni, n)| {
        let switch = is_switch(n);
        n.ports
            .iter()
            .enumerate()
            .filter(move |(_, p)| (p.port_num == 0) == switch)
            .map(move |(pi, p)| EndPort {
                node: ni,
                port: pi,
                lid: port_info(p).lid(),
                guid: p.guid,
            })
            .filter(|e| e.lid != 0)
    })
}

/// The LID a node's port is reached at: its own for an end port, the
/// switch's (port 0's) for a switch's external port.
pub(super) fn lid_of(n: &NodeEntry, p: &PortEntry) -> u16 {
    if is_switch(n) {
        n.ports
            .iter()
            .find(|q| q.port_num == 0)
            .map_or(0, |q| port_info(q).lid())
    } else {
        port_info(p).lid()
    }
}

/// End ports by LID and by GUID, for queries that name one.
#[derive(Debug, Default)]
pub(super) struct Index {
    /// End port by base LID.
    pub(super) by_lid: HashMap<u16, EndPort>,
    /// End port by port GUID.
    pub(super) by_guid: HashMap<u64, EndPort>,
}

impl Index {
    /// Index every end port of `db`.
    pub(super) fn new(db: &SubnetDb) -> Index {
        let mut ix = Index::default();
        for e in end_ports(db) {
            ix.by_lid.insert(e.lid, e);
            ix.by_guid.insert(e.guid, e);
        }
        ix
    }
}

/// The port GID of a requester: its GRH's source GID, else the subnet
/// prefix and the GUID of the end port at its LID (zero if none).
pub(super) fn port_gid_of(db: &SubnetDb, from: &crate::types::MadAddr) -> [u8; 16] {
    if let Some(grh) = from.grh {
        return grh.gid;
    }
    let mut g = [0u8; 16];
    if let Some(e) = end_ports(db).find(|e| e.lid == from.lid) {
        g[..8].copy_from_slice(&db.subnet_prefix.to_be_bytes());
        g[8..].copy_from_slice(&e.guid.to_be_bytes());
    }
    g
}
