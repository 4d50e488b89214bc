//! The embedded simulated fabric: CAs, switches and links inside the process.
//!
//! Nothing here needs hardware or privileges. A [`Fabric`] is a graph of
//! nodes (channel adapters with one or more ports, switches with N ports)
//! joined by links. Every CA port and switch gets a LID (assigned in the
//! order nodes were added, from 1) and a GID (`fe80::/64` + port GUID).
//! Each CA port is opened as a [`SimTransport`] that owns the port's QP0
//! and QP1; frames travel between threads over crossbeam channels.
//!
//! **Subnet management agents.** Every node answers SubnGet(NodeInfo),
//! SubnGet(NodeDescription) and SubnGet(PortInfo) itself, LID-routed or
//! directed-route, the way a HCA's firmware SMA does: those never reach the
//! port's owner. Directed-route SMPs follow IBA 14.2.2 hop by hop (hop
//! pointer, D bit, initial and return paths, LID-routed parts before
//! DrSLID and after DrDLID), so multi-hop DR walks work without an external
//! simulator. Other SMPs to a CA go to whoever opened that port (an SM, or
//! the engine's automatic 0x000c reply); to a switch, a Get/Set of any
//! other attribute is answered with status 0x000c.
//!
//! **Faults.** Each link can drop, duplicate, reorder, delay and corrupt
//! frames ([`FaultConfig`]), decided by a seeded generator per link. Delay
//! and reordering hold frames back in the receiving port's queue; that
//! queue is the one place in the fabric that reads the wall clock.
//!
//! ```
//! use vmad::transport::sim::{Fabric, FaultConfig};
//! let fabric = Fabric::builder()
//!     .ca("docsim0")
//!     .switch("docsw0", 4)
//!     .ca("docsim1")
//!     .link("docsim0", 1, "docsw0", 1)
//!     .link("docsw0", 2, "docsim1", 1)
//!     .faults("docsim1", 1, FaultConfig { loss: 0.01, seed: 9, ..FaultConfig::default() })
//!     .build_private()
//!     .unwrap();
//! assert_eq!(fabric.lid("docsim0", 1), Some(1));
//! assert_eq!(fabric.lid("docsw0", 0), Some(2));
//! assert_eq!(fabric.lid("docsim1", 1), Some(3));
//! ```

mod access;
mod endpoint;
mod fault;
mod route;
mod sma;
#[allow(dead_code)] // filled by the built-in SM, read by the SA (both being written)
mod subnet_db;
mod topo;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use crossbeam_channel::Sender;

pub use access::{MkeyConfig, PortCounters, RawFrame};
pub use endpoint::SimTransport;
pub use fault::{FaultConfig, LinkStats};

use crate::transport::registry::{self, CaInfo, CaProvider};
use crate::transport::{LinkLayer, PortAttrs, Transport};
use crate::{Error, Result};

use fault::LinkFaults;

/// The GID prefix every simulated port uses (link-local).
pub const GID_PREFIX: u64 = 0xfe80_0000_0000_0000;
/// The high bits of every simulated node GUID ("vmad" in ASCII).
const GUID_BASE: u64 = 0x766d_6164_0000_0000;
/// Longest CA name libibumad accepts (`UMAD_CA_NAME_LEN` − 1 for the NUL).
const MAX_NAME: usize = 19;

/// What a node is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeKind {
    /// A channel adapter (node type 1): its ports can be opened.
    Ca,
    /// A switch (node type 2): forwards by LID, answers SMPs on port 0.
    Switch,
}

impl NodeKind {
    fn node_type(self) -> u8 {
        match self {
            NodeKind::Ca => 1,
            NodeKind::Switch => 2,
        }
    }
}

