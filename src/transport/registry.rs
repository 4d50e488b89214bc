//! The process-wide registry of named CAs.
//!
//! Whatever can be opened by name (`umad::open_port("vmadsim0", 1)`)
//! registers here: every [`crate::transport::sim::Fabric`] built with
//! `build()`, and any other transport that wants to be found by name.
//! Names are unique: registering a taken name fails.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use super::{PortAttrs, Transport};
use crate::{Error, Result};

/// What `umad_get_ca` reports about a CA.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CaInfo {
    /// CA name, under 20 bytes.
    pub name: String,
    /// Node type (1 CA, 2 switch, 3 router).
    pub node_type: u8,
    /// Node GUID.
    pub node_guid: u64,
    /// System image GUID.
    pub system_guid: u64,
    /// Firmware version string.
    pub fw_ver: String,
    /// CA type string.
    pub ca_type: String,
    /// Hardware version string.
    pub hw_ver: String,
    /// Its ports, port 1 first.
    pub ports: Vec<PortAttrs>,
}

/// Something that can describe and open the CAs it registered.
pub trait CaProvider: Send + Sync {
    /// Describe CA `name`, if it is one of this provider's.
    fn ca_info(&self, name: &str) -> Option<CaInfo>;

    /// Open `port` of CA `name` (0 = the first usable port).
    ///
    /// # Errors
    /// ENODEV for an unknown CA or port; EADDRINUSE if the port is already open.
    fn open(&self, name: &str, port: u8) -> Result<Box<dyn Transport>>;

    /// The device whose open takes the SM role on `port` of CA `name`, where the CA
    /// has a real one (the kernel's `/dev/infiniband/issmN`). `None` (the default):
    /// vmad stands in for it (see `umad::get_issm_path`).
    ///
    /// # Errors
    /// ENODEV for an unknown CA or port; EOPNOTSUPP where the port has no SM role
    /// (RoCE).
    fn issm_path(&self, _name: &str, _port: u8) -> Result<Option<PathBuf>> {
        Ok(None)
    }
}

type Table = BTreeMap<String, Arc<dyn CaProvider>>;

static REGISTRY: Mutex<Table> = Mutex::new(BTreeMap::new());

fn table() -> MutexGuard<'static, Table> {
    REGISTRY.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Register every name in `names` with `provider`, all or none.
///
/// # Errors
/// EADDRINUSE ([`Error::AddressInUse`]) if any name is taken; nothing is registered then.
pub fn register_cas(names: &[String], provider: Arc<dyn CaProvider>) -> Result<()> {
    let mut t = table();
    if let Some(taken) = names.iter().find(|n| t.contains_key(n.as_str())) {
        return Err(Error::AddressInUse(format!(
            "CA name {taken} is registered"
        )));
    }
    for name in names {
        t.insert(name.clone(), provider.clone());
    }
    Ok(())
}

/// Forget CA `name`; ports already open keep working.
pub fn unregister_ca(name: &str) {
    table().remove(name);
}

/// Whether `name` is registered.
pub fn contains(name: &str) -> bool {
    table().contains_key(name)
}

/// Registered CA names, sorted (as libibumad's `alphasort`).
pub fn ca_names() -> Vec<String> {
    table().keys().cloned().collect()
}

/// Describe CA `name`.
///
/// # Errors
/// ENODEV if it is not registered.
pub fn ca_info(name: &str) -> Result<CaInfo> {
    let provider = provider_of(name)?;
    provider
        .ca_info(name)
        .ok_or_else(|| Error::NoDevice(format!("{name} does not answer")))
}

fn provider_of(name: &str) -> Result<Arc<dyn CaProvider>> {
    let table = table();
    table.get(name).cloned().ok_or_else(|| {
        let known: Vec<&String> = table.keys().collect();
        Error::NoDevice(format!("no CA named {name:?} (known: {known:?})"))
    })
}

/// Open `port` of CA `name`.
///
/// # Errors
/// ENODEV if it is not registered or has no such port; EADDRINUSE if the port is open.
pub fn open(name: &str, port: u8) -> Result<Box<dyn Transport>> {
    let provider = provider_of(name)?;
    provider.open(name, port)
}

/// The real SM-role device of `port` of CA `name`, if its provider has one
/// (see [`CaProvider::issm_path`]).
///
/// # Errors
/// ENODEV if `name` is not registered; otherwise the provider's.
pub fn issm_path(name: &str, port: u8) -> Result<Option<PathBuf>> {
    provider_of(name)?.issm_path(name, port)
}
