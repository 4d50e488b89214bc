//! The built-in subnet manager: a master SM that lives at one CA port of the
//! fabric and configures the subnet the way OpenSM does, with directed-route
//! SMPs that cross the links and reach each node's SMA (so the SMAs' SubnSet
//! rules, M_Key checks and link faults apply to it as to any SM).
//!
//! A sweep discovers the nodes (NodeInfo, PortInfo, NodeDescription), gives
//! every CA port and switch a LID (the one the fabric's description planned,
//! as OpenSM honours its guid2lid file), computes min-hop routes, writes
//! SwitchInfo:LinearFDBTop and the LFT blocks, arms then activates every linked
//! port, and publishes what it read as a [`SubnetDb`] snapshot for the SA.
//!
//! Its SMPs carry TIDs tagged [`TID_TAG`]; their responses are taken off at the
//! SM's port (see [`Sm::catch`]) before they would reach the port's owner. The
//! walk of an SMP through the fabric is synchronous, so a response is there
//! when `originate` returns, or it was lost (the SM then retries).

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use super::subnet_db::{NodeEntry, PortEntry, SubnetDb};
use super::{lock, read, write, FabricInner, GID_PREFIX};
use crate::discover::{Config, Learned, Reason, Walker};
use crate::transport::sim::Pkt;
use crate::wire::mad::{self, MadStatus, Method, MgmtClass};
use crate::wire::smp::{self, lft, node_desc, node_info, pkey_table, port_info, switch_info};
use crate::wire::smp::{node_info::NodeType, port_info::PortState, sm_info, AttrId};
use crate::wire::MAD_SIZE;
use crate::{Error, Result};

/// High bits of the built-in SM's TIDs ("vmS").
pub(crate) const TID_TAG: u64 = 0x766d_5300_0000_0000;
const TID_TAG_MASK: u64 = 0xffff_ff00_0000_0000;
/// Tries per SMP before the SM gives up on it (a link fault may lose it).
const TRIES: u32 = 4;
/// The built-in SM's priority in SMInfo (OpenSM's default).
pub(crate) const PRIORITY: u8 = 0;

/// The last unicast LID (0xBFFF): a subnet has 49,151 of them, 1..=0xBFFF.
pub(crate) const LAST_UNICAST_LID: u16 = 0xbfff;

/// What the fabric's description tells the SM, as OpenSM's guid2lid and guid2mkey files.
#[derive(Debug, Default)]
pub(crate) struct Plan {
    /// Port GUID → the LID to give it.
    pub(crate) lids: HashMap<u64, u16>,
    /// Port GUID → its M_Key.
    pub(crate) mkeys: HashMap<u64, u64>,
}

/// What one sweep did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SweepStats {
    /// Nodes found.
    pub nodes: usize,
    /// Of which switches.
    pub switches: usize,
    /// LIDs given.
    pub lids: usize,
    /// Ports found (CA ports, switches' port 0) left without a LID: the unicast LIDs
    /// (49,151) ran out, as OpenSM reports "no available LID" and leaves them unaddressed.
    pub no_lid: usize,
    /// SMPs sent (retries included).
    pub smps: u64,
    /// SMPs that got no answer after every try, or an error status.
    pub failed: u64,
}

/// The built-in SM's seat and state, kept in the fabric.
#[derive(Debug)]
pub(crate) struct Sm {
    /// The CA port it runs on (None: a fabric with no CA has no SM).
    seat: Option<(usize, u8)>,
    plan: Plan,
    /// The port whose owner holds the SM role (issm open), if any.
    owner: Mutex<Option<(usize, u8)>>,
    /// The built-in SM is master: it has swept and no application holds the role.
    master: AtomicBool,
    sweeping: Mutex<()>,
    inbox: Mutex<Vec<Pkt>>,
    next_tid: AtomicU64,
    act_count: AtomicU32,
    db: RwLock<Arc<SubnetDb>>,
    /// The last sweep's [`SweepStats::no_lid`].
    no_lid: std::sync::atomic::AtomicUsize,
}

