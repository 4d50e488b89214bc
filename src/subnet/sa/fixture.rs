//! Subnets for the SA's tests and benchmark, built as the SM would fill a
//! [`SubnetDb`] (NodeInfo/PortInfo bytes emitted through the wire views,
//! LIDs in node order, shortest-path LFTs), and a client that talks to an
//! [`SaService`] through a real engine in virtual time.

use std::collections::VecDeque;

use super::SaService;
use crate::engine::{AgentId, AgentSpec, Engine, EngineConfig, Event, RecvMeta, SendRequest};
use crate::subnet::subnet_db::{NodeEntry, PortEntry, SubnetDb};
use crate::time::Instant;
use crate::types::{MadAddr, Qp, GSI_QKEY};
use crate::wire::mad::{self, MadStatus, Method, MgmtClass};
use crate::wire::sa as wsa;
use crate::wire::smp::node_desc;
use crate::wire::smp::node_info::{self, NodeType};
use crate::wire::smp::port_info::{self, PhysState, PortState};
use crate::wire::{rmpp, MAD_SIZE};

/// The subnet prefix of every fixture.
pub(crate) const PREFIX: u64 = 0xfe80_0000_0000_0000;

/// Builds a [`SubnetDb`]: nodes, then links, then [`Builder::finish`].
#[derive(Debug, Default)]
pub(crate) struct Builder {
    nodes: Vec<(String, bool, u8)>,
    links: Vec<((usize, u8), (usize, u8))>,
}

impl Builder {
    /// Add a CA with `ports` ports; returns its index.
    pub(crate) fn ca(&mut self, name: &str, ports: u8) -> usize {
        self.nodes.push((name.to_string(), false, ports));
        self.nodes.len() - 1
    }
    /// Add a switch with `ports` external ports; returns its index.
    pub(crate) fn switch(&mut self, name: &str, ports: u8) -> usize {
        self.nodes.push((name.to_string(), true, ports));
        self.nodes.len() - 1
    }
    /// Join port `pa` of node `a` and port `pb` of node `b`.
    pub(crate) fn link(&mut self, a: usize, pa: u8, b: usize, pb: u8) {
        self.links.push(((a, pa), (b, pb)));
    }

    /// The SubnetDb: LIDs from 1 in node order (a CA's linked ports, a
    /// switch's port 0), every linked port Active at 4x QDR with a 2048-byte MTU,
    /// node 0's first port the SM, LFTs by shortest path.
    pub(crate) fn finish(&self) -> SubnetDb {
        let mut lid = 0u16;
        let mut nodes: Vec<NodeEntry> = Vec::new();
        for (i, (name, switch, nports)) in self.nodes.iter().enumerate() {
            let node_guid = 0x0002_c903_0000_0000 | ((i as u64 + 1) << 8);
            let first = u8::from(!*switch);
            let mut ports = Vec::new();
            for pn in (if *switch { 0 } else { 1 })..=*nports {
                // A CA port the SM never reached (unlinked) gets no LID.
                let linked = self
                    .links
                    .iter()
                    .any(|&(a, b)| a == (i, pn) || b == (i, pn));
                let end = (pn == 0) == *switch && (*switch || linked);
                let my_lid = if end {
                    lid += 1;
                    lid
                } else {
                    0
                };
                ports.push(PortEntry {
                    port_num: pn,
                    port_info: [0; port_info::LEN],
                    guid: if *switch {
                        node_guid
                    } else {
                        node_guid + u64::from(pn)
                    },
                    peer: None,
                    pkeys: vec![0xffff],
                });
                let e = ports.last_mut().expect("just pushed");
                e.port_info = port_info_bytes(my_lid, pn, false);
            }
            let mut info = [0u8; node_info::LEN];
            node_info::Repr {
                base_version: 1,
                class_version: 1,
                node_type: if *switch {
                    NodeType::Switch
                } else {
                    NodeType::Ca
                },
                num_ports: *nports,
                sys_image_guid: node_guid,
                node_guid,
                port_guid: node_guid + u64::from(first),
                partition_cap: 64,
                device_id: 0x1003,
                revision: 0,
                local_port_num: first,
                vendor_id: 0x0002c9,
            }
            .emit(&mut node_info::Packet::new_unchecked(&mut info[..]));
            let mut desc = [0u8; node_desc::LEN];
            node_desc::Repr::from_text(name.as_bytes())
                .emit(&mut node_desc::Packet::new_unchecked(&mut desc[..]));
            nodes.push(NodeEntry {
                node_info: info,
                node_desc: desc,
                switch_info: switch.then_some([0; 20]),
                ports,
                lft: Vec::new(),
            });
        }
        for &((a, pa), (b, pb)) in &self.links {
            for ((n, p), peer) in [((a, pa), (b, pb)), ((b, pb), (a, pa))] {
                let port = port_mut(&mut nodes[n], p);
                port.peer = Some(peer);
                let lid = port_info::Packet::new_unchecked(&port.port_info[..]).lid();
                port.port_info = port_info_bytes(lid, p, true);
            }
        }
        let max_lid = lid;
        fill_lfts(&mut nodes, max_lid);
        SubnetDb {
            nodes,
            sm_lid: 1,
            sm_port_guid: 0x0002_c903_0000_0101,
            subnet_prefix: PREFIX,
        }
    }
}