/// One node of a built fabric.
#[derive(Debug)]
pub(crate) struct Node {
    pub(crate) name: String,
    pub(crate) kind: NodeKind,
    pub(crate) num_ports: u8,
    pub(crate) guid: u64,
    /// LID per port number: a CA has one per port (index 0 unused), a switch one at index 0.
    pub(crate) lids: Vec<u16>,
    /// Per port number: the link index attached there.
    pub(crate) links: Vec<Option<usize>>,
    /// Per port number (CA only): where frames for the port's owner go, while it is open.
    pub(crate) endpoints: Vec<Mutex<Option<Sender<endpoint::Msg>>>>,
    /// Per port number (a switch: port 0): the P_Key table.
    pub(crate) pkeys: Vec<Vec<u16>>,
    /// Per port number (a switch: port 0): the SMA's M_Key protection.
    pub(crate) mkeys: Vec<MkeyConfig>,
    /// Per port number (a switch: port 0): frames refused by the access checks.
    pub(crate) counters: Vec<Mutex<PortCounters>>,
}

impl Node {
    pub(crate) fn is_switch(&self) -> bool {
        self.kind == NodeKind::Switch
    }

    /// The port GUID (a switch has one, port 0's).
    pub(crate) fn port_guid(&self, port: u8) -> u64 {
        match self.kind {
            NodeKind::Ca => self.guid + u64::from(port),
            NodeKind::Switch => self.guid,
        }
    }

    /// The LID that answers for `port` (a switch's ports share port 0's).
    pub(crate) fn lid(&self, port: u8) -> u16 {
        match self.kind {
            NodeKind::Ca => self.lids.get(usize::from(port)).copied().unwrap_or(0),
            NodeKind::Switch => self.lids[0],
        }
    }

    /// The port whose P_Keys, M_Key and counters stand for `port` (a switch: port 0).
    pub(crate) fn mgmt_port(&self, port: u8) -> usize {
        match self.kind {
            NodeKind::Ca => usize::from(port).min(self.pkeys.len() - 1),
            NodeKind::Switch => 0,
        }
    }

    /// Count a refused frame on `port`.
    pub(crate) fn count(&self, port: u8, bump: impl FnOnce(&mut PortCounters)) {
        bump(&mut lock(&self.counters[self.mgmt_port(port)]));
    }
}

/// A link between two ports, with its fault state.
#[derive(Debug)]
pub(crate) struct Link {
    pub(crate) ends: [(usize, u8); 2],
    pub(crate) faults: Mutex<LinkFaults>,
}

impl Link {
    /// The far end of the link seen from `(node, port)`.
    pub(crate) fn peer(&self, node: usize, port: u8) -> (usize, u8) {
        if self.ends[0] == (node, port) {
            self.ends[1]
        } else {
            self.ends[0]
        }
    }
}

/// The shared state of a built fabric.
#[derive(Debug)]
pub(crate) struct FabricInner {
    pub(crate) nodes: Vec<Node>,
    pub(crate) links: Vec<Link>,
    /// LID → (node, port).
    pub(crate) lid_map: BTreeMap<u16, (usize, u8)>,
    /// `routes[from][to_node]`: the port `from` sends out of to reach `to_node` (0: none).
    pub(crate) routes: Vec<Vec<u8>>,
    pub(crate) sm_lid: u16,
    /// Names this fabric put in the process-wide registry.
    registered: Mutex<Vec<String>>,
}

impl FabricInner {
    pub(crate) fn node_index(&self, name: &str) -> Option<usize> {
        self.nodes.iter().position(|n| n.name == name)
    }

    fn port_attrs(&self, node: usize, port: u8) -> PortAttrs {
        let n = &self.nodes[node];
        let linked = n.links.get(usize::from(port)).is_some_and(Option::is_some);
        PortAttrs {
            ca_name: n.name.clone(),
            port_num: port,
            node_type: n.kind.node_type(),
            node_guid: n.guid,
            port_guid: n.port_guid(port),
            gid_prefix: GID_PREFIX,
            lid: n.lid(port),
            lmc: 0,
            sm_lid: self.sm_lid,
            sm_sl: 0,
            state: if linked { 4 } else { 1 },
            phys_state: if linked { 5 } else { 2 },
            rate: 100,
            capmask: sma::CAPMASK,
            pkeys: n.pkeys[n.mgmt_port(port)].clone(),
            link_layer: LinkLayer::InfiniBand,
        }
    }

