//! Directed-route discovery of a whole fabric through vmad, as ibnetdiscover
//! does it: NodeInfo over ever longer DR paths, NodeDescription per node,
//! PortInfo per switch port, with many SMPs in flight at once.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::time::Duration;

use vmad::engine::{AgentId, AgentSpec, Event, SendRequest};
use vmad::types::{MadAddr, Qp};

use super::driver::Driver;

/// Something that sends MADs for an agent and hands back events.
pub(crate) trait MadClient {
    fn register(&mut self, spec: AgentSpec) -> AgentId;
    fn send(&mut self, agent: AgentId, req: SendRequest<'_>);
    fn recv(&mut self, timeout: Duration) -> Option<Event>;
}

impl<T: vmad::transport::Transport> MadClient for Driver<T> {
    fn register(&mut self, spec: AgentSpec) -> AgentId {
        Driver::register(self, spec)
    }
    fn send(&mut self, agent: AgentId, req: SendRequest<'_>) {
        Driver::send(self, agent, req)
    }
    fn recv(&mut self, timeout: Duration) -> Option<Event> {
        Driver::recv(self, timeout)
    }
}

pub(crate) const ATTR_NODE_DESC: u16 = 0x0010;
pub(crate) const ATTR_NODE_INFO: u16 = 0x0011;
pub(crate) const ATTR_PORT_INFO: u16 = 0x0015;

/// A directed-route SMP Get over `path` (out-ports, hop 1 first).
pub(crate) fn dr_get(tid: u32, attr: u16, attr_mod: u32, path: &[u8]) -> [u8; 256] {
    let mut m = [0u8; 256];
    m[0] = 1;
    m[1] = 0x81;
    m[2] = 1;
    m[3] = 0x01;
    m[7] = path.len() as u8;
    m[12..16].copy_from_slice(&tid.to_be_bytes());
    m[16..18].copy_from_slice(&attr.to_be_bytes());
    m[20..24].copy_from_slice(&attr_mod.to_be_bytes());
    m[32..36].copy_from_slice(&[0xff; 4]);
    m[129..129 + path.len()].copy_from_slice(path);
    m
}

/// The client-only agent for directed-route SMPs.
pub(crate) fn dr_agent() -> AgentSpec {
    AgentSpec {
        qp: Qp::Smi,
        mgmt_class: 0x81,
        class_version: 1,
        rmpp_version: 0,
        method_mask: [0; 2],
        oui: 0,
        user_rmpp: false,
    }
}

pub(crate) fn dr_addr() -> MadAddr {
    MadAddr {
        lid: 0xffff,
        ..MadAddr::default()
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
    /// Port GUIDs of the ports seen (CAs: per port; switches: the node GUID, port 0).
    pub(crate) port_guids: BTreeMap<u8, u64>,
    /// The DR path it was first reached by.
    pub(crate) path: Vec<u8>,
}

/// A link end: (node GUID, port number).
pub(crate) type End = (u64, u8);

/// A fabric: nodes by GUID and links (each once, smaller end first).
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

/// Outcome counters of a sweep.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Sweep {
    pub(crate) smps: u64,
    pub(crate) timeouts: u64,
}

/// Discover the fabric from the client's port, keeping up to `window` SMPs in flight.
pub(crate) fn discover(
    client: &mut impl MadClient,
    window: usize,
    timeout_ms: u32,
    retries: u32,
) -> (Topology, Sweep) {
    let agent = client.register(dr_agent());
    let mut topo = Topology::default();
    let mut sweep = Sweep::default();
    let mut queue = VecDeque::from([Job::NodeInfo {
        path: Vec::new(),
        from: None,
    }]);
    let mut in_flight: HashMap<u32, Job> = HashMap::new();
    let mut next_tid: u32 = 1;
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
            client.send(
                agent,
                SendRequest {
                    addr: dr_addr(),
                    mad: &mad,
                    timeout_ms,
                    retries,
                },
            );
            sweep.smps += 1;
            in_flight.insert(next_tid, job);
            next_tid = next_tid.wrapping_add(1);
        }
        // Each request ends in a response or a timeout report; the bound is a safety net.
        let ev = client
            .recv(Duration::from_secs(60))
            .expect("no event for 60 s with SMPs in flight");
        match ev {
            Event::Recv { mad, .. } => {
                let tid = u32::from_be_bytes(mad[12..16].try_into().unwrap());
                let Some(job) = in_flight.remove(&tid) else {
                    continue;
                };
                let status = u16::from_be_bytes([mad[4], mad[5]]) & 0x7fff;
                if status != 0 {
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
            Event::RmppAborted { .. } => {}
        }
    }
    (topo, sweep)
}

fn handle(topo: &mut Topology, queue: &mut VecDeque<Job>, job: Job, data: &[u8]) {
    match job {
        Job::NodeInfo { path, from } => {
            let node_type = data[2];
            let num_ports = data[3];
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
            let mut port_guids = BTreeMap::new();
            port_guids.insert(local_port, port_guid);
            topo.nodes.insert(
                guid,
                Node {
                    guid,
                    node_type,
                    num_ports,
                    desc: String::new(),
                    port_guids,
                    path: path.clone(),
                },
            );
            queue.push_back(Job::NodeDesc {
                guid,
                path: path.clone(),
            });
            // Switches forward: look behind every port. A CA does not; only the
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
            let state = data[32] & 0x0f;
            // Down (1) or no state: nothing behind this port.
            if state < 2 {
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

/// Parse `ibnetdiscover` output (default format) into a topology: node GUIDs
/// from the `S-`/`H-` names, descriptions from the comments, links from the
/// port lines, CA port GUIDs from the `[p](guid)` form.
pub(crate) fn parse_ibnetdiscover(text: &str) -> Topology {
    let mut topo = Topology::default();
    let name_guid = |s: &str| -> Option<u64> {
        let start = s.find('"')? + 1;
        let name = &s[start..start + s[start..].find('"')?];
        u64::from_str_radix(name.get(2..)?, 16).ok()
    };
    let mut current: Option<u64> = None;
    for line in text.lines() {
        let (node_type, rest) = if let Some(r) = line.strip_prefix("Switch\t") {
            (2, r)
        } else if let Some(r) = line.strip_prefix("Ca\t") {
            (1, r)
        } else if let Some(r) = line.strip_prefix("Rt\t") {
            (3, r)
        } else if line.starts_with('[') {
            let Some(me) = current else { continue };
            let close = line.find(']').unwrap();
            let port: u8 = line[1..close].parse().unwrap();
            let after = &line[close + 1..];
            // CA lines carry their own port GUID: `[1](100003)`.
            if let Some(g) = after.strip_prefix('(') {
                let g = &g[..g.find(')').unwrap()];
                let pg = u64::from_str_radix(g, 16).unwrap();
                topo.nodes.get_mut(&me).unwrap().port_guids.insert(port, pg);
            }
            let remote = name_guid(after).unwrap();
            let q = after.rfind("\"[").unwrap() + 2;
            let rport: u8 = after[q..q + after[q..].find(']').unwrap()].parse().unwrap();
            topo.add_link((me, port), (remote, rport));
            continue;
        } else {
            continue;
        };
        let num_ports: u8 = rest.split_whitespace().next().unwrap().parse().unwrap();
        let guid = name_guid(rest).unwrap();
        let desc = rest
            .find("# \"")
            .map(|i| {
                let d = &rest[i + 3..];
                d[..d.find('"').unwrap_or(d.len())].to_string()
            })
            .unwrap_or_default();
        let mut port_guids = BTreeMap::new();
        if node_type == 2 {
            port_guids.insert(0, guid);
        }
        topo.nodes.insert(
            guid,
            Node {
                guid,
                node_type,
                num_ports,
                desc,
                port_guids,
                path: Vec::new(),
            },
        );
        current = Some(guid);
    }
    topo
}