impl Sm {
    pub(crate) fn new(seat: Option<(usize, u8)>, plan: Plan) -> Sm {
        Sm {
            seat,
            plan,
            owner: Mutex::new(None),
            master: AtomicBool::new(false),
            sweeping: Mutex::new(()),
            inbox: Mutex::new(Vec::new()),
            next_tid: AtomicU64::new(1),
            act_count: AtomicU32::new(0),
            db: RwLock::new(Arc::new(SubnetDb::default())),
            no_lid: std::sync::atomic::AtomicUsize::new(0),
        }
    }

    /// The last sweep's count of ports left without a LID (the LIDs ran out).
    pub(crate) fn no_lid(&self) -> usize {
        self.no_lid.load(Ordering::Relaxed)
    }

    /// Whether the built-in SM is master now.
    pub(crate) fn is_master(&self) -> bool {
        self.master.load(Ordering::Acquire)
    }

    /// The built-in SM's port, while it is master.
    pub(crate) fn master_seat(&self) -> Option<(usize, u8)> {
        self.seat.filter(|_| self.is_master())
    }

    pub(crate) fn db(&self) -> Arc<SubnetDb> {
        read(&self.db).clone()
    }

    /// Take `pkt`, a response arriving at `(node, port)`, if it answers the built-in SM.
    pub(crate) fn catch(&self, node: usize, port: u8, pkt: &Pkt) -> bool {
        let tid = mad::Packet::new_unchecked(&pkt.mad[..]).tid();
        let mine = self.seat == Some((node, port)) && tid & TID_TAG_MASK == TID_TAG;
        if mine {
            lock(&self.inbox).push(pkt.clone());
        }
        mine
    }

    /// SMInfo as the master SM answers it at its port, if the built-in SM is master there.
    pub(crate) fn sm_info(&self, fabric: &FabricInner, node: usize, port: u8) -> Option<[u8; 64]> {
        (self.master_seat() == Some((node, port))).then(|| {
            let mut d = [0u8; 64];
            let mut p = sm_info::Packet::new_unchecked(&mut d[..]);
            p.set_guid(fabric.nodes[node].port_guid(port));
            p.set_act_count(self.act_count.load(Ordering::Relaxed));
            p.set_priority_state(PRIORITY, sm_info::SmState::Master);
            d
        })
    }

    /// The owner of `(node, port)` takes (`on`) or gives back the SM role.
    pub(crate) fn set_owner(
        &self,
        fabric: &FabricInner,
        node: usize,
        port: u8,
        on: bool,
    ) -> Result<()> {
        {
            let mut owner = lock(&self.owner);
            match (*owner, on) {
                (Some(o), true) if o != (node, port) => {
                    return Err(Error::AddressInUse("another port holds the SM role".into()))
                }
                (Some(o), false) if o != (node, port) => return Ok(()),
                (None, false) => return Ok(()),
                _ => {}
            }
            *owner = on.then_some((node, port));
            self.master.store(false, Ordering::Release);
        }
        let _sweeping = lock(&self.sweeping);
        if let Some((n, p)) = self.seat {
            fabric.nodes[n].conf.write().ports[usize::from(p)].is_sm = !on;
        }
        fabric.nodes[node].conf.write().ports[usize::from(port)].is_sm = on;
        if on {
            *write(&self.db) = Arc::new(SubnetDb::default());
            return Ok(());
        }
        drop(_sweeping);
        self.sweep(fabric).map(|_| ())
    }

