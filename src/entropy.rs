//! Seeds from the operating system, for the driver layer (the engine itself never
//! reads the OS: it takes its seed in [`EngineConfig::rng_seed`]).
//!
//! The kernel hands every agent a TID high word no other agent on the machine
//! holds. vmad's engines draw theirs from their seed, so two ports, or two
//! processes, that started from the same seed would stamp the same high words
//! and could take each other's responses on a shared fabric. Ports therefore
//! seed their engines from here unless a seed was asked for.

use core::sync::atomic::{AtomicU64, Ordering};
use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::engine::EngineConfig;

/// A seed no other call returns: std's per-process random hash keys (from the
/// OS's `getrandom`), the process id, the time and a per-process counter, mixed.
pub(crate) fn os_seed() -> u64 {
    static CALLS: AtomicU64 = AtomicU64::new(0);
    let mut h = RandomState::new().build_hasher();
    h.write_u32(std::process::id());
    h.write_u128(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    h.write_u64(CALLS.fetch_add(1, Ordering::Relaxed));
    h.finish()
}

/// `config` with its seed filled from the OS when it has none.
pub(crate) fn seeded(config: &EngineConfig) -> EngineConfig {
    EngineConfig {
        rng_seed: Some(config.rng_seed.unwrap_or_else(os_seed)),
        ..config.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::{AgentId, AgentSpec, Engine};
    use crate::types::Qp;

    fn first_hi_tid(config: EngineConfig) -> u32 {
        let mut engine = Engine::new(config);
        let agent = engine
            .register(AgentSpec {
                qp: Qp::Gsi,
                mgmt_class: crate::wire::mad::MgmtClass::Perf,
                class_version: 1,
                rmpp_version: 0,
                method_mask: [0; 2],
                oui: 0,
                user_rmpp: false,
            })
            .unwrap();
        assert_eq!(agent, AgentId(0));
        engine.hi_tid(agent).unwrap()
    }

    #[test]
    fn default_configs_get_different_seeds_and_tid_high_words() {
        let (a, b) = (
            seeded(&EngineConfig::default()),
            seeded(&EngineConfig::default()),
        );
        assert_ne!(a.rng_seed, b.rng_seed);
        assert_ne!(first_hi_tid(a), first_hi_tid(b));
    }

    #[test]
    fn an_asked_for_seed_is_kept() {
        let fixed = EngineConfig {
            rng_seed: Some(7),
            ..EngineConfig::default()
        };
        assert_eq!(seeded(&fixed).rng_seed, Some(7));
        assert_eq!(first_hi_tid(seeded(&fixed)), first_hi_tid(seeded(&fixed)));
    }
}
