//! A frame in flight through the simulated fabric, and the SMP constants every
//! node component (router, SMA, PMA, endpoint) reads it with.

use crate::types::GrhAddr;
use crate::wire::MAD_SIZE;

/// The permissive LID.
pub(crate) const PERMISSIVE: u16 = 0xffff;

/// Directed-route SMP fields (IBA 14.2.1.2), absolute MAD offsets.
pub(crate) mod dr {
    use crate::wire::Field;
    pub(crate) const STATUS: Field = 4..6;
    pub(crate) const HOP_PTR: usize = 6;
    pub(crate) const HOP_CNT: usize = 7;
    pub(crate) const DR_SLID: Field = 32..34;
    pub(crate) const DR_DLID: Field = 34..36;
    pub(crate) const INITIAL_PATH: usize = 128;
    pub(crate) const RETURN_PATH: usize = 192;
    /// The D (direction) bit of the status word: set on returning SMPs.
    pub(crate) const DIRECTION: u16 = 0x8000;
    /// Paths hold 64 entries: hop counts are 0..=63.
    pub(crate) const MAX_HOPS: u8 = 63;
}

/// Management class of the directed-route SMPs.
pub(crate) const CLASS_DR: u8 = 0x81;
/// Management class of LID-routed SMPs.
pub(crate) const CLASS_LID: u8 = 0x01;
/// Subnet administration (the SA's class).
pub(crate) const CLASS_SA: u8 = 0x03;

/// A frame in flight, with the LRH/BTH/DETH values a receiver would see.
#[derive(Debug, Clone)]
pub(crate) struct Pkt {
    pub(crate) mad: [u8; MAD_SIZE],
    pub(crate) len: usize,
    pub(crate) slid: u16,
    pub(crate) dlid: u16,
    pub(crate) sqp: u32,
    pub(crate) dqp: u32,
    pub(crate) sl: u8,
    /// The sender's P_Key index; on arrival, the index of the receiving port's
    /// P_Key table entry that accepted the frame.
    pub(crate) pkey_index: u16,
    /// The P_Key carried in the BTH.
    pub(crate) pkey: u16,
    /// The Q_Key carried in the DETH.
    pub(crate) qkey: u32,
    /// The source LID was set by a raw injection: routing must not rewrite it.
    pub(crate) spoofed: bool,
    /// The GRH as the receiver sees it (source GID), if the sender asked for one.
    pub(crate) grh: Option<GrhAddr>,
    /// Links crossed so far.
    pub(crate) hops: u32,
    /// This frame is an injected duplicate: it is never duplicated again, so a
    /// frame crossing n links makes at most n + 1 copies.
    pub(crate) duplicate: bool,
    /// Sent by the in-fabric SA: it goes to the port's owner even at the SM's port
    /// (where a client of the SA may sit too), never back into the SA.
    pub(crate) from_sa: bool,
}

impl Pkt {
    /// An SMP from a local SM (QP0 to QP0, permissive destination).
    pub(crate) fn smp(mad: [u8; MAD_SIZE], slid: u16) -> Pkt {
        Pkt {
            mad,
            len: MAD_SIZE,
            slid,
            dlid: PERMISSIVE,
            sqp: 0,
            dqp: 0,
            sl: 0,
            pkey_index: 0,
            pkey: crate::types::DEFAULT_PKEY,
            qkey: 0,
            spoofed: false,
            grh: None,
            hops: 0,
            duplicate: false,
            from_sa: false,
        }
    }

    pub(crate) fn class(&self) -> u8 {
        self.mad[1]
    }

    pub(super) fn is_dr_smp(&self) -> bool {
        self.class() == CLASS_DR && self.dqp == 0
    }

    pub(super) fn u16_at(&self, f: core::ops::Range<usize>) -> u16 {
        u16::from_be_bytes([self.mad[f.start], self.mad[f.start + 1]])
    }

    pub(super) fn returning(&self) -> bool {
        self.u16_at(dr::STATUS) & dr::DIRECTION != 0
    }
}