    fn ca_info(&self, node: usize) -> CaInfo {
        let n = &self.nodes[node];
        CaInfo {
            name: n.name.clone(),
            node_type: n.kind.node_type(),
            node_guid: n.guid,
            system_guid: n.guid,
            fw_ver: "0.1.0".into(),
            ca_type: "vmad simulated CA".into(),
            hw_ver: "0".into(),
            ports: (1..=n.num_ports)
                .map(|p| self.port_attrs(node, p))
                .collect(),
        }
    }

    fn open(self: &Arc<Self>, ca: &str, port: u8) -> Result<SimTransport> {
        let node = self
            .node_index(ca)
            .ok_or_else(|| Error::NoDevice(format!("no CA {ca:?} on the embedded fabric")))?;
        let n = &self.nodes[node];
        if n.kind != NodeKind::Ca {
            return Err(Error::Unsupported("switch ports cannot be opened"));
        }
        // Port 0 means "the first usable port", as UMAD_ANY_PORT.
        let port = if port == 0 { 1 } else { port };
        if port > n.num_ports {
            return Err(Error::NoDevice(format!(
                "{ca} has ports 1..={}, not {port}",
                n.num_ports
            )));
        }
        SimTransport::open(self.clone(), node, port, self.port_attrs(node, port))
    }
}

/// A built simulated fabric. Cheap to clone; every clone is the same fabric.
#[derive(Debug, Clone)]
pub struct Fabric {
    inner: Arc<FabricInner>,
}

impl Fabric {
    /// Start describing a fabric.
    pub fn builder() -> FabricBuilder {
        FabricBuilder::default()
    }

    /// The default fabric: CAs `vmadsim0` (LID 1) and `vmadsim1` (LID 2), port 1 of each linked
    /// directly, registered under those names.
    ///
    /// # Errors
    /// EADDRINUSE ([`Error::AddressInUse`]) if either name is already registered.
    pub fn default_pair() -> Result<Fabric> {
        Fabric::builder()
            .ca("vmadsim0")
            .ca("vmadsim1")
            .link("vmadsim0", 1, "vmadsim1", 1)
            .build()
    }

    /// Open port `port` of CA `ca` (0 = its first port) as a transport.
    ///
    /// # Errors
    /// ENODEV if there is no such CA or port; EOPNOTSUPP for a switch;
    /// EADDRINUSE if the port is already open.
    pub fn open(&self, ca: &str, port: u8) -> Result<SimTransport> {
        self.inner.open(ca, port)
    }

    /// Names of the CAs (not switches), in the order they were added.
    pub fn ca_names(&self) -> Vec<String> {
        self.inner
            .nodes
            .iter()
            .filter(|n| n.kind == NodeKind::Ca)
            .map(|n| n.name.clone())
            .collect()
    }

    /// The LID of `node`'s `port` (port 0 for a switch), if both exist.
    pub fn lid(&self, node: &str, port: u8) -> Option<u16> {
        let n = &self.inner.nodes[self.inner.node_index(node)?];
        match n.kind {
            NodeKind::Ca if port == 0 || port > n.num_ports => None,
            _ => Some(n.lid(port)),
        }
    }

    /// The node GUID of `node`.
    pub fn node_guid(&self, node: &str) -> Option<u64> {
        Some(self.inner.nodes[self.inner.node_index(node)?].guid)
    }

    /// Counters of the link attached to `node`'s `port`.
    pub fn link_stats(&self, node: &str, port: u8) -> Option<LinkStats> {
        let link = self.link_at(node, port)?;
        Some(lock(&self.inner.links[link].faults).stats)
    }

    /// What `node`'s `port` (port 0 for a switch) refused so far: P_Key, Q_Key and
    /// M_Key violations.
    pub fn port_counters(&self, node: &str, port: u8) -> Option<PortCounters> {
        let n = &self.inner.nodes[self.inner.node_index(node)?];
        let at = usize::from(port);
        match n.kind {
            NodeKind::Ca if port == 0 || port > n.num_ports => None,
            NodeKind::Switch if port != 0 => None,
            _ => Some(*lock(&n.counters[at])),
        }
    }

