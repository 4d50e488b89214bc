//! Seeded fault injection on one simulated link.
//!
//! Every frame that crosses a link asks its [`LinkFaults`] what happens to
//! it. The decisions come from a small seeded generator, drawn in a fixed
//! order per frame, so the *sequence* of decisions on a link is the same on
//! every run with the same seed (which frame gets which decision depends on
//! the order threads put frames on the link).

use core::time::Duration;

/// What can go wrong on a link. All probabilities are in `0.0..=1.0`.
///
/// ```
/// use vmad::subnet::FaultConfig;
/// let lossy = FaultConfig { loss: 0.05, seed: 7, ..FaultConfig::default() };
/// assert!(lossy.is_active());
/// assert!(!FaultConfig::default().is_active());
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FaultConfig {
    /// Probability that a frame is dropped.
    pub loss: f64,
    /// Probability that a frame is delivered twice.
    pub dup: f64,
    /// Probability that a frame is held back for [`FaultConfig::hold`], so frames sent after it overtake it.
    pub reorder: f64,
    /// Latency added to every frame crossing the link.
    pub delay: Duration,
    /// Probability that one byte of the frame's MAD is flipped.
    pub corrupt: f64,
    /// How long a reordered frame is held back.
    pub hold: Duration,
    /// Seed of the link's decision generator.
    pub seed: u64,
}

impl Default for FaultConfig {
    fn default() -> Self {
        FaultConfig {
            loss: 0.0,
            dup: 0.0,
            reorder: 0.0,
            delay: Duration::ZERO,
            corrupt: 0.0,
            hold: Duration::from_micros(500),
            seed: 0,
        }
    }
}

impl FaultConfig {
    /// Whether any fault can happen.
    pub fn is_active(&self) -> bool {
        self.loss > 0.0
            || self.dup > 0.0
            || self.reorder > 0.0
            || self.corrupt > 0.0
            || !self.delay.is_zero()
    }
}

/// Counters of one link (both directions together).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LinkStats {
    /// Frames offered to the link.
    pub frames: u64,
    /// Frames dropped.
    pub lost: u64,
    /// Extra copies delivered.
    pub duplicated: u64,
    /// Frames held back so later ones overtake them.
    pub reordered: u64,
    /// Frames with a flipped byte.
    pub corrupted: u64,
}

/// The fate of one frame on a link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Verdict {
    /// Drop it.
    pub(crate) lose: bool,
    /// Deliver a second copy.
    pub(crate) duplicate: bool,
    /// Extra latency for this frame.
    pub(crate) delay: Duration,
    /// Flip byte `.0` of the MAD with mask `.1` (never zero).
    pub(crate) corrupt: Option<(usize, u8)>,
}

impl Verdict {
    pub(crate) const CLEAN: Verdict = Verdict {
        lose: false,
        duplicate: false,
        delay: Duration::ZERO,
        corrupt: None,
    };
}

/// A link's fault state: its configuration, generator and counters.
#[derive(Debug)]
pub(crate) struct LinkFaults {
    config: FaultConfig,
    rng: SplitMix64,
    pub(crate) stats: LinkStats,
}

impl LinkFaults {
    pub(crate) fn new(config: FaultConfig, link_index: usize) -> LinkFaults {
        let salt = (link_index as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        LinkFaults {
            config,
            rng: SplitMix64(config.seed ^ salt),
            stats: LinkStats::default(),
        }
    }

    /// Whether any fault can happen (else every frame is judged clean).
    pub(crate) fn is_active(&self) -> bool {
        self.config.is_active()
    }

    /// Decide what happens to the next frame. `mad_len` bounds the corrupted byte;
    /// a frame that may not be duplicated (already a copy) draws the same numbers.
    pub(crate) fn judge(&mut self, mad_len: usize, may_dup: bool) -> Verdict {
        self.stats.frames += 1;
        if !self.config.is_active() {
            return Verdict::CLEAN;
        }
        // Always draw every number, so one decision never shifts the others.
        let lose = self.rng.chance(self.config.loss);
        let duplicate = self.rng.chance(self.config.dup) && may_dup;
        let reorder = self.rng.chance(self.config.reorder);
        let corrupt = self.rng.chance(self.config.corrupt);
        let pos = self.rng.next() as usize % mad_len.max(1);
        let mask = (self.rng.next() as u8) | 1;
        if lose {
            self.stats.lost += 1;
            return Verdict {
                lose: true,
                ..Verdict::CLEAN
            };
        }
        let mut delay = self.config.delay;
        if reorder {
            self.stats.reordered += 1;
            delay += self.config.hold;
        }
        if duplicate {
            self.stats.duplicated += 1;
        }
        let corrupt = if corrupt && mad_len > 0 {
            self.stats.corrupted += 1;
            Some((pos, mask))
        } else {
            None
        };
        Verdict {
            lose: false,
            duplicate,
            delay,
            corrupt,
        }
    }
}

/// SplitMix64: tiny, seedable, good enough for fault decisions.
#[derive(Debug, Clone)]
struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// True with probability `p`.
    fn chance(&mut self, p: f64) -> bool {
        let x = self.next();
        if p <= 0.0 {
            return false;
        }
        // 53 random bits as a float in [0, 1).
        ((x >> 11) as f64 / (1u64 << 53) as f64) < p
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_decisions() {
        let cfg = FaultConfig {
            loss: 0.2,
            dup: 0.1,
            reorder: 0.1,
            corrupt: 0.1,
            seed: 42,
            ..FaultConfig::default()
        };
        let mut a = LinkFaults::new(cfg, 3);
        let mut b = LinkFaults::new(cfg, 3);
        let va: Vec<_> = (0..500).map(|_| a.judge(256, true)).collect();
        let vb: Vec<_> = (0..500).map(|_| b.judge(256, true)).collect();
        assert_eq!(va, vb);
        assert_eq!(a.stats, b.stats);
        let mut c = LinkFaults::new(FaultConfig { seed: 43, ..cfg }, 3);
        let vc: Vec<_> = (0..500).map(|_| c.judge(256, true)).collect();
        assert_ne!(va, vc);
    }

    #[test]
    fn rates_are_roughly_honoured() {
        let cfg = FaultConfig {
            loss: 0.25,
            seed: 1,
            ..FaultConfig::default()
        };
        let mut f = LinkFaults::new(cfg, 0);
        for _ in 0..10_000 {
            f.judge(256, true);
        }
        assert!((2000..3000).contains(&f.stats.lost), "{:?}", f.stats);
        assert_eq!(f.stats.frames, 10_000);
    }

    #[test]
    fn clean_link_never_faults() {
        let mut f = LinkFaults::new(FaultConfig::default(), 0);
        for _ in 0..1000 {
            assert_eq!(f.judge(256, true), Verdict::CLEAN);
        }
    }
}
