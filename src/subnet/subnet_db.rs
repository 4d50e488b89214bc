//! What the embedded fabric's SM knows of the subnet after a sweep, and what its SA
//! answers from: each node's attributes exactly as the nodes' SMAs returned them
//! (the raw attribute bytes, read back through the wire views), as OpenSM keeps them.
//!
//! The SM fills it; the SA only reads it. Keeping the SMA's bytes (rather than a
//! second, typed copy of each attribute) means the SA's records carry what the
//! nodes really said, and one definition of each layout stays in `wire`.

use crate::wire::smp::{node_desc, node_info, port_info};

/// One port of a node, as the SM last read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PortEntry {
    /// The port number (0: a switch's management port).
    pub(crate) port_num: u8,
    /// PortInfo as the SMA answered it (after the SM's SubnSet).
    pub(crate) port_info: [u8; port_info::LEN],
    /// The port GUID.
    pub(crate) guid: u64,
    /// The node index and port number at the other end of the link, if any.
    pub(crate) peer: Option<(usize, u8)>,
    /// The P_Key table.
    pub(crate) pkeys: Vec<u16>,
}

/// One node, as the SM last read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct NodeEntry {
    /// NodeInfo as the SMA answered it.
    pub(crate) node_info: [u8; node_info::LEN],
    /// NodeDescription as the SMA answered it.
    pub(crate) node_desc: [u8; node_desc::LEN],
    /// SwitchInfo (20 bytes) for a switch.
    pub(crate) switch_info: Option<[u8; 20]>,
    /// Its ports, by port number order (a switch: port 0 first).
    pub(crate) ports: Vec<PortEntry>,
    /// A switch's linear forwarding table: egress port by LID (0xff: none).
    pub(crate) lft: Vec<u8>,
}

/// The subnet as the SM last swept it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct SubnetDb {
    /// Every node found, the SM's own first.
    pub(crate) nodes: Vec<NodeEntry>,
    /// The master SM's LID and port GUID.
    pub(crate) sm_lid: u16,
    /// The master SM's port GUID.
    pub(crate) sm_port_guid: u64,
    /// The subnet prefix.
    pub(crate) subnet_prefix: u64,
}
