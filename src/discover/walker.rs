//! The directed-route walker: the one breadth-first sweep of the tree, sans-IO.
//!
//! It says which SMP Get to send next ([`Walker::next_request`]: a route or a LID,
//! an attribute and its modifier), is told what came back ([`Walker::answer`]:
//! the data, or why there is none), and builds the [`Topology`] from that. It
//! sends nothing, keeps no clock and starts no thread: timeouts and retries are
//! the driver's (the port engine's, or the embedded SM's), which reports a
//! request it gave up on as [`Reason::Timeout`].
//!
//! Drivers: [`super::discover`] over a [`crate::port::Port`], the embedded SM's
//! sweep through the fabric (synchronously, one request at a time), and
//! `examples/smp_walk` over [`crate::client::Client`].

use std::collections::{HashMap, VecDeque};

use super::{Config, Failure, Node, Progress, Query, Reason, Topology};
use crate::wire::smp::node_info::NodeType;
use crate::wire::smp::{self, node_info, port_info, AttrId};

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

/// An SMP Get the walker wants sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// The walker's name for it, to give back with its answer.
    pub id: u32,
    /// The directed route (out ports, first hop first; empty: the local node).
    pub route: Vec<u8>,
    /// Send it LID-routed to this LID instead ([`Config::lid_routing`]).
    pub lid: Option<u16>,
    /// NodeInfo, NodeDescription or PortInfo.
    pub attr: AttrId,
    /// The attribute modifier (PortInfo: the port).
    pub attr_mod: u32,
    /// The [`Topology::nodes`] index of the node it goes to, when that is known
    /// (None: a NodeInfo probe of whatever is at the end of the route).
    pub node: Option<usize>,
}

/// What an answered request taught, for a driver that keeps more than the
/// [`Topology`] does (the embedded SM keeps the raw attributes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Learned {
    /// NodeInfo of node `node`, reached at its port `port`; `new`: first seen now.
    NodeInfo {
        /// The node's index in [`Topology::nodes`].
        node: usize,
        /// The port the request entered it by.
        port: u8,
        /// Whether the node was first found by this answer.
        new: bool,
    },
    /// NodeDescription of node `node`.
    NodeDesc {
        /// The node's index.
        node: usize,
    },
    /// PortInfo of port `port` of node `node`.
    PortInfo {
        /// The node's index.
        node: usize,
        /// The port.
        port: u8,
    },
}

/// A request waiting to be sent or on the wire.
#[derive(Debug)]
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

/// The sweep's state; see the module docs.
#[derive(Debug)]
pub struct Walker {
    topo: Topology,
    config: Config,
    /// Jobs not yet sent, breadth first.
    queue: VecDeque<Pending>,
    /// Jobs held back by the per-node cap, by route.
    held: HashMap<Vec<u8>, VecDeque<Pending>>,
    /// SMPs on the wire per route.
    busy: HashMap<Vec<u8>, usize>,
    in_flight: HashMap<u32, Pending>,
    next_id: u32,
}

impl Walker {
    /// A walk from the local node, under `config`'s window, per-node cap, hop
    /// limit and LID-routing policy (its timeout and retries are the driver's).
    /// A window or cap of 0 is taken as 1.
    pub fn new(config: &Config) -> Walker {
        let mut config = config.clone();
        config.window = config.window.max(1);
        config.per_node = config.per_node.max(1);
        let mut w = Walker {
            topo: Topology::default(),
            config,
            queue: VecDeque::new(),
            held: HashMap::new(),
            busy: HashMap::new(),
            in_flight: HashMap::new(),
            next_id: 1,
        };
        w.enqueue(Job::NodeInfo {
            route: Vec::new(),
            from: None,
        });
        w
    }

    /// The next SMP to send, if the window and the per-node cap let one go.
    pub fn next_request(&mut self) -> Option<Request> {
        while self.in_flight.len() < self.config.window {
            let mut p = self.queue.pop_front()?;
            let busy = self.busy.get(&p.route).copied().unwrap_or(0);
            if busy >= self.config.per_node {
                self.held.entry(p.route.clone()).or_default().push_back(p);
                continue;
            }
            p.lid = self.lid_for(&p);
            let (attr, attr_mod, node) = match p.job {
                Job::NodeInfo { .. } => (AttrId::NodeInfo, 0, None),
                Job::NodeDesc { node } => (AttrId::NodeDescription, 0, Some(node)),
                Job::PortInfo { node, port } => (AttrId::PortInfo, u32::from(port), Some(node)),
            };
            let id = self.next_id;
            self.next_id = self.next_id.wrapping_add(1).max(1);
            let req = Request {
                id,
                route: p.route.clone(),
                lid: p.lid,
                attr,
                attr_mod,
                node,
            };
            *self.busy.entry(p.route.clone()).or_default() += 1;
            self.topo.smps += 1;
            self.topo.lid_routed += u64::from(p.lid.is_some());
            self.in_flight.insert(id, p);
            return Some(req);
        }
        None
    }

