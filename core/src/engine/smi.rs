//! Directed-route SMP hop handling at a channel adapter: the SMI steps of
//! IBA 14.2.2 ([`crate::wire::smp::dr`]) as an end node applies them.
//!
//! The engine is an end node: it never forwards, so every "intermediate hop"
//! case is a discard. The port-number checks are skipped: the engine does not
//! know which physical port its transport stands for.

use crate::wire::smp::dr::{Smi, Verdict};
use crate::wire::smp::Packet;

/// Fix up the hop pointer of a DR SMP about to leave; false: it cannot be sent from an end node.
pub(crate) fn dr_send(mad: &mut [u8]) -> bool {
    Packet::new_unchecked(mad).smi_send(Smi::END_NODE) == Verdict::Handle
}

/// Check (and fix up) a DR SMP that arrived; false: an end node must discard it.
pub(crate) fn dr_recv(mad: &mut [u8]) -> bool {
    Packet::new_unchecked(mad).smi_recv(Smi::END_NODE) == Verdict::Handle
}