fn port_mut(n: &mut NodeEntry, num: u8) -> &mut PortEntry {
    n.ports
        .iter_mut()
        .find(|p| p.port_num == num)
        .expect("fixture links name existing ports")
}

/// PortInfo as the SM leaves a port: LID (0 on a switch's external port),
/// SM LID 1, subnet prefix, Active/LinkUp at 4x QDR 2048 if linked.
fn port_info_bytes(lid: u16, port_num: u8, linked: bool) -> [u8; port_info::LEN] {
    let mut b = [0u8; port_info::LEN];
    let mut p = port_info::Packet::new_unchecked(&mut b[..]);
    p.set_gid_prefix(PREFIX);
    p.set_lid(lid);
    p.set_master_sm_lid(1);
    p.set_local_port_num(port_num);
    p.set_link_width_enabled(2);
    p.set_link_width_supported(2);
    p.set_link_width_active(2);
    p.set_link_speed_supported(4);
    p.set_link_speed_active(4);
    p.set_link_speed_enabled(4);
    p.set_mtu_cap(4);
    let up = linked || port_num == 0;
    p.set_port_state(if up {
        PortState::Active
    } else {
        PortState::Down
    });
    p.set_phys_state(if up {
        PhysState::LinkUp
    } else {
        PhysState::Polling
    });
    p.set_neighbor_mtu(if up { 4 } else { 0 });
    b
}

/// Shortest-path LFTs: a breadth-first search from every end port back
/// through the links marks, on each switch, the port toward it.
fn fill_lfts(nodes: &mut [NodeEntry], max_lid: u16) {
    for n in nodes.iter_mut() {
        if n.switch_info.is_some() {
            n.lft = vec![0xff; usize::from(max_lid) + 1];
        }
    }
    let ends: Vec<(usize, u8, u16)> = nodes
        .iter()
        .enumerate()
        .flat_map(|(i, n)| {
            n.ports.iter().filter_map(move |p| {
                let lid = port_info::Packet::new_unchecked(&p.port_info[..]).lid();
                (lid != 0).then_some((i, p.port_num, lid))
            })
        })
        .collect();
    for (node, port, lid) in ends {
        let mut seen = vec![false; nodes.len()];
        let mut queue = VecDeque::new();
        seen[node] = true;
        if nodes[node].switch_info.is_some() {
            nodes[node].lft[usize::from(lid)] = 0;
            queue.push_back(node);
        } else if let Some((peer, peer_port)) = port_mut(&mut nodes[node], port).peer {
            seen[peer] = true;
            if nodes[peer].switch_info.is_some() {
                nodes[peer].lft[usize::from(lid)] = peer_port;
                queue.push_back(peer);
            }
        }
        while let Some(sw) = queue.pop_front() {
            let hops: Vec<(usize, u8)> = nodes[sw].ports.iter().filter_map(|p| p.peer).collect();
            for (next, next_port) in hops {
                if !seen[next] && nodes[next].switch_info.is_some() {
                    seen[next] = true;
                    nodes[next].lft[usize::from(lid)] = next_port;
                    queue.push_back(next);
                }
            }
        }
    }
    // Switch LFTs are filled with the egress port; the BFS above stored
    // the port a switch was *entered* on from the destination's side,
    // which is exactly the port back toward the destination.
}

