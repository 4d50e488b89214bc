//! SMInfo (IBA 14.2.5.13): who an SM is and its state, as SMs exchange it
//! and as `sminfo` asks it. The view wraps the attribute data.
//!
//! ```text
//!  0..8 GUID   8..16 SM_Key   16..20 ActCount   20 Priority(4) SMState(4)
//! ```

use crate::wire::{be, enum_with_unknown, Field};

mod field {
    use super::Field;
    pub(super) const GUID: Field = 0..8;
    pub(super) const SM_KEY: Field = 8..16;
    pub(super) const ACT_COUNT: Field = 16..20;
    pub(super) const PRIORITY_STATE: usize = 20;
}

/// Length of SMInfo.
pub const LEN: usize = field::PRIORITY_STATE + 1;

enum_with_unknown! {
    /// SMState.
    pub enum SmState(u8) {
        /// Not active.
        NotActive = 0,
        /// Discovering.
        Discovering = 1,
        /// Standby.
        Standby = 2,
        /// Master.
        Master = 3,
    }
}

/// A view over SMInfo attribute data.
#[derive(Debug, Clone)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    crate::wire::view_constructors!(LEN, "the 21 bytes of SMInfo");
    /// GUID: the SM's port GUID.
    pub fn guid(&self) -> u64 {
        be::u64(self.buffer.as_ref(), field::GUID)
    }
    /// SM_Key.
    pub fn sm_key(&self) -> u64 {
        be::u64(self.buffer.as_ref(), field::SM_KEY)
    }
    /// ActCount: bumped by the SM as it works.
    pub fn act_count(&self) -> u32 {
        be::u32(self.buffer.as_ref(), field::ACT_COUNT)
    }
    /// Priority (4 bits).
    pub fn priority(&self) -> u8 {
        self.buffer.as_ref()[field::PRIORITY_STATE] >> 4
    }
    /// SMState.
    pub fn sm_state(&self) -> SmState {
        SmState::from(self.buffer.as_ref()[field::PRIORITY_STATE] & 0x0f)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Set GUID.
    pub fn set_guid(&mut self, v: u64) {
        be::set_u64(self.buffer.as_mut(), field::GUID, v);
    }
    /// Set SM_Key.
    pub fn set_sm_key(&mut self, v: u64) {
        be::set_u64(self.buffer.as_mut(), field::SM_KEY, v);
    }
    /// Set ActCount.
    pub fn set_act_count(&mut self, v: u32) {
        be::set_u32(self.buffer.as_mut(), field::ACT_COUNT, v);
    }
    /// Set Priority (low 4 bits of `v`) and SMState.
    pub fn set_priority_state(&mut self, priority: u8, state: SmState) {
        self.buffer.as_mut()[field::PRIORITY_STATE] = (priority << 4) | (u8::from(state) & 0x0f);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn master_at_priority_14() {
        let bytes: [u8; LEN] = [
            0, 0, 0, 0, 0, 0x10, 0, 0x01, 0, 0, 0, 0, 0, 0, 0, 0x2a, 0, 0, 0x01, 0x02, 0xe3,
        ];
        let p = Packet::new_checked(&bytes[..]).unwrap();
        assert_eq!(p.guid(), 0x10_0001);
        assert_eq!(p.sm_key(), 42);
        assert_eq!(p.act_count(), 258);
        assert_eq!(p.priority(), 14);
        assert_eq!(p.sm_state(), SmState::Master);
        let mut out = [0u8; LEN];
        let mut w = Packet::new_unchecked(&mut out[..]);
        w.set_guid(0x10_0001);
        w.set_sm_key(42);
        w.set_act_count(258);
        w.set_priority_state(14, SmState::Master);
        assert_eq!(out, bytes);
    }
}
