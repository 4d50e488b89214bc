//! The way a GMP from an open CA port to a LID last went, remembered by that port,
//! so that the next GMP to the same LID follows it instead of walking the fabric
//! again.
//!
//! The walk ([`super::route`]) reads the sending node's and every crossed node's
//! configuration, the LID table and each link's faults, one lock at a time, for
//! every frame; a port that sends a stream of MADs to one peer (a client, an RMPP
//! transfer) finds the same way each time. A [`Shortcut`] is that way: the links
//! crossed, the source LID and the P_Key index the receiving port admits the frame
//! with. It is followed only while the fabric's [`Epoch`] is the one it was found at
//! (every configuration write, link state and fault change moves the epoch on), and
//! only for frames whose way nothing else decides: LID-routed GMPs to QP1 of another
//! CA port, not SA MADs (the built-in SA may take those), over links without faults.
//! Following it does what the walk does on that way: the ports' traffic counters and
//! the links' frame counts, the hop count, the source LID, then the receiving node's
//! handling (its PMA, the port's owner, or the answer for a closed port).
//!
//! [`Epoch`]: super::state::Epoch

use core::time::Duration;
use std::sync::atomic::Ordering;

use super::{lock, FabricInner};
use crate::transport::sim::{Pkt, PERMISSIVE};
use crate::types::GSI_QKEY;
use crate::wire::smp::port_info::PortState;

/// Links a remembered way may cross (a fat tree's longest CA-to-CA way is 2 × levels).
const MAX_LINKS: usize = 8;
/// Ways each port remembers, by destination LID and P_Key (replaced in turn).
const KEPT: usize = 4;

/// One link crossed: from `node`'s port `out` to `peer`'s port `in_port`.
#[derive(Debug, Clone, Copy, Default)]
struct Crossing {
    node: u32,
    link: u32,
    peer: u32,
    out: u8,
    in_port: u8,
}

/// A remembered way; see the module docs.
#[derive(Debug, Clone, Copy)]
struct Shortcut {
    epoch: u64,
    dlid: u16,
    pkey: u16,
    /// The sending port's LID, the frame's source.
    slid: u16,
    /// Where the receiving port's P_Key table admits the frame's P_Key.
    pkey_index: u16,
    links: [Crossing; MAX_LINKS],
    len: u8,
    /// The node and port that take the frame.
    dest: (usize, u8),
}

/// The ways one port remembers (its transport keeps them: one thread sends from a
/// port at a time, so reading them takes no lock).
#[derive(Debug, Default)]
pub(crate) struct Shortcuts {
    kept: [Option<Shortcut>; KEPT],
    next: usize,
}

impl FabricInner {
    /// Put `pkt`, from the owner of CA port `(node, port)`, on the fabric: along a
    /// way in `ways` (the port's, kept by its transport) where one holds, else by
    /// walking it (and remembering the way where it may be followed next time).
    pub(crate) fn send_from_port(
        &self,
        node: usize,
        port: u8,
        pkt: &mut Pkt,
        ways: &mut Shortcuts,
    ) {
        if !follows_shortcuts(pkt) {
            self.walk_from(node, port, pkt, Duration::ZERO);
            return;
        }
        let epoch = self.epoch.now();
        let found = ways
            .kept
            .iter()
            .flatten()
            .find(|s| s.epoch == epoch && s.dlid == pkt.dlid && s.pkey == pkt.pkey);
        if let Some(way) = found {
            self.follow(way, pkt);
            return;
        }
        match self.find_way(epoch, node, port, pkt) {
            Some(way) => {
                let at = ways.next;
                ways.kept[at] = Some(way);
                ways.next = (at + 1) % KEPT;
                self.follow(&way, pkt);
            }
            None => self.walk_from(node, port, pkt, Duration::ZERO),
        }
    }

