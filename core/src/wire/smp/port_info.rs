//! PortInfo (IBA 14.2.5.6): 64 bytes of attribute data, many of its
//! fields packed into nibbles and bit groups.
//!
//! The view wraps the attribute itself (offset 0 = M_Key). The SMP's
//! AttributeModifier selects the port (0 = the port the SMP arrived on).

use crate::wire::{be, enum_with_unknown, Result};

/// Length of PortInfo.
pub const LEN: usize = 64;
const _: () = assert!(LEN == super::DATA_LEN);

/// CapabilityMask bit: IsSM (the port runs an SM; set while `issm` is open).
pub const CAP_IS_SM: u32 = 1 << 1;
/// CapabilityMask bit: IsSMDisabled.
pub const CAP_IS_SM_DISABLED: u32 = 1 << 10;
/// CapabilityMask bit: IsCapabilityMask2Supported.
pub const CAP_HAS_CAP_MASK2: u32 = 1 << 15;

enum_with_unknown! {
    /// PortState (the logical link state).
    pub enum PortState(u8) {
        /// No state change (in a Set).
        NoChange = 0,
        /// Down.
        Down = 1,
        /// Initialize.
        Init = 2,
        /// Armed.
        Armed = 3,
        /// Active.
        Active = 4,
    }
}

enum_with_unknown! {
    /// PortPhysicalState.
    pub enum PhysState(u8) {
        /// No state change (in a Set).
        NoChange = 0,
        /// Sleep.
        Sleep = 1,
        /// Polling.
        Polling = 2,
        /// Disabled.
        Disabled = 3,
        /// PortConfigurationTraining.
        Training = 4,
        /// LinkUp.
        LinkUp = 5,
        /// LinkErrorRecovery.
        LinkErrorRecovery = 6,
        /// PhyTest.
        PhyTest = 7,
    }
}

/// A view over PortInfo attribute data.
#[derive(Debug, Clone)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    crate::wire::view_constructors!(LEN, "the 64 bytes of PortInfo");
    /// PortState.
    pub fn port_state(&self) -> PortState {
        PortState::from(self.port_state_raw())
    }
    /// PortPhysicalState.
    pub fn phys_state(&self) -> PhysState {
        PhysState::from(self.phys_state_raw())
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Set PortState.
    pub fn set_port_state(&mut self, v: PortState) {
        self.set_port_state_raw(v.into());
    }
    /// Set PortPhysicalState.
    pub fn set_phys_state(&mut self, v: PhysState) {
        self.set_phys_state_raw(v.into());
    }
    /// Zero all 64 bytes (reserved bits included).
    pub fn clear(&mut self) {
        self.buffer.as_mut()[..LEN].fill(0);
    }
}