    /// One full sweep; see the module docs.
    pub(crate) fn sweep(&self, fabric: &FabricInner) -> Result<SweepStats> {
        let _sweeping = lock(&self.sweeping);
        if lock(&self.owner).is_some() {
            return Err(Error::AddressInUse(
                "an application holds the SM role".into(),
            ));
        }
        let (node, port) = self
            .seat
            .ok_or(Error::Unsupported("no CA to run an SM on"))?;
        fabric.nodes[node].conf.write().ports[usize::from(port)].is_sm = true;
        let mut s = Sweep {
            sm: self,
            fabric,
            seat: (node, port),
            found: Vec::new(),
            by_guid: HashMap::new(),
            stats: SweepStats::default(),
        };
        s.discover()?;
        let (lids, no_lid) = s.assign_lids();
        s.stats.no_lid = no_lid;
        self.no_lid.store(no_lid, Ordering::Relaxed);
        let lfts = s.routes(&lids);
        let sm_lid = lids.iter().find(|l| l.1 == (0, port)).map_or(0, |l| l.0);
        s.program(&lids, &lfts, sm_lid);
        let db = s.database(&lfts, sm_lid);
        s.stats.lids = lids.len();
        *write(&self.db) = Arc::new(db);
        self.act_count.fetch_add(1, Ordering::Relaxed);
        self.master.store(true, Ordering::Release);
        Ok(s.stats)
    }
}

/// A node as the sweep found it.
#[derive(Debug)]
struct Found {
    node_info: [u8; node_info::LEN],
    desc: [u8; node_desc::LEN],
    switch: bool,
    num_ports: u8,
    /// The DR initial path (hops 1.., the first being the SM's port) to reach each
    /// port: a switch keeps one, at index 0, for all its ports.
    paths: Vec<Option<Vec<u8>>>,
    port_info: Vec<Option<[u8; port_info::LEN]>>,
    peers: Vec<Option<(usize, u8)>>,
    switch_info: Option<[u8; switch_info::LEN]>,
    pkeys: Vec<Vec<u16>>,
}

impl Found {
    fn guid(&self) -> u64 {
        node_info::Packet::new_unchecked(&self.node_info[..]).node_guid()
    }

    fn port_guid(&self, port: u8) -> u64 {
        self.guid() + if self.switch { 0 } else { u64::from(port) }
    }

    /// The path to `port` (a switch: to the switch).
    fn path(&self, port: u8) -> Option<&Vec<u8>> {
        let at = if self.switch { 0 } else { usize::from(port) };
        self.paths.get(at)?.as_ref()
    }
}

struct Sweep<'a> {
    sm: &'a Sm,
    fabric: &'a FabricInner,
    seat: (usize, u8),
    found: Vec<Found>,
    by_guid: HashMap<u64, usize>,
    stats: SweepStats,
}

/// A LID, the (found node, port) that gets it, and that port's GUID.
type LidAt = (u16, (usize, u8), u64);

