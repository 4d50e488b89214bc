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
    c_alloc_copy, c_alloc_one, c_free, c_str_array, ca_name, fail, guard, set_errno,
};
use crate::select;

/// The CAs of the chosen transport, sorted by name.
fn cas() -> vmad::Result<Vec<String>> {
    select::ensure()?;
    Ok(umad::get_cas_names())
}

/// # Safety
/// `ca` is NULL or a NUL-terminated string.
unsafe fn ca_info(ca: *const c_char) -> vmad::Result<CaInfo> {
    // SAFETY: the caller's contract.
    let name = unsafe { ca_name(ca) }?;
    select::ensure()?;
    umad::get_ca(&name)
}

/// `int umad_get_cas_names(char cas[][20], int max)`: how many names were written.
///
/// # Safety
/// `out` is NULL (then `max` is 0) or valid for writes of `max` `char[20]` entries,
/// initialised or not.
pub unsafe extern "C" fn umad_get_cas_names(
    out: *mut [c_char; UMAD_CA_NAME_LEN],
    max: c_int,
) -> c_int {
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
            // SAFETY: the caller's contract: `max` writable entries; i < max. The entry is
            // written whole, never lent as a reference (it may be uninitialised).
            unsafe { out.add(i).write(c_str_array(name)) };
        }
        n as c_int
    })
}

/// `int umad_get_ca_portguids(const char *ca, __be64 *guids, int max)`: numports + 1
/// entries (index 0: a switch's port 0, else 0), -ENOMEM if `max` is too small,
/// -ENODEV for an unknown CA.
///
/// # Safety
/// `ca` is NULL or a NUL-terminated string; `guids` is NULL or valid for writes of `max`
/// `__be64`s (initialised or not, any alignment).
pub unsafe extern "C" fn umad_get_ca_portguids(
    ca: *const c_char,
    guids: *mut u64,
    max: c_int,
) -> c_int {
    guard(-EIO, || {
        // SAFETY: the caller's contract.
        let info = match unsafe { ca_info(ca) } {
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
            // SAFETY: the caller's contract: `max` >= table.len() writable entries; copied
            // bytewise, so their alignment does not matter.
            unsafe {
                core::ptr::copy_nonoverlapping(
                    table.as_ptr().cast::<u8>(),
                    guids.cast::<u8>(),
                    core::mem::size_of_val(table.as_slice()),
                )
            };
        }
        table.len() as c_int
    })
}

fn c_port(ca: &str, p: &PortAttrs) -> UmadPort {
    UmadPort {
        ca_name: c_str_array(ca),
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
        link_layer: c_str_array(match p.link_layer {
            LinkLayer::InfiniBand => "InfiniBand",
            LinkLayer::Ethernet => "Ethernet",
        }),
    }
}

/// `int umad_get_ca(const char *ca, umad_ca_t *out)`: 0, -ENODEV, -EINVAL (NULL out),
/// -ENOMEM. `ports[n]` is allocated for each port n; `umad_release_ca` frees them.
///
/// # Safety
/// `ca` is NULL or a NUL-terminated string; `out` is NULL or valid for writes of a
/// `umad_ca_t` (initialised or not, any alignment: it is written whole, bytewise).
pub unsafe extern "C" fn umad_get_ca(ca: *const c_char, out: *mut UmadCa) -> c_int {
    if out.is_null() {
        return fail(&Error::InvalidArgument("ca is NULL"));
    }
    guard(-EIO, || {
        // SAFETY: the caller's contract.
        let info = match unsafe { ca_info(ca) } {
            Ok(i) => i,
            Err(e) => return fail(&e),
        };
        let mut c = UmadCa {
            ca_name: c_str_array(&info.name),
            node_type: u32::from(info.node_type),
            numports: info.ports.len() as c_int,
            fw_ver: c_str_array(&info.fw_ver),
            ca_type: c_str_array(&info.ca_type),
            hw_ver: c_str_array(&info.hw_ver),
            node_guid: info.node_guid.to_be(),
            system_guid: info.system_guid.to_be(),
            ports: [core::ptr::null_mut(); UMAD_CA_MAX_PORTS],
        };
        for p in &info.ports {
            let slot = usize::from(p.port_num);
            if slot >= UMAD_CA_MAX_PORTS {
                continue;
            }
            let port = c_alloc_one(c_port(&info.name, p));
            if port.is_null() {
                release_ports(&mut c.ports);
                return fail(&Error::LimitReached("out of memory"));
            }
            c.ports[slot] = port;
        }
        // SAFETY: the caller's contract; out is non-NULL.
        unsafe { out.write_unaligned(c) };
        0
    })
}

