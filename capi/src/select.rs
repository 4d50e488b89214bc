//! Which fabric the library talks to, chosen once from the environment, and the
//! SM-role (`issm`) device path.
//!
//! | `VMAD_TRANSPORT` | CAs |
//! |---|---|
//! | unset, `VMAD_FABRIC` set | `ibsim0` on the `vmad fabric` server `IBSIM_SOCKNAME` names (what `eval "$(vmad fabric up FILE)"` sets) |
//! | unset | the host's CAs when `/sys/class/infiniband` lists any: as `hybrid` where built in and the GSI Q_Key is permitted (CAP_NET_RAW, or the kernel allows it on a probe QP: `privileged-qkey on`), else as `kernel`; otherwise the embedded fabric (as `sim`) |
//! | `kernel` | the host's CAs (`rxe0`, `mlx5_0`, …) through `/dev/infiniband/umadN`, QP0 where the port has one; vmad's engine does RMPP, timeouts and retries (`vmad::transport::kernel`). Not in a library built with `--no-default-features` |
//! | `hybrid` | the host's CAs, each port over two paths (`vmad::transport::hybrid`): GMPs this process sends as a client over vmad's own UD QP (verbs), SMPs and what must arrive at QP1 through the kernel. Only in a library built with the `hybrid` feature; needs CAP_NET_RAW (or `privileged-qkey on`) |
//! | `sim` | the embedded fabric, a managed subnet: `vmadsim0` (LID 1, the SM) and `vmadsim1` (LID 2) on switch `vmadsw0` (LID 3); `VMAD_SIM_FAULTS="loss=0.1,dup=0.05,reorder=0.1,corrupt=0,delay_us=0,seed=7"` injects faults on both directions |
//! | `sim` + `VMAD_SIM_TOPO=file.net` | the subnet of an ibsim topology file, managed by the embedded SM; the process is the CA `VMAD_SIM_HOST` (default: the file's first CA) |
//! | `ibsim` | `ibsim0`: the node ibsim attaches this process to (`IBSIM_SOCKNAME`, `IBSIM_SERVER_NAME`/`_PORT`, `SIM_HOST`); `SIM_SET_ISSM=1` attaches as the node's SM |
//! | `verbs` | the host's CAs, each port over vmad's own UD QP only (`vmad::transport::verbs`): a GMP client of any remote QP1 (the replies come back to its QPN) and a peer of whoever addresses its QPN; no QP0, no unsolicited QP1 traffic, no SM role. `umad_debug(1)`/`VMAD_LOG` prints each open port's QPN. Only in a library built with the `hybrid` feature; needs CAP_NET_RAW (or `privileged-qkey on`) |
//! | `roce` | `vmadroce0`, port 1: this process **is** QP1 of the RoCE v2 address `VMAD_ROCE_ADDR` (IPv6 or IPv4; one no kernel RoCE device owns), over UDP 4791 |
//!
//! The choice is made at `umad_init` or the first call that needs a CA, and
//! kept for the life of the process. It is never silent where it matters: with
//! `umad_debug(1)` called before it, or `VMAD_LOG` set, one stderr line says
//! what was chosen and why.

use core::ffi::{c_char, c_int};
use std::sync::OnceLock;
use std::time::Duration;

use vmad::error::errno::EIO;
use vmad::subnet::{Fabric, FabricBuilder, FaultConfig};
use vmad::transport::ibsim::{IbsimConfig, IbsimTransport};
use vmad::transport::registry::{self, CaInfo, CaProvider};
use vmad::transport::Transport;
use vmad::umad;
use vmad::{Error, Result};

use crate::boundary::{ca_name, fail, guard};
use crate::dump::ibwarn;

/// The outcome of the selection: `Err` keeps the errno and the message printed once.
static CHOSEN: OnceLock<std::result::Result<Selected, (i32, String)>> = OnceLock::new();

