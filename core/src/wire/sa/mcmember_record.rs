//! MCMemberRecord (IBA 15.2.5.17): 52 bytes of fields, 56 on the wire
//! (AttributeOffset 7).
//!
//! ```text
//!  0..16 MGID            16..32 PortGID        32..36 Q_Key
//! 36..38 MLID            38  MTUSelector(2) MTU(6)  39 TClass
//! 40..42 P_Key           42  RateSelector(2) Rate(6)
//! 43     PacketLifeTimeSelector(2) PacketLifeTime(6)
//! 44..48 SL(4) FlowLabel(20) HopLimit(8)
//! 48     Scope(4) JoinState(4)   49 ProxyJoin(1) reserved(7)   50..52 reserved
//! ```

use super::comp::Component;
use crate::wire::{be, Field, Result};

mod field {
    use super::Field;
    pub(super) const MGID: Field = 0..16;
    pub(super) const PORT_GID: Field = 16..32;
    pub(super) const QKEY: Field = 32..36;
    pub(super) const MLID: Field = 36..38;
    pub(super) const MTU: usize = 38;
    pub(super) const TCLASS: usize = 39;
    pub(super) const PKEY: Field = 40..42;
    pub(super) const RATE: usize = 42;
    pub(super) const PKT_LIFE: usize = 43;
    pub(super) const SL_FLOW_HOP: Field = 44..48;
    pub(super) const SCOPE_JOIN: usize = 48;
    pub(super) const PROXY: usize = 49;
    pub(super) const RESERVED: Field = 50..52;
    pub(super) const PAD: Field = 52..56;
}

/// Bytes of MCMemberRecord fields.
pub const LEN: usize = field::RESERVED.end;
/// Bytes of one MCMemberRecord in a response.
pub const RECORD_LEN: usize = field::PAD.end;
const _: () = assert!(LEN == 52 && RECORD_LEN == 56);

/// ComponentMask bits.
pub mod comp {
    /// MGID.
    pub const MGID: u64 = 1 << 0;
    /// PortGID.
    pub const PORT_GID: u64 = 1 << 1;
    /// Q_Key.
    pub const QKEY: u64 = 1 << 2;
    /// MLID.
    pub const MLID: u64 = 1 << 3;
    /// MTUSelector.
    pub const MTU_SELECTOR: u64 = 1 << 4;
    /// MTU.
    pub const MTU: u64 = 1 << 5;
    /// TClass.
    pub const TCLASS: u64 = 1 << 6;
    /// P_Key.
    pub const PKEY: u64 = 1 << 7;
    /// RateSelector.
    pub const RATE_SELECTOR: u64 = 1 << 8;
    /// Rate.
    pub const RATE: u64 = 1 << 9;
    /// PacketLifeTimeSelector.
    pub const PKT_LIFE_SELECTOR: u64 = 1 << 10;
    /// PacketLifeTime.
    pub const PKT_LIFE: u64 = 1 << 11;
    /// SL.
    pub const SL: u64 = 1 << 12;
    /// FlowLabel.
    pub const FLOW_LABEL: u64 = 1 << 13;
    /// HopLimit.
    pub const HOP_LIMIT: u64 = 1 << 14;
    /// Scope.
    pub const SCOPE: u64 = 1 << 15;
    /// JoinState.
    pub const JOIN_STATE: u64 = 1 << 16;
    /// ProxyJoin.
    pub const PROXY_JOIN: u64 = 1 << 17;
}

/// The ComponentMask layout, by bit.
pub const COMPONENTS: [Component; 18] = [
    Component::bytes(0, 16),
    Component::bytes(16, 16),
    Component::bytes(32, 4),
    Component::bytes(36, 2),
    Component::bits(38, 0xc0),
    Component::bits(38, 0x3f),
    Component::bytes(39, 1),
    Component::bytes(40, 2),
    Component::bits(42, 0xc0),
    Component::bits(42, 0x3f),
    Component::bits(43, 0xc0),
    Component::bits(43, 0x3f),
    Component::bits(44, 0xf0),
    Component::span(44, 3, 0x0f, 0xff),
    Component::bytes(47, 1),
    Component::bits(48, 0xf0),
    Component::bits(48, 0x0f),
    Component::bits(49, 0x80),
];