    /// Replace the faults of the link attached to `node`'s `port` (counters are kept).
    ///
    /// # Errors
    /// EINVAL if no link is attached there.
    pub fn set_faults(&self, node: &str, port: u8, config: FaultConfig) -> Result<()> {
        let link = self
            .link_at(node, port)
            .ok_or(Error::InvalidArgument("no link at that port"))?;
        let mut faults = lock(&self.inner.links[link].faults);
        let stats = faults.stats;
        *faults = LinkFaults::new(config, link);
        faults.stats = stats;
        Ok(())
    }

    /// Remove this fabric's CAs from the process-wide registry (open ports keep working).
    pub fn unregister(&self) {
        for name in lock(&self.inner.registered).drain(..) {
            registry::unregister_ca(&name);
        }
    }

    fn link_at(&self, node: &str, port: u8) -> Option<usize> {
        let n = &self.inner.nodes[self.inner.node_index(node)?];
        *n.links.get(usize::from(port))?
    }
}

/// What the process-wide registry keeps for each of a fabric's CAs.
struct Provider(Arc<FabricInner>);

impl CaProvider for Provider {
    fn ca_info(&self, name: &str) -> Option<CaInfo> {
        Some(self.0.ca_info(self.0.node_index(name)?))
    }

    fn open(&self, name: &str, port: u8) -> Result<Box<dyn Transport>> {
        Ok(Box::new(self.0.open(name, port)?))
    }
}

/// Describes a fabric; see [`Fabric::builder`].
#[derive(Debug, Default, Clone)]
pub struct FabricBuilder {
    nodes: Vec<(String, NodeKind, u8)>,
    links: Vec<((String, u8), (String, u8))>,
    faults: Vec<((String, u8), FaultConfig)>,
    pkeys: Vec<((String, u8), Vec<u16>)>,
    mkeys: Vec<((String, u8), MkeyConfig)>,
    guids: Vec<(String, u64)>,
    register_only: Option<Vec<String>>,
    sm_lid: Option<u16>,
}

impl FabricBuilder {
    /// Add a CA with one port.
    pub fn ca(self, name: &str) -> Self {
        self.ca_ports(name, 1)
    }

    /// Add a CA with `ports` ports (1..=10).
    pub fn ca_ports(mut self, name: &str, ports: u8) -> Self {
        self.nodes.push((name.to_owned(), NodeKind::Ca, ports));
        self
    }

    /// Add a switch with `ports` external ports (1..=254) plus its management port 0.
    pub fn switch(mut self, name: &str, ports: u8) -> Self {
        self.nodes.push((name.to_owned(), NodeKind::Switch, ports));
        self
    }

    /// Give `node` this node GUID (default: "vmad" in the high bits, the node's
    /// position in the low ones). A CA's port GUIDs are the node GUID + port number.
    pub fn guid(mut self, node: &str, guid: u64) -> Self {
        self.guids.push((node.to_owned(), guid));
        self
    }

    /// Register only these CAs by name when building (default: all of them), so a
    /// big fabric does not fill the process's CA list.
    pub fn register_only(mut self, names: &[&str]) -> Self {
        self.register_only = Some(names.iter().map(|n| (*n).to_owned()).collect());
        self
    }

    /// A builder holding the nodes and links of an ibsim topology file's text (the
    /// `ibnetdiscover` format of `tests/topo/*.net`), with the GUIDs it gives or, where it
    /// gives none, the ones ibsim would assign. Add faults or access rules, then build.
    ///
    /// # Errors
    /// EIO naming the line of a malformed file.
    pub fn from_topology(text: &str) -> Result<Self> {
        Ok(topo::Topology::parse(text)?.builder())
    }