/// What was selected; holds what must live as long as the process.
enum Selected {
    /// The embedded fabric (the default one, or one built here with faults).
    Sim(#[allow(dead_code)] Option<Fabric>),
    /// ibsim through `ibsim0` (registered with the CA registry).
    Ibsim,
    /// The RoCE v2 transport through `vmadroce0` (registered with the CA registry).
    Roce,
    /// The host's CAs through the kernel's umad devices (registered with the CA registry).
    #[cfg(feature = "kernel")]
    Kernel,
    /// The host's CAs, kernel and verbs paths (registered with the CA registry).
    #[cfg(feature = "hybrid")]
    Hybrid,
    /// The host's CAs over vmad's own UD QPs (registered with the CA registry).
    #[cfg(feature = "hybrid")]
    Verbs,
}

/// Select the transport if not done yet.
///
/// # Errors
/// The selection's error, every time: EINVAL for an unknown `VMAD_TRANSPORT` or a bad
/// `VMAD_SIM_FAULTS`, EOPNOTSUPP for `kernel`, `hybrid` or `verbs` where not built in,
/// ENODEV/EIO when ibsim cannot be reached or the host has no CA.
pub(crate) fn ensure() -> Result<()> {
    let chosen = CHOSEN.get_or_init(|| {
        select().map_err(|e| {
            let msg = format!("vmad: transport selection failed: {e}");
            ibwarn("umad_init", format_args!("{msg}"));
            (e.errno(), msg)
        })
    });
    match chosen {
        Ok(_) => Ok(()),
        Err((errno, _)) => Err(error_for(*errno)),
    }
}

/// An error that maps back to `errno` (the first one is consumed by its report).
fn error_for(errno: i32) -> Error {
    use vmad::error::errno::{EINVAL, ENODEV, EOPNOTSUPP};
    match errno {
        EINVAL => Error::InvalidArgument("transport selection failed (see the first error)"),
        ENODEV => Error::NoDevice("transport selection failed (see the first error)".into()),
        EOPNOTSUPP => Error::Unsupported("transport selection failed (see the first error)"),
        _ => Error::Io(std::io::Error::from_raw_os_error(errno)),
    }
}

fn var(k: &str) -> Option<String> {
    std::env::var(k).ok().filter(|v| !v.is_empty())
}

fn select() -> Result<Selected> {
    let forced = var("VMAD_TRANSPORT");
    let (selected, why) = match forced.as_deref() {
        None => select_default()?,
        Some("sim") => (select_sim()?, "VMAD_TRANSPORT=sim".into()),
        Some("ibsim") => (select_ibsim()?, "VMAD_TRANSPORT=ibsim".into()),
        Some("roce") => (select_roce()?, "VMAD_TRANSPORT=roce".into()),
        Some("kernel") => select_kernel("VMAD_TRANSPORT=kernel")?,
        Some("hybrid") => select_hybrid("VMAD_TRANSPORT=hybrid")?,
        Some("verbs") => select_verbs()?,
        Some(_) => {
            return Err(Error::InvalidArgument(
                "VMAD_TRANSPORT must be kernel, hybrid, sim, ibsim, verbs or roce",
            ))
        }
    };
    if logging() {
        ibwarn("umad_init", format_args!("vmad: transport {why}"));
    }
    Ok(selected)
}

/// Whether the choices made are said on stderr (`VMAD_LOG`, or `umad_debug(1)` before).
pub(crate) fn logging() -> bool {
    var("VMAD_LOG").is_some_and(|v| v != "0") || crate::dump::debug_level() >= 1
}

/// `VMAD_TRANSPORT` unset: the host's CAs when it has any, else the embedded fabric.
fn select_default() -> Result<(Selected, String)> {
    if vmad::fabric::selected_by_env() {
        // `eval "$(vmad fabric up FILE)"`: the server it started, over ibsim's protocol.
        let why = "VMAD_TRANSPORT unset and VMAD_FABRIC set: the vmad fabric server (IBSIM_SOCKNAME), as ibsim0";
        return Ok((select_ibsim()?, why.into()));
    }
    #[cfg(feature = "kernel")]
    {
        let cas = vmad::transport::kernel::host_cas();
        if !cas.is_empty() {
            return select_host(&cas);
        }
    }
    let why = if cfg!(feature = "kernel") {
        "VMAD_TRANSPORT unset and /sys/class/infiniband lists no CA: the embedded fabric (vmadsim0, vmadsim1)"
    } else {
        "VMAD_TRANSPORT unset, and this library was built without the kernel transport: the embedded fabric (vmadsim0, vmadsim1)"
    };
    Ok((select_sim()?, why.into()))
}

#[cfg(feature = "kernel")]
fn select_kernel(why: &str) -> Result<(Selected, String)> {
    umad::disable_default_fabric();
    let cas = vmad::transport::kernel::register_host_cas()?;
    Ok((Selected::Kernel, format!("kernel: {why}; CAs {cas:?}")))
}

/// `VMAD_TRANSPORT` unset on a host with CAs: hybrid where it is built in and the
/// GSI Q_Key is permitted, else kernel; the reason says which and why.
#[cfg(feature = "hybrid")]
fn select_host(cas: &[String]) -> Result<(Selected, String)> {
    match vmad::transport::hybrid::gsi_qkey_permission(&cas[0]) {
        Ok(how) => select_hybrid(&format!(
            "VMAD_TRANSPORT unset, the host has CAs {cas:?} and the GSI Q_Key on vmad's own UD QP is permitted: {how}"
        )),
        Err(e) => select_kernel(&format!(
            "VMAD_TRANSPORT unset and the host has CAs {cas:?}; not hybrid: {e}"
        )),
    }
}

#[cfg(all(feature = "kernel", not(feature = "hybrid")))]
fn select_host(cas: &[String]) -> Result<(Selected, String)> {
    select_kernel(&format!(
        "VMAD_TRANSPORT unset and the host has CAs {cas:?}: the kernel's umad devices (this library was built without the hybrid feature)"
    ))
}

#[cfg(feature = "hybrid")]
fn select_hybrid(why: &str) -> Result<(Selected, String)> {
    umad::disable_default_fabric();
    let cas = vmad::transport::hybrid::register_host_cas()?;
    Ok((
        Selected::Hybrid,
        format!("hybrid (client GMPs over vmad's UD QP, the rest through the kernel): {why}; CAs {cas:?}"),
    ))
}

#[cfg(feature = "hybrid")]
fn select_verbs() -> Result<(Selected, String)> {
    umad::disable_default_fabric();
    let cas = vmad::transport::kernel::register_host_cas_under(std::sync::Arc::new(
        AnnouncedVerbsCas(vmad::transport::verbs::cas::VerbsCas::new(
            vmad::transport::kernel::sysfs::Sysfs::host(),
        )),
    ))?;
    Ok((
        Selected::Verbs,
        format!("verbs (vmad's own UD QP per port: a GMP client of remote QP1s and a peer at its QPN; no QP0, no unsolicited QP1 traffic, no SM role): VMAD_TRANSPORT=verbs; CAs {cas:?}"),
    ))
}

/// The verbs CAs, saying where each port opened listens (peers address its QPN:
/// nothing sent to QP1 reaches it).
#[cfg(feature = "hybrid")]
struct AnnouncedVerbsCas(vmad::transport::verbs::cas::VerbsCas);

#[cfg(feature = "hybrid")]
impl CaProvider for AnnouncedVerbsCas {
    fn ca_info(&self, name: &str) -> Option<CaInfo> {
        self.0.ca_info(name)
    }