/// JoinState bit: full member.
pub const JOIN_FULL: u8 = 1 << 0;
/// JoinState bit: non-member.
pub const JOIN_NON: u8 = 1 << 1;
/// JoinState bit: send-only non-member.
pub const JOIN_SEND_ONLY: u8 = 1 << 2;

/// A view over one MCMemberRecord.
#[derive(Debug, Clone)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

fn gid(b: &[u8], f: Field) -> [u8; 16] {
    let mut g = [0u8; 16];
    g.copy_from_slice(&b[f]);
    g
}

impl<T: AsRef<[u8]>> Packet<T> {
    crate::wire::view_constructors!(LEN, "the 52 bytes of fields");
    fn byte(&self, i: usize) -> u8 {
        self.buffer.as_ref()[i]
    }
    /// MGID.
    pub fn mgid(&self) -> [u8; 16] {
        gid(self.buffer.as_ref(), field::MGID)
    }
    /// PortGID.
    pub fn port_gid(&self) -> [u8; 16] {
        gid(self.buffer.as_ref(), field::PORT_GID)
    }
    /// Q_Key.
    pub fn qkey(&self) -> u32 {
        be::u32(self.buffer.as_ref(), field::QKEY)
    }
    /// MLID.
    pub fn mlid(&self) -> u16 {
        be::u16(self.buffer.as_ref(), field::MLID)
    }
    /// MTUSelector (2 bits).
    pub fn mtu_selector(&self) -> u8 {
        self.byte(field::MTU) >> 6
    }
    /// MTU (6 bits).
    pub fn mtu(&self) -> u8 {
        self.byte(field::MTU) & 0x3f
    }
    /// TClass.
    pub fn tclass(&self) -> u8 {
        self.byte(field::TCLASS)
    }
    /// P_Key.
    pub fn pkey(&self) -> u16 {
        be::u16(self.buffer.as_ref(), field::PKEY)
    }
    /// RateSelector (2 bits).
    pub fn rate_selector(&self) -> u8 {
        self.byte(field::RATE) >> 6
    }
    /// Rate (6 bits).
    pub fn rate(&self) -> u8 {
        self.byte(field::RATE) & 0x3f
    }
    /// PacketLifeTimeSelector (2 bits).
    pub fn pkt_life_selector(&self) -> u8 {
        self.byte(field::PKT_LIFE) >> 6
    }
    /// PacketLifeTime (6 bits).
    pub fn pkt_life(&self) -> u8 {
        self.byte(field::PKT_LIFE) & 0x3f
    }
    /// SL (4 bits).
    pub fn sl(&self) -> u8 {
        self.byte(field::SL_FLOW_HOP.start) >> 4
    }
    /// FlowLabel (20 bits).
    pub fn flow_label(&self) -> u32 {
        (be::u32(self.buffer.as_ref(), field::SL_FLOW_HOP) >> 8) & 0xf_ffff
    }
    /// HopLimit.
    pub fn hop_limit(&self) -> u8 {
        self.byte(field::SL_FLOW_HOP.end - 1)
    }
    /// Scope (4 bits).
    pub fn scope(&self) -> u8 {
        self.byte(field::SCOPE_JOIN) >> 4
    }
    /// JoinState (4 bits: full, non, send-only non-member).
    pub fn join_state(&self) -> u8 {
        self.byte(field::SCOPE_JOIN) & 0x0f
    }
    /// ProxyJoin.
    pub fn proxy_join(&self) -> bool {
        self.byte(field::PROXY) & 0x80 != 0
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Set MGID.
    pub fn set_mgid(&mut self, v: &[u8; 16]) {
        self.buffer.as_mut()[field::MGID].copy_from_slice(v);
    }
    /// Set PortGID.
    pub fn set_port_gid(&mut self, v: &[u8; 16]) {
        self.buffer.as_mut()[field::PORT_GID].copy_from_slice(v);
    }
    /// Set Q_Key.
    pub fn set_qkey(&mut self, v: u32) {
        be::set_u32(self.buffer.as_mut(), field::QKEY, v);
    }
    /// Set MLID.
    pub fn set_mlid(&mut self, v: u16) {
        be::set_u16(self.buffer.as_mut(), field::MLID, v);
    }
    /// Set MTUSelector (2 bits) and MTU (6 bits).
    pub fn set_mtu(&mut self, selector: u8, mtu: u8) {
        self.buffer.as_mut()[field::MTU] = (selector << 6) | (mtu & 0x3f);
    }
    /// Set TClass.
    pub fn set_tclass(&mut self, v: u8) {
        self.buffer.as_mut()[field::TCLASS] = v;
    }
    /// Set P_Key.
    pub fn set_pkey(&mut self, v: u16) {
        be::set_u16(self.buffer.as_mut(), field::PKEY, v);
    }
    /// Set RateSelector (2 bits) and Rate (6 bits).
    pub fn set_rate(&mut self, selector: u8, rate: u8) {
        self.buffer.as_mut()[field::RATE] = (selector << 6) | (rate & 0x3f);
    }
    /// Set PacketLifeTimeSelector (2 bits) and PacketLifeTime (6 bits).
    pub fn set_pkt_life(&mut self, selector: u8, life: u8) {
        self.buffer.as_mut()[field::PKT_LIFE] = (selector << 6) | (life & 0x3f);
    }
    /// Set SL (4 bits), FlowLabel (20 bits) and HopLimit.
    pub fn set_sl_flow_hop(&mut self, sl: u8, flow_label: u32, hop_limit: u8) {
        let v =
            (u32::from(sl & 0x0f) << 28) | ((flow_label & 0xf_ffff) << 8) | u32::from(hop_limit);
        be::set_u32(self.buffer.as_mut(), field::SL_FLOW_HOP, v);
    }
    /// Set Scope and JoinState (4 bits each).
    pub fn set_scope_join(&mut self, scope: u8, join_state: u8) {
        self.buffer.as_mut()[field::SCOPE_JOIN] = (scope << 4) | (join_state & 0x0f);
    }
    /// Set ProxyJoin and zero the reserved bits after it.
    pub fn set_proxy_join(&mut self, v: bool) {
        let b = self.buffer.as_mut();
        b[field::PROXY] = u8::from(v) << 7;
        b[field::RESERVED].fill(0);
    }
}

/// MCMemberRecord as a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Repr {
    /// MGID.
    pub mgid: [u8; 16],
    /// PortGID.
    pub port_gid: [u8; 16],
    /// Q_Key.
    pub qkey: u32,
    /// MLID.
    pub mlid: u16,
    /// MTUSelector.
    pub mtu_selector: u8,
    /// MTU code.
    pub mtu: u8,
    /// TClass.
    pub tclass: u8,
    /// P_Key.
    pub pkey: u16,
    /// RateSelector.
    pub rate_selector: u8,
    /// Rate code.
    pub rate: u8,
    /// PacketLifeTimeSelector.
    pub pkt_life_selector: u8,
    /// PacketLifeTime.
    pub pkt_life: u8,
    /// SL.
    pub sl: u8,
    /// FlowLabel.
    pub flow_label: u32,
    /// HopLimit.
    pub hop_limit: u8,
    /// Scope.
    pub scope: u8,
    /// JoinState.
    pub join_state: u8,
    /// ProxyJoin.
    pub proxy_join: bool,
}

