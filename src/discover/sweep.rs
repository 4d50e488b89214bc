//! The sweep's scheduler: jobs in breadth-first order, sent under the window and
//! the per-node cap, answers matched by TID.
//!
//! The SMP send and match code is [`Smps`], kept small and apart so that it can
//! move onto a shared client (one TID map per port) without touching the sweep.

use std::collections::{HashMap, VecDeque};
use std::time::Duration;

use super::{Config, Failure, Node, Progress, Query, Reason, Topology};
use crate::engine::{AgentId, AgentSpec, Event, SendRequest};
use crate::port::Port;
use crate::types::{MadAddr, Qp};
use crate::wire::mad::{self, MadStatus, Method, MgmtClass};
use crate::wire::smp::node_info::NodeType;
use crate::wire::smp::{self, node_info, port_info, AttrId, DirectedRoute};
use crate::{Error, Result};

/// What one request is for.
#[derive(Debug, Clone)]
enum Job {
    /// NodeInfo over `route`, reached from node index `from`'s port (None: the local node).
    NodeInfo {
        route: Vec<u8>,
        from: Option<(usize, u8)>,
    },
    NodeDesc {
        node: usize,
    },
    PortInfo {
        node: usize,
        port: u8,
    },
}

/// The answer to one SMP, as taken off the port's queue (no clone of the MAD).
enum Answer {
    Data {
        tid: u32,
        status: u16,
        data: [u8; smp::DATA_LEN],
    },
    TimedOut {
        tid: u32,
    },
    Other,
}

/// SMP Gets in flight on two agents (directed route and LID routed), keyed by
/// the TID's low word, which one counter hands out to both.
struct Smps<'p> {
    port: &'p Port,
    agent: AgentId,
    lid_agent: AgentId,
    timeout_ms: u32,
    retries: u32,
    next_tid: u32,
    sent: u64,
    lid_routed: u64,
}

impl<'p> Smps<'p> {
    fn open(port: &'p Port, config: &Config) -> Result<Smps<'p>> {
        let spec = |mgmt_class| AgentSpec {
            qp: Qp::Smi,
            mgmt_class,
            class_version: 1,
            rmpp_version: 0,
            method_mask: [0; 2],
            oui: 0,
            user_rmpp: false,
        };
        let agent = port.register(spec(MgmtClass::SubnDirectedRoute))?;
        let lid_agent = match port.register(spec(MgmtClass::SubnLid)) {
            Ok(a) => a,
            Err(e) => {
                let _ = port.unregister(agent);
                return Err(e);
            }
        };
        Ok(Smps {
            port,
            agent,
            lid_agent,
            timeout_ms: config.timeout_ms,
            retries: config.retries,
            next_tid: 1,
            sent: 0,
            lid_routed: 0,
        })
    }

    /// Send a SubnGet(`attr`, `attr_mod`) to `lid` if given, else along `route`;
    /// returns its TID.
    fn get(&mut self, attr: AttrId, attr_mod: u32, route: &[u8], lid: Option<u16>) -> Result<u32> {
        let tid = self.next_tid;
        self.next_tid = self.next_tid.wrapping_add(1).max(1);
        let mut m = [0u8; crate::wire::MAD_SIZE];
        let class = match lid {
            Some(_) => MgmtClass::SubnLid,
            None => MgmtClass::SubnDirectedRoute,
        };
        mad::Repr {
            base_version: mad::BASE_VERSION,
            mgmt_class: class,
            class_version: 1,
            method: Method::Get,
            status: MadStatus::OK,
            class_specific: 0,
            tid: u64::from(tid),
            attr_id: attr.into(),
            attr_mod,
        }
        .emit(&mut mad::Packet::new_unchecked(&mut m[..]));
        let dr = lid.is_none().then(|| {
            let mut dr = DirectedRoute {
                hop_count: route.len() as u8,
                ..DirectedRoute::default()
            };
            dr.initial_path[1..=route.len()].copy_from_slice(route);
            dr
        });
        smp::Repr {
            m_key: 0,
            data: [0; smp::DATA_LEN],
            dr,
        }
        .emit(&mut smp::Packet::new_unchecked(&mut m[..]));
        let agent = if lid.is_some() {
            self.lid_agent
        } else {
            self.agent
        };
        self.port.send(
            agent,
            SendRequest {
                // Directed-route SMPs go to the permissive LID.
                addr: MadAddr {
                    lid: lid.unwrap_or(smp::PERMISSIVE_LID),
                    ..MadAddr::default()
                },
                mad: &m,
                timeout_ms: self.timeout_ms,
                retries: self.retries,
            },
        )?;
        self.sent += 1;
        self.lid_routed += u64::from(lid.is_some());
        Ok(tid)
    }

    /// The next answer or timeout report of this agent (others' events are dropped:
    /// the sweep owns its open).
    fn next(&self, patience: Duration) -> Result<Answer> {
        let ours = |a: &AgentId| *a == self.agent || *a == self.lid_agent;
        self.port.recv_with(Some(patience), |e| {
            Ok(match e {
                Event::Recv { agent: a, mad, .. } if ours(a) => {
                    match smp::Packet::new_checked(&mad[..]) {
                        Ok(p) => {
                            let mut data = [0u8; smp::DATA_LEN];
                            data.copy_from_slice(p.data());
                            Answer::Data {
                                tid: mad::Packet::new_unchecked(&mad[..]).tid() as u32,
                                status: p.smp_status().0,
                                data,
                            }
                        }
                        Err(_) => Answer::Other,
                    }
                }
                Event::SendTimedOut {
                    agent: a, header, ..
                } if ours(a) => Answer::TimedOut {
                    tid: mad::Packet::new_unchecked(&header[..]).tid() as u32,
                },
                _ => Answer::Other,
            })
        })
    }

    fn close(self) {
        let _ = self.port.unregister(self.agent);
        let _ = self.port.unregister(self.lid_agent);
    }
}

/// A request waiting to be sent or on the wire.
struct Pending {
    job: Job,
    /// The node's directed route: the key of the per-node cap, and the way the
    /// SMP goes unless it goes by LID.
    route: Vec<u8>,
    /// The LID it went to, if it went LID-routed.
    lid: Option<u16>,
    /// Directed route only: it went by LID once and got no answer.
    dr_only: bool,
}

struct Sweep<'a> {
    topo: Topology,
    config: &'a Config,
    /// Jobs not yet sent, breadth first.
    queue: VecDeque<Pending>,
    /// Jobs held back by the per-node cap, by route.
    held: HashMap<Vec<u8>, VecDeque<Pending>>,
    /// SMPs on the wire per route.
    busy: HashMap<Vec<u8>, usize>,
    in_flight: HashMap<u32, Pending>,
}

