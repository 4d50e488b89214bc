//! Registries of named CAs, and the process-wide one.
//!
//! Whatever can be opened by name (`umad::open_port("vmadsim0", 1)`)
//! registers in a [`Registry`]: every [`crate::subnet::Fabric`] built with
//! `build()` (in the process-wide registry, [`global`]), and any other transport
//! that wants to be found by name. Names are unique: registering a taken name fails.
//!
//! A registry may have [`DefaultCas`]: what it offers when asked for CAs before any
//! of the default's are registered (the process-wide registry's is the embedded
//! fabric's pair, `vmadsim0` and `vmadsim1`: [`crate::subnet::DefaultPair`]). The layers
//! above choose a transport by CA name only, never by naming one.

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

/// The CAs a registry offers before any of them is registered, built on first need.
pub trait DefaultCas: Send + Sync {
    /// Whether the default CAs are (or were made) registered in `registry`:
    /// register them there unless one of their names is taken. Losing a race to
    /// another thread registering them is fine: they exist either way.
    fn ensure(&self, registry: &Arc<Registry>);
}

type Table = BTreeMap<String, Arc<dyn CaProvider>>;

/// Named CAs and who opens them.
#[derive(Default)]
pub struct Registry {
    cas: Mutex<Table>,
    default: Mutex<Option<Arc<dyn DefaultCas>>>,
}

impl core::fmt::Debug for Registry {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Registry")
            .field("cas", &self.ca_names())
            .finish_non_exhaustive()
    }
}

/// The process-wide registry (whose default is the embedded fabric's pair).
pub fn global() -> &'static Arc<Registry> {
    crate::global_registry()
}

impl Registry {
    /// An empty registry without default CAs.
    pub fn new() -> Registry {
        Registry::default()
    }

    /// An empty registry offering `default` when asked before it has CAs of its own.
    pub fn with_default(default: Arc<dyn DefaultCas>) -> Registry {
        let r = Registry::new();
        r.set_default(Some(default));
        r
    }

    /// Replace (or with `None`, drop) the default CAs. For a caller that chose another
    /// transport (the C library with `VMAD_TRANSPORT=ibsim`), so that only that
    /// transport's CAs are listed and opened.
    pub fn set_default(&self, default: Option<Arc<dyn DefaultCas>>) {
        *self.default.lock().unwrap_or_else(PoisonError::into_inner) = default;
    }

    /// Register the default CAs unless already done (or there is no default).
    pub fn ensure_default(self: &Arc<Self>) {
        let default = self
            .default
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        if let Some(d) = default {
            d.ensure(self);
        }
    }

    fn table(&self) -> MutexGuard<'_, Table> {
        self.cas.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Register every name in `names` with `provider`, all or none.
    ///
    /// # Errors
    /// EADDRINUSE ([`Error::AddressInUse`]) if any name is taken; nothing is registered then.
    pub fn register_cas(&self, names: &[String], provider: Arc<dyn CaProvider>) -> Result<()> {
        let mut t = self.table();
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
    pub fn unregister_ca(&self, name: &str) {
        self.table().remove(name);
    }

    /// Whether `name` is registered.
    pub fn contains(&self, name: &str) -> bool {
        self.table().contains_key(name)
    }

    /// Registered CA names, sorted (as libibumad's `alphasort`).
    pub fn ca_names(&self) -> Vec<String> {
        self.table().keys().cloned().collect()
    }

    /// Describe CA `name`.
    ///
    /// # Errors
    /// ENODEV if it is not registered.
    pub fn ca_info(&self, name: &str) -> Result<CaInfo> {
        self.provider_of(name)?
            .ca_info(name)
            .ok_or_else(|| Error::NoDevice(format!("{name} does not answer")))
    }

    fn provider_of(&self, name: &str) -> Result<Arc<dyn CaProvider>> {
        let table = self.table();
        table.get(name).cloned().ok_or_else(|| {
            let known: Vec<&String> = table.keys().collect();
            Error::NoDevice(format!("no CA named {name:?} (known: {known:?})"))
        })
    }

    /// Open `port` of CA `name`.
    ///
    /// # Errors
    /// ENODEV if it is not registered or has no such port; EADDRINUSE if the port is open.
    pub fn open(&self, name: &str, port: u8) -> Result<Box<dyn Transport>> {
        self.provider_of(name)?.open(name, port)
    }

    /// The real SM-role device of `port` of CA `name`, if its provider has one
    /// (see [`CaProvider::issm_path`]).
    ///
    /// # Errors
    /// ENODEV if `name` is not registered; otherwise the provider's.
    pub fn issm_path(&self, name: &str, port: u8) -> Result<Option<PathBuf>> {
        self.provider_of(name)?.issm_path(name, port)
    }
}

/// [`Registry::register_cas`] on the process-wide registry.
///
/// # Errors
/// As [`Registry::register_cas`].
pub fn register_cas(names: &[String], provider: Arc<dyn CaProvider>) -> Result<()> {
    global().register_cas(names, provider)
}

/// [`Registry::unregister_ca`] on the process-wide registry.
pub fn unregister_ca(name: &str) {
    global().unregister_ca(name);
}

/// [`Registry::contains`] on the process-wide registry.
pub fn contains(name: &str) -> bool {
    global().contains(name)
}

/// [`Registry::ca_names`] on the process-wide registry.
pub fn ca_names() -> Vec<String> {
    global().ca_names()
}

/// [`Registry::ca_info`] on the process-wide registry.
///
/// # Errors
/// As [`Registry::ca_info`].
pub fn ca_info(name: &str) -> Result<CaInfo> {
    global().ca_info(name)
}

/// [`Registry::open`] on the process-wide registry.
///
/// # Errors
/// As [`Registry::open`].
pub fn open(name: &str, port: u8) -> Result<Box<dyn Transport>> {
    global().open(name, port)
}

/// [`Registry::issm_path`] on the process-wide registry.
///
/// # Errors
/// As [`Registry::issm_path`].
pub fn issm_path(name: &str, port: u8) -> Result<Option<PathBuf>> {
    global().issm_path(name, port)
}