    fn open(&self, name: &str, port: u8) -> Result<Box<dyn Transport>> {
        let t = self.0.open_verbs(name, port)?;
        if logging() {
            ibwarn(
                "umad_open_port",
                format_args!(
                    "vmad: {name} port {} open over vmad's UD QP, QPN {} (0x{:x})",
                    t.attrs().port_num,
                    t.qpn(),
                    t.qpn()
                ),
            );
        }
        Ok(Box::new(t))
    }

    fn issm_path(&self, name: &str, port: u8) -> Result<Option<std::path::PathBuf>> {
        self.0.issm_path(name, port)
    }
}

#[cfg(not(feature = "hybrid"))]
fn select_verbs() -> Result<(Selected, String)> {
    Err(Error::Unsupported(
        "VMAD_TRANSPORT=verbs: this libibumad was built without the verbs transport (cargo build -p vmad-capi --features hybrid)",
    ))
}

#[cfg(not(feature = "hybrid"))]
fn select_hybrid(_why: &str) -> Result<(Selected, String)> {
    Err(Error::Unsupported(
        "VMAD_TRANSPORT=hybrid: this libibumad was built without the hybrid feature (cargo build -p vmad-capi --features hybrid)",
    ))
}

#[cfg(not(feature = "kernel"))]
fn select_kernel(_why: &str) -> Result<(Selected, String)> {
    Err(Error::Unsupported(
        "VMAD_TRANSPORT=kernel: this libibumad was built without the kernel transport",
    ))
}

fn select_sim() -> Result<Selected> {
    if let Some(path) = var("VMAD_SIM_TOPO") {
        return Ok(Selected::Sim(Some(sim_topology(&path)?)));
    }
    let Some(spec) = var("VMAD_SIM_FAULTS") else {
        // The umad layer builds the default pair on first lookup.
        return Ok(Selected::Sim(None));
    };
    let f = parse_faults(&spec)?;
    // One faulty link, vmadsim1's, with the seed that won when the CAs were linked directly.
    let config = FaultConfig {
        seed: f.seed.wrapping_add(1),
        ..f
    };
    let fabric = Fabric::default_builder()
        .faults("vmadsim1", 1, config)
        .build()?;
    Ok(Selected::Sim(Some(fabric)))
}

/// The fabric of an ibsim topology file; only the process's own CA is registered, as
/// ibsim attaches a client to one node: `VMAD_SIM_HOST`, else the file's first CA.
fn sim_topology(path: &str) -> Result<Fabric> {
    let text = std::fs::read_to_string(path)?;
    let builder = FabricBuilder::from_topology(&text)?;
    let host = var("VMAD_SIM_HOST")
        .or_else(|| builder.ca_names().into_iter().next())
        .ok_or(Error::InvalidArgument("VMAD_SIM_TOPO has no CA"))?;
    builder.register_only(&[&host]).build()
}

/// `loss=0.1,dup=0.05,reorder=0.1,corrupt=0.01,delay_us=20,seed=7`.
pub(crate) fn parse_faults(spec: &str) -> Result<FaultConfig> {
    let bad = || {
        Error::InvalidArgument("VMAD_SIM_FAULTS: expected key=value[,key=value…] with keys loss, dup, reorder, corrupt, delay_us, seed")
    };
    let mut f = FaultConfig::default();
    for item in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let (k, v) = item.split_once('=').ok_or_else(bad)?;
        let p = || {
            v.parse::<f64>()
                .ok()
                .filter(|p| (0.0..=1.0).contains(p))
                .ok_or_else(bad)
        };
        match k.trim() {
            "loss" => f.loss = p()?,
            "dup" => f.dup = p()?,
            "reorder" => f.reorder = p()?,
            "corrupt" => f.corrupt = p()?,
            "delay_us" => f.delay = Duration::from_micros(v.parse().map_err(|_| bad())?),
            "seed" => f.seed = v.parse().map_err(|_| bad())?,
            _ => return Err(bad()),
        }
    }
    Ok(f)
}

