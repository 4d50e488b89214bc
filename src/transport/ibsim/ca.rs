//! ibsim nodes as named CAs: what `umad::open_port("ibsim0", 1)` finds.

use std::sync::Arc;

use super::control::{node_candidates, query_attrs, Control};
use super::{sock, IbsimConfig, IbsimTransport};
use crate::transport::registry::{self, CaInfo, CaProvider};
use crate::transport::Transport;
use crate::{Error, Result};

#[derive(Debug)]
struct IbsimCa {
    config: IbsimConfig,
}

impl IbsimCa {
    /// Attach just long enough to read the port (and free the slot again).
    fn describe(&self, name: &str) -> Result<CaInfo> {
        let mut last = Error::NoDevice(format!("{name}: no ibsim node to attach to"));
        for node in node_candidates(self.config.node.as_deref()) {
            let un = sock::open(&self.config.endpoint)?;
            let mut ctl = Control {
                sock: un.ctl,
                slot: None,
                timeout: self.config.ctl_timeout,
            };
            // Never as SM: describing must not take the node's one SM place.
            if let Err(e) = ctl.connect(un.id, 0, false, &node) {
                last = if e.kind() == std::io::ErrorKind::Other {
                    Error::NoDevice(refused(&node))
                } else {
                    e.into()
                };
                continue;
            }
            let mut attrs = query_attrs(&ctl)?;
            attrs.ca_name = name.to_string();
            let vendor = ctl.call(super::proto::CtlType::GetVendor, &[])?;
            // struct sim_vendor {u32 vendor_id, part_id, hw_ver; u64 fw_ver}, host order.
            let word = |at: usize| {
                u32::from_ne_bytes(vendor.data[at..at + 4].try_into().unwrap_or([0; 4]))
            };
            let fw = u64::from_ne_bytes(vendor.data[16..24].try_into().unwrap_or([0; 8]));
            return Ok(CaInfo {
                name: name.to_string(),
                node_type: attrs.node_type,
                node_guid: attrs.node_guid,
                system_guid: attrs.node_guid,
                fw_ver: format!("{fw:x}"),
                ca_type: "simulator".into(),
                hw_ver: format!("{:x}", word(8)),
                ports: vec![attrs],
            });
        }
        Err(last)
    }
}

impl CaProvider for IbsimCa {
    fn ca_info(&self, name: &str) -> Option<CaInfo> {
        self.describe(name).ok()
    }

    fn open(&self, name: &str, port: u8) -> Result<Box<dyn Transport>> {
        let mut t = IbsimTransport::connect(self.config.clone())?;
        if port != 0 && port != t.attrs().port_num {
            return Err(Error::NoDevice(format!(
                "{name} port {port}: ibsim attaches to a node's first port only (port {})",
                t.attrs().port_num
            )));
        }
        t.attrs.ca_name = name.to_string();
        Ok(Box::new(t))
    }
}

/// Make the ibsim node `config` names openable as CA `name` (e.g. `"ibsim0"`,
/// the name umad2sim gives it) through [`crate::transport::registry`] and
/// the umad API. Each open attaches a new ibsim client.
///
/// # Errors
///
/// EADDRINUSE ([`Error::AddressInUse`]) if the name is taken.
pub fn register_ca(name: &str, config: IbsimConfig) -> Result<()> {
    registry::register_cas(&[name.to_string()], Arc::new(IbsimCa { config }))
}

/// As [`register_ca`], in `registry` rather than the process-wide one.
///
/// # Errors
///
/// EADDRINUSE ([`Error::AddressInUse`]) if the name is taken.
pub fn register_ca_in(
    registry: &registry::Registry,
    name: &str,
    config: IbsimConfig,
) -> Result<()> {
    registry.register_cas(&[name.to_string()], Arc::new(IbsimCa { config }))
}

/// Why ibsim answered CONNECT with a bare ERROR.
pub(super) fn refused(node: &str) -> String {
    format!(
        "ibsim refused to attach to node {node:?}: no such node, all 10 client slots \
         taken, or (as SM) an SM already attached"
    )
}