    /// What the walk would do to `pkt` on `way`, without looking anything up again.
    fn follow(&self, way: &Shortcut, pkt: &mut Pkt) {
        pkt.slid = way.slid;
        for c in &way.links[..usize::from(way.len)] {
            pkt.hops += 1;
            self.nodes[c.node as usize].traffic[usize::from(c.out)].sent(pkt.len);
            self.links[c.link as usize]
                .unjudged
                .fetch_add(1, Ordering::Relaxed);
            self.nodes[c.peer as usize].traffic[usize::from(c.in_port)].received(pkt.len);
        }
        pkt.pkey_index = way.pkey_index;
        self.handle_admitted(way.dest.0, way.dest.1, pkt, Duration::ZERO);
    }

    /// The way LID routing takes `pkt` from CA port `(node, port)`, if it ends at
    /// another CA port that admits it with no link, no port state and no access check
    /// on the way that would stop or change it; `None` leaves the frame to the walk.
    /// The same rules as [`FabricInner::walk_from`]'s LID routing, read once.
    fn find_way(&self, epoch: u64, node: usize, port: u8, pkt: &Pkt) -> Option<Shortcut> {
        let here = &self.nodes[node];
        if here.is_switch() {
            return None;
        }
        let (dest_node, _) = self.lid_owner(pkt.dlid)?;
        if dest_node == node {
            return None;
        }
        let mut way = Shortcut {
            epoch,
            dlid: pkt.dlid,
            pkey: pkt.pkey,
            slid: here.lid(port),
            pkey_index: 0,
            links: [Crossing::default(); MAX_LINKS],
            len: 0,
            dest: (dest_node, 0),
        };
        let (mut at, mut out) = (node, port);
        loop {
            let from = &self.nodes[at];
            let link_index = (*from.links.get(usize::from(out))?)?;
            let link = &self.links[link_index];
            if !link.up.load(Ordering::Acquire) || lock(&link.faults).is_active() {
                return None;
            }
            let (peer, in_port) = link.peer(at, out);
            let out_state = from.conf.read().ports.get(usize::from(out))?.state;
            let in_state = self.nodes[peer]
                .conf
                .read()
                .ports
                .get(usize::from(in_port))?
                .state;
            if out_state != PortState::Active || in_state < PortState::Armed {
                return None;
            }
            *way.links.get_mut(usize::from(way.len))? = Crossing {
                node: u32::try_from(at).ok()?,
                link: u32::try_from(link_index).ok()?,
                peer: u32::try_from(peer).ok()?,
                out,
                in_port,
            };
            way.len += 1;
            let there = &self.nodes[peer];
            if !there.is_switch() {
                // A CA takes what is for it and forwards nothing.
                if peer != dest_node {
                    return None;
                }
                let conf = there.conf.read();
                let pkeys = &conf.ports.get(there.mgmt_port(in_port))?.pkeys;
                way.pkey_index = super::access::pkey_index(pkeys, pkt.pkey)?;
                way.dest = (peer, in_port);
                return Some(way);
            }
            if peer == dest_node {
                return None; // For the switch's own port 0: its SMA and PMA.
            }
            out = there.conf.read().route(pkt.dlid).filter(|&o| o != 0)?;
            at = peer;
        }
    }
}

/// Whether `pkt`'s way is LID routing alone: a GMP to QP1 as the port's owner sends
/// it, not yet walked. (An SA MAD for the built-in SA is taken at the SM's port, by
/// the same handling a walk ends in.)
fn follows_shortcuts(pkt: &Pkt) -> bool {
    pkt.dqp == 1
        && pkt.qkey == GSI_QKEY
        && pkt.dlid != PERMISSIVE
        && pkt.dlid != 0
        && pkt.hops == 0
        && !pkt.spoofed
        && !pkt.duplicate
        && !pkt.from_sa
        && !pkt.class().is_smp()
}

#[cfg(test)]
#[path = "shortcut_tests.rs"]
mod tests;
