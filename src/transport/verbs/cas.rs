//! The host's CAs with every port over vmad's own UD QP: what the drop-in
//! libibumad's `VMAD_TRANSPORT=verbs` opens (features `verbs` and `kernel`).
//!
//! The CAs are listed and described from sysfs as libibumad (and the kernel
//! transport) describe them; an open port is a [`VerbsTransport`], so it has the
//! verbs transport's reach and limits: a GMP client of any remote QP1 and a peer
//! of whoever addresses its QPN, with no QP0, no unsolicited QP1 traffic and no
//! SM role. Register them with [`crate::transport::kernel::register_host_cas_under`].

use std::path::PathBuf;

use super::{VerbsConfig, VerbsTransport};
use crate::transport::kernel::sysfs::Sysfs;
use crate::transport::kernel::{self, KernelCas};
use crate::transport::registry::{CaInfo, CaProvider};
use crate::transport::Transport;
use crate::{Error, Result};

/// The host's CAs, each port opened as a [`VerbsTransport`].
#[derive(Debug)]
pub struct VerbsCas {
    sysfs: Sysfs,
    described: KernelCas,
}

impl VerbsCas {
    /// The CAs of `sysfs`.
    pub fn new(sysfs: Sysfs) -> VerbsCas {
        VerbsCas {
            described: KernelCas::new(sysfs.clone()),
            sysfs,
        }
    }

    /// Open `port` of CA `name` (0: the port libibumad would pick, the first
    /// active one) as vmad's own UD QP.
    ///
    /// # Errors
    /// ENODEV for an unknown CA or port; otherwise as [`VerbsTransport::open`]
    /// (EPERM without CAP_NET_RAW or `privileged-qkey on`).
    pub fn open_verbs(&self, name: &str, port: u8) -> Result<VerbsTransport> {
        let info = self.sysfs.ca_info(name)?;
        let port = kernel::pick_port(&info, port)?.port_num;
        VerbsTransport::open(VerbsConfig {
            device: Some(name.to_owned()),
            port: Some(port),
            ..VerbsConfig::default()
        })
    }
}

impl CaProvider for VerbsCas {
    fn ca_info(&self, name: &str) -> Option<CaInfo> {
        self.described.ca_info(name)
    }

    fn open(&self, name: &str, port: u8) -> Result<Box<dyn Transport>> {
        Ok(Box::new(self.open_verbs(name, port)?))
    }

    fn issm_path(&self, _name: &str, _port: u8) -> Result<Option<PathBuf>> {
        Err(Error::Unsupported(
            "the verbs transport has no SM role: userspace verbs cannot own QP0 or QP1 (the kernel and hybrid transports open the real issm device)",
        ))
    }
}
