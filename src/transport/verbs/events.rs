//! Async events: what the device says about its port, its QP and itself.
//!
//! The context's async fd is non-blocking and polled next to the completion
//! channel in [`Transport::wait`](crate::transport::Transport::wait). It is
//! drained (each event acknowledged) when a wait starts, when it says the fd
//! is readable, and at least once a second under traffic (reading it before
//! every receive burst would add a system call to the busy-polled path):
//!
//! | event | what the transport does |
//! |---|---|
//! | PORT_ACTIVE, PORT_ERR, LID_CHANGE, SM_CHANGE, PKEY_CHANGE, CLIENT_REREGISTER, GID_CHANGE | re-query the port: [`VerbsTransport::port_attrs`] |
//! | QP_FATAL, QP_REQ_ERR, QP_ACCESS_ERR | reset the QP to RTS and repost every receive (`recovery.rs`) |
//! | DEVICE_FATAL | the transport is gone: every call fails (not transiently) |
//!
//! A driver without `disassociate_ucontext` (rxe, siw) sends no
//! DEVICE_FATAL when its device is removed (`rdma link delete`): the kernel
//! removes the device's uverbs node and then waits, for as long as it
//! takes, for every process to close the device. So the transport also
//! looks, at most once a second, whether its uverbs node is still there,
//! and treats its disappearance as DEVICE_FATAL; closing the port then
//! lets the removal finish.

use std::io;
use std::path::Path;
use std::time::{Duration, Instant as Clock};

use ibverbs_sys as sys;

use super::{attrs, VerbsTransport};

/// How often an idle transport looks for its device in sysfs.
pub(super) const LIVENESS_EVERY: Duration = Duration::from_secs(1);

/// A busy-polling port reads the transport on every spin: only one read in this many
/// (and every wait) looks at the clock for the liveness check. Where the clock source
/// has no vDSO (a TCG guest's HPET) a clock read is a system call and an emulated
/// device access that holds up the other CPUs.
const LIVENESS_CLOCK_EVERY: u32 = 64;

/// Async events seen, by kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AsyncEventCounts {
    /// IBV_EVENT_PORT_ACTIVE.
    pub port_active: u64,
    /// IBV_EVENT_PORT_ERR (the link went down).
    pub port_err: u64,
    /// IBV_EVENT_LID_CHANGE.
    pub lid_change: u64,
    /// IBV_EVENT_PKEY_CHANGE.
    pub pkey_change: u64,
    /// IBV_EVENT_SM_CHANGE.
    pub sm_change: u64,
    /// IBV_EVENT_CLIENT_REREGISTER.
    pub client_reregister: u64,
    /// IBV_EVENT_GID_CHANGE.
    pub gid_change: u64,
    /// IBV_EVENT_QP_FATAL, QP_REQ_ERR, QP_ACCESS_ERR.
    pub qp_error: u64,
    /// IBV_EVENT_DEVICE_FATAL, or the device's uverbs node gone.
    pub device_fatal: u64,
    /// Any other kind (CQ, SRQ, WQ events: vmad has none of those objects).
    pub other: u64,
}

/// What an event asks of the transport.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Action {
    RefreshPort,
    RecoverQp,
    Fatal,
    Nothing,
}

impl AsyncEventCounts {
    /// Count one event of `kind` and say what to do about it.
    pub(super) fn note(&mut self, kind: sys::ibv_event_type) -> Action {
        let (counter, action) = match kind {
            sys::IBV_EVENT_PORT_ACTIVE => (&mut self.port_active, Action::RefreshPort),
            sys::IBV_EVENT_PORT_ERR => (&mut self.port_err, Action::RefreshPort),
            sys::IBV_EVENT_LID_CHANGE => (&mut self.lid_change, Action::RefreshPort),
            sys::IBV_EVENT_PKEY_CHANGE => (&mut self.pkey_change, Action::RefreshPort),
            sys::IBV_EVENT_SM_CHANGE => (&mut self.sm_change, Action::RefreshPort),
            sys::IBV_EVENT_CLIENT_REREGISTER => (&mut self.client_reregister, Action::RefreshPort),
            sys::IBV_EVENT_GID_CHANGE => (&mut self.gid_change, Action::RefreshPort),
            sys::IBV_EVENT_QP_FATAL | sys::IBV_EVENT_QP_REQ_ERR | sys::IBV_EVENT_QP_ACCESS_ERR => {
                (&mut self.qp_error, Action::RecoverQp)
            }
            sys::IBV_EVENT_DEVICE_FATAL => (&mut self.device_fatal, Action::Fatal),
            _ => (&mut self.other, Action::Nothing),
        };
        *counter += 1;
        action
    }
}

/// The error every call returns once the device is gone: not transient, so
/// the port fails its callers with EIO.
pub(super) fn gone(why: &str) -> io::Error {
    io::Error::new(io::ErrorKind::NotConnected, format!("verbs: {why}"))
}

