//! Directed-route discovery of a whole fabric, as `ibnetdiscover` does it:
//! NodeInfo over ever longer DR paths, NodeDescription per node, PortInfo per
//! port, with many SMPs in flight at once. Prints the nodes and links in
//! ibnetdiscover's topology format. The walk is the library's one directed-route
//! walker (`vmad::discover::Walker`, as `vmad discover` and the embedded SM use
//! it), driven here over `vmad::client` and its windows.
//!
//! Runs against ibsim, attached as `scripts/ibsim-start` says:
//!
//! ```sh
//! eval "$(scripts/ibsim-start tests/topo/ft234.net)"
//! cargo run --example smp_walk -- [--window N] [--per-dest N] [--timeout MS] [--retries N] [--quiet]
//! scripts/ibsim-stop "$VMAD_IBSIM_RUN"
//! ```
//!
//! or on the embedded subnet built from the same file: `--sim tests/topo/ft234.net`.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use vmad::client::{
    Attribute, Client, ClientConfig, NodeDesc, NodeInfo, Pending, PortInfo, Target,
};
use vmad::discover::{Config, Reason, Walker};
use vmad::engine::AgentSpec;
use vmad::port::{Port, PortConfig};
use vmad::subnet::FabricBuilder;
use vmad::transport::ibsim::IbsimTransport;
use vmad::types::{MadAddr, Qp};
use vmad::wire::mad::{self, MadStatus, Method, MgmtClass};
use vmad::wire::smp::{self, AttrId};

#[allow(dead_code)] // for the ibsim tests that compile this file
pub(crate) const ATTR_NODE_DESC: u16 = AttrId::NodeDescription.raw();
#[allow(dead_code)] // for the ibsim tests that compile this file
pub(crate) const ATTR_NODE_INFO: u16 = AttrId::NodeInfo.raw();
#[allow(dead_code)] // for the ibsim tests that compile this file
pub(crate) const ATTR_PORT_INFO: u16 = AttrId::PortInfo.raw();

/// A directed-route SMP Get over `path` (out-ports, hop 1 first), as libibmad
/// builds it: hop pointer 0, DrSLID = DrDLID = permissive. (For tests that send
/// SMPs by hand; the walk below asks through `vmad::client`.)
#[allow(dead_code)]
pub(crate) fn dr_get(tid: u32, attr: u16, attr_mod: u32, path: &[u8]) -> [u8; 256] {
    let mut m = [0u8; 256];
    mad::Repr {
        base_version: mad::BASE_VERSION,
        mgmt_class: MgmtClass::SubnDirectedRoute,
        class_version: smp::CLASS_VERSION,
        method: Method::Get,
        status: MadStatus::OK,
        class_specific: 0,
        tid: u64::from(tid),
        attr_id: attr,
        attr_mod,
    }
    .emit(&mut mad::Packet::new_unchecked(&mut m[..]));
    let mut dr = smp::DirectedRoute {
        hop_count: path.len() as u8,
        ..smp::DirectedRoute::default()
    };
    dr.initial_path[1..=path.len()].copy_from_slice(path);
    smp::Repr {
        m_key: 0,
        data: [0; smp::DATA_LEN],
        dr: Some(dr),
    }
    .emit(&mut smp::Packet::new_unchecked(&mut m[..]));
    m
}

/// Directed-route SMPs go to the permissive LID.
#[allow(dead_code)]
pub(crate) fn dr_addr() -> MadAddr {
    MadAddr {
        lid: smp::PERMISSIVE_LID,
        ..MadAddr::default()
    }
}

/// A client-only agent (it serves no requests) of `class` on `qp`.
#[allow(dead_code)]
pub(crate) fn client_agent(qp: Qp, class: u8, version: u8) -> AgentSpec {
    AgentSpec {
        qp,
        mgmt_class: class.into(),
        class_version: version,
        rmpp_version: 0,
        method_mask: [0; 2],
        oui: 0,
        user_rmpp: false,
    }
}

/// One node as discovery saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Node {
    pub(crate) guid: u64,
    /// 1 CA, 2 switch, 3 router.
    pub(crate) node_type: u8,
    pub(crate) num_ports: u8,
    pub(crate) desc: String,
    /// Port GUIDs of the ports seen (a switch reports its node GUID on every port).
    pub(crate) port_guids: BTreeMap<u8, u64>,
}

