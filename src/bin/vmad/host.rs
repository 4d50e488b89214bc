//! The host's CAs: `--transport kernel|hybrid`, and the default the C drop-in
//! would choose when neither `--transport` nor `VMAD_TRANSPORT` says
//! (`capi/src/select.rs`: the host's CAs when sysfs lists any, as `hybrid` where
//! built in and the GSI Q_Key is permitted, else as `kernel`; otherwise `sim`).

use std::sync::Arc;

use vmad::port::{Port, PortConfig};

use crate::exit::Exit;
use crate::{Cli, Failure, TransportKind};

/// The host's CA names (libibumad's list); empty without the kernel transport.
fn host_cas() -> Vec<String> {
    #[cfg(feature = "kernel")]
    {
        vmad::transport::kernel::host_cas()
    }
    #[cfg(not(feature = "kernel"))]
    {
        Vec::new()
    }
}

/// What the drop-in picks with `VMAD_TRANSPORT` unset.
pub(crate) fn default_kind() -> TransportKind {
    let cas = host_cas();
    let Some(_first) = cas.first() else {
        return TransportKind::Sim;
    };
    #[cfg(all(feature = "kernel", feature = "verbs"))]
    if vmad::transport::hybrid::gsi_qkey_permission(_first).is_ok() {
        return TransportKind::Hybrid;
    }
    TransportKind::Kernel
}

/// `-C`, else the host's first CA; a host without any is told so.
fn ca(cli: &Cli, kind: &str) -> Result<String, Failure> {
    if let Some(ca) = &cli.ca {
        return Ok(ca.clone());
    }
    host_cas().into_iter().next().ok_or_else(|| {
        Failure::new(
            Exit::NoDevice,
            format!(
                "--transport {kind}: this host has no CA (/sys/class/infiniband lists none); \
                 --transport sim runs on the embedded fabric, ibsim on a running ibsim"
            ),
        )
    })
}

#[cfg(feature = "kernel")]
pub(crate) fn open_kernel(cli: &Cli, config: PortConfig) -> Result<Arc<Port>, Failure> {
    use vmad::transport::kernel::{sysfs::Sysfs, KernelTransport};
    let ca = ca(cli, "kernel")?;
    let t = KernelTransport::open(&Sysfs::host(), &ca, cli.port)
        .map_err(|e| opening("kernel", &ca, e))?;
    Ok(Arc::new(Port::open(Box::new(t), config)?))
}

#[cfg(not(feature = "kernel"))]
pub(crate) fn open_kernel(_cli: &Cli, _config: PortConfig) -> Result<Arc<Port>, Failure> {
    Err(Failure::new(
        Exit::Unsupported,
        "this vmad was built without the `kernel` feature",
    ))
}

#[cfg(all(feature = "kernel", feature = "verbs"))]
pub(crate) fn open_hybrid(cli: &Cli, config: PortConfig) -> Result<Arc<Port>, Failure> {
    use vmad::transport::{hybrid::HybridTransport, kernel::sysfs::Sysfs};
    let ca = ca(cli, "hybrid")?;
    let t = HybridTransport::open(&Sysfs::host(), &ca, cli.port)
        .map_err(|e| opening("hybrid", &ca, e))?;
    Ok(Arc::new(Port::open(Box::new(t), config)?))
}

#[cfg(not(all(feature = "kernel", feature = "verbs")))]
pub(crate) fn open_hybrid(_cli: &Cli, _config: PortConfig) -> Result<Arc<Port>, Failure> {
    Err(Failure::new(
        Exit::Unsupported,
        "this vmad was built without the hybrid transport (cargo build --features verbs)",
    ))
}

/// The stack's error, with the transport and CA it came from.
#[cfg(feature = "kernel")]
fn opening(kind: &str, ca: &str, e: vmad::Error) -> Failure {
    let f = Failure::from(e);
    Failure::new(
        f.exit,
        format!("--transport {kind}: cannot open {ca}: {}", f.msg),
    )
}