/// Free the ports `umad_get_ca` allocated, and set their slots to NULL.
fn release_ports(ports: &mut [*mut UmadPort; UMAD_CA_MAX_PORTS]) {
    for slot in ports {
        let p = core::mem::replace(slot, core::ptr::null_mut());
        if !p.is_null() {
            // SAFETY: p came from c_alloc_one in umad_get_ca (malloc: aligned for
            // UmadPort), its pkeys from c_alloc_copy; each is freed once.
            unsafe {
                c_free((*p).pkeys);
                c_free(p);
            }
        }
    }
}

/// `int umad_release_ca(umad_ca_t *ca)`: frees what `umad_get_ca` allocated; 0.
///
/// # Safety
/// `ca` is NULL or valid for reads and writes of a `umad_ca_t` that `umad_get_ca` filled
/// and that was not released since (any alignment: its `ports` are read and written
/// bytewise).
pub unsafe extern "C" fn umad_release_ca(ca: *mut UmadCa) -> c_int {
    if ca.is_null() {
        return fail(&Error::InvalidArgument("ca is NULL"));
    }
    guard(-EIO, || {
        // SAFETY: the caller's contract; ca is non-NULL (only the field's place is made).
        let ports = unsafe { core::ptr::addr_of_mut!((*ca).ports) };
        // SAFETY: as above.
        let mut taken = unsafe { ports.read_unaligned() };
        release_ports(&mut taken);
        // SAFETY: as above.
        unsafe { ports.write_unaligned(taken) };
        0
    })
}

/// `int umad_get_port(const char *ca, int portnum, umad_port_t *out)`: 0, -ENODEV,
/// -EINVAL. `pkeys` is malloc'd; `umad_release_port` frees it.
///
/// # Safety
/// `ca` is NULL or a NUL-terminated string; `out` is NULL or valid for writes of a
/// `umad_port_t` (initialised or not, any alignment: it is written whole, bytewise).
pub unsafe extern "C" fn umad_get_port(
    ca: *const c_char,
    portnum: c_int,
    out: *mut UmadPort,
) -> c_int {
    if out.is_null() {
        return fail(&Error::InvalidArgument("port is NULL"));
    }
    guard(-EIO, || {
        // SAFETY: the caller's contract.
        let name = match unsafe { ca_name(ca) }.and_then(|n| select::ensure().map(|()| n)) {
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
                // SAFETY: the caller's contract; out is non-NULL.
                unsafe { out.write_unaligned(c_port(&resolved, &p)) };
                0
            }
            Err(e) => fail(&e),
        }
    })
}

