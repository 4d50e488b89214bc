//! What a simulated CA port refuses before any software sees a frame, as an
//! HCA does: Q_Key and P_Key checks on QP1 (IBA 9.6.1.1, 10.9.3), the SMA's
//! M_Key check (IBA 14.2.4) and their violation counters.

/// M_Key protection of a simulated port (PortInfo:M_Key and M_KeyProtectBits).
///
/// With `key == 0` nothing is checked. Otherwise an SMP the port's SMA answers
/// must carry `key`, or, by `protect_bits` (IBA 14.2.4.1, table "Protection
/// Levels"): 0: a Get succeeds and shows the M_Key; 1: a Get succeeds and shows
/// M_Key 0; 2 and 3: a Get fails. A Set with a wrong key always fails. A failed
/// SMP is discarded without a response and counted in
/// [`PortCounters::mkey_violations`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MkeyConfig {
    /// The port's M_Key (0: no protection).
    pub key: u64,
    /// M_KeyProtectBits (0..=3).
    pub protect_bits: u8,
}

/// What the SMA may do with one SMP under the port's M_Key protection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MkeyVerdict {
    /// Answer, showing the M_Key in PortInfo.
    Pass,
    /// Answer, but PortInfo:M_Key reads 0.
    PassHidden,
    /// Discard and count a violation.
    Fail,
}

impl MkeyConfig {
    /// IBA 14.2.4.1 for an SMP carrying `smp_key` with method `method`.
    pub(crate) fn check(&self, smp_key: u64, is_get: bool) -> MkeyVerdict {
        if self.key == 0 || smp_key == self.key {
            return MkeyVerdict::Pass;
        }
        match (is_get, self.protect_bits) {
            (true, 0) => MkeyVerdict::Pass,
            (true, 1) => MkeyVerdict::PassHidden,
            _ => MkeyVerdict::Fail,
        }
    }
}

/// Frames a simulated CA port refused, by reason (PortInfo's violation counters, and
/// receive-queue overflows; read with [`super::Fabric::port_counters`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PortCounters {
    /// QP1 frames whose P_Key matches no entry of the port's P_Key table.
    pub pkey_violations: u64,
    /// QP1 frames whose Q_Key is not the GSI Q_Key 0x80010000.
    pub qkey_violations: u64,
    /// SMPs discarded by the SMA's M_Key check.
    pub mkey_violations: u64,
    /// Frames dropped because the open port already held
    /// [`crate::transport::sim::RECV_QUEUE_DEPTH`] frames its owner had not
    /// received (an HCA's receive-queue overflow; mlx5's `out_of_buffer`). No
    /// PortInfo or PMA field carries it: IBA's PortRcvErrors counts link-level
    /// buffer overruns, not a QP's.
    pub rcv_queue_overflows: u64,
}

/// Whether two P_Keys let their holders talk (IBA 10.9.3): same partition (low
/// 15 bits), not the invalid P_Key, and at least one of them a full member.
pub(crate) fn pkey_match(a: u16, b: u16) -> bool {
    let (pa, pb) = (a & 0x7fff, b & 0x7fff);
    pa != 0 && pa == pb && (a | b) & 0x8000 != 0
}

/// The index of the first entry of `table` that accepts `pkey`.
pub(crate) fn pkey_index(table: &[u16], pkey: u16) -> Option<u16> {
    table
        .iter()
        .position(|&entry| pkey_match(entry, pkey))
        .and_then(|i| u16::try_from(i).ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pkey_membership_rules() {
        assert!(pkey_match(0xffff, 0xffff));
        assert!(pkey_match(0xffff, 0x7fff)); // full member talks to limited
        assert!(!pkey_match(0x7fff, 0x7fff)); // two limited members do not
        assert!(!pkey_match(0x8001, 0x8002));
        assert!(!pkey_match(0x8000, 0x8000)); // the invalid P_Key
        assert_eq!(pkey_index(&[0xffff, 0x8005], 0x0005), Some(1));
        assert_eq!(pkey_index(&[0xffff], 0x8005), None);
    }

    #[test]
    fn mkey_protection_levels() {
        let open = MkeyConfig::default();
        assert_eq!(open.check(7, false), MkeyVerdict::Pass);
        for bits in 0..4 {
            let m = MkeyConfig {
                key: 0x1234,
                protect_bits: bits,
            };
            assert_eq!(m.check(0x1234, true), MkeyVerdict::Pass);
            assert_eq!(m.check(0x1234, false), MkeyVerdict::Pass);
            assert_eq!(m.check(9, false), MkeyVerdict::Fail);
            let get = match bits {
                0 => MkeyVerdict::Pass,
                1 => MkeyVerdict::PassHidden,
                _ => MkeyVerdict::Fail,
            };
            assert_eq!(m.check(9, true), get, "protect bits {bits}");
        }
    }
}
