//! Fabric discovery: a parallel, breadth-first directed-route sweep, as
//! `ibnetdiscover` does it, with many SMPs in flight.
//!
//! From the port's own node, the sweep reads NodeInfo over ever longer directed
//! routes, NodeDescription once per node, and PortInfo of every port (a switch's
//! port 0 for its LID); behind every switch port that is up it reads NodeInfo
//! again, one hop further. Up to [`Config::window`] SMPs are on the wire at once,
//! at most [`Config::per_node`] of them to any one node (a switch's VL15 buffer is
//! small: the field sees drops above ~20 outstanding to one switch, and no gain
//! above 2–3). Answers are matched to their requests by TID, whatever order they
//! come in.
//!
//! Once the SM has brought the subnet up (the local port and a switch's port 0
//! answer with a LID, Active), the switch's NodeDescription and the PortInfo of
//! its other ports go LID-routed ([`Config::lid_routing`]); an SMP with no answer
//! that way is asked again by directed route, and a fabric without LIDs is swept
//! by directed route throughout.
//!
//! A node that does not answer does not end the sweep: what it would have led to
//! is reached by other routes if there are any, and the [`Topology`] names what
//! failed ([`Topology::failures`]) next to what was found. It prints as
//! `ibnetdiscover`'s topology file ([`Topology::to_ibnetdiscover`], which ibsim
//! and [`crate::subnet::FabricBuilder::from_topology`] read back), Graphviz
//! ([`Topology::to_dot`]) and JSON ([`Topology::to_json`]).
//!
//! [`discover_sa`] reads the same [`Topology`] from the SA instead (NodeRecord,
//! PortInfoRecord and LinkRecord GetTables): three requests in place of an SMP per
//! port, showing what the SM last swept.
//!
//! ```
//! # fn main() -> vmad::Result<()> {
//! use vmad::discover::{discover, Config};
//! let fabric = vmad::subnet::Fabric::default_builder().build_private()?;
//! let port = vmad::port::Port::open(Box::new(fabric.open("vmadsim0", 1)?), Default::default())?;
//! let topo = discover(&port, &Config::default())?;
//! assert_eq!((topo.nodes.len(), topo.links().len()), (3, 2));
//! assert!(topo.failures.is_empty());
//! # Ok(()) }
//! ```

mod format;
mod sa;
mod sweep;
mod walker;

pub use sa::{discover_sa, table_records, TableRecords};
pub use walker::{Learned, Request, Walker};

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use crate::port::Port;
use crate::wire::smp::node_info::{self, NodeType};
use crate::Result;

/// How a sweep runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// SMPs in flight at once, on the whole port (at least 1).
    ///
    /// Default 32: on ibsim's 1,612-node fat tree, windows from 8 to 128 sweep in
    /// the same time within the noise (2 and 4 are slower), and so do 4 to 256 on
    /// a 10,000-node embedded subnet (docs/performance.md, "`vmad discover`
    /// against ibnetdiscover"); 32 leaves room for a real port, which takes 128 in
    /// flight without drops (the driver's QP0 send queue).
    pub window: usize,
    /// SMPs in flight at once to one node (at least 1). Default 4, as OpenSM's
    /// `max_wire_smps`: the field sees no gain above 2–3 outstanding to one switch,
    /// and VL15 drops above ~20.
    ///
    /// Counted per directed route: every request to a known node takes the route
    /// it was first reached by, so this bounds them; NodeInfo probes that reach a
    /// node not yet known by several routes at once count on each route.
    pub per_node: usize,
    /// Milliseconds to wait for each answer.
    pub timeout_ms: u32,
    /// Attempts after the first, per SMP.
    pub retries: u32,
    /// The longest directed route to follow (IBA: 63 hops).
    pub max_hops: u8,
    /// Once a switch's port 0 and the local port have answered with a LID and
    /// Active (the SM has brought the subnet up), read the switch's other ports
    /// and NodeDescription LID-routed; an SMP that gets no answer that way is
    /// asked again by directed route. Default on; a fabric without LIDs goes by
    /// directed route throughout either way.
    pub lid_routing: bool,
    /// How long the sweep's thread polls for the next answer before it sleeps
    /// (while the port's recent waits were that short, and while no other thread
    /// wants the CPU; zero: never), whatever the transport's own policy says.
    ///
    /// Default 100 µs: a sweep keeps the window full, so an answer is never far
    /// off, and a sleep and wake-up per answer cost more than the wait. On ibsim's
    /// 1,612-node fat tree (2-core machine, idle) the sweep took 38–42 ms with it
    /// and 46–58 ms without (docs/performance.md, "Where `vmad discover`'s time
    /// goes on ibsim").
    pub spin: Duration,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            window: 32,
            per_node: 4,
            timeout_ms: 200,
            retries: 2,
            max_hops: crate::wire::smp::MAX_HOPS,
            lid_routing: true,
            spin: Duration::from_micros(100),
        }
    }
}

/// How far a sweep has got, for a progress display.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Progress {
    /// Nodes found so far.
    pub nodes: usize,
    /// SMPs sent so far.
    pub smps: u64,
    /// SMPs on the wire now.
    pub in_flight: usize,
    /// SMPs waiting to be sent.
    pub queued: usize,
}

/// A (node GUID, port number) pair: one end of a link.
pub type End = (u64, u8);