/// The CA name the ibsim transport's port carries.
const IBSIM_CA: &str = "ibsim0";

/// `ibsim0`: described by asking ibsim (a short control connection) each time, so
/// LIDs and states set by an SM are reported as they are now.
struct IbsimCa {
    config: IbsimConfig,
}

impl IbsimCa {
    fn probe(&self) -> Result<CaInfo> {
        let probe = IbsimConfig {
            issm: false,
            ..self.config.clone()
        };
        let t = IbsimTransport::connect(probe)?;
        let mut attrs = t.attrs().clone();
        attrs.ca_name = IBSIM_CA.into();
        Ok(CaInfo {
            name: IBSIM_CA.into(),
            node_type: attrs.node_type,
            node_guid: attrs.node_guid,
            system_guid: attrs.node_guid,
            fw_ver: "vmad".into(),
            ca_type: "ibsim".into(),
            hw_ver: "0".into(),
            ports: vec![attrs],
        })
    }
}

impl CaProvider for IbsimCa {
    fn ca_info(&self, name: &str) -> Option<CaInfo> {
        (name == IBSIM_CA).then(|| self.probe().ok()).flatten()
    }

    fn open(&self, name: &str, port: u8) -> Result<Box<dyn Transport>> {
        if name != IBSIM_CA || port > 1 {
            return Err(Error::NoDevice(format!("{name} port {port}")));
        }
        Ok(Box::new(IbsimTransport::connect(self.config.clone())?))
    }
}