/// A link end: (node GUID, port number).
pub(crate) type End = (u64, u8);

/// A fabric: nodes by GUID, links once each (smaller end first).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Topology {
    pub(crate) nodes: BTreeMap<u64, Node>,
    pub(crate) links: BTreeSet<(End, End)>,
}

impl Topology {
    pub(crate) fn add_link(&mut self, a: End, b: End) {
        self.links.insert(if a <= b { (a, b) } else { (b, a) });
    }
}

/// Counters of one sweep.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Sweep {
    pub(crate) smps: u64,
    pub(crate) timeouts: u64,
}

/// A request on its way, by its walker id.
enum Asked {
    Node(Pending<NodeInfo>),
    Desc(Pending<NodeDesc>),
    Port(Pending<PortInfo>),
}

/// Discover the fabric from `port`, keeping up to `window` SMPs in flight (the
/// client's SMP window; to one node at most 8).
///
/// # Errors
///
/// The port's errors (a closed port, an event that never comes).
#[allow(dead_code)] // for the ibsim tests that compile this file
pub(crate) fn walk(
    port: &Port,
    window: usize,
    timeout_ms: u32,
    retries: u32,
) -> vmad::Result<(Topology, Sweep)> {
    walk_with(
        port,
        ClientConfig {
            smp_window: window,
            timeout_ms,
            retries,
            ..ClientConfig::default()
        },
    )
}

/// [`walk`] under any client settings (the windows, the per-destination cap).
///
/// The walk is the library's directed-route walker ([`Walker`]), driven over
/// `vmad::client`: the client's SMP window and per-destination cap pace it, so
/// the walker hands out every request it has at once.
///
/// # Errors
///
/// As [`walk`].
pub(crate) fn walk_with(port: &Port, config: ClientConfig) -> vmad::Result<(Topology, Sweep)> {
    let client = Client::new(port, config)?;
    let mut walker = Walker::new(&Config {
        window: usize::MAX,
        per_node: usize::MAX,
        // Directed route throughout, as ibnetdiscover goes.
        lid_routing: false,
        ..Config::default()
    });
    let mut sweep = Sweep::default();
    let mut asked: Vec<(u32, Asked)> = Vec::new();
    loop {
        while let Some(r) = walker.next_request() {
            let to = Target::dr(&r.route);
            let a = match r.attr {
                AttrId::NodeInfo => Asked::Node(client.get_async(&to, r.attr_mod)?),
                AttrId::NodeDescription => Asked::Desc(client.get_async(&to, r.attr_mod)?),
                _ => Asked::Port(client.get_async(&to, r.attr_mod)?),
            };
            asked.push((r.id, a));
            sweep.smps += 1;
        }
        if walker.is_done() {
            break;
        }
        // Let answers arrive (the client files each under its request), then
        // give the walker those that came; what they teach is asked at once.
        client.drive(Duration::from_millis(50));
        let mut next = Vec::with_capacity(asked.len());
        for (id, mut a) in asked.drain(..) {
            let mut data = [0u8; smp::DATA_LEN];
            let done = match &mut a {
                Asked::Node(p) => p.try_wait().map(|r| r.map(|v| v.encode(&mut data))),
                Asked::Desc(p) => p.try_wait().map(|r| r.map(|v| v.encode(&mut data))),
                Asked::Port(p) => p.try_wait().map(|r| r.map(|v| v.encode(&mut data))),
            };
            match done {
                None => next.push((id, a)),
                Some(Ok(())) => {
                    walker.answer(id, Ok(&data));
                }
                Some(Err(vmad::Error::TimedOut)) => {
                    sweep.timeouts += 1;
                    walker.answer(id, Err(Reason::Timeout));
                }
                Some(Err(vmad::Error::MadStatus { status, .. })) => {
                    walker.answer(id, Err(Reason::Status(status)));
                }
                Some(Err(e)) => return Err(e),
            }
        }
        asked = next;
    }
    let found = walker.into_topology();
    let mut topo = Topology::default();
    for n in &found.nodes {
        topo.nodes.insert(
            n.guid,
            Node {
                guid: n.guid,
                node_type: u8::from(n.node_type),
                num_ports: n.num_ports,
                desc: n.desc.clone(),
                port_guids: n
                    .ports
                    .iter()
                    .filter(|(_, p)| p.guid != 0)
                    .map(|(&i, p)| (i, p.guid))
                    .collect(),
            },
        );
    }
    for (a, b) in found.links() {
        topo.add_link(a, b);
    }
    Ok((topo, sweep))
}