/// `int umad_release_port(umad_port_t *port)`: frees `pkeys`; 0.
///
/// # Safety
/// `port` is NULL or valid for reads and writes of a `umad_port_t` that `umad_get_port`
/// filled and that was not released since (any alignment: its fields are read and
/// written bytewise).
pub unsafe extern "C" fn umad_release_port(port: *mut UmadPort) -> c_int {
    if port.is_null() {
        return fail(&Error::InvalidArgument("port is NULL"));
    }
    guard(-EIO, || {
        // SAFETY: the caller's contract; port is non-NULL. pkeys came from c_alloc_copy
        // (or is NULL) and is freed once: NULL is stored in its place.
        unsafe {
            let pkeys = core::ptr::addr_of_mut!((*port).pkeys);
            c_free(pkeys.read_unaligned());
            pkeys.write_unaligned(core::ptr::null_mut());
            core::ptr::addr_of_mut!((*port).pkeys_size).write_unaligned(0);
        }
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
///
/// # Safety
/// `head` is NULL or a list `umad_get_ca_device_list` returned (sorted or not), not
/// freed since and not used again.
pub unsafe extern "C" fn umad_free_ca_device_list(head: *mut UmadDeviceNode) {
    guard((), || {
        let mut p = head;
        while !p.is_null() {
            // SAFETY: the caller's contract: every node came from Box::into_raw in
            // umad_get_ca_device_list, with its name from CString::into_raw; each is freed once.
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
///
/// # Safety
/// `head` is NULL or valid for reads and writes of a pointer (any alignment) to a list
/// `umad_get_ca_device_list` returned, not freed since.
pub unsafe extern "C" fn umad_sort_ca_device_list(
    head: *mut *mut UmadDeviceNode,
    size: usize,
) -> c_int {
    if head.is_null() {
        return EINVAL;
    }
    guard(EIO, || {
        let mut nodes = Vec::new();
        // SAFETY: the caller's contract; head is non-NULL.
        let mut p = unsafe { head.read_unaligned() };
        while !p.is_null() {
            nodes.push(p);
            // SAFETY: the caller's contract: p is a node of our list (a Box: aligned).
            p = unsafe { (*p).next };
        }
        if size != 0 && size != nodes.len() {
            return EINVAL;
        }
        // SAFETY: the nodes are ours; their names NUL-terminated C strings of
        // CString::into_raw (or NULL, sorted first).
        let key = |n: &*mut UmadDeviceNode| unsafe {
            let name = (**n).ca_name;
            (!name.is_null()).then(|| core::ffi::CStr::from_ptr(name).to_bytes().to_vec())
        };
        nodes.sort_by_key(key);
        let mut next = core::ptr::null_mut();
        for &n in nodes.iter().rev() {
            // SAFETY: n is a node of our list.
            unsafe { (*n).next = next };
            next = n;
        }
        // SAFETY: as for the read of head above.
        unsafe { head.write_unaligned(next) };
        0
    })
}

fn pair_of(info: &CaInfo) -> UmadCaPair {
    let preferred = umad::preferred_port(info).map_or(0, |p| u32::from(p.port_num));
    UmadCaPair {
        smi_name: c_str_array(&info.name),
        smi_preferred_port: preferred,
        gsi_name: c_str_array(&info.name),
        gsi_preferred_port: preferred,
    }
}

/// `int umad_get_smi_gsi_pairs(struct umad_ca_pair cas[], size_t max)` (IBUMAD_1.4): no vmad
/// CA is planarized, so each CA is its own SMI and GSI. The count written, or -1.
///
/// # Safety
/// `out` is NULL (then `max` is 0) or valid for writes of `max` `struct umad_ca_pair`s
/// (initialised or not, any alignment).
pub unsafe extern "C" fn umad_get_smi_gsi_pairs(out: *mut UmadCaPair, max: usize) -> c_int {
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
            // SAFETY: the caller's contract: `max` writable entries; n < max.
            unsafe { out.add(n).write_unaligned(pair_of(&info)) };
            n += 1;
        }
        n as c_int
    })
}

/// `int umad_get_smi_gsi_pair_by_ca_name(const char *name, uint8_t port,
/// struct umad_ca_pair *pair, unsigned enforce_smi)` (IBUMAD_1.4): 0 found, 1 not found,
/// -ENODEV when the CA does not exist.
///
/// # Safety
/// `name` is NULL or a NUL-terminated string; `out` is NULL or valid for writes of a
/// `struct umad_ca_pair` (initialised or not, any alignment).
pub unsafe extern "C" fn umad_get_smi_gsi_pair_by_ca_name(
    name: *const c_char,
    portnum: u8,
    out: *mut UmadCaPair,
    _enforce_smi: u32,
) -> c_int {
    if out.is_null() {
        return fail(&Error::InvalidArgument("pair is NULL"));
    }
    guard(-EIO, || {
        // SAFETY: the caller's contract.
        let info = match unsafe { ca_info(name) } {
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
        // SAFETY: the caller's contract; out is non-NULL.
        unsafe { out.write_unaligned(pair) };
        0
    })
}
