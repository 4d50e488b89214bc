//! The walker's driver over a [`Port`]: each request the [`Walker`] hands out is
//! sent with its id as the TID, and each answer or timeout report is given back
//! to it by that TID.

use std::time::Duration;

use super::walker::Walker;
use super::{Config, Progress, Reason, Topology};
use crate::engine::{AgentId, AgentSpec, Event, SendRequest};
use crate::port::Port;
use crate::types::{MadAddr, Qp};
use crate::wire::mad::{self, MadStatus, Method, MgmtClass};
use crate::wire::smp::{self, AttrId, DirectedRoute};
use crate::{Error, Result};

/// The answer to one SMP, as taken off the port's queue (no clone of the MAD).
enum Answer {
    Data {
        tid: u32,
        status: u16,
        data: [u8; smp::DATA_LEN],
    },
    TimedOut {
        tid: u32,
    },
    Other,
}

/// SMP Gets in flight on two agents (directed route and LID routed), keyed by
/// the TID's low word, which one counter hands out to both.
struct Smps<'p> {
    port: &'p Port,
    agent: AgentId,
    lid_agent: AgentId,
    timeout_ms: u32,
    retries: u32,
    spin: Duration,
}

impl<'p> Smps<'p> {
    fn open(port: &'p Port, config: &Config) -> Result<Smps<'p>> {
        let spec = |mgmt_class| AgentSpec {
            qp: Qp::Smi,
            mgmt_class,
            class_version: 1,
            rmpp_version: 0,
            method_mask: [0; 2],
            oui: 0,
            user_rmpp: false,
        };
        let agent = port.register(spec(MgmtClass::SubnDirectedRoute))?;
        let lid_agent = match port.register(spec(MgmtClass::SubnLid)) {
            Ok(a) => a,
            Err(e) => {
                let _ = port.unregister(agent);
                return Err(e);
            }
        };
        Ok(Smps {
            port,
            agent,
            lid_agent,
            timeout_ms: config.timeout_ms,
            retries: config.retries,
            spin: config.spin,
        })
    }

    /// Send a SubnGet(`attr`, `attr_mod`) with TID `tid` to `lid` if given, else
    /// along `route`.
    fn get(
        &mut self,
        tid: u32,
        attr: AttrId,
        attr_mod: u32,
        route: &[u8],
        lid: Option<u16>,
    ) -> Result<()> {
        let mut m = [0u8; crate::wire::MAD_SIZE];
        let class = match lid {
            Some(_) => MgmtClass::SubnLid,
            None => MgmtClass::SubnDirectedRoute,
        };
        mad::Repr {
            base_version: mad::BASE_VERSION,
            mgmt_class: class,
            class_version: 1,
            method: Method::Get,
            status: MadStatus::OK,
            class_specific: 0,
            tid: u64::from(tid),
            attr_id: attr.into(),
            attr_mod,
        }
        .emit(&mut mad::Packet::new_unchecked(&mut m[..]));
        let dr = lid.is_none().then(|| {
            let mut dr = DirectedRoute {
                hop_count: route.len() as u8,
                ..DirectedRoute::default()
            };
            dr.initial_path[1..=route.len()].copy_from_slice(route);
            dr
        });
        smp::Repr {
            m_key: 0,
            data: [0; smp::DATA_LEN],
            dr,
        }
        .emit(&mut smp::Packet::new_unchecked(&mut m[..]));
        let agent = if lid.is_some() {
            self.lid_agent
        } else {
            self.agent
        };
        self.port.send(
            agent,
            SendRequest {
                // Directed-route SMPs go to the permissive LID.
                addr: MadAddr {
                    lid: lid.unwrap_or(smp::PERMISSIVE_LID),
                    ..MadAddr::default()
                },
                mad: &m,
                timeout_ms: self.timeout_ms,
                retries: self.retries,
            },
        )?;
        Ok(())
    }

    /// The next answer or timeout report of this agent (others' events are dropped:
    /// the sweep owns its open).
    fn next(&self, patience: Duration) -> Result<Answer> {
        let ours = |a: &AgentId| *a == self.agent || *a == self.lid_agent;
        self.port.recv_spinning(Some(patience), self.spin, |e| {
            Ok(match e {
                Event::Recv { agent: a, mad, .. } if ours(a) => {
                    match smp::Packet::new_checked(&mad[..]) {
                        Ok(p) => {
                            let mut data = [0u8; smp::DATA_LEN];
                            data.copy_from_slice(p.data());
                            Answer::Data {
                                tid: mad::Packet::new_unchecked(&mad[..]).tid() as u32,
                                status: p.smp_status().0,
                                data,
                            }
                        }
                        Err(_) => Answer::Other,
                    }
                }
                Event::SendTimedOut {
                    agent: a, header, ..
                } if ours(a) => Answer::TimedOut {
                    tid: mad::Packet::new_unchecked(&header[..]).tid() as u32,
                },
                _ => Answer::Other,
            })
        })
    }

    fn close(self) {
        let _ = self.port.unregister(self.agent);
        let _ = self.port.unregister(self.lid_agent);
    }
}

pub(super) fn run(
    port: &Port,
    config: &Config,
    progress: &mut dyn FnMut(&Progress),
) -> Result<Topology> {
    if config.window == 0 || config.per_node == 0 {
        return Err(Error::InvalidArgument(
            "discovery window and per-node cap must be at least 1",
        ));
    }
    let mut smps = Smps::open(port, config)?;
    let result = sweep(&mut smps, config, progress);
    smps.close();
    result
}

fn sweep(
    smps: &mut Smps<'_>,
    config: &Config,
    progress: &mut dyn FnMut(&Progress),
) -> Result<Topology> {
    let mut walker = Walker::new(config);
    // Every request ends in an answer or a timeout report from the engine; this only
    // catches a port that reports neither.
    let attempts = u64::from(config.retries) + 1;
    let patience = Duration::from_millis(u64::from(config.timeout_ms) * attempts + 10_000);
    loop {
        while let Some(r) = walker.next_request() {
            smps.get(r.id, r.attr, r.attr_mod, &r.route, r.lid)?;
        }
        if walker.is_done() {
            break;
        }
        let (tid, outcome) = match smps.next(patience)? {
            Answer::Data { tid, status, data } => {
                let status = status & !smp::DIRECTION_BIT;
                (
                    tid,
                    (status == 0).then_some(data).ok_or(Reason::Status(status)),
                )
            }
            Answer::TimedOut { tid } => (tid, Err(Reason::Timeout)),
            Answer::Other => continue,
        };
        // A late answer to a request already reported timed out changes nothing.
        walker.answer(tid, outcome.as_ref().map_err(|r| *r));
        progress(&walker.progress());
    }
    Ok(walker.into_topology())
}
