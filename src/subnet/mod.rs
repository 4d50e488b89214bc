//! The embedded simulated subnet: CAs, switches and links inside the process,
//! managed by a built-in SM with its SA, and every node's SMA and PMA.
//!
//! Nothing here needs hardware or privileges. A [`Fabric`] is a graph of
//! nodes (channel adapters with one or more ports, switches with N ports)
//! joined by links. Every CA port and switch gets a LID (assigned in the
//! order nodes were added, from 1) and a GID (`fe80::/64` + port GUID).
//! Each CA port is opened as a [`SimTransport`] that owns the port's QP0
//! and QP1: the in-process link layer of [`crate::transport::sim`], which
//! hands this fabric its frames and gets the port's frames back through its
//! mailbox. This module routes them between ports.
//!
//! **A managed subnet.** Nodes power on unconfigured (LID 0, ports in
//! Init, empty forwarding tables). A built-in SM, seated on the first CA's
//! port 1 (see [`FabricBuilder::sm_lid`]), sweeps the subnet when the fabric
//! is built and on [`Fabric::sweep`]: it discovers the nodes with
//! directed-route SMPs, gives each port its LID, programs the switches' LFTs
//! and brings the ports to Active, all through SubnSet to the nodes' SMAs,
//! and answers SMInfo as MASTER. An application that takes the SM role
//! (`set_sm`, as opening `issm`) makes it step aside. Every node also runs a
//! PMA whose counters count the fabric's real traffic and drops.
//!
//! **The subnet administrator.** While the built-in SM is master, SA MADs
//! (class 0x03) to its port go to the built-in SA, which answers from what the
//! last sweep found: ClassPortInfo, NodeRecord, PortInfoRecord, PathRecord,
//! LinkRecord, SwitchInfoRecord and GUIDInfoRecord queries (Get, and GetTable
//! answered over RMPP), MCMemberRecord joins and leaves, ServiceRecord
//! registrations with their leases, and InformInfo subscriptions, to which it
//! reports traps the SM receives and the groups it creates and deletes. A
//! port's owner that registers an SA-class agent serving a method gets those
//! requests instead, as the kernel hands them to the registered agent.
//!
//! **Subnet management agents.** Every node answers SubnGet/SubnSet of
//! NodeInfo, NodeDescription, PortInfo and P_KeyTable itself (a switch also
//! SwitchInfo and its linear and multicast forwarding tables), LID-routed or
//! directed-route, under the port's M_Key, the way a HCA's firmware SMA does:
//! those never reach the port's owner. Directed-route SMPs follow IBA 14.2.2
//! hop by hop (hop pointer, D bit, initial and return paths, LID-routed parts
//! before DrSLID and after DrDLID), so multi-hop DR walks work without an
//! external simulator. Other SMPs to a CA go to whoever opened that port (an
//! SM, or the engine's automatic 0x000c reply); a switch answers them with
//! status 0x000c.
//!
//! **Faults.** Each link can drop, duplicate, reorder, delay and corrupt
//! frames ([`FaultConfig`]), decided by a seeded generator per link. Delay
//! and reordering hold frames back in the receiving port's queue; that
//! queue is the one place in the fabric that reads the wall clock.
//!
//! ```
//! use vmad::subnet::{Fabric, FaultConfig};
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
mod builder;
mod fault;
mod pma;
mod route;
mod sa;
mod shortcut;
mod sm;
mod sma;
mod state;
pub(crate) mod subnet_db;
#[cfg(test)]
mod tests;
mod topo;

use std::sync::{Arc, Mutex, RwLock, Weak};

pub use access::{MkeyConfig, PortCounters};
pub use builder::FabricBuilder;
pub use fault::{FaultConfig, LinkStats};
#[doc(hidden)]
pub use sa::SaBench;
pub use sm::SweepStats;

