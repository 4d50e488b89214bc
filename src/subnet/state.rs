//! What an SM can change in a simulated node, through its SMA's SubnSet: per
//! port the LID, master SM LID, port state, M_Key and P_Key table; per switch
//! the linear and multicast forwarding tables. Nodes start unconfigured (LID 0,
//! linked ports in Init, empty LFT), as after power-on, until an SM sweeps.

use std::collections::BTreeMap;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

use super::access::MkeyConfig;
use crate::wire::smp::lft;
use crate::wire::smp::port_info::PortState;

/// One port's SM-set state. A switch keeps LID, SM LID, M_Key and P_Keys on port 0
/// only; its other ports keep just their state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PortConf {
    pub(crate) lid: u16,
    pub(crate) sm_lid: u16,
    pub(crate) state: PortState,
    pub(crate) mkey: MkeyConfig,
    pub(crate) pkeys: Vec<u16>,
    /// An SM runs behind this port (PortInfo:CapabilityMask.IsSM): set by the port's
    /// owner (issm), never by SubnSet.
    pub(crate) is_sm: bool,
}

/// A node's SM-set state.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct NodeConf {
    /// By port number (index 0: a switch's management port; unused on a CA).
    pub(crate) ports: Vec<PortConf>,
    /// A switch's linear forwarding table: egress port by LID ([`lft::NO_PORT`]: none).
    pub(crate) lft: Vec<u8>,
    /// SwitchInfo:LinearFDBTop.
    pub(crate) lft_top: u16,
    /// Multicast forwarding table blocks as the SM wrote them, by attribute modifier.
    pub(crate) mft: BTreeMap<u32, [u8; 64]>,
}

impl NodeConf {
    /// Power-on state: no LIDs, linked ports in Init, a switch's port 0 Active.
    pub(crate) fn power_on(is_switch: bool, linked: &[bool]) -> NodeConf {
        let ports = linked
            .iter()
            .enumerate()
            .map(|(p, &up)| PortConf {
                lid: 0,
                sm_lid: 0,
                state: match (p, is_switch, up) {
                    (0, true, _) => PortState::Active,
                    (_, _, true) => PortState::Init,
                    _ => PortState::Down,
                },
                mkey: MkeyConfig::default(),
                pkeys: vec![crate::types::DEFAULT_PKEY],
                is_sm: false,
            })
            .collect();
        NodeConf {
            ports,
            ..NodeConf::default()
        }
    }

    /// The LFT's egress port for `lid`, if the table routes it.
    pub(crate) fn route(&self, lid: u16) -> Option<u8> {
        if lid > self.lft_top {
            return None;
        }
        self.lft
            .get(usize::from(lid))
            .copied()
            .filter(|&p| p != lft::NO_PORT)
    }

    /// Write one 64-entry LFT block.
    pub(crate) fn set_lft_block(&mut self, block: u32, ports: &[u8]) {
        let start = block as usize * lft::LEN;
        if self.lft.len() < start + lft::LEN {
            self.lft.resize(start + lft::LEN, lft::NO_PORT);
        }
        self.lft[start..start + lft::LEN].copy_from_slice(&ports[..lft::LEN]);
    }

    /// One 64-entry LFT block.
    pub(crate) fn lft_block(&self, block: u32) -> [u8; lft::LEN] {
        let mut out = [lft::NO_PORT; lft::LEN];
        let start = block as usize * lft::LEN;
        if let Some(have) = self.lft.get(start..) {
            let n = have.len().min(lft::LEN);
            out[..n].copy_from_slice(&have[..n]);
        }
        out
    }
}

/// A node's [`NodeConf`] under its lock, with what the walk of every frame reads (each
/// port's LID and state) mirrored outside it: the walk loads two atomics where it
/// took the lock three times per frame, each a write to a line the other ports'
/// walks share. Only [`Conf::write`] changes the conf, and it refreshes the mirror.
#[derive(Debug)]
pub(crate) struct Conf {
    lock: RwLock<NodeConf>,
    /// Per port number: the LID that answers for it (a switch's: port 0's) in the low
    /// 16 bits, its state above.
    fast: Vec<AtomicU32>,
    is_switch: bool,
}

impl Conf {
    /// A node of `num_ports` ports with `conf`.
    pub(crate) fn new(num_ports: u8, is_switch: bool, conf: NodeConf) -> Conf {
        let c = Conf {
            lock: RwLock::new(NodeConf::default()),
            fast: (0..=num_ports).map(|_| AtomicU32::new(0)).collect(),
            is_switch,
        };
        *c.write() = conf;
        c
    }

