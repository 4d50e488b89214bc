//! Directed-route discovery of a whole fabric, as `ibnetdiscover` does it:
//! NodeInfo over ever longer DR paths, NodeDescription per node, PortInfo per
//! switch port, with many SMPs in flight at once. Prints the nodes and links
//! in ibnetdiscover's topology format.
//!
//! Runs against ibsim, attached as `scripts/ibsim-start` says:
//!
//! ```sh
//! eval "$(scripts/ibsim-start tests/topo/ft234.net)"
//! cargo run --example smp_walk -- [--window N] [--timeout MS] [--retries N] [--quiet]
//! scripts/ibsim-stop "$VMAD_IBSIM_RUN"
//! ```

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::time::{Duration, Instant};

use vmad::engine::{AgentSpec, Event, SendRequest};
use vmad::port::{Port, PortConfig};
use vmad::transport::ibsim::IbsimTransport;
use vmad::types::{MadAddr, Qp};

pub(crate) const ATTR_NODE_DESC: u16 = 0x0010;
pub(crate) const ATTR_NODE_INFO: u16 = 0x0011;
pub(crate) const ATTR_PORT_INFO: u16 = 0x0015;

/// A directed-route SMP Get over `path` (out-ports, hop 1 first), as libibmad
/// builds it: hop pointer 0, DrSLID = DrDLID = permissive.
pub(crate) fn dr_get(tid: u32, attr: u16, attr_mod: u32, path: &[u8]) -> [u8; 256] {
    let mut m = [0u8; 256];
    m[0] = 1; // BaseVersion
    m[1] = 0x81; // directed-route SMP
    m[2] = 1; // ClassVersion
    m[3] = 0x01; // Get
    m[7] = path.len() as u8; // hop count
    m[12..16].copy_from_slice(&tid.to_be_bytes());
    m[16..18].copy_from_slice(&attr.to_be_bytes());
    m[20..24].copy_from_slice(&attr_mod.to_be_bytes());
    m[32..36].copy_from_slice(&[0xff; 4]);
    m[129..129 + path.len()].copy_from_slice(path);
    m
}

/// Directed-route SMPs go to the permissive LID.
pub(crate) fn dr_addr() -> MadAddr {
    MadAddr {
        lid: 0xffff,
        ..MadAddr::default()
    }
}

/// A client-only agent (it serves no requests) of `class` on `qp`.
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