use crate::clock::Clock;
use crate::engine::AgentSpec;
use crate::transport::registry::{CaInfo, CaProvider, DefaultCas, Registry};
use crate::transport::sim::{Medium, Pkt, RecvQueue, SendMemo, SimTransport};
use crate::transport::{LinkLayer, PortAttrs, Transport};
use crate::wire::smp::port_info::{self, PortState};
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
    /// Per port number: the link index attached there.
    pub(crate) links: Vec<Option<usize>>,
    /// Per port number (CA only): where frames for the port's owner go, while it is open.
    pub(crate) endpoints: Vec<Mutex<Option<RecvQueue>>>,
    /// What the SM set through the SMA: LIDs, port states, M_Keys, P_Keys, LFT.
    pub(crate) conf: state::Conf,
    /// Per port number (a switch: port 0): frames refused by the access checks.
    pub(crate) counters: Vec<Mutex<PortCounters>>,
    /// Per port number: traffic and drops, as the PMA reports them.
    pub(crate) traffic: Vec<pma::Traffic>,
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
        self.conf.read().ports[self.mgmt_port(port)].lid
    }

    /// The port whose LID, P_Keys, M_Key and counters stand for `port` (a switch: port 0).
    pub(crate) fn mgmt_port(&self, port: u8) -> usize {
        match self.kind {
            NodeKind::Ca => usize::from(port.clamp(1, self.num_ports)),
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
    /// The link trains: false while [`Fabric::set_link`] has it down.
    pub(crate) up: std::sync::atomic::AtomicBool,
    /// Frames that crossed along a remembered way (no faults to judge), beside those
    /// `faults` counts.
    pub(crate) unjudged: std::sync::atomic::AtomicU64,
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
/// An SA-class agent of a port's owner: (node, port, its TID high word, its method mask).
pub(crate) type LocalSaAgent = (usize, u8, u32, [u64; 2]);

#[derive(Debug)]
pub(crate) struct FabricInner {
    pub(crate) nodes: Vec<Node>,
    pub(crate) links: Vec<Link>,
    /// LID → (node, port), as the SMAs' LIDs stand now (written only under the
    /// owning node's configuration lock, whose release moves `epoch` on).
    pub(crate) lid_map: RwLock<route::LidTable>,
    /// Moved on by every change to the nodes' configuration, the links' states and
    /// faults: remembered ways are followed only at the epoch they were found at.
    pub(crate) epoch: Arc<state::Epoch>,
    /// The built-in SM.
    pub(crate) sm: sm::Sm,
    /// The in-fabric SA: the built-in one ([`SaSlot`]), or a stand-in a test puts
    /// there; see [`SaPort`].
    pub(crate) sa: RwLock<Arc<dyn SaPort>>,
    /// (TID, peer LID) of the last MADs the SA sent: what answers them is the SA's.
    pub(crate) sa_sent: Mutex<std::collections::VecDeque<(u64, u16)>>,
    /// SA-class (0x03) agents the ports' owners serve methods with: (node, port, the
    /// agent's TID high word, its method mask). A request for one of their methods is
    /// theirs, not the built-in SA's, as the kernel hands it to the registered agent.
    pub(crate) sa_local: Mutex<Vec<LocalSaAgent>>,
    /// The registry this fabric put its names in, and those names.
    registered: Mutex<(Weak<Registry>, Vec<String>)>,
    /// The fabric's time: link delays, the SA's timers, and its ports' default clock.
    pub(crate) clock: Arc<dyn Clock>,
    /// Told after a frame is queued for an open port (see [`Fabric::on_arrival`]).
    pub(crate) on_arrival: std::sync::OnceLock<ArrivalHook>,
}

/// What [`Fabric::on_arrival`] calls: with the node and port a frame was queued for.
pub(crate) struct ArrivalHook(pub(crate) Box<dyn Fn(usize, u8) + Send + Sync>);

impl core::fmt::Debug for ArrivalHook {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("ArrivalHook")
    }
}

/// The in-fabric SA, as the fabric drives it: each SubnAdm (class 0x03) MAD that
/// reaches the built-in SM's port on QP1 while the built-in SM is master (requests,
/// the clients' RMPP ACKs, ReportResps; an application holding the SM role gets them
/// itself instead) is handed to [`SaPort::exchange`] with its source as received and
/// the SM's [`SubnetDb`] snapshot; every MAD returned is sent from the SM's port
/// QP1 to its `dest`, in order. The walk is synchronous, so the SA's timers fire
/// when the next SA MAD arrives (`exchange` fires what is due first).
///
/// [`SubnetDb`]: subnet_db::SubnetDb
pub(crate) trait SaPort: Send + Sync + core::fmt::Debug {
    fn exchange(
        &self,
        meta: crate::engine::RecvMeta,
        mad: &[u8],
        db: &subnet_db::SubnetDb,
    ) -> Vec<(crate::engine::Transmit, Box<[u8; crate::wire::MAD_SIZE]>)>;

    /// A Trap(Notice) SMP reached the master SM (which has answered it with
    /// TrapRepress): `notice` is its 64 bytes of data. Returns the MADs to send (the
    /// Reports to InformInfo subscribers), as `exchange`.
    fn trap(
        &self,
        notice: &[u8],
        db: &subnet_db::SubnetDb,
    ) -> Vec<(crate::engine::Transmit, Box<[u8; crate::wire::MAD_SIZE]>)>;
}

/// The SA service as the fabric drives it: one lock around it (SA MADs come from
/// every sending thread), and its clock the time since the fabric was built, since
/// its clients' RMPP timers run on the same wall clock.
#[derive(Debug)]
pub(crate) struct SaSlot {
    sa: Mutex<sa::SaService>,
    clock: Arc<dyn Clock>,
}

impl SaSlot {
    pub(crate) fn new(clock: Arc<dyn Clock>) -> SaSlot {
        let mut config = crate::engine::EngineConfig::default();
        // A GetTable of every PathRecord of a large fabric is many megabytes.
        config.rmpp.max_message = 1 << 30;
        SaSlot {
            sa: Mutex::new(sa::SaService::new(config)),
            clock,
        }
    }

    fn now(&self) -> crate::time::Instant {
        self.clock.now()
    }
}

impl SaPort for SaSlot {
    fn exchange(
        &self,
        meta: crate::engine::RecvMeta,
        mad: &[u8],
        db: &subnet_db::SubnetDb,
    ) -> Vec<(crate::engine::Transmit, Box<[u8; crate::wire::MAD_SIZE]>)> {
        lock(&self.sa).exchange(self.now(), meta, mad, db)
    }

    fn trap(
        &self,
        notice: &[u8],
        _db: &subnet_db::SubnetDb,
    ) -> Vec<(crate::engine::Transmit, Box<[u8; crate::wire::MAD_SIZE]>)> {
        let now = self.now();
        let mut sa = lock(&self.sa);
        sa.handle_trap(now, notice);
        sa.drain(now)
    }
}

impl FabricInner {
    pub(crate) fn node_index(&self, name: &str) -> Option<usize> {
        self.nodes.iter().position(|n| n.name == name)
    }

    /// Whether `node`'s `port` is cabled to another node and the link is up.
    pub(crate) fn link_up(&self, node: usize, port: u8) -> bool {
        let link = self.nodes[node]
            .links
            .get(usize::from(port))
            .copied()
            .flatten();
        link.is_some_and(|l| self.links[l].up.load(std::sync::atomic::Ordering::Acquire))
    }

    /// Where `lid` is now.
    pub(crate) fn lid_owner(&self, lid: u16) -> Option<(usize, u8)> {
        read(&self.lid_map).get(&lid).copied()
    }

    /// The subnet as the built-in SM last swept it (empty while an application holds the
    /// SM role and before the first sweep).
    pub(crate) fn subnet_db(&self) -> Arc<subnet_db::SubnetDb> {
        self.sm.db()
    }

    pub(crate) fn port_attrs(&self, node: usize, port: u8) -> PortAttrs {
        let n = &self.nodes[node];
        let conf = n.conf.read();
        let pc = &conf.ports[n.mgmt_port(port)];
        let state = conf
            .ports
            .get(usize::from(port))
            .map_or(1, |p| p.state.into());
        let capmask = sma::CAPMASK | if pc.is_sm { port_info::CAP_IS_SM } else { 0 };
        PortAttrs {
            ca_name: n.name.clone(),
            port_num: port,
            node_type: n.kind.node_type(),
            node_guid: n.guid,
            port_guid: n.port_guid(port),
            gid_prefix: GID_PREFIX,
            lid: pc.lid,
            lmc: 0,
            sm_lid: pc.sm_lid,
            sm_sl: 0,
            state,
            phys_state: if self.link_up(node, port) { 5 } else { 2 },
            rate: 100,
            capmask,
            pkeys: pc.pkeys.clone(),
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
        SimTransport::open(self.clone(), node, port)
    }
}

/// The fabric as its open ports see it.
impl Medium for FabricInner {
    fn attach(&self, node: usize, port: u8, queue: RecvQueue) -> Result<()> {
        let n = &self.nodes[node];
        let mut slot = lock(&n.endpoints[usize::from(port)]);
        if slot.is_some() {
            return Err(Error::AddressInUse(format!(
                "{}:{port} is already open",
                n.name
            )));
        }
        *slot = Some(queue);
        Ok(())
    }

    fn detach(&self, node: usize, port: u8) {
        *lock(&self.nodes[node].endpoints[usize::from(port)]) = None;
        lock(&self.sa_local).retain(|&(n, p, _, _)| (n, p) != (node, port));
    }

    fn port_attrs(&self, node: usize, port: u8) -> PortAttrs {
        FabricInner::port_attrs(self, node, port)
    }

    fn send(&self, node: usize, port: u8, pkt: &mut Pkt, memo: &mut Option<SendMemo>) {
        let ways = memo.get_or_insert_with(|| Box::<shortcut::Shortcuts>::default());
        match ways.downcast_mut() {
            Some(ways) => self.send_from_port(node, port, pkt, ways),
            None => self.walk_from(node, port, pkt, std::time::Duration::ZERO),
        }
    }

    fn clock(&self) -> &Arc<dyn Clock> {
        &self.clock
    }

    /// An SA-class agent that serves methods takes those requests from the built-in SA.
    fn register_agent(&self, node: usize, port: u8, spec: &AgentSpec, hi_tid: u32) {
        if spec.qp == crate::types::Qp::Gsi
            && spec.mgmt_class == crate::wire::mad::MgmtClass::SubnAdm
            && spec.method_mask != [0; 2]
        {
            lock(&self.sa_local).push((node, port, hi_tid, spec.method_mask));
        }
    }

    fn unregister_agent(&self, node: usize, port: u8, hi_tid: u32) {
        lock(&self.sa_local).retain(|&(n, p, h, _)| (n, p, h) != (node, port, hi_tid));
    }

    fn set_sm(&self, node: usize, port: u8, on: bool) -> Result<()> {
        self.sm.set_owner(self, node, port, on)
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

    /// The default fabric: CAs `vmadsim0` (LID 1) and `vmadsim1` (LID 2), each on a port of
    /// the 8-port switch `vmadsw0` (LID 3: ports 1 and 2), the CAs registered under their
    /// names; the built-in SM runs on `vmadsim0` port 1.
    ///
    /// # Errors
    /// EADDRINUSE ([`Error::AddressInUse`]) if either name is already registered.
    pub fn default_pair() -> Result<Fabric> {
        Fabric::default_builder().build()
    }

    /// The description [`Fabric::default_pair`] builds, to add faults or rules to first.
    pub fn default_builder() -> FabricBuilder {
        Fabric::builder()
            .ca("vmadsim0")
            .ca("vmadsim1")
            .switch("vmadsw0", 8)
            .link("vmadsim0", 1, "vmadsw0", 1)
            .link("vmadsw0", 2, "vmadsim1", 1)
    }

    /// Open port `port` of CA `ca` (0 = its first port) as a transport.
    ///
    /// # Errors
    /// ENODEV if there is no such CA or port; EOPNOTSUPP for a switch;
    /// EADDRINUSE if the port is already open.
    pub fn open(&self, ca: &str, port: u8) -> Result<SimTransport> {
        self.inner.open(ca, port)
    }

    /// For `crate::fabric`, whose loop drives its ports without a thread waiting on
    /// each: `hook` is called (in the thread that walked the frame) after every frame
    /// queued for an open port. Set once; false if a hook was set already.
    pub(crate) fn on_arrival(&self, hook: ArrivalHook) -> bool {
        self.inner.on_arrival.set(hook).is_ok()
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

    /// Sweep the subnet again with the built-in SM (discover, assign LIDs, program the
    /// LFTs, bring ports up, refresh the subnet the SA answers from).
    ///
    /// # Errors
    /// EBUSY-like [`Error::AddressInUse`] while an application holds the SM role;
    /// EIO if the SM's own port cannot be reached.
    pub fn sweep(&self) -> Result<SweepStats> {
        self.inner.sm.sweep(&self.inner)
    }

    /// The subnet as the built-in SM last swept it: how many nodes (0 while an
    /// application holds the SM role).
    pub fn swept_nodes(&self) -> usize {
        self.inner.subnet_db().nodes.len()
    }

    /// How many ports (CA ports, switches' port 0) the built-in SM's last sweep found
    /// and left without a LID because the 49,151 unicast LIDs ran out.
    pub fn ports_without_lid(&self) -> usize {
        self.inner.sm.no_lid()
    }

    /// The egress port `switch`'s LFT gives `lid` (None: no entry).
    pub fn lft_port(&self, switch: &str, lid: u16) -> Option<u8> {
        let n = &self.inner.nodes[self.inner.node_index(switch)?];
        n.conf.read().route(lid)
    }

    /// `node`'s `port` state (1 Down, 2 Init, 3 Armed, 4 Active).
    pub fn port_state(&self, node: &str, port: u8) -> Option<u8> {
        let n = &self.inner.nodes[self.inner.node_index(node)?];
        Some(n.conf.read().ports.get(usize::from(port))?.state.into())
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
        let l = &self.inner.links[link];
        let mut stats = lock(&l.faults).stats;
        stats.frames += l.unjudged.load(std::sync::atomic::Ordering::Relaxed);
        Some(stats)
    }

    /// What `node`'s `port` (port 0 for a switch) refused so far: P_Key, Q_Key and
    /// M_Key violations, and frames its full receive queue dropped.
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
        drop(faults);
        self.inner.epoch.advance();
        Ok(())
    }

    /// Take the link at `node`'s `port` down (both ends Down, nothing crosses it) or bring
    /// it back up (both ends Init, as after training). As an SM does on the trap such a
    /// change raises, the built-in SM, while master, then sweeps again: routes move to the
    /// links that remain, and a link back up is brought to Active.
    ///
    /// # Errors
    /// EINVAL if no link is attached there.
    pub fn set_link(&self, node: &str, port: u8, up: bool) -> Result<()> {
        let link = self
            .link_at(node, port)
            .ok_or(Error::InvalidArgument("no link at that port"))?;
        let l = &self.inner.links[link];
        l.up.store(up, std::sync::atomic::Ordering::Release);
        for (n, p) in l.ends {
            let state = if up { PortState::Init } else { PortState::Down };
            self.inner.nodes[n].conf.write().ports[usize::from(p)].state = state;
        }
        if self.inner.sm.is_master() {
            self.sweep()?;
        }
        Ok(())
    }

    /// Take `node` out of the subnet (`up` false: every link attached to it goes down
    /// at once, as when a switch is powered off or unplugged) or put it back (`up` true:
    /// every link attached to it comes back up, to Init). The built-in SM, while master,
    /// then sweeps once, as on the traps the change raises: a node taken out is no longer
    /// found, its LIDs leave the SA's records; a node put back is found and brought up.
    /// Returns how many links changed state. Nodes the topology did not describe cannot
    /// be added (the fabric's node set is fixed when it is built).
    ///
    /// # Errors
    /// EINVAL if there is no such node.
    pub fn set_node(&self, node: &str, up: bool) -> Result<usize> {
        let i = self
            .inner
            .node_index(node)
            .ok_or(Error::InvalidArgument("no such node"))?;
        let mut changed = 0;
        for link in self.inner.nodes[i].links.iter().flatten() {
            let l = &self.inner.links[*link];
            if l.up.swap(up, std::sync::atomic::Ordering::AcqRel) == up {
                continue;
            }
            changed += 1;
            for (n, p) in l.ends {
                let state = if up { PortState::Init } else { PortState::Down };
                self.inner.nodes[n].conf.write().ports[usize::from(p)].state = state;
            }
        }
        if changed > 0 && self.inner.sm.is_master() {
            self.sweep()?;
        }
        Ok(changed)
    }

    /// Remove this fabric's CAs from the registry it was built in (open ports keep working).
    pub fn unregister(&self) {
        let (registry, names) = std::mem::take(&mut *lock(&self.inner.registered));
        if let Some(registry) = registry.upgrade() {
            for name in names {
                registry.unregister_ca(&name);
            }
        }
    }

    /// For `crate::fabric` (ibsim's control channel): the raw NodeInfo and PortInfo
    /// (64 bytes each, IBA layout) the SMA of `node`'s `port` would answer now, and the
    /// port's attributes.
    pub(crate) fn smp_view(&self, node: &str, port: u8) -> Option<([u8; 64], [u8; 64], PortAttrs)> {
        let i = self.inner.node_index(node)?;
        let n = &self.inner.nodes[i];
        // The SMA's encoders index the port tables: only ports the node has.
        if port > n.num_ports || (port == 0 && n.kind == NodeKind::Ca) {
            return None;
        }
        let (mut ni, mut pi) = ([0u8; 64], [0u8; 64]);
        sma::node_info(&self.inner, i, port, &mut ni);
        sma::port_info(&self.inner, i, port, port, false, &mut pi);
        Some((ni, pi, self.inner.port_attrs(i, port)))
    }

    fn link_at(&self, node: &str, port: u8) -> Option<usize> {
        let n = &self.inner.nodes[self.inner.node_index(node)?];
        *n.links.get(usize::from(port))?
    }
}

/// The default CAs of the process-wide registry: [`Fabric::default_pair`], built in
/// the registry that asks for it unless it has `vmadsim0` or `vmadsim1`.
#[derive(Debug, Clone, Copy, Default)]
pub struct DefaultPair;

impl DefaultCas for DefaultPair {
    fn ensure(&self, registry: &Arc<Registry>) {
        if !registry.contains("vmadsim0") && !registry.contains("vmadsim1") {
            // Losing a race to another thread building it is fine: it exists either way.
            let _ = Fabric::default_builder().build_in(registry);
        }
    }
}

/// What a registry keeps for each of a fabric's CAs.
struct Provider(Arc<FabricInner>);

impl CaProvider for Provider {
    fn ca_info(&self, name: &str) -> Option<CaInfo> {
        Some(self.0.ca_info(self.0.node_index(name)?))
    }

    fn open(&self, name: &str, port: u8) -> Result<Box<dyn Transport>> {
        Ok(Box::new(self.0.open(name, port)?))
    }
}

/// Read-lock, ignoring poisoning (as [`lock`]).
pub(crate) fn read<T>(m: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    m.read().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Write-lock, ignoring poisoning (as [`lock`]).
pub(crate) fn write<T>(m: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    m.write().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Lock, ignoring poisoning: fabric state stays consistent across a panicking user thread.
pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}
