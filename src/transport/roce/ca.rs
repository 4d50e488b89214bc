//! A RoCE port as a named CA: what `umad::open_port("vmadroce0", 1)` finds.

use std::sync::Arc;

use super::{RoceConfig, RoceTransport};
use crate::transport::registry::{self, CaInfo, CaProvider};
use crate::transport::Transport;
use crate::{Error, Result};

#[derive(Debug)]
struct RoceCa {
    config: RoceConfig,
}

impl RoceCa {
    fn config(&self, name: &str) -> RoceConfig {
        RoceConfig {
            ca_name: name.to_string(),
            ..self.config.clone()
        }
    }
}

impl CaProvider for RoceCa {
    fn ca_info(&self, name: &str) -> Option<CaInfo> {
        // Describing must not bind the port: the attributes follow from the config alone.
        let attrs = super::port_attrs(&self.config(name));
        Some(CaInfo {
            name: name.to_string(),
            node_type: attrs.node_type,
            node_guid: attrs.node_guid,
            system_guid: attrs.node_guid,
            fw_ver: "0.0.0".into(),
            ca_type: "vmad RoCE v2".into(),
            hw_ver: "0".into(),
            ports: vec![attrs],
        })
    }

    fn open(&self, name: &str, port: u8) -> Result<Box<dyn Transport>> {
        if port > 1 {
            return Err(Error::NoDevice(format!("{name} has one port, not {port}")));
        }
        Ok(Box::new(RoceTransport::open(self.config(name))?))
    }
}

/// Make a RoCE port on `config.addr` openable as CA `name` (e.g.
/// `"vmadroce0"`), port 1, through [`crate::transport::registry`] and the
/// umad API. Each open binds the UDP port; a second open while the first is
/// held fails with EADDRINUSE.
///
/// # Errors
///
/// EADDRINUSE ([`Error::AddressInUse`]) if the name is taken.
pub fn register_ca(name: &str, config: RoceConfig) -> Result<()> {
    registry::register_cas(&[name.to_string()], Arc::new(RoceCa { config }))
}
