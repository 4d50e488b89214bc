//! The exported C symbols.
//!
//! rustc links a cdylib with its own anonymous version script that lists every
//! `#[no_mangle]` function, and a linker lets that list win over ours, which would
//! leave the symbols unversioned. So the entry points are ordinary (mangled,
//! unexported) Rust functions, and each C name is a two-instruction trampoline
//! defined in assembly: rustc does not know these names, so only
//! `libibumad.map` places them, at IBUMAD_1.0 … IBUMAD_1.4. `umad_recv` and
//! `umad_poll` come from `src/wait.c`, over two hidden entry points defined here.

macro_rules! export {
    ($($name:ident => $path:path,)*) => {
        $(export!(@one "", $name => $path);)*
    };
    (hidden: $($name:ident => $path:path,)*) => {
        $(export!(@one concat!(".hidden ", stringify!($name)), $name => $path);)*
    };
    (@one $hidden:expr, $name:ident => $path:path) => {
            #[cfg(target_arch = "x86_64")]
            core::arch::global_asm!(
                concat!(".globl ", stringify!($name)),
                $hidden,
                concat!(".type ", stringify!($name), ", @function"),
                ".p2align 4",
                concat!(stringify!($name), ":"),
                ".cfi_startproc",
                "jmp {0}",
                ".cfi_endproc",
                concat!(".size ", stringify!($name), ", . - ", stringify!($name)),
                sym $path,
            );
            #[cfg(target_arch = "aarch64")]
            core::arch::global_asm!(
                concat!(".globl ", stringify!($name)),
                $hidden,
                concat!(".type ", stringify!($name), ", %function"),
                ".p2align 2",
                concat!(stringify!($name), ":"),
                ".cfi_startproc",
                "b {0}",
                ".cfi_endproc",
                concat!(".size ", stringify!($name), ", . - ", stringify!($name)),
                sym $path,
            );
    };
}

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
compile_error!("vmad-capi exports its symbols from x86_64 or aarch64 assembly only");

use crate::{devices, dump, header, ports, select, strings, waiting};

export! {
    umad_size => header::umad_size,
    umad_get_mad => header::umad_get_mad,
    umad_get_mad_addr => header::umad_get_mad_addr,
    umad_status => header::umad_status,
    umad_set_addr => header::umad_set_addr,
    umad_set_addr_net => header::umad_set_addr_net,
    umad_set_grh => header::umad_set_grh,
    umad_set_pkey => header::umad_set_pkey,
    umad_get_pkey => header::umad_get_pkey,
    umad_init => ports::umad_init,
    umad_done => ports::umad_done,
    umad_open_port => ports::umad_open_port,
    umad_open_smi_port => ports::umad_open_smi_port,
    umad_close_port => ports::umad_close_port,
    umad_get_fd => ports::umad_get_fd,
    umad_register => ports::umad_register,
    umad_register_oui => ports::umad_register_oui,
    umad_register2 => ports::umad_register2,
    umad_unregister => ports::umad_unregister,
    umad_send => ports::umad_send,
    umad_get_cas_names => devices::umad_get_cas_names,
    umad_get_ca_portguids => devices::umad_get_ca_portguids,
    umad_get_ca => devices::umad_get_ca,
    umad_release_ca => devices::umad_release_ca,
    umad_get_port => devices::umad_get_port,
    umad_release_port => devices::umad_release_port,
    umad_get_ca_device_list => devices::umad_get_ca_device_list,
    umad_free_ca_device_list => devices::umad_free_ca_device_list,
    umad_sort_ca_device_list => devices::umad_sort_ca_device_list,
    umad_get_smi_gsi_pairs => devices::umad_get_smi_gsi_pairs,
    umad_get_smi_gsi_pair_by_ca_name => devices::umad_get_smi_gsi_pair_by_ca_name,
    umad_get_issm_path => select::umad_get_issm_path,
    umad_class_str => strings::umad_class_str,
    umad_method_str => strings::umad_method_str,
    umad_attribute_str => strings::umad_attribute_str,
    umad_common_mad_status_str => strings::umad_common_mad_status_str,
    umad_sa_mad_status_str => strings::umad_sa_mad_status_str,
    umad_debug => dump::umad_debug,
    umad_addr_dump => dump::umad_addr_dump,
    umad_dump => dump::umad_dump,
}

// For src/wait.c, which defines umad_recv and umad_poll: linkable, never exported.
export! {
    hidden:
    vmad_capi_recv_nb => ports::recv_nonblocking,
    vmad_capi_recv_before_wait => ports::recv_before_wait,
    vmad_capi_poll_nb => ports::poll_nonblocking,
    vmad_capi_wait_begin => waiting::wait_begin,
    vmad_capi_wait_end => waiting::wait_end,
    vmad_capi_spin_us => waiting::spin_us,
    vmad_capi_waited => waiting::waited,
}
