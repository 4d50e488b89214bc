//! CA and port discovery: what `umad_get_cas_names`, `umad_get_ca`, `umad_get_port`,
//! the device-list and SMI/GSI-pair functions report about the chosen transport's CAs.

use core::ffi::{c_char, c_int};

use vmad::error::errno::{EINVAL, EIO, ENODEV, ENOMEM};
use vmad::transport::{LinkLayer, PortAttrs};
use vmad::umad::{self as umad, CaInfo};
use vmad::Error;

use crate::abi::{
    UmadCa, UmadCaPair, UmadDeviceNode, UmadPort, UMAD_CA_MAX_PORTS, UMAD_CA_NAME_LEN,
};
use crate::boundary::{
    c_alloc_copy, c_alloc_one, c_free, ca_name, fail, fill_cstr, guard, set_errno,
};
use crate::select;

/// The CAs of the chosen transport, sorted by name.
fn cas() -> vmad::Result<Vec<String>> {
    select::ensure()?;
    Ok(umad::get_cas_names())
}

fn ca_info(ca: *const c_char) -> vmad::Result<CaInfo> {
    let name = ca_name(ca)?;
    select::ensure()?;
    umad::get_ca(&name)
}

/// `int umad_get_cas_names(char cas[][20], int max)`: how many names were written.
pub extern "C" fn umad_get_cas_names(out: *mut [c_char; UMAD_CA_NAME_LEN], max: c_int) -> c_int {
    let Ok(max) = usize::try_from(max) else {
        return fail(&Error::InvalidArgument("max is negative"));
    };
    if out.is_null() && max > 0 {
        return fail(&Error::InvalidArgument("cas is NULL"));
    }
    guard(-EIO, || {
        let names = match cas() {
            Ok(n) => n,
            Err(e) => return fail(&e),
        };
        let n = names.len().min(max);
        for (i, name) in names.iter().take(n).enumerate() {
            // SAFETY: the caller's array holds `max` entries of char[20]; i < max.
            fill_cstr(unsafe { &mut *out.add(i) }, name);
        }
        n as c_int
    })
}

/// `int umad_get_ca_portguids(const char *ca, __be64 *guids, int max)`: numports + 1
/// entries (index 0: a switch's port 0, else 0), -ENOMEM if `max` is too small,
/// -ENODEV for an unknown CA.
pub extern "C" fn umad_get_ca_portguids(ca: *const c_char, guids: *mut u64, max: c_int) -> c_int {
    guard(-EIO, || {
        let info = match ca_info(ca) {
            Ok(i) => i,
            Err(e) => return fail(&e),
        };
        let numports = info
            .ports
            .iter()
            .map(|p| usize::from(p.port_num))
            .max()
            .unwrap_or(0);
        let mut table = vec![0u64; numports + 1];
        for p in &info.ports {
            table[usize::from(p.port_num)] = p.port_guid.to_be();
        }
        if !guids.is_null() {
            if usize::try_from(max).map_or(true, |m| m < table.len()) {
                set_errno(ENOMEM);
                return -ENOMEM;
            }
            // SAFETY: the caller's array holds `max` >= table.len() entries.
            unsafe { core::ptr::copy_nonoverlapping(table.as_ptr(), guids, table.len()) };
        }
        table.len() as c_int
    })
}

fn c_port(ca: &str, p: &PortAttrs) -> UmadPort {
    let mut port = UmadPort {
        ca_name: [0; UMAD_CA_NAME_LEN],
        portnum: c_int::from(p.port_num),
        base_lid: u32::from(p.lid),
        lmc: u32::from(p.lmc),
        sm_lid: u32::from(p.sm_lid),
        sm_sl: u32::from(p.sm_sl),
        state: u32::from(p.state),
        phys_state: u32::from(p.phys_state),
        rate: p.rate,
        capmask: p.capmask.to_be(),
        gid_prefix: p.gid_prefix.to_be(),
        port_guid: p.port_guid.to_be(),
        pkeys_size: p.pkeys.len() as u32,
        pkeys: c_alloc_copy(&p.pkeys),
        link_layer: [0; UMAD_CA_NAME_LEN],
    };
    fill_cstr(&mut port.ca_name, ca);
    fill_cstr(
        &mut port.link_layer,
        match p.link_layer {
            LinkLayer::InfiniBand => "InfiniBand",
            LinkLayer::Ethernet => "Ethernet",
        },
    );
    port
}