pub(super) fn run(
    port: &Port,
    config: &Config,
    progress: &mut dyn FnMut(&Progress),
) -> Result<Topology> {
    if config.window == 0 || config.per_node == 0 {
        return Err(Error::InvalidArgument(
            "discovery window and per-node cap must be at least 1",
        ));
    }
    let mut smps = Smps::open(port, config)?;
    let result = sweep(&mut smps, config, progress);
    let (sent, lid_routed) = (smps.sent, smps.lid_routed);
    smps.close();
    let mut topo = result?;
    topo.smps = sent;
    topo.lid_routed = lid_routed;
    Ok(topo)
}

fn sweep(
    smps: &mut Smps<'_>,
    config: &Config,
    progress: &mut dyn FnMut(&Progress),
) -> Result<Topology> {
    let mut s = Sweep {
        topo: Topology::default(),
        config,
        queue: VecDeque::new(),
        held: HashMap::new(),
        busy: HashMap::new(),
        in_flight: HashMap::new(),
    };
    s.enqueue(Job::NodeInfo {
        route: Vec::new(),
        from: None,
    });
    // Every request ends in an answer or a timeout report from the engine; this only
    // catches a port that reports neither.
    let attempts = u64::from(config.retries) + 1;
    let patience = Duration::from_millis(u64::from(config.timeout_ms) * attempts + 10_000);
    loop {
        s.fill(smps)?;
        if s.in_flight.is_empty() {
            break;
        }
        let (tid, answer) = match smps.next(patience)? {
            Answer::Data { tid, status, data } => (tid, Ok((status & !smp::DIRECTION_BIT, data))),
            Answer::TimedOut { tid } => (tid, Err(Reason::Timeout)),
            Answer::Other => continue,
        };
        let Some(p) = s.in_flight.remove(&tid) else {
            continue; // A late answer to a request already reported timed out.
        };
        s.release(&p.route);
        match answer {
            Ok((0, data)) => s.handle(p, &data),
            Ok((status, _)) => s.fail(p, Reason::Status(status)),
            Err(reason) => s.fail(p, reason),
        }
        progress(&Progress {
            nodes: s.topo.nodes.len(),
            smps: smps.sent,
            in_flight: s.in_flight.len(),
            queued: s.queue.len() + s.held.values().map(VecDeque::len).sum::<usize>(),
        });
    }
    Ok(s.topo)
}

