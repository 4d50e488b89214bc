//! Incoming MADs: validation, response matching, request routing, the
//! engine's own answer to unclaimed Get/Set; requests pass the duplicate filter.

use alloc::vec::Vec;

use super::peer::reply_addr;
use super::rmpp::{is_rmpp_active, is_rmpp_transfer};
use super::{agent, smi, AgentId, Engine, Event, RecvMeta};
use crate::time::Instant;
use crate::types::{MadAddr, Qp};
use crate::wire::mad::{self, MadStatus, Method, MgmtClass};
use crate::wire::MAD_SIZE;

/// The ClassPortInfo attribute (common to every class).
const CLASS_PORT_INFO: u16 = 0x0001;

impl Engine {
    pub(super) fn datagram(&mut self, now: Instant, meta: RecvMeta, bytes: &[u8]) {
        self.stats.received += 1;
        if bytes.len() < MAD_SIZE {
            self.stats.dropped_invalid += 1;
            return;
        }
        let Ok(received) = <&[u8; MAD_SIZE]>::try_from(&bytes[..MAD_SIZE]) else {
            return;
        };
        let pkt = mad::Packet::new_unchecked(&received[..]);
        let class = pkt.mgmt_class();
        // kernel validate_mad: IB base version only; SMPs on QP0 only, GMPs never on QP0;
        // CM attributes other than ClassPortInfo only use the Send method.
        let bad_cm = class == MgmtClass::Cm
            && pkt.attr_id() != CLASS_PORT_INFO
            && pkt.method() != Method::Send;
        if pkt.base_version() != mad::BASE_VERSION
            || class.is_smp() != (meta.qp == Qp::Smi)
            || bad_cm
        {
            self.stats.dropped_invalid += 1;
            return;
        }
        // Only a DR SMP is changed on its way in (its hop pointer): only it is copied.
        let mut stepped;
        let buf = if class == MgmtClass::SubnDirectedRoute {
            stepped = *received;
            if !smi::dr_recv(&mut stepped[..]) {
                self.stats.dropped_invalid += 1;
                return;
            }
            &stepped
        } else {
            received
        };
        let response = mad::Packet::new_unchecked(&buf[..]).is_response();
        let Some(agent) = self.route(buf, response) else {
            self.unrouted(meta, *buf, response);
            return;
        };
        if self.rmpp_intercept(now, agent, meta, buf) {
            return;
        }
        if response {
            self.recv_response(now, agent, meta, buf);
        } else {
            self.recv_request(now, agent, meta, buf);
        }
    }

    /// The agent a MAD belongs to: by TID high word for responses, by
    /// class/version/method (and OUI) for requests (kernel `find_mad_agent`).
    fn route(&self, buf: &[u8; MAD_SIZE], response: bool) -> Option<AgentId> {
        let pkt = mad::Packet::new_unchecked(&buf[..]);
        if response {
            return self.agents.by_hi_tid((pkt.tid() >> 32) as u32);
        }
        let (class, version) = (pkt.mgmt_class(), pkt.class_version());
        if version >= agent::MAX_CLASS_VERSION {
            return None;
        }
        let oui = if class.is_vendor_range2() {
            crate::wire::vendor::Packet::new_unchecked(&buf[..]).oui()
        } else {
            0
        };
        self.agents
            .for_request(class, version, u8::from(pkt.method()), oui)
    }