/// `int umad_get_ca(const char *ca, umad_ca_t *out)`: 0, -ENODEV, -EINVAL (NULL out),
/// -ENOMEM. `ports[n]` is allocated for each port n; `umad_release_ca` frees them.
pub extern "C" fn umad_get_ca(ca: *const c_char, out: *mut UmadCa) -> c_int {
    if out.is_null() {
        return fail(&Error::InvalidArgument("ca is NULL"));
    }
    guard(-EIO, || {
        let info = match ca_info(ca) {
            Ok(i) => i,
            Err(e) => return fail(&e),
        };
        let mut c = UmadCa {
            ca_name: [0; UMAD_CA_NAME_LEN],
            node_type: u32::from(info.node_type),
            numports: info.ports.len() as c_int,
            fw_ver: [0; 20],
            ca_type: [0; 40],
            hw_ver: [0; 20],
            node_guid: info.node_guid.to_be(),
            system_guid: info.system_guid.to_be(),
            ports: [core::ptr::null_mut(); UMAD_CA_MAX_PORTS],
        };
        fill_cstr(&mut c.ca_name, &info.name);
        fill_cstr(&mut c.fw_ver, &info.fw_ver);
        fill_cstr(&mut c.ca_type, &info.ca_type);
        fill_cstr(&mut c.hw_ver, &info.hw_ver);
        for p in &info.ports {
            let slot = usize::from(p.port_num);
            if slot >= UMAD_CA_MAX_PORTS {
                continue;
            }
            let port = c_alloc_one(c_port(&info.name, p));
            if port.is_null() {
                release_ports(&mut c);
                return fail(&Error::LimitReached("out of memory"));
            }
            c.ports[slot] = port;
        }
        // SAFETY: out is non-NULL and points to a umad_ca_t (libibumad's contract).
        unsafe { out.write_unaligned(c) };
        0
    })
}

fn release_ports(c: &mut UmadCa) {
    for slot in &mut c.ports {
        let p = core::mem::replace(slot, core::ptr::null_mut());
        if !p.is_null() {
            // SAFETY: p came from c_alloc_one in umad_get_ca; its pkeys from c_alloc_copy.
            unsafe {
                c_free((*p).pkeys);
                c_free(p);
            }
        }
    }
}

/// `int umad_release_ca(umad_ca_t *ca)`: frees what `umad_get_ca` allocated; 0.
pub extern "C" fn umad_release_ca(ca: *mut UmadCa) -> c_int {
    if ca.is_null() {
        return fail(&Error::InvalidArgument("ca is NULL"));
    }
    guard(-EIO, || {
        // SAFETY: ca is non-NULL and was filled by umad_get_ca (libibumad's contract).
        let c = unsafe { &mut *ca };
        release_ports(c);
        0
    })
}

/// `int umad_get_port(const char *ca, int portnum, umad_port_t *out)`: 0, -ENODEV,
/// -EINVAL. `pkeys` is malloc'd; `umad_release_port` frees it.
pub extern "C" fn umad_get_port(ca: *const c_char, portnum: c_int, out: *mut UmadPort) -> c_int {
    if out.is_null() {
        return fail(&Error::InvalidArgument("port is NULL"));
    }
    guard(-EIO, || {
        let name = match ca_name(ca).and_then(|n| select::ensure().map(|()| n)) {
            Ok(n) => n,
            Err(e) => return fail(&e),
        };
        let Ok(port) = u8::try_from(portnum) else {
            return fail(&Error::NoDevice(format!("port {portnum}")));
        };
        let resolved = match umad::get_ca(&name) {
            Ok(info) => info.name,
            Err(e) => return fail(&e),
        };
        match umad::get_port(&resolved, port) {
            Ok(p) => {
                // SAFETY: out is non-NULL and points to a umad_port_t (libibumad's contract).
                unsafe { out.write_unaligned(c_port(&resolved, &p)) };
                0
            }
            Err(e) => fail(&e),
        }
    })
}

/// `int umad_release_port(umad_port_t *port)`: frees `pkeys`; 0.
pub extern "C" fn umad_release_port(port: *mut UmadPort) -> c_int {
    if port.is_null() {
        return fail(&Error::InvalidArgument("port is NULL"));
    }
    guard(-EIO, || {
        // SAFETY: port is non-NULL and was filled by umad_get_port (libibumad's contract).
        let p = unsafe { &mut *port };
        // SAFETY: pkeys came from c_alloc_copy (or is NULL).
        unsafe { c_free(core::mem::replace(&mut p.pkeys, core::ptr::null_mut())) };
        p.pkeys_size = 0;
        0
    })
}

/// `struct umad_device_node *umad_get_ca_device_list(void)`: a list of the CAs, or NULL
/// with errno 0 when there are none (ENOMEM / the selection error otherwise).
pub extern "C" fn umad_get_ca_device_list() -> *mut UmadDeviceNode {
    guard(core::ptr::null_mut(), || {
        let names = match cas() {
            Ok(n) => n,
            Err(e) => {
                set_errno(e.errno());
                return core::ptr::null_mut();
            }
        };
        let mut head: *mut UmadDeviceNode = core::ptr::null_mut();
        for name in names.iter().rev() {
            let cname = std::ffi::CString::new(name.as_str()).unwrap_or_default();
            let node = Box::new(UmadDeviceNode {
                next: head,
                ca_name: cname.into_raw(),
            });
            head = Box::into_raw(node);
        }
        if head.is_null() {
            set_errno(0);
        }
        head
    })
}

