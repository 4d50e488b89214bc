//! Keys per destination: the M_Key each SMP carries (IBA 14.2.4) and the SM_Key of
//! SA requests (IBA 15.2.1.1). [`ClientConfig::m_key`](super::ClientConfig::m_key) and
//! [`ClientConfig::sm_key`](super::ClientConfig::sm_key) are the keys of destinations
//! the table does not name.

use std::collections::HashMap;
use std::sync::PoisonError;

use super::{Client, Target};

/// The client's key table.
#[derive(Debug, Default)]
pub(crate) struct Keys {
    m_keys: HashMap<Target, u64>,
    sm_keys: HashMap<u16, u64>,
}

impl Client {
    /// Send `key` as the M_Key of every SMP to `to` from now on (`None`: the
    /// configured default again).
    ///
    /// The table is keyed by the target as written: a node's port reached by LID
    /// and by a directed route are two entries (the client cannot know they are the
    /// same port until it asks), and a directed route's key is its last hop's.
    pub fn set_m_key(&self, to: &Target, key: Option<u64>) {
        let mut keys = self
            .inner
            .keys
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        match key {
            Some(k) => keys.m_keys.insert(to.clone(), k),
            None => keys.m_keys.remove(to),
        };
    }

    /// The M_Key SMPs to `to` carry: the table's, else [`ClientConfig::m_key`](super::ClientConfig::m_key).
    pub fn m_key(&self, to: &Target) -> u64 {
        let keys = self
            .inner
            .keys
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        keys.m_keys
            .get(to)
            .copied()
            .unwrap_or(self.inner.config.m_key)
    }

    /// Send `key` as the SM_Key of every SA request to the SA at `sa_lid` from now on
    /// (`None`: the configured default again). Only the SA class has an SM_Key; the
    /// other classes' calls carry none.
    pub fn set_sm_key(&self, sa_lid: u16, key: Option<u64>) {
        let mut keys = self
            .inner
            .keys
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        match key {
            Some(k) => keys.sm_keys.insert(sa_lid, k),
            None => keys.sm_keys.remove(&sa_lid),
        };
    }

    /// The SM_Key SA requests to `sa_lid` carry: the table's, else
    /// [`ClientConfig::sm_key`](super::ClientConfig::sm_key).
    pub fn sm_key(&self, sa_lid: u16) -> u64 {
        let keys = self
            .inner
            .keys
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        keys.sm_keys
            .get(&sa_lid)
            .copied()
            .unwrap_or(self.inner.config.sm_key)
    }
}
