//! The agent table: registration rules (kernel `ib_register_mad_agent`),
//! request routing by class, version, method and OUI, and the TID high words.

use alloc::vec;
use alloc::vec::Vec;

use super::config::SplitMix;
use super::hash::IdMap;
use super::ids::AgentSerial;
use super::{AgentId, AgentSpec};
use crate::types::Qp;
use crate::wire::mad::MgmtClass;
use crate::{Error, Result};

/// Agents per port (kernel `IB_UMAD_MAX_AGENTS`).
pub(crate) const MAX_AGENTS: usize = 32;
/// Class versions at or above this are refused (kernel `MAX_MGMT_VERSION`).
pub(crate) const MAX_CLASS_VERSION: u8 = 0x83;
const HI_TID_LIMIT: u32 = 1 << 24;

#[derive(Debug, Clone)]
pub(crate) struct Agent {
    pub(crate) spec: AgentSpec,
    /// The TID high word stamped on this agent's requests.
    pub(crate) hi_tid: u32,
    /// A serial unique to this registration, so queued work of an agent that
    /// was unregistered (and whose slot was reused) is recognised as stale.
    pub(crate) serial: AgentSerial,
}

impl Agent {
    /// Whether this agent runs RMPP itself in the engine (kernel `ib_mad_kernel_rmpp_agent`).
    pub(crate) fn kernel_rmpp(&self) -> bool {
        self.spec.rmpp_version != 0 && !self.spec.user_rmpp
    }
}

#[derive(Debug)]
pub(crate) struct AgentTable {
    slots: Vec<Option<Agent>>,
    by_hi_tid: IdMap<u32, usize>,
    next_hi_tid: u32,
    next_serial: u64,
}

impl AgentTable {
    pub(crate) fn new(rng: &mut SplitMix) -> AgentTable {
        AgentTable {
            slots: vec![None; MAX_AGENTS],
            by_hi_tid: IdMap::default(),
            next_hi_tid: (rng.next_u64() as u32) % HI_TID_LIMIT,
            next_serial: 1,
        }
    }

    pub(crate) fn get(&self, id: AgentId) -> Option<&Agent> {
        self.slots.get(id.0 as usize).and_then(Option::as_ref)
    }

    /// The agent whose requests carry this TID high word.
    pub(crate) fn by_hi_tid(&self, hi_tid: u32) -> Option<AgentId> {
        self.by_hi_tid.get(&hi_tid).map(|&i| AgentId(i as u32))
    }

    pub(crate) fn register(&mut self, spec: AgentSpec) -> Result<AgentId> {
        validate(&spec)?;
        for agent in self.slots.iter().flatten() {
            if let Some(method) = overlap(&agent.spec, &spec) {
                return Err(Error::MethodInUse {
                    class: u8::from(spec.mgmt_class),
                    version: spec.class_version,
                    method,
                });
            }
        }
        let slot = self
            .slots
            .iter()
            .position(Option::is_none)
            .ok_or(Error::LimitReached("32 agents per port"))?;
        // Cyclic, like the kernel's xa_alloc_cyclic: a fresh agent does not
        // reuse the high word of one just unregistered while its late
        // responses may still arrive.
        let mut hi_tid = self.next_hi_tid;
        while self.by_hi_tid.contains_key(&hi_tid) {
            hi_tid = (hi_tid + 1) % HI_TID_LIMIT;
        }
        self.next_hi_tid = (hi_tid + 1) % HI_TID_LIMIT;
        self.by_hi_tid.insert(hi_tid, slot);
        self.slots[slot] = Some(Agent {
            spec,
            hi_tid,
            serial: AgentSerial(self.next_serial),
        });
        self.next_serial += 1;
        Ok(AgentId(slot as u32))
    }

    pub(crate) fn unregister(&mut self, id: AgentId) -> Result<Agent> {
        let agent = self
            .slots
            .get_mut(id.0 as usize)
            .and_then(Option::take)
            .ok_or(Error::UnknownAgent(id.0))?;
        self.by_hi_tid.remove(&agent.hi_tid);
        Ok(agent)
    }

    /// The agent serving requests of this class, version and method (R bit
    /// ignored), and OUI for vendor range 2 (kernel `find_mad_agent`).
    pub(crate) fn for_request(
        &self,
        class: MgmtClass,
        version: u8,
        method: u8,
        oui: u32,
    ) -> Option<AgentId> {
        let vendor2 = class.is_vendor_range2();
        let method = method & 0x7f;
        self.slots.iter().enumerate().find_map(|(i, a)| {
            let s = &a.as_ref()?.spec;
            let hit = s.mgmt_class == class
                && s.class_version == version
                && (!vendor2 || s.oui == oui)
                && mask_has(&s.method_mask, method);
            hit.then_some(AgentId(i as u32))
        })
    }
}

fn mask_has(mask: &[u64; 2], method: u8) -> bool {
    let m = usize::from(method & 0x7f);
    mask[m / 64] & (1 << (m % 64)) != 0
}

fn validate(spec: &AgentSpec) -> Result<()> {
    let class = spec.mgmt_class;
    if spec.rmpp_version > 1 {
        return Err(Error::InvalidArgument("rmpp_version must be 0 or 1"));
    }
    if spec.class_version >= MAX_CLASS_VERSION {
        return Err(Error::InvalidArgument("class version must be below 0x83"));
    }
    if u8::from(class) == 0 {
        return Err(Error::InvalidArgument("management class 0"));
    }
    // Kernel MAX_MGMT_CLASS (80); 0x81 is aliased to slot 0.
    if u8::from(class) >= 80 && class != MgmtClass::SubnDirectedRoute {
        return Err(Error::InvalidArgument("management class out of range"));
    }
    if class.is_vendor_range2() && spec.oui == 0 {
        return Err(Error::InvalidArgument("vendor range 2 class needs an OUI"));
    }
    if spec.oui > 0x00ff_ffff {
        return Err(Error::InvalidArgument("OUI wider than 24 bits"));
    }
    if spec.rmpp_version != 0 && !class.is_rmpp_class() {
        return Err(Error::InvalidArgument("RMPP on a class that has none"));
    }
    if (spec.qp == Qp::Smi) != class.is_smp() {
        return Err(Error::InvalidArgument("class does not travel on this QP"));
    }
    Ok(())
}

/// The first method both registrations claim for the same class, version (and OUI).
fn overlap(a: &AgentSpec, b: &AgentSpec) -> Option<u8> {
    if a.mgmt_class != b.mgmt_class || a.class_version != b.class_version {
        return None;
    }
    if a.mgmt_class.is_vendor_range2() && a.oui != b.oui {
        return None;
    }
    (0..128u8).find(|&m| mask_has(&a.method_mask, m) && mask_has(&b.method_mask, m))
}