/// One port of a discovered node, as its PortInfo said.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NodePort {
    /// The port GUID (a switch's ports all carry the node's port-0 GUID).
    pub guid: u64,
    /// The LID that addresses the port (a switch: its port 0's, for every port).
    pub lid: u16,
    /// LMC.
    pub lmc: u8,
    /// PortState (1 Down, 2 Init, 3 Armed, 4 Active); 0 where PortInfo was not read.
    pub state: u8,
    /// LinkWidthActive (1 1x, 2 4x, 4 8x, 8 12x, 16 2x).
    pub width: u8,
    /// LinkSpeedActive (1 SDR, 2 DDR, 4 QDR).
    pub speed: u8,
    /// LinkSpeedExtActive (1 FDR, 2 EDR, 4 HDR, 8 NDR), 0 for none.
    pub speed_ext: u8,
    /// The other end of the link, when the sweep crossed it.
    pub remote: Option<End>,
}

/// One discovered node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    /// NodeGUID.
    pub guid: u64,
    /// CA, switch or router.
    pub node_type: NodeType,
    /// NumPorts.
    pub num_ports: u8,
    /// SystemImageGUID.
    pub sys_image_guid: u64,
    /// VendorID (24 bits).
    pub vendor_id: u32,
    /// DeviceID.
    pub device_id: u16,
    /// Revision.
    pub revision: u32,
    /// NodeDescription (empty if it could not be read).
    pub desc: String,
    /// The directed route (out ports, first hop first) the node was first reached by.
    pub route: Vec<u8>,
    /// The ports the sweep read, by number (0: a switch's management port).
    pub ports: BTreeMap<u8, NodePort>,
}

impl Node {
    /// The node its NodeInfo describes (from an SMP or inside an SA NodeRecord),
    /// reached along `route`, with no ports known yet.
    pub(crate) fn from_info<T: AsRef<[u8]>>(
        info: &node_info::Packet<T>,
        desc: String,
        route: Vec<u8>,
    ) -> Node {
        Node {
            guid: info.node_guid(),
            node_type: info.node_type(),
            num_ports: info.num_ports(),
            sys_image_guid: info.sys_image_guid(),
            vendor_id: info.vendor_id(),
            device_id: info.device_id(),
            revision: info.revision(),
            desc,
            route,
            ports: Default::default(),
        }
    }

    /// Whether the node is a switch.
    pub fn is_switch(&self) -> bool {
        self.node_type == NodeType::Switch
    }

    /// The LID that addresses the node: a switch's port 0's, else its lowest port's.
    pub fn lid(&self) -> u16 {
        self.ports.values().next().map_or(0, |p| p.lid)
    }

    /// ibnetdiscover's name for the node: `S-`, `H-` or `R-` and the GUID.
    pub fn name(&self) -> String {
        let kind = match self.node_type {
            NodeType::Switch => 'S',
            NodeType::Router => 'R',
            _ => 'H',
        };
        format!("{kind}-{:016x}", self.guid)
    }
}

/// What a failed request asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Query {
    /// NodeInfo: the node at the end of the route is unknown.
    NodeInfo,
    /// NodeDescription.
    NodeDescription,
    /// PortInfo of this port.
    PortInfo(u8),
}

/// Why a request failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    /// No answer within every attempt.
    Timeout,
    /// An answer with this MAD status (the D bit masked off).
    Status(u16),
}

/// A request of the sweep that got no usable answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// The directed route the request took.
    pub route: Vec<u8>,
    /// The node and port the route's last hop leaves from (None: the route is empty).
    /// For a [`Query::NodeInfo`] this names where the silent node hangs.
    pub via: Option<End>,
    /// The node the request was for, when it was known (not for NodeInfo).
    pub node: Option<u64>,
    /// What was asked.
    pub query: Query,
    /// Why it failed.
    pub reason: Reason,
}

/// The fabric as a sweep found it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Topology {
    /// Nodes in the order they were found; the port's own node first.
    pub nodes: Vec<Node>,
    /// Requests that got no usable answer: where these are, the topology is partial.
    pub failures: Vec<Failure>,
    /// SMPs sent (a retried one counts once).
    pub smps: u64,
    /// Of those, the SMPs sent LID-routed ([`Config::lid_routing`]).
    pub lid_routed: u64,
    index: HashMap<u64, usize>,
}

impl Topology {
    /// The node with this GUID.
    pub fn node(&self, guid: u64) -> Option<&Node> {
        self.index.get(&guid).map(|&i| &self.nodes[i])
    }

    /// Every link once, the smaller end first, in order.
    pub fn links(&self) -> Vec<(End, End)> {
        let mut links: Vec<(End, End)> = self
            .nodes
            .iter()
            .flat_map(|n| {
                n.ports
                    .iter()
                    .filter_map(move |(&p, port)| Some(((n.guid, p), port.remote?)))
            })
            .filter(|(a, b)| a < b)
            .collect();
        links.sort_unstable();
        links
    }

    /// Whether every request was answered.
    pub fn is_complete(&self) -> bool {
        self.failures.is_empty()
    }

    fn push(&mut self, node: Node) -> usize {
        let i = self.nodes.len();
        self.index.insert(node.guid, i);
        self.nodes.push(node);
        i
    }
}

/// Sweep the fabric from `port`'s own node.
///
/// # Errors
/// The port's: a closed port, a transport that failed, or no event at all for far
/// longer than every attempt of every request in flight could take. Requests that
/// time out or come back with an error status are not errors: they are
/// [`Topology::failures`].
pub fn discover(port: &Port, config: &Config) -> Result<Topology> {
    discover_with(port, config, &mut |_| {})
}

/// [`discover`], calling `progress` after each answer.
///
/// # Errors
/// As [`discover`].
pub fn discover_with(
    port: &Port,
    config: &Config,
    progress: &mut dyn FnMut(&Progress),
) -> Result<Topology> {
    sweep::run(port, config, progress)
}