fn name(n: &Node) -> String {
    let kind = match n.node_type {
        2 => 'S',
        3 => 'R',
        _ => 'H',
    };
    format!("\"{kind}-{:016x}\"", n.guid)
}

/// The topology in ibnetdiscover's format (switches first, then CAs).
pub(crate) fn render(topo: &Topology) -> String {
    let mut peer: BTreeMap<End, End> = BTreeMap::new();
    for &(a, b) in &topo.links {
        peer.insert(a, b);
        peer.insert(b, a);
    }
    let mut out = String::new();
    for kind in [2u8, 1, 3] {
        for n in topo.nodes.values().filter(|n| n.node_type == kind) {
            let label = match kind {
                2 => "Switch",
                3 => "Rt",
                _ => "Ca",
            };
            out += &format!(
                "\n{label}\t{} {}\t\t# \"{}\"\n",
                n.num_ports,
                name(n),
                n.desc
            );
            for p in 0..=n.num_ports {
                let Some(&(rg, rp)) = peer.get(&(n.guid, p)) else {
                    continue;
                };
                let remote = &topo.nodes[&rg];
                let own = if kind == 2 {
                    String::new()
                } else {
                    format!("({:x})", n.port_guids.get(&p).copied().unwrap_or(0))
                };
                out += &format!(
                    "[{p}]{own}\t{}[{rp}]\t\t# \"{}\"\n",
                    name(remote),
                    remote.desc
                );
            }
        }
    }
    out
}

#[allow(dead_code)] // Also compiled into the ibsim integration tests, which have their own main.
fn main() {
    let mut config = ClientConfig {
        smp_window: 64,
        timeout_ms: 100,
        retries: 3,
        ..ClientConfig::default()
    };
    let mut quiet = false;
    let mut sim = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut num = |what: &str| -> u64 {
            args.next()
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("{what} needs a number"))
        };
        match a.as_str() {
            "--window" => config.smp_window = num("--window").max(1) as usize,
            "--per-dest" => config.per_destination = num("--per-dest").max(1) as usize,
            "--timeout" => config.timeout_ms = num("--timeout") as u32,
            "--retries" => config.retries = num("--retries") as u32,
            "--quiet" | "-q" => quiet = true,
            "--sim" => sim = args.next(),
            _ => {
                eprintln!(
                    "usage: smp_walk [--window N] [--per-dest N] [--timeout MS] [--retries N] \
                     [--quiet] [--sim TOPOLOGY]"
                );
                std::process::exit(2);
            }
        }
    }
    let start = Instant::now();
    // The embedded subnet, when there is one, lives until the walk is done.
    let mut _fabric = None;
    let port = match sim {
        // The embedded subnet built from an ibsim topology file, from its first CA.
        Some(file) => {
            let text = std::fs::read_to_string(&file).expect("read the topology");
            let builder = FabricBuilder::from_topology(&text).expect("parse the topology");
            let ca = builder.ca_names().into_iter().next().expect("a CA");
            _fabric = Some(builder.register_only(&[&ca]).build().expect("build"));
            vmad::umad::open(&ca, 1).expect("open port").1
        }
        None => {
            let transport = IbsimTransport::from_env().unwrap_or_else(|e| {
                eprintln!(
                    "smp_walk: cannot attach to ibsim ({e}); start one with scripts/ibsim-start"
                );
                std::process::exit(1);
            });
            std::sync::Arc::new(
                Port::open(Box::new(transport), PortConfig::default()).expect("open port"),
            )
        }
    };
    let walked = Instant::now();
    let (topo, sweep) = walk_with(&port, config).expect("walk");
    let done = walked.elapsed();
    if !quiet {
        print!("{}", render(&topo));
    }
    let switches = topo.nodes.values().filter(|n| n.node_type == 2).count();
    eprintln!(
        "smp_walk: {} nodes ({switches} switches), {} links; {} SMPs, {} timed out; sweep {:.3} s, total {:.3} s",
        topo.nodes.len(),
        topo.links.len(),
        sweep.smps,
        sweep.timeouts,
        done.as_secs_f64(),
        start.elapsed().as_secs_f64()
    );
}