impl VerbsTransport {
    /// Read and act on every pending async event when `now` (or when a wait
    /// saw the fd readable, or a second has passed); look for the device in
    /// sysfs once a second. `Err` once the device is gone (and from then on).
    /// `quiet`: the ready descriptor showed nothing (an idle turn, as the port makes
    /// one every [`LIVENESS_EVERY`]): look at the clock too.
    pub(super) fn poll_events(&mut self, now: bool, quiet: bool) -> io::Result<()> {
        if let Some(why) = &self.dead {
            return Err(gone(why));
        }
        self.liveness_polls = self.liveness_polls.wrapping_add(1);
        let look = now || quiet || self.liveness_polls % LIVENESS_CLOCK_EVERY == 0;
        let due = look && self.last_liveness.elapsed() >= LIVENESS_EVERY;
        if !(now || due || self.async_ready) {
            return Ok(());
        }
        self.async_ready = false;
        let mut refresh = false;
        while let Some(ev) = self.ctx.next_async_event()? {
            match self.stats.events.note(ev.kind) {
                Action::RefreshPort => {
                    refresh |= ev.port.is_none_or(|p| p == self.attrs.port_num);
                }
                Action::RecoverQp => self.qp_suspect = true,
                Action::Fatal => self.die("the device reported a fatal error (DEVICE_FATAL)"),
                Action::Nothing => {}
            }
        }
        if self.dead.is_none() && due {
            self.last_liveness = Clock::now();
            if !self.uverbs_path.is_empty() && !Path::new(&self.uverbs_path).exists() {
                self.stats.events.device_fatal += 1;
                self.die("the device was removed (its uverbs node is gone)");
            }
        }
        if let Some(why) = &self.dead {
            return Err(gone(why));
        }
        if refresh {
            self.refresh_port();
        }
        if self.qp_suspect {
            self.check_qp()?;
        }
        Ok(())
    }

    fn die(&mut self, why: &str) {
        self.dead.get_or_insert_with(|| why.to_owned());
    }

    /// Re-read the port's attributes (state, LIDs, SM, rate, P_Keys). A
    /// failing query leaves the old values: the next event tries again.
    fn refresh_port(&mut self) {
        let port = self.attrs.port_num;
        let Ok(p) = self.ctx.query_port(port) else {
            return;
        };
        attrs::apply(&mut self.attrs, &p);
        self.grh_required = p.flags & attrs::QPF_GRH_REQUIRED != 0;
        let pkeys: Option<Vec<u16>> = (0..p.pkey_tbl_len)
            .map(|i| self.ctx.query_pkey(port, i).ok())
            .collect();
        if let Some(pkeys) = pkeys {
            self.attrs.pkeys = pkeys;
        }
        self.stats.port_refreshes += 1;
        self.attrs_dirty = true;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_event_is_counted_under_its_kind_and_asks_for_its_action() {
        let mut c = AsyncEventCounts::default();
        assert_eq!(c.note(sys::IBV_EVENT_PORT_ERR), Action::RefreshPort);
        assert_eq!(c.note(sys::IBV_EVENT_PORT_ACTIVE), Action::RefreshPort);
        assert_eq!(c.note(sys::IBV_EVENT_LID_CHANGE), Action::RefreshPort);
        assert_eq!(c.note(sys::IBV_EVENT_PKEY_CHANGE), Action::RefreshPort);
        assert_eq!(c.note(sys::IBV_EVENT_SM_CHANGE), Action::RefreshPort);
        assert_eq!(
            c.note(sys::IBV_EVENT_CLIENT_REREGISTER),
            Action::RefreshPort
        );
        assert_eq!(c.note(sys::IBV_EVENT_GID_CHANGE), Action::RefreshPort);
        assert_eq!(c.note(sys::IBV_EVENT_QP_FATAL), Action::RecoverQp);
        assert_eq!(c.note(sys::IBV_EVENT_QP_REQ_ERR), Action::RecoverQp);
        assert_eq!(c.note(sys::IBV_EVENT_QP_ACCESS_ERR), Action::RecoverQp);
        assert_eq!(c.note(sys::IBV_EVENT_DEVICE_FATAL), Action::Fatal);
        assert_eq!(c.note(sys::IBV_EVENT_CQ_ERR), Action::Nothing);
        assert_eq!(
            c,
            AsyncEventCounts {
                port_active: 1,
                port_err: 1,
                lid_change: 1,
                pkey_change: 1,
                sm_change: 1,
                client_reregister: 1,
                gid_change: 1,
                qp_error: 3,
                device_fatal: 1,
                other: 1,
            }
        );
    }

    #[test]
    fn the_gone_error_is_not_transient() {
        let e = gone("x");
        assert!(!matches!(
            e.kind(),
            io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted | io::ErrorKind::TimedOut
        ));
    }
}