    /// Names of the CAs described so far, in the order they were added.
    pub fn ca_names(&self) -> Vec<String> {
        let cas = self
            .nodes
            .iter()
            .filter(|(_, kind, _)| *kind == NodeKind::Ca);
        cas.map(|(name, _, _)| name.clone()).collect()
    }

    /// Join port `pa` of node `a` to port `pb` of node `b`.
    pub fn link(mut self, a: &str, pa: u8, b: &str, pb: u8) -> Self {
        self.links.push(((a.to_owned(), pa), (b.to_owned(), pb)));
        self
    }

    /// Inject faults on the link attached to `node`'s `port` (both directions).
    pub fn faults(mut self, node: &str, port: u8, config: FaultConfig) -> Self {
        self.faults.push(((node.to_owned(), port), config));
        self
    }

    /// Give `node`'s `port` (port 0 for a switch) this P_Key table (default: `[0xffff]`).
    /// QP1 frames whose P_Key no entry accepts are dropped and counted.
    pub fn pkeys(mut self, node: &str, port: u8, table: &[u16]) -> Self {
        self.pkeys.push(((node.to_owned(), port), table.to_vec()));
        self
    }

    /// Protect `node`'s `port` (port 0 for a switch) with an M_Key (default: none).
    pub fn mkey(mut self, node: &str, port: u8, mkey: MkeyConfig) -> Self {
        self.mkeys.push(((node.to_owned(), port), mkey));
        self
    }

    /// The SM LID every port reports (default: the first CA port's LID).
    pub fn sm_lid(mut self, lid: u16) -> Self {
        self.sm_lid = Some(lid);
        self
    }

    /// Build the fabric and register its CAs by name, so `umad::open_port(name, ..)` finds them.
    ///
    /// # Errors
    /// EINVAL for an inconsistent description (unknown node, duplicate name, a name of 20
    /// bytes or more, a port out of range or linked twice); EADDRINUSE if a CA name is
    /// already registered (nothing is registered then).
    pub fn build(self) -> Result<Fabric> {
        let only = self.register_only.clone();
        let fabric = self.build_private()?;
        let inner = &fabric.inner;
        let names = only.unwrap_or_else(|| fabric.ca_names());
        if names.iter().any(|n| !fabric.ca_names().contains(n)) {
            return Err(Error::InvalidArgument("register_only names an unknown CA"));
        }
        let provider: Arc<dyn CaProvider> = Arc::new(Provider(inner.clone()));
        registry::register_cas(&names, provider)?;
        *lock(&inner.registered) = names;
        Ok(fabric)
    }

