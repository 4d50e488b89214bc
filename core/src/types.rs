//! Small value types shared by every layer.

/// One of a port's two management queue pairs.
///
/// On the sim and ibsim transports these are the real QP0 and QP1. On the
/// verbs transport the GSI side is vmad's own UD QP (see the crate docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Qp {
    /// QP0: subnet management (SMPs, classes 0x01 and 0x81), Q_Key 0.
    Smi,
    /// QP1: general services (GMPs), Q_Key 0x80010000.
    Gsi,
}

impl Qp {
    /// The QP number (0 or 1).
    pub fn qpn(self) -> u32 {
        match self {
            Qp::Smi => 0,
            Qp::Gsi => 1,
        }
    }

    /// The QP a management class travels on.
    pub fn for_class(mgmt_class: u8) -> Qp {
        if mgmt_class == 0x01 || mgmt_class == 0x81 {
            Qp::Smi
        } else {
            Qp::Gsi
        }
    }
}

/// The Q_Key of QP1 (GSI), a controlled Q_Key.
pub const GSI_QKEY: u32 = 0x8001_0000;
/// The default (full-membership) P_Key.
pub const DEFAULT_PKEY: u16 = 0xffff;

/// The global-route part of an address (from or for a GRH).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct GrhAddr {
    /// The remote GID (source on receive, destination on send).
    pub gid: [u8; 16],
    /// Local GID table index used on send.
    pub gid_index: u8,
    /// Hop limit.
    pub hop_limit: u8,
    /// Traffic class.
    pub traffic_class: u8,
    /// Flow label (20 bits).
    pub flow_label: u32,
}

/// A MAD's peer address, in host values: what `ib_mad_addr` carries.
///
/// On receive it names the source; on send, the destination.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct MadAddr {
    /// Remote QP number (24 bits).
    pub qpn: u32,
    /// Q_Key to send with (0 on receive, as the kernel reports).
    pub qkey: u32,
    /// Remote LID (0xffff = permissive, for directed-route SMPs).
    pub lid: u16,
    /// Service level.
    pub sl: u8,
    /// Source path bits.
    pub path_bits: u8,
    /// Global route, when present.
    pub grh: Option<GrhAddr>,
    /// P_Key table index.
    pub pkey_index: u16,
}