impl Repr {
    /// Parse a checked MCMemberRecord.
    ///
    /// # Errors
    ///
    /// [`Error::Truncated`](crate::wire::Error::Truncated) if the buffer is shorter than 52 bytes.
    pub fn parse<T: AsRef<[u8]>>(p: &Packet<T>) -> Result<Repr> {
        p.check_len()?;
        Ok(Repr {
            mgid: p.mgid(),
            port_gid: p.port_gid(),
            qkey: p.qkey(),
            mlid: p.mlid(),
            mtu_selector: p.mtu_selector(),
            mtu: p.mtu(),
            tclass: p.tclass(),
            pkey: p.pkey(),
            rate_selector: p.rate_selector(),
            rate: p.rate(),
            pkt_life_selector: p.pkt_life_selector(),
            pkt_life: p.pkt_life(),
            sl: p.sl(),
            flow_label: p.flow_label(),
            hop_limit: p.hop_limit(),
            scope: p.scope(),
            join_state: p.join_state(),
            proxy_join: p.proxy_join(),
        })
    }
    /// Bytes `emit` writes.
    pub const fn buffer_len(&self) -> usize {
        LEN
    }
    /// Write the 52 bytes of fields (reserved as zero).
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut Packet<T>) {
        p.set_mgid(&self.mgid);
        p.set_port_gid(&self.port_gid);
        p.set_qkey(self.qkey);
        p.set_mlid(self.mlid);
        p.set_mtu(self.mtu_selector, self.mtu);
        p.set_tclass(self.tclass);
        p.set_pkey(self.pkey);
        p.set_rate(self.rate_selector, self.rate);
        p.set_pkt_life(self.pkt_life_selector, self.pkt_life);
        p.set_sl_flow_hop(self.sl, self.flow_label, self.hop_limit);
        p.set_scope_join(self.scope, self.join_state);
        p.set_proxy_join(self.proxy_join);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::Error;
    use proptest::prelude::*;

    /// The IPoIB broadcast group of P_Key 0xffff joined as a full member:
    /// MGID ff12:401b:ffff::ffff:ffff, Q_Key 0x0b1b, MLID 0xc000, MTU 2048
    /// exactly, rate 10 Gb/s exactly, SL 0, scope 2 (link-local).
    fn fixture() -> [u8; 52] {
        let mut b = [0u8; 52];
        b[..16].copy_from_slice(&[
            0xff, 0x12, 0x40, 0x1b, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff,
        ]);
        b[16..32].copy_from_slice(&[
            0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x00, 0x02, 0xc9, 0x03, 0, 0, 0x03, 0x01,
        ]);
        b[32..52].copy_from_slice(&[
            0x00, 0x00, 0x0b, 0x1b, 0xc0, 0x00, 0x84, 0x00, // Q_Key, MLID, MTU 2/4, TClass
            0xff, 0xff, 0x83, 0x92, // P_Key, rate 2/3, life 2/18
            0x00, 0x00, 0x00, 0x00, // SL, flow label, hop limit
            0x21, 0x00, 0x00, 0x00, // scope 2, join full; proxy 0
        ]);
        b
    }

    fn repr() -> Repr {
        let b = fixture();
        let mut mgid = [0u8; 16];
        mgid.copy_from_slice(&b[..16]);
        let mut port_gid = [0u8; 16];
        port_gid.copy_from_slice(&b[16..32]);
        Repr {
            mgid,
            port_gid,
            qkey: 0x0b1b,
            mlid: 0xc000,
            mtu_selector: 2,
            mtu: 4,
            pkey: 0xffff,
            rate_selector: 2,
            rate: 3,
            pkt_life_selector: 2,
            pkt_life: 18,
            scope: 2,
            join_state: JOIN_FULL,
            ..Repr::default()
        }
    }

    #[test]
    fn test_deconstruct() {
        let b = fixture();
        let p = Packet::new_checked(&b[..]).unwrap();
        assert_eq!((p.qkey(), p.mlid(), p.pkey()), (0x0b1b, 0xc000, 0xffff));
        assert_eq!(
            (p.mtu_selector(), p.mtu(), p.rate(), p.pkt_life()),
            (2, 4, 3, 18)
        );
        assert_eq!(
            (p.scope(), p.join_state(), p.proxy_join()),
            (2, JOIN_FULL, false)
        );
        assert_eq!(p.mgid()[..4], [0xff, 0x12, 0x40, 0x1b]);
    }

    #[test]
    fn test_emit_parse_over_garbage() {
        let mut b = [0xa5u8; 52];
        repr().emit(&mut Packet::new_unchecked(&mut b[..]));
        assert_eq!(b, fixture());
        assert_eq!(
            Repr::parse(&Packet::new_checked(&b[..]).unwrap()).unwrap(),
            repr()
        );
    }

    #[test]
    fn test_truncated() {
        assert_eq!(
            Packet::new_checked(&fixture()[..51]).unwrap_err(),
            Error::Truncated
        );
    }

    proptest! {
        #[test]
        fn roundtrip(bytes in proptest::collection::vec(any::<u8>(), 52)) {
            let r = Repr::parse(&Packet::new_checked(&bytes[..]).unwrap()).unwrap();
            let mut out = [0xa5u8; 52];
            r.emit(&mut Packet::new_unchecked(&mut out[..]));
            prop_assert_eq!(Repr::parse(&Packet::new_checked(&out[..]).unwrap()).unwrap(), r);
            prop_assert_eq!(&out[..49], &bytes[..49]);
        }
    }
}
