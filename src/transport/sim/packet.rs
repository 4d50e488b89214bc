//! Frames on the in-process link: [`Pkt`], a frame in flight, read through the wire
//! views by every part of the fabric that handles it (the subnet's router, SMAs, PMAs
//! and SM; the endpoint), and [`RawFrame`], one a port's owner puts on the link as it
//! likes.

use crate::types::{GrhAddr, GSI_QKEY};
use crate::wire::mad::{self, MgmtClass};
use crate::wire::smp;
use crate::wire::MAD_SIZE;

/// The permissive LID.
pub(crate) const PERMISSIVE: u16 = smp::PERMISSIVE_LID;

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

    /// The MAD header.
    pub(crate) fn header(&self) -> mad::Packet<&[u8]> {
        mad::Packet::new_unchecked(&self.mad[..])
    }

    /// The MAD as an SMP.
    pub(crate) fn smp_view(&self) -> smp::Packet<&[u8]> {
        smp::Packet::new_unchecked(&self.mad[..])
    }

    pub(crate) fn class(&self) -> MgmtClass {
        self.header().mgmt_class()
    }

    pub(crate) fn is_dr_smp(&self) -> bool {
        self.class() == MgmtClass::SubnDirectedRoute && self.dqp == 0
    }

    /// A request: no R bit, and not a directed-route SMP on its way back.
    pub(crate) fn is_request(&self) -> bool {
        let response = self.header().method().is_response_bit();
        !(response || self.is_dr_smp() && self.smp_view().is_returning())
    }
}

/// A frame a hostile (or test) node puts on the fabric as it likes, bypassing any
/// engine: see [`super::SimTransport::inject`].
#[derive(Debug, Clone, Copy)]
pub struct RawFrame {
    /// The MAD bytes (the first `len` are sent).
    pub mad: [u8; MAD_SIZE],
    /// Bytes of `mad` to send (at most 256).
    pub len: usize,
    /// Source QP number written in the frame.
    pub src_qpn: u32,
    /// Source LID written in the frame; `None`: the sending port's own LID.
    pub src_lid: Option<u16>,
    /// Destination LID.
    pub dest_lid: u16,
    /// Destination QP number.
    pub dest_qpn: u32,
    /// Q_Key carried in the frame.
    pub qkey: u32,
    /// P_Key carried in the frame.
    pub pkey: u16,
    /// Service level.
    pub sl: u8,
    /// A GRH with this source GID (and the other GRH fields), if any.
    pub grh: Option<GrhAddr>,
}

impl RawFrame {
    /// A well-formed GMP frame to QP1 of `dest_lid`: GSI Q_Key, default P_Key, source QP1.
    pub fn gsi(mad: [u8; MAD_SIZE], dest_lid: u16) -> RawFrame {
        RawFrame {
            mad,
            len: MAD_SIZE,
            src_qpn: 1,
            src_lid: None,
            dest_lid,
            dest_qpn: 1,
            qkey: GSI_QKEY,
            pkey: crate::types::DEFAULT_PKEY,
            sl: 0,
            grh: None,
        }
    }
}