/// `void umad_free_ca_device_list(struct umad_device_node *head)`.
pub extern "C" fn umad_free_ca_device_list(head: *mut UmadDeviceNode) {
    guard((), || {
        let mut p = head;
        while !p.is_null() {
            // SAFETY: every node came from Box::into_raw in umad_get_ca_device_list, with its
            // name from CString::into_raw; each is freed once.
            let node = unsafe { Box::from_raw(p) };
            if !node.ca_name.is_null() {
                // SAFETY: as above.
                drop(unsafe { std::ffi::CString::from_raw(node.ca_name.cast_mut()) });
            }
            p = node.next;
        }
    })
}

/// `int umad_sort_ca_device_list(struct umad_device_node **head, size_t size)`: sorts by
/// name (size 0: count the nodes first); 0, or EINVAL (a positive errno, errno untouched).
pub extern "C" fn umad_sort_ca_device_list(head: *mut *mut UmadDeviceNode, size: usize) -> c_int {
    if head.is_null() {
        return EINVAL;
    }
    guard(EIO, || {
        let mut nodes = Vec::new();
        // SAFETY: head is non-NULL; the list is a valid chain of umad_device_node.
        let mut p = unsafe { *head };
        while !p.is_null() {
            nodes.push(p);
            // SAFETY: as above.
            p = unsafe { (*p).next };
        }
        if size != 0 && size != nodes.len() {
            return EINVAL;
        }
        // SAFETY: names are NUL-terminated C strings (or NULL, sorted first).
        let key = |n: &*mut UmadDeviceNode| unsafe {
            let name = (**n).ca_name;
            (!name.is_null()).then(|| core::ffi::CStr::from_ptr(name).to_bytes().to_vec())
        };
        nodes.sort_by_key(key);
        let mut next = core::ptr::null_mut();
        for &n in nodes.iter().rev() {
            // SAFETY: n is a node of the caller's list.
            unsafe { (*n).next = next };
            next = n;
        }
        // SAFETY: head is non-NULL.
        unsafe { *head = next };
        0
    })
}

fn pair_of(info: &CaInfo) -> UmadCaPair {
    let preferred = umad::preferred_port(info).map_or(0, |p| u32::from(p.port_num));
    let mut pair = UmadCaPair {
        smi_name: [0; UMAD_CA_NAME_LEN],
        smi_preferred_port: preferred,
        gsi_name: [0; UMAD_CA_NAME_LEN],
        gsi_preferred_port: preferred,
    };
    fill_cstr(&mut pair.smi_name, &info.name);
    fill_cstr(&mut pair.gsi_name, &info.name);
    pair
}

/// `int umad_get_smi_gsi_pairs(struct umad_ca_pair cas[], size_t max)` (IBUMAD_1.4): no vmad
/// CA is planarized, so each CA is its own SMI and GSI. The count written, or -1.
pub extern "C" fn umad_get_smi_gsi_pairs(out: *mut UmadCaPair, max: usize) -> c_int {
    if out.is_null() && max > 0 {
        set_errno(EINVAL);
        return -1;
    }
    guard(-1, || {
        let Ok(names) = cas() else {
            return -1;
        };
        let mut n = 0;
        for name in &names {
            if n == max {
                break;
            }
            let Ok(info) = umad::get_ca(name) else {
                continue;
            };
            // SAFETY: the caller's array holds `max` entries; n < max.
            unsafe { out.add(n).write_unaligned(pair_of(&info)) };
            n += 1;
        }
        n as c_int
    })
}

/// `int umad_get_smi_gsi_pair_by_ca_name(const char *name, uint8_t port,
/// struct umad_ca_pair *pair, unsigned enforce_smi)` (IBUMAD_1.4): 0 found, 1 not found,
/// -ENODEV when the CA does not exist.
pub extern "C" fn umad_get_smi_gsi_pair_by_ca_name(
    name: *const c_char,
    portnum: u8,
    out: *mut UmadCaPair,
    _enforce_smi: u32,
) -> c_int {
    if out.is_null() {
        return fail(&Error::InvalidArgument("pair is NULL"));
    }
    guard(-EIO, || {
        let info = match ca_info(name) {
            Ok(i) => i,
            Err(Error::NoDevice(_)) => {
                set_errno(ENODEV);
                return -ENODEV;
            }
            Err(e) => return fail(&e),
        };
        if portnum != 0 && !info.ports.iter().any(|p| p.port_num == portnum) {
            return 1;
        }
        let mut pair = pair_of(&info);
        if portnum != 0 {
            pair.smi_preferred_port = u32::from(portnum);
            pair.gsi_preferred_port = u32::from(portnum);
        }
        // SAFETY: out is non-NULL and points to a struct umad_ca_pair.
        unsafe { out.write_unaligned(pair) };
        0
    })
}