fn select_ibsim() -> Result<Selected> {
    let ca = IbsimCa {
        config: IbsimConfig::from_env(),
    };
    // Fail now, with ibsim's own error, rather than as ENODEV on every later lookup.
    ca.probe()?;
    umad::disable_default_fabric();
    registry::register_cas(&[IBSIM_CA.to_owned()], std::sync::Arc::new(ca))?;
    Ok(Selected::Ibsim)
}

/// `vmadroce0` on `VMAD_ROCE_ADDR`; the UDP port is bound when a program opens the port.
fn select_roce() -> Result<Selected> {
    use vmad::transport::roce::{register_ca, RoceConfig};
    let addr = var("VMAD_ROCE_ADDR")
        .and_then(|a| a.parse::<std::net::IpAddr>().ok())
        .ok_or(Error::InvalidArgument(
            "VMAD_TRANSPORT=roce needs VMAD_ROCE_ADDR=<a local IPv6 or IPv4 address>",
        ))?;
    umad::disable_default_fabric();
    register_ca("vmadroce0", RoceConfig::new(addr))?;
    Ok(Selected::Roce)
}

/// `int umad_get_issm_path(const char *ca, int portnum, char path[], int max)`: 0, -ENODEV
/// (no such CA), -EINVAL (no such port, NULL path), -EIO (the file or its watch).
///
/// On the kernel transport, the port's real `/dev/infiniband/issmN`. Elsewhere the path is
/// an empty file of this process's (see `vmad::umad::get_issm_path`): opening
/// it takes the SM role on the port, as opening `/dev/infiniband/issmN` does (on ibsim:
/// the node's SM client, PortInfo:CapMask.IsSM; on the embedded fabric: IsSM, and the
/// built-in SM steps aside), and closing it gives the role up.
///
/// # Safety
/// `ca` is NULL or a NUL-terminated string; `path` is NULL or valid for writes of `max`
/// bytes (initialised or not).
pub unsafe extern "C" fn umad_get_issm_path(
    ca: *const c_char,
    portnum: c_int,
    path: *mut c_char,
    max: c_int,
) -> c_int {
    if path.is_null() {
        return fail(&Error::InvalidArgument("path is NULL"));
    }
    let Ok(max) = usize::try_from(max) else {
        return fail(&Error::InvalidArgument("max is negative"));
    };
    guard(-EIO, || {
        // SAFETY: the caller's contract.
        let name = match unsafe { ca_name(ca) }.and_then(|n| ensure().map(|()| n)) {
            Ok(n) => n,
            Err(e) => return fail(&e),
        };
        // An unknown CA is ENODEV; then an unknown port is EINVAL, as libibumad.
        let info = match umad::get_ca(&name) {
            Ok(i) => i,
            Err(e) => return fail(&e),
        };
        let no_port = || fail(&Error::InvalidArgument("no such port"));
        let Ok(port) = u8::try_from(portnum) else {
            return no_port();
        };
        let file = match umad::get_issm_path(&info.name, port) {
            Ok(f) => f,
            Err(Error::NoDevice(_)) => return no_port(),
            Err(e) => return fail(&e),
        };
        let bytes = file.as_os_str().as_encoded_bytes();
        // snprintf semantics: truncate to max - 1 bytes and terminate.
        if max > 0 {
            let n = bytes.len().min(max - 1);
            // SAFETY: the caller's contract: `max` writable bytes; n + 1 <= max.
            unsafe {
                core::ptr::copy_nonoverlapping(bytes.as_ptr(), path.cast::<u8>(), n);
                *path.add(n) = 0;
            }
        }
        0
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fault_spec_parses() {
        let f = parse_faults("loss=0.1,dup=0.05,reorder=0.1,seed=7").unwrap();
        assert_eq!((f.loss, f.dup, f.reorder, f.seed), (0.1, 0.05, 0.1, 7));
        assert_eq!(
            parse_faults("delay_us=20").unwrap().delay,
            Duration::from_micros(20)
        );
        assert!(parse_faults("loss=2").is_err());
        assert!(parse_faults("bogus=1").is_err());
        assert!(parse_faults("loss").is_err());
        assert_eq!(parse_faults("").unwrap(), FaultConfig::default());
    }
}
