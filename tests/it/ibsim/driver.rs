//! A minimal single-threaded driver: one engine over one transport, the
//! caller's thread turning the loop. Stands in for the port layer in these
//! tests, with the same call shapes (register, send, recv).

use std::time::{Duration, Instant as Clock};

use vmad::engine::{AgentId, AgentSpec, Engine, EngineConfig, Event, SendRequest};
use vmad::time::Instant;
use vmad::transport::Transport;
use vmad::wire::MAD_SIZE;

pub(crate) struct Driver<T: Transport> {
    engine: Engine,
    transport: T,
    epoch: Clock,
}

impl<T: Transport> Driver<T> {
    pub(crate) fn new(transport: T) -> Driver<T> {
        Driver {
            engine: Engine::new(EngineConfig::default()),
            transport,
            epoch: Clock::now(),
        }
    }

    pub(crate) fn stats(&self) -> vmad::engine::EngineStats {
        self.engine.stats()
    }

    fn now(&self) -> Instant {
        Instant::from_micros(self.epoch.elapsed().as_micros() as u64)
    }

    pub(crate) fn register(&mut self, spec: AgentSpec) -> AgentId {
        self.engine.register(spec).expect("register")
    }

    pub(crate) fn send(&mut self, agent: AgentId, req: SendRequest<'_>) {
        let now = self.now();
        self.engine.send(now, agent, req).expect("send");
        self.flush();
    }

    fn flush(&mut self) {
        let now = self.now();
        let engine = &mut self.engine;
        let mut slot = [0u8; MAD_SIZE];
        loop {
            let sent = self
                .transport
                .transmit(&mut |out| {
                    let t = engine.poll_transmit(now, &mut slot)?;
                    out.copy_from_slice(&slot);
                    Some(t)
                })
                .expect("transmit");
            if !sent {
                return;
            }
        }
    }

    fn pump(&mut self) {
        let now = self.now();
        let engine = &mut self.engine;
        while self
            .transport
            .recv_burst(64, &mut |meta, mad| engine.handle_datagram(now, meta, mad))
            .expect("recv_burst")
            > 0
        {}
        self.engine.handle_timeout(self.now());
        self.flush();
    }

    /// The next event, or `None` once `timeout` has passed with none.
    pub(crate) fn recv(&mut self, timeout: Duration) -> Option<Event> {
        let give_up = Clock::now() + timeout;
        loop {
            if let Some(ev) = self.engine.poll_event() {
                return Some(ev);
            }
            self.pump();
            if self.engine.pending_events() > 0 {
                continue;
            }
            let now = Clock::now();
            if now >= give_up {
                return None;
            }
            let mut park = give_up - now;
            if let Some(deadline) = self.engine.poll_timeout() {
                park = park.min(deadline.saturating_duration_since(self.now()));
            }
            self.transport.wait(Some(park)).expect("wait");
        }
    }
}