fn be64(b: &[u8]) -> u64 {
    u64::from_be_bytes(b[..8].try_into().unwrap())
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

#[derive(Debug, Clone)]
enum Job {
    /// NodeInfo over `path`, reached from `from` (None: the local node).
    NodeInfo {
        path: Vec<u8>,
        from: Option<End>,
    },
    NodeDesc {
        guid: u64,
        path: Vec<u8>,
    },
    PortInfo {
        guid: u64,
        path: Vec<u8>,
        port: u8,
    },
}

/// Discover the fabric from `port`, keeping up to `window` SMPs in flight.
///
/// # Errors
///
/// The port's errors (a closed port, an event that never comes).
pub(crate) fn walk(
    port: &Port,
    window: usize,
    timeout_ms: u32,
    retries: u32,
) -> vmad::Result<(Topology, Sweep)> {
    let agent = port.register(client_agent(Qp::Smi, 0x81, 1))?;
    let result = walk_with(port, agent, window, timeout_ms, retries);
    port.unregister(agent)?;
    result
}

fn walk_with(
    port: &Port,
    agent: vmad::engine::AgentId,
    window: usize,
    timeout_ms: u32,
    retries: u32,
) -> vmad::Result<(Topology, Sweep)> {
    let mut topo = Topology::default();
    let mut sweep = Sweep::default();
    let mut queue = VecDeque::from([Job::NodeInfo {
        path: Vec::new(),
        from: None,
    }]);
    let mut in_flight: HashMap<u32, Job> = HashMap::new();
    let mut next_tid: u32 = 1;
    // Every request ends in a response or a timeout report, well within this.
    let patience = Duration::from_millis(u64::from(timeout_ms) * u64::from(retries + 1) + 10_000);
    while !queue.is_empty() || !in_flight.is_empty() {
        while in_flight.len() < window {
            let Some(job) = queue.pop_front() else { break };
            let mad = match &job {
                Job::NodeInfo { path, .. } => dr_get(next_tid, ATTR_NODE_INFO, 0, path),
                Job::NodeDesc { path, .. } => dr_get(next_tid, ATTR_NODE_DESC, 0, path),
                Job::PortInfo { path, port, .. } => {
                    dr_get(next_tid, ATTR_PORT_INFO, u32::from(*port), path)
                }
            };
            port.send(
                agent,
                SendRequest {
                    addr: dr_addr(),
                    mad: &mad,
                    timeout_ms,
                    retries,
                },
            )?;
            sweep.smps += 1;
            in_flight.insert(next_tid, job);
            next_tid = next_tid.wrapping_add(1);
        }
        match port.recv(Some(patience))? {
            Event::Recv { mad, .. } => {
                let tid = u32::from_be_bytes(mad[12..16].try_into().unwrap());
                let Some(job) = in_flight.remove(&tid) else {
                    continue;
                };
                // A DR SMP's status word carries the D bit on top.
                if u16::from_be_bytes([mad[4], mad[5]]) & 0x7fff != 0 {
                    continue;
                }
                handle(&mut topo, &mut queue, job, &mad[64..128]);
            }
            Event::SendTimedOut { header, .. } => {
                let tid = u32::from_be_bytes(header[12..16].try_into().unwrap());
                if in_flight.remove(&tid).is_some() {
                    sweep.timeouts += 1;
                }
            }
        }
    }
    Ok((topo, sweep))
}

fn handle(topo: &mut Topology, queue: &mut VecDeque<Job>, job: Job, data: &[u8]) {
    match job {
        Job::NodeInfo { path, from } => {
            let (node_type, num_ports) = (data[2], data[3]);
            let guid = be64(&data[12..20]);
            let port_guid = be64(&data[20..28]);
            let local_port = data[36];
            if let Some(from) = from {
                topo.add_link(from, (guid, local_port));
            }
            if let Some(node) = topo.nodes.get_mut(&guid) {
                node.port_guids.insert(local_port, port_guid);
                return;
            }
            topo.nodes.insert(
                guid,
                Node {
                    guid,
                    node_type,
                    num_ports,
                    desc: String::new(),
                    port_guids: [(local_port, port_guid)].into(),
                },
            );
            queue.push_back(Job::NodeDesc {
                guid,
                path: path.clone(),
            });
            // Switches forward: look behind every port. CAs do not; only the
            // local one is looked through, by the port we are attached to.
            let ports: Vec<u8> = if node_type == 2 {
                (1..=num_ports).collect()
            } else if path.is_empty() {
                vec![local_port]
            } else {
                Vec::new()
            };
            for port in ports {
                queue.push_back(Job::PortInfo {
                    guid,
                    path: path.clone(),
                    port,
                });
            }
        }
        Job::NodeDesc { guid, .. } => {
            let end = data.iter().position(|&c| c == 0).unwrap_or(data.len());
            if let Some(node) = topo.nodes.get_mut(&guid) {
                node.desc = String::from_utf8_lossy(&data[..end]).into_owned();
            }
        }
        Job::PortInfo { guid, path, port } => {
            // PortState Down (1): nothing behind this port.
            if data[32] & 0x0f < 2 {
                return;
            }
            let mut next = path;
            next.push(port);
            queue.push_back(Job::NodeInfo {
                path: next,
                from: Some((guid, port)),
            });
        }
    }
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
    let mut window = 64usize;
    let mut timeout_ms = 100u32;
    let mut retries = 3u32;
    let mut quiet = false;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut num = |what: &str| -> u64 {
            args.next()
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("{what} needs a number"))
        };
        match a.as_str() {
            "--window" => window = num("--window").max(1) as usize,
            "--timeout" => timeout_ms = num("--timeout") as u32,
            "--retries" => retries = num("--retries") as u32,
            "--quiet" | "-q" => quiet = true,
            _ => {
                eprintln!("usage: smp_walk [--window N] [--timeout MS] [--retries N] [--quiet]");
                std::process::exit(2);
            }
        }
    }
    let start = Instant::now();
    let transport = IbsimTransport::from_env().unwrap_or_else(|e| {
        eprintln!("smp_walk: cannot attach to ibsim ({e}); start one with scripts/ibsim-start");
        std::process::exit(1);
    });
    let port = Port::open(Box::new(transport), PortConfig::default()).expect("open port");
    let walked = Instant::now();
    let (topo, sweep) = walk(&port, window, timeout_ms, retries).expect("walk");
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
