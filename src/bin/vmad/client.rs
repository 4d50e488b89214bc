//! The commands' typed client: a [`vmad::client::Client`] on the session's port with
//! the session's timeout and retries, and its errors in the CLI's words.

use std::time::{Duration, Instant};

use vmad::client::{Client, ClientConfig};

use crate::{Failure, Session};

impl Session {
    /// A client on a new open of the session's port (its answers are its own).
    pub(crate) fn client(&self) -> Result<Client, Failure> {
        self.client_with(|_| {})
    }

    /// [`Session::client`] with settings changed by `f`.
    pub(crate) fn client_with(&self, f: impl FnOnce(&mut ClientConfig)) -> Result<Client, Failure> {
        let mut config = ClientConfig {
            timeout_ms: self.timeout_ms,
            retries: self.retries,
            ..ClientConfig::default()
        };
        f(&mut config);
        Ok(Client::new(&self.port, config)?)
    }

    /// A client call's error as the CLI says it: a timeout with the attempts made,
    /// a MAD status as a protocol failure prefixed with `what` was asked.
    pub(crate) fn failure(&self, what: &str, e: vmad::Error) -> Failure {
        match e {
            vmad::Error::TimedOut => Failure::timeout(format!(
                "{what}: timed out after {} attempt(s) of {} ms",
                self.retries + 1,
                self.timeout_ms
            )),
            e @ vmad::Error::MadStatus { .. } => Failure::protocol(format!("{what}: {e}")),
            e => e.into(),
        }
    }
}

/// The LID of the port's SM, where its SA answers, asked of the fabric again until an
/// SM has set it: a port opened while the SM is still coming up has none yet, and the
/// fabric may not say when it gets one (ibsim does not). Waits up to `wait`.
pub(crate) fn sm_lid(port: &vmad::port::Port, wait: Duration) -> Result<u16, Failure> {
    let deadline = Instant::now() + wait;
    loop {
        let lid = port.refresh_attrs()?.sm_lid;
        if lid != 0 {
            return Ok(lid);
        }
        if Instant::now() >= deadline {
            return Err(Failure::timeout(format!(
                "no SM has set this port's SM LID within {} ms (is a subnet manager running?); \
                 --sa-lid names the SA's LID",
                wait.as_millis()
            )));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A NodeDescription as text (NUL-terminated, at most 64 bytes).
pub(crate) fn desc_text(b: &[u8]) -> String {
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    String::from_utf8_lossy(&b[..end]).into_owned()
}
