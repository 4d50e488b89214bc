//! What an SM can change in a simulated node, through its SMA's SubnSet: per
//! port the LID, master SM LID, port state, M_Key and P_Key table; per switch
//! the linear and multicast forwarding tables. Nodes start unconfigured (LID 0,
//! linked ports in Init, empty LFT), as after power-on, until an SM sweeps.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

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

/// The fabric's routing epoch: moved on after every change a frame's way through the
/// fabric depends on (a node's configuration, a link's state or faults), so that a way
/// a sending port remembered ([`super::shortcut`]) is not followed once it may be stale.
#[derive(Debug, Default)]
pub(crate) struct Epoch(AtomicU64);

impl Epoch {
    pub(crate) fn now(&self) -> u64 {
        self.0.load(Ordering::Acquire)
    }

    /// After the change is written: whoever read the epoch before it, and then what it
    /// changed, holds an epoch that no longer matches.
    pub(crate) fn advance(&self) {
        self.0.fetch_add(1, Ordering::AcqRel);
    }
}

/// A node's [`NodeConf`] behind its lock. Every write, whatever it changes, moves the
/// fabric's [`Epoch`] on when it ends: there is no other way to write it.
#[derive(Debug)]
pub(crate) struct Conf {
    lock: RwLock<NodeConf>,
    epoch: Arc<Epoch>,
}

impl Conf {
    pub(crate) fn new(epoch: Arc<Epoch>) -> Conf {
        Conf {
            lock: RwLock::new(NodeConf::default()),
            epoch,
        }
    }

    /// Read-lock, ignoring poisoning (as the fabric's other locks).
    pub(crate) fn read(&self) -> RwLockReadGuard<'_, NodeConf> {
        self.lock.read().unwrap_or_else(PoisonError::into_inner)
    }

    /// Write-lock; the epoch moves on when the guard is dropped.
    pub(crate) fn write(&self) -> ConfWrite<'_> {
        ConfWrite {
            guard: Some(self.lock.write().unwrap_or_else(PoisonError::into_inner)),
            epoch: &self.epoch,
        }
    }
}

/// [`Conf::write`]'s guard.
pub(crate) struct ConfWrite<'a> {
    guard: Option<RwLockWriteGuard<'a, NodeConf>>,
    epoch: &'a Epoch,
}

impl core::ops::Deref for ConfWrite<'_> {
    type Target = NodeConf;
    fn deref(&self) -> &NodeConf {
        self.guard.as_deref().expect("held until dropped")
    }
}

impl core::ops::DerefMut for ConfWrite<'_> {
    fn deref_mut(&mut self) -> &mut NodeConf {
        self.guard.as_deref_mut().expect("held until dropped")
    }
}

impl Drop for ConfWrite<'_> {
    fn drop(&mut self) {
        // Unlocked first: a reader that saw the epoch before this advance may have
        // read the old configuration, never the other way round.
        self.guard.take();
        self.epoch.advance();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