    /// The outcome of request `id`: its data (a MAD status of 0), or why there is
    /// none. What it taught, if anything; an id not in flight (a late answer to a
    /// request already reported) is ignored.
    pub fn answer(
        &mut self,
        id: u32,
        outcome: Result<&[u8; smp::DATA_LEN], Reason>,
    ) -> Option<Learned> {
        let p = self.in_flight.remove(&id)?;
        self.release(&p.route);
        match outcome {
            Ok(data) => Some(self.handle(p, data)),
            Err(reason) => {
                self.fail(p, reason);
                None
            }
        }
    }

    /// Whether the walk is over: nothing left to send and nothing on the wire.
    pub fn is_done(&self) -> bool {
        self.in_flight.is_empty() && self.queue.is_empty()
    }

    /// How far the walk has got.
    pub fn progress(&self) -> Progress {
        Progress {
            nodes: self.topo.nodes.len(),
            smps: self.topo.smps,
            in_flight: self.in_flight.len(),
            queued: self.queue.len() + self.held.values().map(VecDeque::len).sum::<usize>(),
        }
    }

    /// What was found so far.
    pub fn topology(&self) -> &Topology {
        &self.topo
    }

    /// The topology found ([`Topology::smps`] counts the requests handed out).
    pub fn into_topology(self) -> Topology {
        self.topo
    }

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

    fn handle(&mut self, p: Pending, data: &[u8; smp::DATA_LEN]) -> Learned {
        match p.job {
            Job::NodeInfo { route, from } => self.node_info(route, from, data),
            Job::NodeDesc { node } => {
                let end = data.iter().position(|&c| c == 0).unwrap_or(data.len());
                self.topo.nodes[node].desc = String::from_utf8_lossy(&data[..end]).into_owned();
                Learned::NodeDesc { node }
            }
            Job::PortInfo { node, port } => {
                self.port_info(node, port, data);
                Learned::PortInfo { node, port }
            }
        }
    }

    fn node_info(&mut self, route: Vec<u8>, from: Option<(usize, u8)>, data: &[u8]) -> Learned {
        let info = node_info::Packet::new_unchecked(data);
        let (guid, entry) = (info.node_guid(), info.local_port_num());
        let known = self.topo.index.get(&guid).copied();
        let idx = match known {
            Some(i) => i,
            None => self
                .topo
                .push(Node::from_info(&info, String::new(), route.clone())),
        };
        let learned = Learned::NodeInfo {
            node: idx,
            port: entry,
            new: known.is_none(),
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
            return learned;
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
        learned
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::smp::port_info::PortState;

    /// The local CA (GUID 1) at switch 2's port 3; CA 3 at the switch's port 1;
    /// the switch's port 2 leads to a node that never answers.
    fn answer(r: &Request) -> Option<[u8; smp::DATA_LEN]> {
        let node = match r.route.as_slice() {
            [] => 1,
            [1] => 2,
            [1, 1] => 3,
            _ => return None,
        };
        let mut d = [0u8; smp::DATA_LEN];
        if r.attr == AttrId::NodeInfo {
            let mut p = node_info::Packet::new_unchecked(&mut d[..]);
            p.set_node_guid(node);
            p.set_port_guid(node);
            let switch = node == 2;
            p.set_node_type(if switch {
                NodeType::Switch
            } else {
                NodeType::Ca
            });
            p.set_num_ports(if switch { 3 } else { 1 });
            p.set_local_port_num(if switch { 3 } else { 1 });
        } else if r.attr == AttrId::PortInfo {
            port_info::Packet::new_unchecked(&mut d[..]).set_port_state(PortState::Active);
        }
        Some(d)
    }

    #[test]
    fn walks_under_the_window_and_names_what_failed() {
        let config = Config {
            window: 2,
            per_node: 2,
            ..Config::default()
        };
        let mut w = Walker::new(&config);
        let mut out: Vec<Request> = Vec::new();
        let mut probed = Vec::new();
        while !w.is_done() {
            while let Some(r) = w.next_request() {
                if r.attr == AttrId::NodeInfo {
                    probed.push(r.route.clone());
                }
                out.push(r);
            }
            assert!(out.len() <= 2, "window of 2: {out:?}");
            let r = out.remove(0);
            match answer(&r) {
                Some(d) => w.answer(r.id, Ok(&d)),
                None => w.answer(r.id, Err(Reason::Timeout)),
            };
        }
        let topo = w.into_topology();
        let guids: Vec<u64> = topo.nodes.iter().map(|n| n.guid).collect();
        assert_eq!(guids, [1, 2, 3]);
        assert_eq!(topo.links(), [((1, 1), (2, 3)), ((2, 1), (3, 1))]);
        assert_eq!(topo.failures.len(), 1, "{:?}", topo.failures);
        let f = &topo.failures[0];
        assert_eq!(
            (f.query, f.via, f.route.as_slice()),
            (Query::NodeInfo, Some((2, 2)), &[1, 2][..])
        );
        // The switch's port 3 leads back where the walk came from: not probed again.
        assert_eq!(probed, [vec![], vec![1], vec![1, 1], vec![1, 2]]);
    }
}
