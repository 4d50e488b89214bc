//! Directed-route SMP hop handling at a channel adapter (IBA 14.2.2, kernel
//! `smi_handle_dr_smp_send` / `smi_handle_dr_smp_recv` with `is_switch = false`).
//!
//! The engine is an end node: it never forwards, so every "intermediate hop"
//! case is a discard. The port-number checks of the kernel are skipped: the
//! engine does not know which physical port its transport stands for.

const STATUS_HI: usize = 4;
const HOP_PTR: usize = 6;
const HOP_CNT: usize = 7;
const DR_SLID: core::ops::Range<usize> = 32..34;
const DR_DLID: core::ops::Range<usize> = 34..36;
/// Bit 15 of the status word: the SMP is on its way back.
pub(crate) const DIRECTION: u16 = 0x8000;
const MAX_PATH_HOPS: u8 = 64;
const PERMISSIVE: [u8; 2] = [0xff, 0xff];

fn returning(mad: &[u8]) -> bool {
    mad[STATUS_HI] & 0x80 != 0
}

/// Fix up the hop pointer of a DR SMP about to leave; false: it cannot be sent from an end node.
pub(crate) fn dr_send(mad: &mut [u8]) -> bool {
    let (ptr, cnt) = (mad[HOP_PTR], mad[HOP_CNT]);
    if cnt >= MAX_PATH_HOPS {
        return false;
    }
    if !returning(mad) {
        if cnt != 0 && ptr == 0 {
            mad[HOP_PTR] = 1;
            return true;
        }
        if ptr != 0 && ptr < cnt {
            return false;
        }
        if ptr == cnt {
            mad[HOP_PTR] = ptr + 1;
            return mad[DR_DLID] == PERMISSIVE;
        }
        ptr == cnt + 1
    } else {
        if cnt != 0 && ptr == cnt + 1 {
            mad[HOP_PTR] = ptr - 1;
            return true;
        }
        if (2..=cnt).contains(&ptr) {
            return false;
        }
        if ptr == 1 {
            mad[HOP_PTR] = 0;
            return mad[DR_SLID] == PERMISSIVE;
        }
        ptr == 0
    }
}

/// Check (and fix up) a DR SMP that arrived; false: an end node must discard it.
pub(crate) fn dr_recv(mad: &mut [u8]) -> bool {
    let (ptr, cnt) = (mad[HOP_PTR], mad[HOP_CNT]);
    if cnt >= MAX_PATH_HOPS {
        return false;
    }
    if !returning(mad) {
        if cnt != 0 && ptr == 0 {
            return false;
        }
        if ptr != 0 && ptr < cnt {
            return false;
        }
        if ptr == cnt {
            return mad[DR_DLID] == PERMISSIVE;
        }
        ptr == cnt + 1
    } else {
        if cnt != 0 && ptr == cnt + 1 {
            mad[HOP_PTR] = ptr - 1;
            return true;
        }
        if (2..=cnt).contains(&ptr) {
            return false;
        }
        if ptr == 1 {
            if mad[DR_SLID] == PERMISSIVE {
                mad[HOP_PTR] = 0;
                return true;
            }
            return false;
        }
        ptr == 0
    }
}
