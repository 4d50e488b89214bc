//! A transport for tests of the port and umad layers: it carries nothing, fails for
//! good when told to, and reports the SM-role calls it gets.

use std::io;
use std::time::Duration;

use crossbeam_channel::{Receiver, Sender};
use vmad::engine::{RecvMeta, Transmit};
use vmad::transport::{Caps, LinkLayer, PortAttrs, Transport, Waker};
use vmad::wire::MAD_SIZE;

/// An active InfiniBand CA port 1 at `lid` (node and port GUID = `lid`, SM at LID 1),
/// for the test transports.
pub(crate) fn active_port(ca: &str, lid: u16) -> PortAttrs {
    PortAttrs {
        ca_name: ca.into(),
        port_num: 1,
        node_type: 1,
        node_guid: u64::from(lid),
        port_guid: u64::from(lid),
        gid_prefix: 0,
        lid,
        lmc: 0,
        sm_lid: 1,
        sm_sl: 0,
        state: 4,
        phys_state: 5,
        rate: 10,
        capmask: 0,
        pkeys: vec![0xffff],
        link_layer: LinkLayer::InfiniBand,
    }
}

/// A transport that carries nothing and fails for good once `kill` is sent.
pub(crate) struct Mortal {
    attrs: PortAttrs,
    kill: Receiver<()>,
    wake: (Sender<()>, Receiver<()>),
    dead: bool,
    /// Where [`Transport::set_sm`] calls are reported, if anywhere.
    pub(crate) roles: Option<Sender<bool>>,
}

impl Mortal {
    pub(crate) fn new(ca: &str) -> (Mortal, Sender<()>) {
        let (tx, rx) = crossbeam_channel::unbounded();
        let attrs = active_port(ca, 1);
        let t = Mortal {
            attrs,
            kill: rx,
            wake: crossbeam_channel::unbounded(),
            dead: false,
            roles: None,
        };
        (t, tx)
    }

    fn check(&mut self) -> io::Result<()> {
        if self.kill.try_recv().is_ok() {
            self.dead = true;
        }
        if self.dead {
            return Err(io::Error::new(io::ErrorKind::BrokenPipe, "fabric gone"));
        }
        Ok(())
    }
}

impl Transport for Mortal {
    fn caps(&self) -> Caps {
        Caps {
            smi: true,
            gsi: true,
        }
    }

    fn attrs(&self) -> &PortAttrs {
        &self.attrs
    }

    fn recv_burst(
        &mut self,
        _max: usize,
        _sink: &mut dyn FnMut(RecvMeta, &[u8]),
    ) -> io::Result<usize> {
        self.check().map(|()| 0)
    }

    fn transmit(
        &mut self,
        fill: &mut dyn FnMut(&mut [u8; MAD_SIZE]) -> Option<Transmit>,
    ) -> io::Result<bool> {
        self.check()?;
        let mut slot = [0u8; MAD_SIZE];
        Ok(fill(&mut slot).is_some())
    }

    fn wait(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        // Block until killed, woken or timed out (the port thread parks here).
        let kill = self.kill.clone();
        let wake = self.wake.1.clone();
        crossbeam_channel::select! {
            recv(kill) -> m => match m {
                Ok(()) => self.dead = true,
                // Nobody holds the kill handle any more: nobody can kill it.
                Err(_) => self.kill = crossbeam_channel::never(),
            },
            recv(wake) -> _ => {},
            default(timeout.unwrap_or(Duration::from_secs(3600))) => {},
        }
        self.check()
    }

    fn set_sm(&mut self, on: bool) -> vmad::Result<()> {
        match &self.roles {
            Some(tx) => {
                let _ = tx.send(on);
                Ok(())
            }
            None => Err(vmad::Error::Unsupported("no SM role here")),
        }
    }

    fn waker(&self) -> Option<Waker> {
        let tx = self.wake.0.clone();
        Some(Waker::new(move || {
            let _ = tx.send(());
        }))
    }
}