/// Big-endian whole-byte fields: `getter, setter: type @ range`.
macro_rules! be_fields {
    ($( $(#[$doc:meta])* $get:ident, $set:ident: $ty:ident @ $range:expr; )*) => {
        impl<T: AsRef<[u8]>> Packet<T> {
            $( $(#[$doc])* pub fn $get(&self) -> $ty { be::$ty(self.buffer.as_ref(), $range) } )*
        }
        impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
            $(
                #[doc = concat!("Set `", stringify!($get), "`.")]
                pub fn $set(&mut self, v: $ty) {
                    paste_set!($ty, self.buffer.as_mut(), $range, v);
                }
            )*
        }
    };
}

macro_rules! paste_set {
    (u16, $b:expr, $r:expr, $v:expr) => {
        be::set_u16($b, $r, $v)
    };
    (u32, $b:expr, $r:expr, $v:expr) => {
        be::set_u32($b, $r, $v)
    };
    (u64, $b:expr, $r:expr, $v:expr) => {
        be::set_u64($b, $r, $v)
    };
}

/// Bit groups inside one byte: `getter, setter: byte, shift, width`.
/// Setters keep the other bits of the byte and mask the value to `width`.
macro_rules! bit_fields {
    ($( $(#[$doc:meta])* $get:ident, $set:ident: $byte:expr, $shift:expr, $width:expr; )*) => {
        impl<T: AsRef<[u8]>> Packet<T> {
            $(
                $(#[$doc])*
                pub fn $get(&self) -> u8 {
                    (self.buffer.as_ref()[$byte] >> $shift) & (((1u16 << $width) - 1) as u8)
                }
            )*
        }
        impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
            $(
                #[doc = concat!("Set `", stringify!($get), "` (low ", stringify!($width), " bits of `v`).")]
                pub fn $set(&mut self, v: u8) {
                    let mask = (((1u16 << $width) - 1) as u8) << $shift;
                    let b = &mut self.buffer.as_mut()[$byte];
                    *b = (*b & !mask) | ((v << $shift) & mask);
                }
            )*
        }
    };
}

be_fields! {
    /// M_Key.
    m_key, set_m_key: u64 @ 0..8;
    /// GidPrefix (the subnet prefix).
    gid_prefix, set_gid_prefix: u64 @ 8..16;
    /// LID (base LID).
    lid, set_lid: u16 @ 16..18;
    /// MasterSMLID.
    master_sm_lid, set_master_sm_lid: u16 @ 18..20;
    /// CapabilityMask.
    capability_mask, set_capability_mask: u32 @ 20..24;
    /// DiagCode.
    diag_code, set_diag_code: u16 @ 24..26;
    /// M_KeyLeasePeriod.
    m_key_lease_period, set_m_key_lease_period: u16 @ 26..28;
    /// M_KeyViolations.
    m_key_violations, set_m_key_violations: u16 @ 44..46;
    /// P_KeyViolations.
    p_key_violations, set_p_key_violations: u16 @ 46..48;
    /// Q_KeyViolations.
    q_key_violations, set_q_key_violations: u16 @ 48..50;
    /// MaxCreditHint.
    max_credit_hint, set_max_credit_hint: u16 @ 54..56;
    /// CapabilityMask2.
    capability_mask2, set_capability_mask2: u16 @ 60..62;
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// LinkRoundTripLatency (24 bits).
    pub fn link_round_trip_latency(&self) -> u32 {
        be::u32(self.buffer.as_ref(), 56..60) & 0x00ff_ffff
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Set LinkRoundTripLatency (low 24 bits; the reserved byte before it is zeroed).
    pub fn set_link_round_trip_latency(&mut self, v: u32) {
        be::set_u32(self.buffer.as_mut(), 56..60, v & 0x00ff_ffff);
    }
}

bit_fields! {
    /// LocalPortNum.
    local_port_num, set_local_port_num: 28, 0, 8;
    /// LinkWidthEnabled.
    link_width_enabled, set_link_width_enabled: 29, 0, 8;
    /// LinkWidthSupported.
    link_width_supported, set_link_width_supported: 30, 0, 8;
    /// LinkWidthActive.
    link_width_active, set_link_width_active: 31, 0, 8;
    /// LinkSpeedSupported.
    link_speed_supported, set_link_speed_supported: 32, 4, 4;
    /// PortState, raw.
    port_state_raw, set_port_state_raw: 32, 0, 4;
    /// PortPhysicalState, raw.
    phys_state_raw, set_phys_state_raw: 33, 4, 4;
    /// LinkDownDefaultState.
    link_down_default_state, set_link_down_default_state: 33, 0, 4;
    /// M_KeyProtectBits.
    m_key_protect_bits, set_m_key_protect_bits: 34, 6, 2;
    /// LMC.
    lmc, set_lmc: 34, 0, 3;
    /// LinkSpeedActive.
    link_speed_active, set_link_speed_active: 35, 4, 4;
    /// LinkSpeedEnabled.
    link_speed_enabled, set_link_speed_enabled: 35, 0, 4;
    /// NeighborMTU.
    neighbor_mtu, set_neighbor_mtu: 36, 4, 4;
    /// MasterSMSL.
    master_sm_sl, set_master_sm_sl: 36, 0, 4;
    /// VLCap.
    vl_cap, set_vl_cap: 37, 4, 4;
    /// InitType.
    init_type, set_init_type: 37, 0, 4;
    /// VLHighLimit.
    vl_high_limit, set_vl_high_limit: 38, 0, 8;
    /// VLArbitrationHighCap.
    vl_arb_high_cap, set_vl_arb_high_cap: 39, 0, 8;
    /// VLArbitrationLowCap.
    vl_arb_low_cap, set_vl_arb_low_cap: 40, 0, 8;
    /// InitTypeReply.
    init_type_reply, set_init_type_reply: 41, 4, 4;
    /// MTUCap.
    mtu_cap, set_mtu_cap: 41, 0, 4;
    /// VLStallCount.
    vl_stall_count, set_vl_stall_count: 42, 5, 3;
    /// HOQLife.
    hoq_life, set_hoq_life: 42, 0, 5;
    /// OperationalVLs.
    operational_vls, set_operational_vls: 43, 4, 4;
    /// PartitionEnforcementInbound/Outbound, FilterRawInbound/Outbound (bits 3..0).
    enforcement, set_enforcement: 43, 0, 4;
    /// GUIDCap.
    guid_cap, set_guid_cap: 50, 0, 8;
    /// ClientReregister.
    client_reregister, set_client_reregister: 51, 7, 1;
    /// MulticastPKeyTrapSuppressionEnabled (2 bits as IBA 1.2.1 defines it;
    /// OpenSM's IBA type definitions treat only the high bit as defined).
    mcast_pkey_trap_suppression, set_mcast_pkey_trap_suppression: 51, 5, 2;
    /// SubnetTimeOut.
    subnet_timeout, set_subnet_timeout: 51, 0, 5;
    /// RespTimeValue.
    resp_time_value, set_resp_time_value: 52, 0, 5;
    /// LocalPhyErrors (threshold).
    local_phy_errors, set_local_phy_errors: 53, 4, 4;
    /// OverrunErrors (threshold).
    overrun_errors, set_overrun_errors: 53, 0, 4;
    /// LinkSpeedExtActive.
    link_speed_ext_active, set_link_speed_ext_active: 62, 4, 4;
    /// LinkSpeedExtSupported.
    link_speed_ext_supported, set_link_speed_ext_supported: 62, 0, 4;
    /// LinkSpeedExtEnabled.
    link_speed_ext_enabled, set_link_speed_ext_enabled: 63, 0, 5;
}

/// Declares `Repr` with every PortInfo field, and its parse/emit.
macro_rules! port_info_repr {
    ($( $(#[$doc:meta])* $name:ident: $ty:ty = $get:ident / $set:ident, )*) => {
        /// PortInfo as a value: every field, host values; reserved bits are not kept.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub struct Repr {
            $( $(#[$doc])* pub $name: $ty, )*
        }

        impl Repr {
            /// Parse checked PortInfo.
            ///
            /// # Errors
            ///
            /// [`Error::Truncated`](crate::wire::Error::Truncated) if the buffer is shorter than 64 bytes.
            pub fn parse<T: AsRef<[u8]>>(p: &Packet<T>) -> Result<Repr> {
                p.check_len()?;
                Ok(Repr { $( $name: p.$get(), )* })
            }

            /// Write all 64 bytes: reserved bits zero, each field masked to its width.
            pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut Packet<T>) {
                p.clear();
                $( p.$set(self.$name); )*
            }
        }
    };
}

port_info_repr! {
    /// M_Key.
    m_key: u64 = m_key / set_m_key,
    /// GidPrefix.
    gid_prefix: u64 = gid_prefix / set_gid_prefix,
    /// LID.
    lid: u16 = lid / set_lid,
    /// MasterSMLID.
    master_sm_lid: u16 = master_sm_lid / set_master_sm_lid,
    /// CapabilityMask.
    capability_mask: u32 = capability_mask / set_capability_mask,
    /// DiagCode.
    diag_code: u16 = diag_code / set_diag_code,
    /// M_KeyLeasePeriod.
    m_key_lease_period: u16 = m_key_lease_period / set_m_key_lease_period,
    /// LocalPortNum.
    local_port_num: u8 = local_port_num / set_local_port_num,
    /// LinkWidthEnabled.
    link_width_enabled: u8 = link_width_enabled / set_link_width_enabled,
    /// LinkWidthSupported.
    link_width_supported: u8 = link_width_supported / set_link_width_supported,
    /// LinkWidthActive.
    link_width_active: u8 = link_width_active / set_link_width_active,
    /// LinkSpeedSupported (4 bits).
    link_speed_supported: u8 = link_speed_supported / set_link_speed_supported,
    /// PortState.
    port_state: PortState = port_state / set_port_state,
    /// PortPhysicalState.
    phys_state: PhysState = phys_state / set_phys_state,
    /// LinkDownDefaultState (4 bits).
    link_down_default_state: u8 = link_down_default_state / set_link_down_default_state,
    /// M_KeyProtectBits (2 bits).
    m_key_protect_bits: u8 = m_key_protect_bits / set_m_key_protect_bits,
    /// LMC (3 bits).
    lmc: u8 = lmc / set_lmc,
    /// LinkSpeedActive (4 bits).
    link_speed_active: u8 = link_speed_active / set_link_speed_active,
    /// LinkSpeedEnabled (4 bits).
    link_speed_enabled: u8 = link_speed_enabled / set_link_speed_enabled,
    /// NeighborMTU (4 bits).
    neighbor_mtu: u8 = neighbor_mtu / set_neighbor_mtu,
    /// MasterSMSL (4 bits).
    master_sm_sl: u8 = master_sm_sl / set_master_sm_sl,
    /// VLCap (4 bits).
    vl_cap: u8 = vl_cap / set_vl_cap,
    /// InitType (4 bits).
    init_type: u8 = init_type / set_init_type,
    /// VLHighLimit.
    vl_high_limit: u8 = vl_high_limit / set_vl_high_limit,
    /// VLArbitrationHighCap.
    vl_arb_high_cap: u8 = vl_arb_high_cap / set_vl_arb_high_cap,
    /// VLArbitrationLowCap.
    vl_arb_low_cap: u8 = vl_arb_low_cap / set_vl_arb_low_cap,
    /// InitTypeReply (4 bits).
    init_type_reply: u8 = init_type_reply / set_init_type_reply,
    /// MTUCap (4 bits).
    mtu_cap: u8 = mtu_cap / set_mtu_cap,
    /// VLStallCount (3 bits).
    vl_stall_count: u8 = vl_stall_count / set_vl_stall_count,
    /// HOQLife (5 bits).
    hoq_life: u8 = hoq_life / set_hoq_life,
    /// OperationalVLs (4 bits).
    operational_vls: u8 = operational_vls / set_operational_vls,
    /// Partition enforcement and raw filter flags (4 bits).
    enforcement: u8 = enforcement / set_enforcement,
    /// M_KeyViolations.
    m_key_violations: u16 = m_key_violations / set_m_key_violations,
    /// P_KeyViolations.
    p_key_violations: u16 = p_key_violations / set_p_key_violations,
    /// Q_KeyViolations.
    q_key_violations: u16 = q_key_violations / set_q_key_violations,
    /// GUIDCap.
    guid_cap: u8 = guid_cap / set_guid_cap,
    /// ClientReregister (1 bit).
    client_reregister: u8 = client_reregister / set_client_reregister,
    /// MulticastPKeyTrapSuppressionEnabled (2 bits).
    mcast_pkey_trap_suppression: u8 = mcast_pkey_trap_suppression / set_mcast_pkey_trap_suppression,
    /// SubnetTimeOut (5 bits).
    subnet_timeout: u8 = subnet_timeout / set_subnet_timeout,
    /// RespTimeValue (5 bits).
    resp_time_value: u8 = resp_time_value / set_resp_time_value,
    /// LocalPhyErrors (4 bits).
    local_phy_errors: u8 = local_phy_errors / set_local_phy_errors,
    /// OverrunErrors (4 bits).
    overrun_errors: u8 = overrun_errors / set_overrun_errors,
    /// MaxCreditHint.
    max_credit_hint: u16 = max_credit_hint / set_max_credit_hint,
    /// LinkRoundTripLatency (24 bits).
    link_round_trip_latency: u32 = link_round_trip_latency / set_link_round_trip_latency,
    /// CapabilityMask2.
    capability_mask2: u16 = capability_mask2 / set_capability_mask2,
    /// LinkSpeedExtActive (4 bits).
    link_speed_ext_active: u8 = link_speed_ext_active / set_link_speed_ext_active,
    /// LinkSpeedExtSupported (4 bits).
    link_speed_ext_supported: u8 = link_speed_ext_supported / set_link_speed_ext_supported,
    /// LinkSpeedExtEnabled (5 bits).
    link_speed_ext_enabled: u8 = link_speed_ext_enabled / set_link_speed_ext_enabled,
}

impl Repr {
    /// Bytes `emit` writes.
    pub const fn buffer_len(&self) -> usize {
        LEN
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::Error;
    use proptest::prelude::*;

    /// Port 1 of a CA, Active/LinkUp, LID 0x0012, SM at LID 0x0001 SL 0,
    /// 4X (width 2) at QDR (speed 4), MTU 4096 (5), LMC 0, SubnetTimeOut 18.
    const ACTIVE_CA_PORT: [u8; 64] = [
        0, 0, 0, 0, 0, 0, 0, 0, // M_Key 0
        0xfe, 0x80, 0, 0, 0, 0, 0, 0, // GidPrefix fe80::
        0x00, 0x12, 0x00, 0x01, // LID 0x12, MasterSMLID 1
        0x02, 0x51, 0x08, 0x68, // CapabilityMask 0x02510868
        0x00, 0x00, 0x00, 0x0f, // DiagCode 0, M_KeyLeasePeriod 15
        0x01, 0x03, 0x03, 0x02, // LocalPortNum 1, width enabled 3, supported 3, active 2 (4X)
        0x74, 0x52, 0x00,
        0x47, // speed supp 7 / Active(4); LinkUp(5) / Polling(2); mkey/LMC 0; speed active 4 / enabled 7
        0x50, 0x44, 0x00,
        0x08, // NeighborMTU 5 / SM SL 0; VLCap 4 / InitType 4; VLHighLimit 0; VLArbHighCap 8
        0x08, 0x05, 0xf0,
        0x4f, // VLArbLowCap 8; InitTypeReply 0 / MTUCap 5; stall 7 / HOQLife 16; OpVLs 4 / enforcement 0xf
        0x00, 0x00, 0x00, 0x00, // M_KeyViolations, P_KeyViolations
        0x00, 0x00, 0x20,
        0x92, // Q_KeyViolations; GUIDCap 32; ClientReregister 1, SubnetTimeOut 18
        0x0e, 0x88, 0x00,
        0x00, // RespTimeValue 14; LocalPhyErrors 8 / OverrunErrors 8; MaxCreditHint 0
        0x00, 0x00, 0x00, 0x00, // reserved, LinkRoundTripLatency 0
        0x00, 0x00, 0x00, 0x00, // CapabilityMask2 0; ext speeds 0
    ];

    #[test]
    fn test_deconstruct() {
        let p = Packet::new_checked(&ACTIVE_CA_PORT[..]).unwrap();
        assert_eq!(p.gid_prefix(), 0xfe80_0000_0000_0000);
        assert_eq!((p.lid(), p.master_sm_lid()), (0x12, 1));
        assert_eq!(p.capability_mask(), 0x0251_0868);
        assert_eq!(p.capability_mask() & CAP_IS_SM, 0);
        assert_eq!(p.m_key_lease_period(), 15);
        assert_eq!(p.local_port_num(), 1);
        assert_eq!((p.link_width_active(), p.link_speed_active()), (2, 4));
        assert_eq!(p.link_speed_supported(), 7);
        assert_eq!(p.link_speed_enabled(), 7);
        assert_eq!(p.port_state(), PortState::Active);
        assert_eq!(p.phys_state(), PhysState::LinkUp);
        assert_eq!(p.link_down_default_state(), 2);
        assert_eq!((p.lmc(), p.master_sm_sl()), (0, 0));
        assert_eq!((p.neighbor_mtu(), p.mtu_cap()), (5, 5));
        assert_eq!((p.vl_cap(), p.init_type()), (4, 4));
        assert_eq!((p.vl_stall_count(), p.hoq_life()), (7, 16));
        assert_eq!((p.operational_vls(), p.enforcement()), (4, 0xf));
        assert_eq!(p.guid_cap(), 32);
        assert_eq!((p.client_reregister(), p.subnet_timeout()), (1, 18));
        assert_eq!(p.resp_time_value(), 14);
        assert_eq!((p.local_phy_errors(), p.overrun_errors()), (8, 8));
    }

    #[test]
    fn test_emit_parse_over_garbage() {
        let r = Repr::parse(&Packet::new_checked(&ACTIVE_CA_PORT[..]).unwrap()).unwrap();
        let mut b = [0xa5u8; 64];
        r.emit(&mut Packet::new_unchecked(&mut b[..]));
        assert_eq!(b, ACTIVE_CA_PORT);
    }

    #[test]
    fn setters_keep_neighbour_bits() {
        let mut b = ACTIVE_CA_PORT;
        let mut p = Packet::new_unchecked(&mut b[..]);
        p.set_port_state(PortState::Down);
        p.set_lmc(0xff); // masked to 3 bits
        p.set_subnet_timeout(0x3f); // masked to 5 bits
        assert_eq!(b[32], 0x71);
        assert_eq!(b[34], 0x07);
        assert_eq!(b[51], 0x9f);
    }

    #[test]
    fn test_truncated() {
        assert_eq!(
            Packet::new_checked(&ACTIVE_CA_PORT[..63]).unwrap_err(),
            Error::Truncated
        );
        assert_eq!(
            Repr::parse(&Packet::new_unchecked(&ACTIVE_CA_PORT[..40])).unwrap_err(),
            Error::Truncated
        );
    }

    proptest! {
        #[test]
        fn roundtrip(bytes in proptest::collection::vec(any::<u8>(), 64)) {
            let r = Repr::parse(&Packet::new_checked(&bytes[..]).unwrap()).unwrap();
            let mut out = [0xa5u8; 64];
            r.emit(&mut Packet::new_unchecked(&mut out[..]));
            prop_assert_eq!(Repr::parse(&Packet::new_checked(&out[..]).unwrap()).unwrap(), r);
            // Only reserved bits may differ.
            for (i, (a, b)) in out.iter().zip(&bytes).enumerate() {
                let reserved: u8 = match i { 34 => 0x38, 52 => 0xe0, 56 => 0xff, 63 => 0xe0, _ => 0 };
                prop_assert_eq!(a & !reserved, b & !reserved, "byte {}", i);
                prop_assert_eq!(a & reserved, 0);
            }
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..80)) {
            if let Ok(p) = Packet::new_checked(&bytes[..]) {
                let _ = Repr::parse(&p);
            }
        }
    }
}