impl Sweep<'_> {
    /// One directed-route SMP along `path` (the initial path's hops 1..; empty: the
    /// SM's own node); the response data.
    fn smp(
        &mut self,
        path: &[u8],
        method: Method,
        attr: AttrId,
        modifier: u32,
        mkey: u64,
        data: &[u8],
    ) -> Option<[u8; 64]> {
        if path.len() > usize::from(smp::MAX_HOPS) {
            return None;
        }
        let (node, port) = self.seat;
        for _ in 0..TRIES {
            self.stats.smps += 1;
            let tid = TID_TAG | self.sm.next_tid.fetch_add(1, Ordering::Relaxed);
            let mut m = [0u8; MAD_SIZE];
            mad::Repr {
                base_version: 1,
                mgmt_class: MgmtClass::SubnDirectedRoute,
                class_version: 1,
                method,
                status: MadStatus::OK,
                class_specific: 0,
                tid,
                attr_id: attr.into(),
                attr_mod: modifier,
            }
            .emit(&mut mad::Packet::new_unchecked(&mut m[..]));
            let mut p = smp::Packet::new_unchecked(&mut m[..]);
            p.set_hop_count(path.len() as u8);
            // The sender's SMI has handled hop 0, as the kernel's does before QP0 sends.
            p.set_hop_pointer(1);
            p.set_m_key(mkey);
            p.set_dr_slid(smp::PERMISSIVE_LID);
            p.set_dr_dlid(smp::PERMISSIVE_LID);
            p.initial_path_mut()[1..=path.len()].copy_from_slice(path);
            p.data_mut()[..data.len()].copy_from_slice(data);
            let pkt = Pkt::smp(m, self.fabric.nodes[node].lid(port));
            self.fabric.originate(node, port, pkt, Duration::ZERO);
            let answer = {
                let mut inbox = lock(&self.sm.inbox);
                let at = inbox
                    .iter()
                    .position(|r| mad::Packet::new_unchecked(&r.mad[..]).tid() == tid);
                let answer = at.map(|i| inbox.swap_remove(i));
                inbox.clear();
                answer
            };
            if let Some(r) = answer {
                let p = smp::Packet::new_unchecked(&r.mad[..]);
                if p.smp_status().0 & !smp::DIRECTION_BIT != 0 {
                    break;
                }
                let mut d = [0u8; 64];
                d.copy_from_slice(p.data());
                return Some(d);
            }
        }
        self.stats.failed += 1;
        None
    }

    fn mkey_of(&self, port_guid: u64) -> u64 {
        self.sm.plan.mkeys.get(&port_guid).copied().unwrap_or(0)
    }

    /// NodeInfo of whatever is at the end of `path`, before the SM knows its GUID
    /// (so its M_Key): each key the SM was given, then none.
    fn node_info(&mut self, path: &[u8]) -> Option<[u8; 64]> {
        let mut keys: Vec<u64> = self.sm.plan.mkeys.values().copied().collect();
        keys.sort_unstable();
        keys.dedup();
        keys.push(0);
        keys.into_iter()
            .find_map(|key| self.smp(path, Method::Get, AttrId::NodeInfo, 0, key, &[]))
    }

    /// Discovery from the SM's port by the tree's one directed-route walker
    /// ([`Walker`]), driven one SMP at a time through the fabric; the SM keeps
    /// the attributes as read, each CA port's path, and the links.
    fn discover(&mut self) -> Result<()> {
        let own = &self.fabric.nodes[self.seat.0];
        let (own_guid, own_key) = (own.guid, self.mkey_of(own.port_guid(self.seat.1)));
        // One at a time (the fabric answers before `originate` returns), by
        // directed route only (LIDs are what the SM is about to hand out).
        let config = Config {
            window: 1,
            per_node: 1,
            lid_routing: false,
            ..Config::default()
        };
        let mut walker = Walker::new(&config);
        while let Some(r) = walker.next_request() {
            let (method, attr, modifier) = (Method::Get, r.attr, r.attr_mod);
            let data = match r.node {
                None if r.route.is_empty() => self.smp(&[], method, attr, 0, own_key, &[]),
                None => self.node_info(&r.route),
                Some(i) => {
                    let f = &self.found[i];
                    let port = match attr {
                        AttrId::PortInfo => r.attr_mod as u8,
                        _ if f.switch => 0,
                        _ => f.paths.iter().position(Option::is_some).unwrap_or(1) as u8,
                    };
                    let mkey = self.mkey_of(f.port_guid(port));
                    self.smp(&r.route, method, attr, modifier, mkey, &[])
                }
            };
            let Some(d) = data else {
                // An error status or every try lost: the walker notes it and goes on.
                walker.answer(r.id, Err(Reason::Timeout));
                continue;
            };
            match walker.answer(r.id, Ok(&d)) {
                Some(Learned::NodeInfo { node, port, new }) => {
                    if new {
                        debug_assert_eq!(node, self.found.len());
                        self.add(d, r.route);
                    } else if !self.found[node].switch {
                        // Another port of a known CA: the path that reaches it.
                        if let Some(slot @ None) = self.found[node].paths.get_mut(usize::from(port))
                        {
                            *slot = Some(r.route);
                        }
                    }
                }
                Some(Learned::PortInfo { node, port }) => {
                    self.found[node].port_info[usize::from(port)] =
                        d[..port_info::LEN].try_into().ok();
                }
                Some(Learned::NodeDesc { node }) => {
                    self.found[node].desc.copy_from_slice(&d[..node_desc::LEN]);
                }
                None => {}
            }
        }
        if self.found.is_empty() {
            return Err(Error::Io(std::io::Error::other(
                "the SM's own node does not answer",
            )));
        }
        debug_assert_eq!(self.found[0].guid(), own_guid);
        // The links, both ends, as the walker crossed them.
        let topo = walker.into_topology();
        for (i, n) in topo.nodes.iter().enumerate() {
            for (&port, p) in &n.ports {
                let Some((guid, peer_port)) = p.remote else {
                    continue;
                };
                let peer = self.by_guid[&guid];
                if let Some(slot) = self.found[i].peers.get_mut(usize::from(port)) {
                    *slot = Some((peer, peer_port));
                }
            }
        }
        self.stats.nodes = self.found.len();
        self.stats.switches = self.found.iter().filter(|f| f.switch).count();
        Ok(())
    }

    /// Record a node first reached along `path` (its NodeInfo says which port).
    fn add(&mut self, info: [u8; 64], path: Vec<u8>) -> usize {
        let ni = node_info::Packet::new_unchecked(&info[..]);
        let switch = ni.node_type() == NodeType::Switch;
        let n = usize::from(ni.num_ports()) + 1;
        let mut f = Found {
            node_info: [0; node_info::LEN],
            desc: [0; node_desc::LEN],
            switch,
            num_ports: ni.num_ports(),
            paths: vec![None; n],
            port_info: vec![None; n],
            peers: vec![None; n],
            switch_info: None,
            pkeys: vec![Vec::new(); n],
        };
        f.node_info.copy_from_slice(&info[..node_info::LEN]);
        let at = if switch {
            0
        } else {
            usize::from(ni.local_port_num()).min(n - 1)
        };
        f.paths[at] = Some(path);
        let index = self.found.len();
        self.by_guid.insert(ni.node_guid(), index);
        self.found.push(f);
        index
    }

    /// Every CA port found and every switch's port 0 gets its planned LID, else the
    /// next one free above all planned LIDs.
    /// Past the last unicast LID the rest get none: returned is how many.
    fn assign_lids(&self) -> (Vec<LidAt>, usize) {
        let mut wanted = Vec::new();
        for (i, f) in self.found.iter().enumerate() {
            if f.switch {
                wanted.push((i, 0));
            } else {
                wanted.extend(
                    (1..=f.num_ports)
                        .filter(|&p| f.path(p).is_some())
                        .map(|p| (i, p)),
                );
            }
        }
        let mut taken = std::collections::HashSet::new();
        let mut next = self.sm.plan.lids.values().max().copied().unwrap_or(0) + 1;
        let mut out = Vec::with_capacity(wanted.len());
        let mut none = 0;
        for (i, p) in wanted {
            let guid = self.found[i].port_guid(p);
            let lid = match self.sm.plan.lids.get(&guid) {
                Some(&l) if taken.insert(l) => l,
                _ => {
                    while next <= LAST_UNICAST_LID && !taken.insert(next) {
                        next += 1;
                    }
                    if next > LAST_UNICAST_LID {
                        none += 1;
                        continue;
                    }
                    next
                }
            };
            out.push((lid, (i, p), guid));
        }
        out.sort_unstable();
        (out, none)
    }

    /// Min-hop LFTs, one per found switch (indexed like `found`; empty for a CA).
    fn routes(&self, lids: &[LidAt]) -> Vec<Vec<u8>> {
        let top = lids.last().map_or(0, |l| l.0);
        let mut lfts = vec![Vec::new(); self.found.len()];
        for (s, sw) in self.found.iter().enumerate().filter(|(_, f)| f.switch) {
            // first[t]: the port of `s` on a shortest path to node t, through switches only.
            let mut first = vec![0u8; self.found.len()];
            let mut seen = vec![false; self.found.len()];
            seen[s] = true;
            let mut queue = VecDeque::new();
            for (port, peer) in sw.peers.iter().enumerate().skip(1) {
                if let Some((t, _)) = *peer {
                    if !seen[t] {
                        seen[t] = true;
                        first[t] = port as u8;
                        queue.push_back(t);
                    }
                }
            }
            while let Some(u) = queue.pop_front() {
                if !self.found[u].switch {
                    continue;
                }
                for &(t, _) in self.found[u].peers.iter().flatten() {
                    if !seen[t] {
                        seen[t] = true;
                        first[t] = first[u];
                        queue.push_back(t);
                    }
                }
            }
            let mut table = vec![lft::NO_PORT; usize::from(top) + 1];
            for &(lid, (t, p), _) in lids {
                table[usize::from(lid)] = if t == s {
                    0
                } else if self.found[t].switch {
                    first[t]
                } else {
                    // The switch on the CA port's link, then out that link.
                    match self.found[t].peers[usize::from(p)] {
                        Some((sw2, swp)) if sw2 == s => swp,
                        Some((sw2, _)) if self.found[sw2].switch && first[sw2] != 0 => first[sw2],
                        _ => lft::NO_PORT,
                    }
                };
            }
            lfts[s] = table;
        }
        lfts
    }

    /// A PortInfo Set along `path`: `pi` as last read, with `edit` applied.
    fn set_port_info(
        &mut self,
        at: usize,
        port: u8,
        edit: impl FnOnce(&mut port_info::Packet<&mut [u8]>),
    ) {
        let Some(mut pi) = self.found[at].port_info[usize::from(port)] else {
            return;
        };
        let Some(path) = self.found[at].path(port).cloned() else {
            return;
        };
        {
            let mut p = port_info::Packet::new_unchecked(&mut pi[..]);
            p.set_port_state(PortState::NoChange);
            p.set_phys_state(port_info::PhysState::NoChange);
            edit(&mut p);
        }
        let mkey = self.mkey_of(self.found[at].port_guid(port));
        let owns_lid = port == 0 || !self.found[at].switch;
        let want = port_info::Packet::new_unchecked(&pi[..]);
        let (lid, sm_lid, state) = (want.lid(), want.master_sm_lid(), want.port_state());
        let applied = |d: &[u8; 64]| {
            let got = port_info::Packet::new_unchecked(&d[..]);
            (!owns_lid || (got.lid(), got.master_sm_lid()) == (lid, sm_lid))
                && (state == PortState::NoChange || got.port_state() == state)
        };
        let attr = AttrId::PortInfo;
        if let Some(d) = self.set_checked(&path, attr, u32::from(port), mkey, &pi, applied) {
            self.found[at].port_info[usize::from(port)] = d[..port_info::LEN].try_into().ok();
        }
    }

    /// A Set whose answer shows it `applied`, else sent again: a link that corrupts
    /// frames (the fault injector has no CRC to drop them) may have changed it on the way.
    fn set_checked(
        &mut self,
        path: &[u8],
        attr: AttrId,
        modifier: u32,
        mkey: u64,
        data: &[u8],
        applied: impl Fn(&[u8; 64]) -> bool,
    ) -> Option<[u8; 64]> {
        for _ in 0..TRIES {
            let d = self.smp(path, Method::Set, attr, modifier, mkey, data)?;
            if applied(&d) {
                return Some(d);
            }
        }
        self.stats.failed += 1;
        None
    }

    /// LIDs, SM LID, LFTs, then every linked port Armed and Active, all by SubnSet.
    fn program(&mut self, lids: &[LidAt], lfts: &[Vec<u8>], sm_lid: u16) {
        for &(lid, (at, port), _) in lids {
            self.set_port_info(at, port, |p| {
                p.set_lid(lid);
                p.set_master_sm_lid(sm_lid);
            });
        }
        let top = lids.last().map_or(0, |l| l.0);
        for (s, table) in lfts.iter().enumerate() {
            if !self.found[s].switch {
                continue;
            }
            let path = self.found[s].path(0).cloned().unwrap_or_default();
            let mkey = self.mkey_of(self.found[s].guid());
            if let Some(mut si) = self.smp(&path, Method::Get, AttrId::SwitchInfo, 0, mkey, &[]) {
                switch_info::Packet::new_unchecked(&mut si[..]).set_linear_fdb_top(top);
                let applied = |d: &[u8; 64]| {
                    switch_info::Packet::new_unchecked(&d[..]).linear_fdb_top() == top
                };
                let si = &si[..switch_info::LEN];
                let set = self.set_checked(&path, AttrId::SwitchInfo, 0, mkey, si, applied);
                self.found[s].switch_info = set.and_then(|d| d[..switch_info::LEN].try_into().ok());
            }
            for (block, ports) in table.chunks(lft::LEN).enumerate() {
                let mut b = [lft::NO_PORT; lft::LEN];
                b[..ports.len()].copy_from_slice(ports);
                let attr = AttrId::LinearFwdTable;
                self.set_checked(&path, attr, block as u32, mkey, &b, |d| *d == b);
            }
        }
        // Init → Armed → Active; a port already further on (a re-sweep) is left as it is.
        for (from, to) in [
            (PortState::Init, PortState::Armed),
            (PortState::Armed, PortState::Active),
        ] {
            for at in 0..self.found.len() {
                for port in 1..=self.found[at].num_ports {
                    let f = &self.found[at];
                    let now = f.port_info[usize::from(port)]
                        .map(|pi| port_info::Packet::new_unchecked(&pi[..]).port_state());
                    if f.peers[usize::from(port)].is_some() && now == Some(from) {
                        self.set_port_info(at, port, |p| p.set_port_state(to));
                    }
                }
            }
        }
        // A switch's port 0 is always up: read it back with its new LID.
        for at in 0..self.found.len() {
            if self.found[at].switch {
                self.set_port_info(at, 0, |_| {});
            }
        }
        for &(_, (at, port), guid) in lids {
            let path = self.found[at].path(port).cloned().unwrap_or_default();
            let mkey = self.mkey_of(guid);
            if let Some(d) = self.smp(
                &path,
                Method::Get,
                AttrId::PKeyTable,
                u32::from(port) << 16,
                mkey,
                &[],
            ) {
                let b = pkey_table::Packet::new_unchecked(&d[..]);
                let mut keys: Vec<u16> = (0..pkey_table::ENTRIES).map(|i| b.pkey(i)).collect();
                while keys.last() == Some(&0) {
                    keys.pop();
                }
                self.found[at].pkeys[usize::from(port)] = keys;
            }
        }
    }

    /// What the sweep read, for the SA.
    fn database(&self, lfts: &[Vec<u8>], sm_lid: u16) -> SubnetDb {
        let nodes = self
            .found
            .iter()
            .zip(lfts)
            .map(|(f, lft)| {
                let first = if f.switch { 0 } else { 1 };
                let ports = (first..=f.num_ports)
                    .filter_map(|p| {
                        Some(PortEntry {
                            port_num: p,
                            port_info: f.port_info[usize::from(p)]?,
                            guid: f.port_guid(p),
                            peer: f.peers[usize::from(p)],
                            pkeys: f.pkeys[usize::from(p)].clone(),
                        })
                    })
                    .collect();
                NodeEntry {
                    node_info: f.node_info,
                    node_desc: f.desc,
                    switch_info: f.switch_info,
                    ports,
                    lft: lft.clone(),
                }
            })
            .collect();
        SubnetDb {
            nodes,
            sm_lid,
            sm_port_guid: self.fabric.nodes[self.seat.0].port_guid(self.seat.1),
            subnet_prefix: GID_PREFIX,
        }
    }
}
