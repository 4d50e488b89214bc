//! `#[repr(C)]` mirrors of libibumad's structs, with their sizes and offsets
//! asserted at compile time (as rdma-core's compile test of the umad headers does).

use core::ffi::c_char;
use core::mem::{offset_of, size_of};

/// `ib_mad_addr_t`: 44 bytes; multi-byte fields big-endian except `pkey_index`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct IbMadAddr {
    pub qpn: u32,
    pub qkey: u32,
    pub lid: u16,
    pub sl: u8,
    pub path_bits: u8,
    pub grh_present: u8,
    pub gid_index: u8,
    pub hop_limit: u8,
    pub traffic_class: u8,
    pub gid: [u8; 16],
    pub flow_label: u32,
    pub pkey_index: u16,
    pub reserved: [u8; 6],
}

/// `struct ib_user_mad` without its flexible `data[]`: 64 bytes.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct IbUserMad {
    pub agent_id: u32,
    pub status: u32,
    pub timeout_ms: u32,
    pub retries: u32,
    pub length: u32,
    pub addr: IbMadAddr,
}

pub const UMAD_CA_NAME_LEN: usize = 20;
pub const UMAD_CA_MAX_PORTS: usize = 10;

/// `umad_port_t`.
#[repr(C)]
#[derive(Debug)]
pub struct UmadPort {
    pub ca_name: [c_char; UMAD_CA_NAME_LEN],
    pub portnum: i32,
    pub base_lid: u32,
    pub lmc: u32,
    pub sm_lid: u32,
    pub sm_sl: u32,
    pub state: u32,
    pub phys_state: u32,
    pub rate: u32,
    pub capmask: u32,
    pub gid_prefix: u64,
    pub port_guid: u64,
    pub pkeys_size: u32,
    pub pkeys: *mut u16,
    pub link_layer: [c_char; UMAD_CA_NAME_LEN],
}

/// `umad_ca_t`.
#[repr(C)]
#[derive(Debug)]
pub struct UmadCa {
    pub ca_name: [c_char; UMAD_CA_NAME_LEN],
    pub node_type: u32,
    pub numports: i32,
    pub fw_ver: [c_char; 20],
    pub ca_type: [c_char; 40],
    pub hw_ver: [c_char; 20],
    pub node_guid: u64,
    pub system_guid: u64,
    pub ports: [*mut UmadPort; UMAD_CA_MAX_PORTS],
}

/// `struct umad_reg_attr`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct UmadRegAttr {
    pub mgmt_class: u8,
    pub mgmt_class_version: u8,
    pub flags: u32,
    pub method_mask: [u64; 2],
    pub oui: u32,
    pub rmpp_version: u8,
}

/// `struct umad_ca_pair` (IBUMAD_1.4).
#[repr(C)]
#[derive(Debug)]
pub struct UmadCaPair {
    pub smi_name: [c_char; UMAD_CA_NAME_LEN],
    pub smi_preferred_port: u32,
    pub gsi_name: [c_char; UMAD_CA_NAME_LEN],
    pub gsi_preferred_port: u32,
}

/// `struct umad_device_node`.
#[repr(C)]
#[derive(Debug)]
pub struct UmadDeviceNode {
    pub next: *mut UmadDeviceNode,
    pub ca_name: *const c_char,
}

const _: () = {
    assert!(size_of::<IbMadAddr>() == 44);
    assert!(offset_of!(IbMadAddr, gid) == 16);
    assert!(offset_of!(IbMadAddr, flow_label) == 32);
    assert!(offset_of!(IbMadAddr, pkey_index) == 36);
    assert!(size_of::<IbUserMad>() == 64);
    assert!(offset_of!(IbUserMad, addr) == 20);
    // The header vmad's buffer helpers read and write is this one.
    assert!(size_of::<IbUserMad>() == vmad::wire::umad::HEADER_LEN);
    assert!(offset_of!(IbUserMad, addr) == vmad::wire::umad::ADDR_OFFSET);
    assert!(size_of::<IbUserMad>() - offset_of!(IbUserMad, addr) == size_of::<IbMadAddr>());
    assert!(size_of::<UmadPort>() == 112);
    assert!(offset_of!(UmadPort, capmask) == 52);
    assert!(offset_of!(UmadPort, gid_prefix) == 56);
    assert!(offset_of!(UmadPort, pkeys) == 80);
    assert!(offset_of!(UmadPort, link_layer) == 88);
    assert!(size_of::<UmadCa>() == 208);
    assert!(offset_of!(UmadCa, node_guid) == 112);
    assert!(offset_of!(UmadCa, ports) == 128);
    assert!(size_of::<UmadRegAttr>() == 32);
    assert!(offset_of!(UmadRegAttr, method_mask) == 8);
    assert!(offset_of!(UmadRegAttr, oui) == 24);
    assert!(size_of::<UmadCaPair>() == 48);
};

#[cfg(test)]
mod tests {
    use super::*;

    /// The same table `capi/tests/c/layout.c` prints from the C headers.
    #[test]
    fn layout_matches_the_c_headers() {
        let mut t = String::new();
        let mut s = |name: &str, v: usize| t.push_str(&format!("sizeof {name} {v}\n"));
        macro_rules! o {
            ($t:expr, $ty:ty, $($f:ident),*) => {
                $(t.push_str(&format!("offsetof {}.{} {}\n", $t, stringify!($f), offset_of!($ty, $f)));)*
            };
        }
        s("ib_mad_addr_t", size_of::<IbMadAddr>());
        o!(
            "ib_mad_addr_t",
            IbMadAddr,
            qpn,
            qkey,
            lid,
            sl,
            path_bits,
            grh_present,
            gid_index,
            hop_limit,
            traffic_class,
            gid,
            flow_label,
            pkey_index,
            reserved
        );
        let mut s = |name: &str, v: usize| t.push_str(&format!("sizeof {name} {v}\n"));
        s("struct ib_user_mad", size_of::<IbUserMad>());
        o!(
            "struct ib_user_mad",
            IbUserMad,
            agent_id,
            status,
            timeout_ms,
            retries,
            length,
            addr
        );
        t.push_str(&format!(
            "offsetof struct ib_user_mad.data {}\n",
            size_of::<IbUserMad>()
        ));
        t.push_str(&format!("sizeof umad_port_t {}\n", size_of::<UmadPort>()));
        o!(
            "umad_port_t",
            UmadPort,
            ca_name,
            portnum,
            base_lid,
            lmc,
            sm_lid,
            sm_sl,
            state,
            phys_state,
            rate,
            capmask,
            gid_prefix,
            port_guid,
            pkeys_size,
            pkeys,
            link_layer
        );
        t.push_str(&format!("sizeof umad_ca_t {}\n", size_of::<UmadCa>()));
        o!(
            "umad_ca_t",
            UmadCa,
            ca_name,
            node_type,
            numports,
            fw_ver,
            ca_type,
            hw_ver,
            node_guid,
            system_guid,
            ports
        );
        t.push_str(&format!(
            "sizeof struct umad_reg_attr {}\n",
            size_of::<UmadRegAttr>()
        ));
        o!(
            "struct umad_reg_attr",
            UmadRegAttr,
            mgmt_class,
            mgmt_class_version,
            flags,
            method_mask,
            oui,
            rmpp_version
        );
        t.push_str(&format!(
            "sizeof struct umad_device_node {}\n",
            size_of::<UmadDeviceNode>()
        ));
        o!("struct umad_device_node", UmadDeviceNode, next, ca_name);
        assert_eq!(t, include_str!("../tests/c/layout.expected"));
    }
}