    /// The conf, read-locked (poisoning ignored: a panicking writer leaves a conf an SM
    /// can still read and rewrite).
    pub(crate) fn read(&self) -> RwLockReadGuard<'_, NodeConf> {
        self.lock.read().unwrap_or_else(PoisonError::into_inner)
    }

    /// The conf, write-locked; the mirror is refreshed when the guard drops.
    pub(crate) fn write(&self) -> ConfWrite<'_> {
        ConfWrite {
            conf: self,
            guard: self.lock.write().unwrap_or_else(PoisonError::into_inner),
        }
    }

    /// The LID that answers for `port` (a switch's ports share port 0's); 0 for a port
    /// the node does not have.
    pub(crate) fn lid(&self, port: u8) -> u16 {
        let p = if self.is_switch {
            0
        } else {
            port.clamp(1, self.num_ports())
        };
        self.fast
            .get(usize::from(p))
            .map_or(0, |f| f.load(Ordering::Acquire) as u16)
    }

    /// `port`'s state (Down for a port the node does not have).
    pub(crate) fn state(&self, port: u8) -> PortState {
        self.fast
            .get(usize::from(port))
            .map_or(PortState::Down, |f| {
                PortState::from((f.load(Ordering::Acquire) >> 16) as u8)
            })
    }

    fn num_ports(&self) -> u8 {
        u8::try_from(self.fast.len() - 1).unwrap_or(u8::MAX)
    }
}

/// [`Conf::write`]'s guard.
pub(crate) struct ConfWrite<'a> {
    conf: &'a Conf,
    guard: RwLockWriteGuard<'a, NodeConf>,
}

impl Deref for ConfWrite<'_> {
    type Target = NodeConf;
    fn deref(&self) -> &NodeConf {
        &self.guard
    }
}

impl DerefMut for ConfWrite<'_> {
    fn deref_mut(&mut self) -> &mut NodeConf {
        &mut self.guard
    }
}

impl Drop for ConfWrite<'_> {
    /// Still under the lock: a reader of the conf never sees it ahead of the mirror.
    fn drop(&mut self) {
        let ports = &self.guard.ports;
        for (p, fast) in self.conf.fast.iter().enumerate() {
            let mgmt = if self.conf.is_switch { 0 } else { p.max(1) };
            let lid = ports.get(mgmt).map_or(0, |c| c.lid);
            let state = ports.get(p).map_or(PortState::Down, |c| c.state);
            fast.store(
                u32::from(lid) | u32::from(u8::from(state)) << 16,
                Ordering::Release,
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_walks_mirror_follows_every_write_of_lids_and_states() {
        let ca = Conf::new(2, false, NodeConf::power_on(false, &[false, true, false]));
        assert_eq!(
            (ca.state(1), ca.state(2), ca.state(3)),
            (PortState::Init, PortState::Down, PortState::Down)
        );
        {
            let mut w = ca.write();
            w.ports[1].lid = 7;
            w.ports[1].state = PortState::Active;
            w.ports[2].lid = 9;
        }
        assert_eq!((ca.lid(1), ca.lid(2)), (7, 9));
        // A CA's port 0 and ports past its last answer as its first and last.
        assert_eq!((ca.lid(0), ca.lid(5)), (7, 9));
        assert_eq!(ca.state(1), PortState::Active);
        assert_eq!(ca.read().ports[1].lid, 7);

        // A switch's ports all answer with port 0's LID, each keeps its own state.
        let sw = Conf::new(
            3,
            true,
            NodeConf::power_on(true, &[true, true, false, true]),
        );
        sw.write().ports[0].lid = 1;
        assert_eq!((sw.lid(0), sw.lid(2), sw.lid(3)), (1, 1, 1));
        assert_eq!(
            (sw.state(0), sw.state(2), sw.state(3)),
            (PortState::Active, PortState::Down, PortState::Init)
        );
        *sw.write() = NodeConf::default();
        assert_eq!((sw.lid(2), sw.state(0)), (0, PortState::Down));
    }

    #[test]
    fn lft_routes_only_programmed_lids_up_to_top() {
        let mut c = NodeConf::power_on(true, &[true, true, false]);
        assert_eq!(c.ports[2].state, PortState::Down);
        assert_eq!(c.route(1), None);
        let mut block = [lft::NO_PORT; 64];
        block[1] = 2;
        block[3] = 0;
        c.set_lft_block(0, &block);
        assert_eq!(c.route(1), None, "LinearFDBTop still 0");
        c.lft_top = 3;
        assert_eq!(
            (c.route(1), c.route(2), c.route(3)),
            (Some(2), None, Some(0))
        );
        assert_eq!(c.lft_block(0), block);
        assert_eq!(c.lft_block(5), [lft::NO_PORT; 64]);
    }
}