impl Sweep<'_> {
    fn route_of(&self, job: &Job) -> Vec<u8> {
        match job {
            Job::NodeInfo { route, .. } => route.clone(),
            Job::NodeDesc { node } | Job::PortInfo { node, .. } => {
                self.topo.nodes[*node].route.clone()
            }
        }
    }

    fn enqueue(&mut self, job: Job) {
        let route = self.route_of(&job);
        self.queue.push_back(Pending {
            job,
            route,
            lid: None,
            dr_only: false,
        });
    }

    /// The LID to send `p` to instead of its directed route: a switch's
    /// NodeDescription and PortInfo of ports other than 0, once its port 0 and the
    /// local port have answered with a LID, Active (so the SM has assigned LIDs and,
    /// it can be taken, programmed the forwarding tables). A fabric without LIDs,
    /// and every node until then, goes by directed route.
    fn lid_for(&self, p: &Pending) -> Option<u16> {
        let node = match p.job {
            Job::NodeDesc { node } => node,
            Job::PortInfo { node, port } if port != 0 => node,
            _ => return None,
        };
        if p.dr_only || !self.config.lid_routing {
            return None;
        }
        let active = |port: Option<&super::NodePort>| {
            port.filter(|q| q.lid != 0 && q.state == u8::from(port_info::PortState::Active))
                .map(|q| q.lid)
        };
        let local = self.topo.nodes.first()?;
        let entry = local
            .ports
            .iter()
            .find(|(_, q)| q.state != 0)
            .map(|(_, q)| q);
        active(entry)?;
        let n = &self.topo.nodes[node];
        if !n.is_switch() || n.route.is_empty() {
            return None;
        }
        active(n.ports.get(&0))
    }

    /// Send until the window is full or nothing can go.
    fn fill(&mut self, smps: &mut Smps<'_>) -> Result<()> {
        while self.in_flight.len() < self.config.window {
            let Some(p) = self.queue.pop_front() else {
                break;
            };
            let busy = self.busy.get(&p.route).copied().unwrap_or(0);
            if busy >= self.config.per_node {
                self.held.entry(p.route.clone()).or_default().push_back(p);
                continue;
            }
            self.send(smps, p)?;
        }
        Ok(())
    }

    fn send(&mut self, smps: &mut Smps<'_>, mut p: Pending) -> Result<()> {
        p.lid = self.lid_for(&p);
        let (attr, attr_mod) = match p.job {
            Job::NodeInfo { .. } => (AttrId::NodeInfo, 0),
            Job::NodeDesc { .. } => (AttrId::NodeDescription, 0),
            Job::PortInfo { port, .. } => (AttrId::PortInfo, u32::from(port)),
        };
        let tid = smps.get(attr, attr_mod, &p.route, p.lid)?;
        *self.busy.entry(p.route.clone()).or_default() += 1;
        self.in_flight.insert(tid, p);
        Ok(())
    }

    /// One SMP to `route` is done: a job held back for it goes to the front.
    fn release(&mut self, route: &[u8]) {
        if let Some(n) = self.busy.get_mut(route) {
            *n -= 1;
            if *n == 0 {
                self.busy.remove(route);
            }
        }
        if let Some(q) = self.held.get_mut(route) {
            if let Some(p) = q.pop_front() {
                self.queue.push_front(p);
            }
            if q.is_empty() {
                self.held.remove(route);
            }
        }
    }

    fn fail(&mut self, p: Pending, reason: Reason) {
        if p.lid.is_some() {
            // No answer by LID (forwarding tables not set up yet, a stale LID):
            // ask again by directed route before calling it a failure.
            self.queue.push_back(Pending {
                lid: None,
                dr_only: true,
                ..p
            });
            return;
        }
        let (via, node, query) = match p.job {
            Job::NodeInfo { from, .. } => (
                from.map(|(i, port)| (self.topo.nodes[i].guid, port)),
                None,
                Query::NodeInfo,
            ),
            Job::NodeDesc { node } => (None, Some(node), Query::NodeDescription),
            Job::PortInfo { node, port } => (None, Some(node), Query::PortInfo(port)),
        };
        let via = via.or_else(|| self.via(&p.route));
        self.topo.failures.push(Failure {
            via,
            node: node.map(|i| self.topo.nodes[i].guid),
            route: p.route,
            query,
            reason,
        });
    }

    /// The node and port the route's last hop leaves from, if that node is known.
    fn via(&self, route: &[u8]) -> Option<(u64, u8)> {
        let (&last, parent) = route.split_last()?;
        self.topo
            .nodes
            .iter()
            .find(|n| n.route == parent)
            .map(|n| (n.guid, last))
    }

    fn handle(&mut self, p: Pending, data: &[u8; smp::DATA_LEN]) {
        match p.job {
            Job::NodeInfo { route, from } => self.node_info(route, from, data),
            Job::NodeDesc { node } => {
                let end = data.iter().position(|&c| c == 0).unwrap_or(data.len());
                self.topo.nodes[node].desc = String::from_utf8_lossy(&data[..end]).into_owned();
            }
            Job::PortInfo { node, port } => self.port_info(node, port, data),
        }
    }

    fn node_info(&mut self, route: Vec<u8>, from: Option<(usize, u8)>, data: &[u8]) {
        let info = node_info::Packet::new_unchecked(data);
        let (guid, entry) = (info.node_guid(), info.local_port_num());
        let known = self.topo.index.get(&guid).copied();
        let idx = match known {
            Some(i) => i,
            None => self.topo.push(Node {
                guid,
                node_type: info.node_type(),
                num_ports: info.num_ports(),
                sys_image_guid: info.sys_image_guid(),
                vendor_id: info.vendor_id(),
                device_id: info.device_id(),
                revision: info.revision(),
                desc: String::new(),
                route: route.clone(),
                ports: Default::default(),
            }),
        };
        let switch = info.node_type() == NodeType::Switch;
        // A switch's port GUID is its node's on every port; a CA port's its own.
        self.topo.nodes[idx].ports.entry(entry).or_default().guid = info.port_guid();
        if let Some((from, out)) = from {
            let from_guid = self.topo.nodes[from].guid;
            self.topo.nodes[from].ports.entry(out).or_default().remote = Some((guid, entry));
            self.topo.nodes[idx].ports.entry(entry).or_default().remote = Some((from_guid, out));
        }
        if known.is_some() {
            if !switch {
                // Another port of a known CA, reached by another route: read it there.
                self.queue.push_back(Pending {
                    job: Job::PortInfo {
                        node: idx,
                        port: entry,
                    },
                    route,
                    lid: None,
                    dr_only: false,
                });
            }
            return;
        }
        if switch {
            // Port 0 first: its LID can carry the rest (see `lid_for`).
            self.enqueue(Job::PortInfo { node: idx, port: 0 });
            self.enqueue(Job::NodeDesc { node: idx });
            for port in 1..=info.num_ports() {
                self.enqueue(Job::PortInfo { node: idx, port });
            }
        } else {
            self.enqueue(Job::NodeDesc { node: idx });
            self.enqueue(Job::PortInfo {
                node: idx,
                port: entry,
            });
        }
    }

    fn port_info(&mut self, node: usize, port: u8, data: &[u8]) {
        let pi = port_info::Packet::new_unchecked(data);
        let n = &mut self.topo.nodes[node];
        let switch = n.is_switch();
        let lid = if switch && port != 0 {
            // Switch ports other than 0 carry no LID of their own.
            n.ports.get(&0).map_or(0, |p| p.lid)
        } else {
            pi.lid()
        };
        let guid = n.ports.get(&0).map_or(0, |p| p.guid);
        let rec = n.ports.entry(port).or_default();
        rec.lid = lid;
        rec.lmc = pi.lmc();
        rec.state = pi.port_state_raw();
        rec.width = pi.link_width_active();
        rec.speed = pi.link_speed_active();
        rec.speed_ext = pi.link_speed_ext_active();
        if switch && rec.guid == 0 {
            rec.guid = guid;
        }
        let up = rec.state >= u8::from(port_info::PortState::Init);
        let crossed = rec.remote.is_some();
        if switch && port == 0 {
            // Port 0's LID is every port's: fill in those read before it.
            for p in n.ports.values_mut() {
                p.lid = lid;
            }
        }
        // Look behind every port that is up, but not back where we came from, and
        // only out of a switch or out of the local CA.
        let forwards = switch || n.route.is_empty();
        if port == 0
            || !up
            || crossed
            || !forwards
            || n.route.len() >= usize::from(self.config.max_hops)
        {
            return;
        }
        let mut route = n.route.clone();
        route.push(port);
        self.queue.push_back(Pending {
            job: Job::NodeInfo {
                route: route.clone(),
                from: Some((node, port)),
            },
            route,
            lid: None,
            dr_only: false,
        });
    }
}