    /// No agent: responses are unmatched; unclaimed Get/Set get the engine's answer.
    fn unrouted(&mut self, meta: RecvMeta, mut buf: [u8; MAD_SIZE], response: bool) {
        if response {
            self.stats.unmatched_responses += 1;
            return;
        }
        let method = mad::Packet::new_unchecked(&buf[..]).method();
        if method != Method::Get && method != Method::Set {
            self.stats.dropped_unclaimed += 1;
            return;
        }
        // kernel generate_unmatched_resp: the request turned around, status
        // UNSUPPORTED_METHOD_ATTR, plus the direction bit for a DR SMP.
        let dr = mad::Packet::new_unchecked(&buf[..]).mgmt_class() == MgmtClass::SubnDirectedRoute;
        let mut pkt = mad::Packet::new_unchecked(&mut buf[..]);
        pkt.set_method(Method::GetResp);
        let mut status = MadStatus::UNSUPPORTED_METHOD_ATTR.0;
        if dr {
            status |= crate::wire::smp::DIRECTION_BIT;
        }
        pkt.set_status(MadStatus(status));
        if dr && !smi::dr_send(&mut buf[..]) {
            self.stats.dropped_invalid += 1;
            return;
        }
        self.stats.auto_replies += 1;
        let mad = self.mad_buf(&buf);
        self.tx_queue.push_back(super::txn::Out::Raw {
            agent: None,
            qp: meta.qp,
            dest: reply_addr(meta.qp, &meta.src),
            mad,
        });
    }

    fn recv_response(
        &mut self,
        now: Instant,
        agent: AgentId,
        meta: RecvMeta,
        buf: &[u8; MAD_SIZE],
    ) {
        let pkt = mad::Packet::new_unchecked(&buf[..]);
        let (tid, class) = (pkt.tid(), u8::from(pkt.mgmt_class()));
        if let Some(txn_id) = self.txns.match_response(agent, tid, class, &meta.src) {
            if let Some(mad) = self.finish_txn(now, txn_id) {
                self.recycle(mad);
            }
            self.deliver_answer(agent, meta.src, buf.to_vec());
            return;
        }
        // kernel ib_mad_complete_recv: an agent not running RMPP in the
        // kernel gets unmatched RMPP-active responses (the later segments).
        let rmpp_in_engine = self.agents.get(agent).is_some_and(|a| a.kernel_rmpp());
        if !rmpp_in_engine && is_rmpp_active(buf) {
            self.deliver(agent, meta.src, buf.to_vec());
            return;
        }
        self.stats.unmatched_responses += 1;
    }

    pub(super) fn recv_request(
        &mut self,
        now: Instant,
        agent: AgentId,
        meta: RecvMeta,
        buf: &[u8; MAD_SIZE],
    ) {
        let method = mad::Packet::new_unchecked(&buf[..]).method();
        // Segments handed raw to an agent doing its own RMPP share a TID: never filter those.
        let filtered = method != Method::Send && !is_rmpp_transfer(buf);
        self.deliver_request(now, agent, meta.src, buf.to_vec(), filtered);
    }

    /// Deliver a request unless it repeats one delivered and not yet answered;
    /// remember it (when `filtered`) only once it is really queued, so that a
    /// request the full queue dropped is welcome again when retried.
    pub(super) fn deliver_request(
        &mut self,
        now: Instant,
        agent: AgentId,
        src: MadAddr,
        mad: Vec<u8>,
        filtered: bool,
    ) {
        let pkt = mad::Packet::new_unchecked(&mad[..]);
        let (tid, class) = (pkt.tid(), u8::from(pkt.mgmt_class()));
        if filtered && self.dedup.is_remembered(&src, tid, class) {
            self.stats.dropped_duplicates += 1;
            return;
        }
        if self.deliver(agent, src, mad) && filtered {
            self.dedup
                .remember(&mut self.timers, now, agent, &src, tid, class);
        }
    }

    /// Queue a MAD for `agent`; false if the full queue dropped it.
    pub(super) fn deliver(&mut self, agent: AgentId, addr: MadAddr, mad: Vec<u8>) -> bool {
        self.push_event(Event::Recv { agent, addr, mad })
    }

    /// The response that completed one of the agent's requests: queued even when
    /// the queue is full (as a timeout report is), so that a flood of unsolicited
    /// MADs never makes a request end with neither its answer nor ETIMEDOUT. Their
    /// number is bounded by the requests the application itself sent.
    pub(super) fn deliver_answer(&mut self, agent: AgentId, addr: MadAddr, mad: Vec<u8>) {
        self.stats.delivered += 1;
        self.events.push_back(Event::Recv { agent, addr, mad });
    }
}