#[cfg(test)]
/// Two CAs on one 8-port switch: `sm` (LID 1, port 1 to switch port 1),
/// the switch (LID 2), `host` (LID 3, port 1 to switch port 2).
pub(crate) fn two_cas_one_switch() -> SubnetDb {
    let mut b = Builder::default();
    let sm = b.ca("sm", 1);
    let sw = b.switch("sw", 8);
    let host = b.ca("host", 1);
    b.link(sm, 1, sw, 1);
    b.link(host, 1, sw, 2);
    b.finish()
}

/// A two-level fat tree: `leaves` leaf switches with `hosts` CAs each,
/// every leaf linked once to each of `spines` spine switches. Node 0 is the
/// first CA (the SM).
pub(crate) fn fat_tree(leaves: u8, hosts: u8, spines: u8) -> SubnetDb {
    let mut b = Builder::default();
    let mut cas = Vec::new();
    for l in 0..leaves {
        for h in 0..hosts {
            cas.push(b.ca(&format!("h{l}-{h} HCA-1"), 1));
        }
    }
    let leaf: Vec<usize> = (0..leaves)
        .map(|l| b.switch(&format!("leaf{l}"), hosts + spines))
        .collect();
    let spine: Vec<usize> = (0..spines)
        .map(|s| b.switch(&format!("spine{s}"), leaves))
        .collect();
    for l in 0..leaves {
        for h in 0..hosts {
            b.link(
                cas[usize::from(l) * usize::from(hosts) + usize::from(h)],
                1,
                leaf[usize::from(l)],
                h + 1,
            );
        }
        for s in 0..spines {
            b.link(
                leaf[usize::from(l)],
                hosts + s + 1,
                spine[usize::from(s)],
                l + 1,
            );
        }
    }
    b.finish()
}

/// A response as the client reassembled it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Reply {
    /// The MAD header.
    pub(crate) hdr: mad::Repr,
    /// The SA header.
    pub(crate) sa: wsa::Repr,
    /// The whole message (one MAD, or the coalesced RMPP message).
    pub(crate) bytes: Vec<u8>,
}

impl Reply {
    /// The records of the response.
    pub(crate) fn records(&self) -> Vec<Vec<u8>> {
        let p = wsa::Packet::new_unchecked(&self.bytes[..]);
        p.records()
            .map(|r| r.map(<[u8]>::to_vec).collect())
            .unwrap_or_default()
    }
    /// The SA status code.
    #[cfg(test)]
    pub(crate) fn sa_status(&self) -> wsa::SaStatus {
        wsa::SaStatus::of(self.hdr.status)
    }
}

/// An SA client on LID `lid`: its own engine, talking to the SA at the SM's
/// LID in virtual time (10 µs per MAD each way).
#[derive(Debug)]
pub(crate) struct Client {
    /// The client's engine.
    pub(crate) engine: Engine,
    /// Its SA agent (client only).
    pub(crate) agent: AgentId,
    /// Its LID.
    pub(crate) lid: u16,
    /// The current time.
    pub(crate) now: Instant,
    /// Events the client engine produced that no query claimed.
    pub(crate) events: Vec<Event>,
    tid: u64,
}

impl Client {
    /// A client on LID `lid` whose engine allows `max_message` RMPP bytes.
    pub(crate) fn new(lid: u16, max_message: usize) -> Client {
        let mut config = EngineConfig {
            rng_seed: Some(u64::from(lid)),
            ..EngineConfig::default()
        };
        config.rmpp.max_message = max_message;
        let mut engine = Engine::new(config);
        let agent = engine
            .register(AgentSpec {
                qp: Qp::Gsi,
                mgmt_class: MgmtClass::from(0x03),
                class_version: 2,
                rmpp_version: 1,
                method_mask: [0; 2],
                oui: 0,
                user_rmpp: false,
            })
            .expect("register");
        Client {
            engine,
            agent,
            lid,
            now: Instant::ZERO,
            events: Vec::new(),
            tid: 0,
        }
    }

