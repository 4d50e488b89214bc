//! Describing a fabric: [`FabricBuilder`].

use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};

use super::fault::LinkFaults;
use super::state::{Conf, Epoch, NodeConf};
use super::{
    lock, pma, sm, topo, CaProvider, Fabric, FabricInner, FaultConfig, Link, MkeyConfig, Node,
    NodeKind, PortCounters, Provider, SaPort, SaSlot, GUID_BASE, MAX_NAME,
};
use crate::clock::{Clock, SystemClock};
use crate::transport::registry::{self, Registry};
use crate::{Error, Result};

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
    unmanaged: bool,
    clock: Option<Arc<dyn Clock>>,
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

    /// Inject faults on the link attached to `node`'s `port` (both directions), from
    /// the end of the built-in SM's first sweep on ([`Fabric::set_faults`] changes them
    /// later; a later [`Fabric::sweep`] crosses them like any traffic).
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

    /// Run the built-in SM on the port that gets `lid` (default: the first CA's port 1).
    ///
    /// The SM gives each port the LID of its place in the description, counting
    /// from 1 in the order nodes were added (a CA one per port, a switch one for
    /// port 0), as OpenSM keeps LIDs it was given in its guid2lid file.
    pub fn sm_lid(mut self, lid: u16) -> Self {
        self.sm_lid = Some(lid);
        self
    }

    /// Keep the fabric's time on `clock` (default: the OS's monotonic clock): its link
    /// delays, its SA's timers and every port opened on it (unless its
    /// [`crate::port::PortConfig::clock`] says otherwise) read it. With a
    /// [`crate::clock::VirtualClock`], behaviour in time happens as a test advances it.
    pub fn clock(mut self, clock: impl Clock + 'static) -> Self {
        self.clock = Some(Arc::new(clock));
        self
    }

    /// Build without sweeping: ports stay in Init with LID 0 and the switches' LFTs
    /// empty, as after power-on, until [`Fabric::sweep`] or an application holding
    /// the SM role (`set_sm`) configures them.
    pub fn unmanaged(mut self) -> Self {
        self.unmanaged = true;
        self
    }

    /// Build the fabric and register its CAs by name in the process-wide registry, so
    /// `umad::open_port(name, ..)` finds them.
    ///
    /// # Errors
    /// EINVAL for an inconsistent description (unknown node, duplicate name, a name of 20
    /// bytes or more, a port out of range or linked twice); EADDRINUSE if a CA name is
    /// already registered (nothing is registered then).
    pub fn build(self) -> Result<Fabric> {
        self.build_in(registry::global())
    }

    /// Build the fabric and register its CAs by name in `registry`.
    ///
    /// # Errors
    /// As [`FabricBuilder::build`].
    pub fn build_in(self, registry: &Arc<Registry>) -> Result<Fabric> {
        let only = self.register_only.clone();
        let fabric = self.build_private()?;
        let inner = &fabric.inner;
        let names = only.unwrap_or_else(|| fabric.ca_names());
        if names.iter().any(|n| !fabric.ca_names().contains(n)) {
            return Err(Error::InvalidArgument("register_only names an unknown CA"));
        }
        let provider: Arc<dyn CaProvider> = Arc::new(Provider(inner.clone()));
        registry.register_cas(&names, provider)?;
        *lock(&inner.registered) = (Arc::downgrade(registry), names);
        Ok(fabric)
    }

    /// Build the fabric without registering it: reach its ports through [`Fabric::open`] only.
    ///
    /// # Errors
    /// EINVAL as for [`FabricBuilder::build`].
    pub fn build_private(self) -> Result<Fabric> {
        let clock = self
            .clock
            .clone()
            .unwrap_or_else(|| Arc::new(SystemClock::new()));
        let epoch = Arc::new(Epoch::default());
        let mut nodes = Vec::with_capacity(self.nodes.len());
        let mut by_name: HashMap<&str, usize> = HashMap::with_capacity(self.nodes.len());
        // The LIDs the SM will give, as its guid2lid file would say: see `sm_lid`.
        let mut planned: Vec<(usize, u8, u16)> = Vec::new();
        let mut next_lid = 1u16;
        // When the ports outnumber the unicast LIDs, every switch keeps one (the SM
        // reaches and routes through them) and the CA ports last in the file go without.
        let switches = self
            .nodes
            .iter()
            .filter(|n| n.1 == NodeKind::Switch)
            .count();
        let mut ca_lids_left = usize::from(sm::LAST_UNICAST_LID).saturating_sub(switches);
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
            let lid_ports: Vec<u8> = match kind {
                NodeKind::Ca => (1..=*ports).collect(),
                NodeKind::Switch => vec![0],
            };
            // Past the last unicast LID nothing is planned: the SM gives LIDs while
            // they last and counts the ports left without one (SweepStats::no_lid).
            for p in lid_ports {
                let room = match kind {
                    NodeKind::Ca => ca_lids_left.checked_sub(1).map(|l| ca_lids_left = l),
                    NodeKind::Switch => Some(()),
                };
                if room.is_some() && next_lid <= sm::LAST_UNICAST_LID {
                    planned.push((index, p, next_lid));
                    next_lid += 1;
                }
            }
            nodes.push(Node {
                name: name.clone(),
                kind: *kind,
                num_ports: *ports,
                guid: GUID_BASE | ((index as u64 + 1) << 8),
                links: vec![None; usize::from(*ports) + 1],
                endpoints: (0..=*ports).map(|_| Mutex::new(None)).collect(),
                conf: Conf::new(epoch.clone()),
                counters: (0..=*ports)
                    .map(|_| Mutex::new(PortCounters::default()))
                    .collect(),
                traffic: (0..=*ports).map(|_| pma::Traffic::default()).collect(),
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
                up: std::sync::atomic::AtomicBool::new(true),
                unjudged: std::sync::atomic::AtomicU64::new(0),
            });
        }
        let mut faults = Vec::with_capacity(self.faults.len());
        for (at, config) in &self.faults {
            let (n, p) = find(&nodes, at)?;
            let link = nodes[n].links[usize::from(p)]
                .ok_or(Error::InvalidArgument("faults on a port with no link"))?;
            faults.push((link, *config));
        }
        for n in &nodes {
            let linked: Vec<bool> = n.links.iter().map(Option::is_some).collect();
            *n.conf.write() = NodeConf::power_on(n.is_switch(), &linked);
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
            nodes[n].conf.write().ports[p].pkeys = table.clone();
        }
        for (at, mkey) in &self.mkeys {
            let (n, p) = mgmt(&nodes, at)?;
            if mkey.protect_bits > 3 {
                return Err(Error::InvalidArgument("M_KeyProtectBits is 0..=3"));
            }
            nodes[n].conf.write().ports[p].mkey = *mkey;
        }
        let port_guid = |(n, p): (usize, u8)| nodes[n].port_guid(p);
        let seat = match self.sm_lid {
            Some(lid) => Some(
                planned
                    .iter()
                    .find(|&&(_, _, l)| l == lid)
                    .map(|&(n, p, _)| (n, p))
                    .ok_or(Error::InvalidArgument("sm_lid is no port's LID"))?,
            ),
            None => nodes
                .iter()
                .position(|n| n.kind == NodeKind::Ca)
                .map(|n| (n, 1)),
        };
        let plan = sm::Plan {
            lids: planned
                .iter()
                .map(|&(n, p, l)| (port_guid((n, p)), l))
                .collect(),
            mkeys: self
                .mkeys
                .iter()
                .filter_map(|(at, m)| {
                    Some((
                        port_guid(mgmt(&nodes, at).ok().map(|(n, p)| (n, p as u8))?),
                        m.key,
                    ))
                })
                .collect(),
        };
        let fabric = Fabric {
            inner: Arc::new(FabricInner {
                nodes,
                links,
                lid_map: RwLock::new(super::route::LidTable::default()),
                epoch,
                sm: sm::Sm::new(seat, plan),
                sa: RwLock::new(Arc::new(SaSlot::new(clock.clone())) as Arc<dyn SaPort>),
                sa_sent: Mutex::new(std::collections::VecDeque::new()),
                sa_local: Mutex::new(Vec::new()),
                registered: Mutex::new((std::sync::Weak::new(), Vec::new())),
                clock,
                on_arrival: std::sync::OnceLock::new(),
            }),
        };
        if !self.unmanaged && seat.is_some() {
            fabric.sweep()?;
        }
        // Faults start once the subnet is up, with fresh counters: the first sweep
        // runs clean, as a test of what follows usually wants (see `faults`).
        for (link, config) in faults {
            let l = &fabric.inner.links[link];
            *lock(&l.faults) = LinkFaults::new(config, link);
            l.unjudged.store(0, std::sync::atomic::Ordering::Relaxed);
        }
        fabric.inner.epoch.advance();
        Ok(fabric)
    }
}