    /// Build the fabric without registering it: reach its ports through [`Fabric::open`] only.
    ///
    /// # Errors
    /// EINVAL as for [`FabricBuilder::build`].
    pub fn build_private(self) -> Result<Fabric> {
        let mut nodes = Vec::with_capacity(self.nodes.len());
        let mut by_name: HashMap<&str, usize> = HashMap::with_capacity(self.nodes.len());
        let mut lid_map = BTreeMap::new();
        let mut next_lid = 1u16;
        for (index, (name, kind, ports)) in self.nodes.iter().enumerate() {
            if name.is_empty() || name.len() > MAX_NAME || name.contains('\0') {
                return Err(Error::InvalidArgument("node names are 1 to 19 bytes"));
            }
            if by_name.insert(name, index).is_some() {
                return Err(Error::InvalidArgument("duplicate node name"));
            }
            let max = match kind {
                NodeKind::Ca => 10,
                NodeKind::Switch => 254,
            };
            if *ports == 0 || *ports > max {
                return Err(Error::InvalidArgument("port count out of range"));
            }
            let mut lids = vec![0u16; usize::from(*ports) + 1];
            let lid_ports: Vec<u8> = match kind {
                NodeKind::Ca => (1..=*ports).collect(),
                NodeKind::Switch => vec![0],
            };
            for p in lid_ports {
                lids[usize::from(p)] = next_lid;
                lid_map.insert(next_lid, (index, p));
                next_lid = next_lid
                    .checked_add(1)
                    .filter(|l| *l < 0xc000)
                    .ok_or(Error::InvalidArgument("too many ports for unicast LIDs"))?;
            }
            nodes.push(Node {
                name: name.clone(),
                kind: *kind,
                num_ports: *ports,
                guid: GUID_BASE | ((index as u64 + 1) << 8),
                lids,
                links: vec![None; usize::from(*ports) + 1],
                endpoints: (0..=*ports).map(|_| Mutex::new(None)).collect(),
                pkeys: vec![vec![crate::types::DEFAULT_PKEY]; usize::from(*ports) + 1],
                mkeys: vec![MkeyConfig::default(); usize::from(*ports) + 1],
                counters: (0..=*ports)
                    .map(|_| Mutex::new(PortCounters::default()))
                    .collect(),
            });
        }
        for (name, guid) in &self.guids {
            let &i = by_name
                .get(name.as_str())
                .ok_or(Error::InvalidArgument("guid names an unknown node"))?;
            nodes[i].guid = *guid;
        }
        let find = |nodes: &[Node], (name, port): &(String, u8)| -> Result<(usize, u8)> {
            let &i = by_name
                .get(name.as_str())
                .ok_or(Error::InvalidArgument("link names an unknown node"))?;
            if *port == 0 || *port > nodes[i].num_ports {
                return Err(Error::InvalidArgument("link port out of range"));
            }
            Ok((i, *port))
        };
        let mut links = Vec::with_capacity(self.links.len());
        for (a, b) in &self.links {
            let (a, b) = (find(&nodes, a)?, find(&nodes, b)?);
            for (n, p) in [a, b] {
                let slot = &mut nodes[n].links[usize::from(p)];
                if slot.is_some() || a == b {
                    return Err(Error::InvalidArgument("port linked twice"));
                }
                *slot = Some(links.len());
            }
            links.push(Link {
                ends: [a, b],
                faults: Mutex::new(LinkFaults::new(FaultConfig::default(), links.len())),
            });
        }
        for (at, config) in &self.faults {
            let (n, p) = find(&nodes, at)?;
            let link = nodes[n].links[usize::from(p)]
                .ok_or(Error::InvalidArgument("faults on a port with no link"))?;
            *lock(&links[link].faults) = LinkFaults::new(*config, link);
        }
        let mgmt = |nodes: &[Node], (name, port): &(String, u8)| -> Result<(usize, usize)> {
            let &i = by_name
                .get(name.as_str())
                .ok_or(Error::InvalidArgument("access rule names an unknown node"))?;
            let ok = match nodes[i].kind {
                NodeKind::Ca => *port >= 1 && *port <= nodes[i].num_ports,
                NodeKind::Switch => *port == 0,
            };
            if !ok {
                return Err(Error::InvalidArgument("access rule port out of range"));
            }
            Ok((i, usize::from(*port)))
        };
        for (at, table) in &self.pkeys {
            let (n, p) = mgmt(&nodes, at)?;
            if table.is_empty() || table.len() > 0xffff {
                return Err(Error::InvalidArgument(
                    "a P_Key table holds 1 to 65535 entries",
                ));
            }
            nodes[n].pkeys[p] = table.clone();
        }
        for (at, mkey) in &self.mkeys {
            let (n, p) = mgmt(&nodes, at)?;
            if mkey.protect_bits > 3 {
                return Err(Error::InvalidArgument("M_KeyProtectBits is 0..=3"));
            }
            nodes[n].mkeys[p] = *mkey;
        }
        let routes = route::shortest_paths(&nodes, &links);
        let sm_lid = self.sm_lid.unwrap_or_else(|| {
            nodes
                .iter()
                .find(|n| n.kind == NodeKind::Ca)
                .map_or(0, |n| n.lids[1])
        });
        Ok(Fabric {
            inner: Arc::new(FabricInner {
                nodes,
                links,
                lid_map,
                routes,
                sm_lid,
                registered: Mutex::new(Vec::new()),
            }),
        })
    }
}

/// Lock, ignoring poisoning: fabric state stays consistent across a panicking user thread.
pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}