    /// An SA request MAD: `method` of `attr` with `comp_mask` and `record`.
    pub(crate) fn request(
        &mut self,
        method: Method,
        attr: wsa::AttrId,
        comp_mask: u64,
        record: &[u8],
    ) -> Vec<u8> {
        self.tid += 1;
        let mut m = vec![0u8; MAD_SIZE];
        mad::Repr {
            base_version: 1,
            mgmt_class: MgmtClass::SubnAdm,
            class_version: 2,
            method,
            status: MadStatus::OK,
            class_specific: 0,
            tid: self.tid,
            attr_id: attr.into(),
            attr_mod: 0,
        }
        .emit(&mut mad::Packet::new_unchecked(&mut m[..]));
        m[rmpp::OFFSET] = rmpp::VERSION;
        wsa::Repr {
            sm_key: 0,
            attr_offset: wsa::Repr::attr_offset_for(record.len()),
            comp_mask,
        }
        .emit(&mut wsa::Packet::new_unchecked(&mut m[..]));
        m[wsa::DATA_OFFSET..wsa::DATA_OFFSET + record.len()].copy_from_slice(record);
        m
    }

    /// Send `mad` to the SA and drive both sides until its response arrives.
    pub(crate) fn ask(&mut self, sa: &mut SaService, db: &SubnetDb, m: &[u8]) -> Option<Reply> {
        let to = MadAddr {
            qpn: 1,
            qkey: GSI_QKEY,
            lid: db.sm_lid,
            ..MadAddr::default()
        };
        let req = SendRequest {
            addr: to,
            mad: m,
            timeout_ms: 1000,
            retries: 2,
        };
        self.engine.send(self.now, self.agent, req).ok()?;
        let tid = mad::Packet::new_unchecked(m).tid() & 0xffff_ffff;
        self.drive(sa, db);
        let pos = self.events.iter().position(|e| {
            matches!(e, Event::Recv { mad, .. } if mad::Packet::new_unchecked(&mad[..]).tid() & 0xffff_ffff == tid)
        })?;
        let Event::Recv { mad: bytes, .. } = self.events.remove(pos) else {
            return None;
        };
        let hdr = mad::Repr::parse(&mad::Packet::new_checked(&bytes[..]).ok()?).ok()?;
        let sa = wsa::Repr::parse(&wsa::Packet::new_checked(&bytes[..]).ok()?).ok()?;
        Some(Reply { hdr, sa, bytes })
    }

    /// Move MADs both ways at the current time until both sides are quiet.
    pub(crate) fn pump(&mut self, sa: &mut SaService, db: &SubnetDb) {
        let mut buf = [0u8; MAD_SIZE];
        loop {
            let mut moved = false;
            while let Some(tx) = self.engine.poll_transmit(self.now, &mut buf) {
                moved = true;
                let meta = RecvMeta {
                    qp: Qp::Gsi,
                    src: MadAddr {
                        qpn: 1,
                        lid: self.lid,
                        ..MadAddr::default()
                    },
                    local_qpn: None,
                };
                sa.handle_datagram(self.now, meta, &buf[..tx.len], db);
            }
            for (tx, mad) in sa.drain(self.now) {
                moved = true;
                if tx.dest.lid != self.lid {
                    continue; // to another client: this test fabric has one
                }
                let meta = RecvMeta {
                    qp: Qp::Gsi,
                    src: MadAddr {
                        qpn: 1,
                        lid: db.sm_lid,
                        ..MadAddr::default()
                    },
                    local_qpn: None,
                };
                self.engine.handle_datagram(self.now, meta, &mad[..tx.len]);
            }
            while let Some(e) = self.engine.poll_event() {
                self.events.push(e);
            }
            if !moved {
                return;
            }
        }
    }

    /// [`Client::pump`], then advance time to the next deadline and again,
    /// until only deadlines more than 5 s away (the engines' lingering
    /// state) are left. Panics on a livelock.
    pub(crate) fn drive(&mut self, sa: &mut SaService, db: &SubnetDb) {
        for _ in 0..10_000_000 {
            self.pump(sa, db);
            let next = [self.engine.poll_timeout(), sa.poll_timeout()]
                .into_iter()
                .flatten()
                .min();
            match next {
                Some(t) if t <= self.now + core::time::Duration::from_secs(5) => {
                    self.now = t.max(self.now);
                    self.engine.handle_timeout(self.now);
                    sa.handle_timeout(self.now, db);
                }
                _ => return,
            }
        }
        panic!("SA client livelock");
    }
}
