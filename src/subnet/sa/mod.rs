//! The embedded fabric's subnet administrator (IBA 15): it answers SA
//! queries (class 0x03, version 2) from the [`SubnetDb`] the SM filled,
//! keeps the SA's own state (multicast groups, service records,
//! InformInfo subscriptions), and forwards traps as Reports.
//!
//! The service is sans-IO, like the engine it owns: the fabric hands it
//! each SA MAD with [`SaService::handle_datagram`], sends what
//! [`SaService::poll_transmit`] writes, arms a timer for
//! [`SaService::poll_timeout`] and calls [`SaService::handle_timeout`].
//! GetTable responses go out over RMPP through that engine, so segment
//! windows, ACKs and resends are the engine's, and `now` comes from the
//! caller. The SubnetDb is passed into every call rather than held: the SM
//! owns it and replaces it after each sweep.
//!
//! # Feeding it
//!
//! - Build one [`SaService::new`] per fabric (its engine's
//!   `rmpp.max_message` bounds a GetTable: larger answers are
//!   ERR_NO_RESOURCES, as OpenSM answers when it has no buffer).
//! - Every MAD of class 0x03 that reaches the master SM's port on QP1
//!   (requests, and the clients' RMPP ACKs and ReportResps) goes to
//!   [`SaService::handle_datagram`] with `RecvMeta { qp: Qp::Gsi, src, local_qpn: None }`,
//!   `src` being the sender's LID, QPN, SL, P_Key index and GRH as received.
//! - Then each [`Transmit`] from [`SaService::poll_transmit`] is sent from
//!   the SM's port QP1 to `dest` (LID, QPN, Q_Key, GRH). A fabric that
//!   answers synchronously uses [`SaService::exchange`] (both steps, plus
//!   timers due) instead.
//! - Timers: when [`SaService::poll_timeout`] passes, call
//!   [`SaService::handle_timeout`] (RMPP resends under loss, Report
//!   retries); calling it early does nothing. `exchange` fires them too.
//! - Traps the SM receives (Trap(Notice) SMPs): their data to
//!   [`SaService::handle_trap`], then drain the transmits (the Reports).
//!
//! Answers follow OpenSM's SA (`docs/sa.md`: what `tests/it/sa_parity.rs`
//! compares against OpenSM, and where this SA still departs): a record
//! matches a query where every field whose ComponentMask bit is set is
//! equal; SubnAdmGet with no match is ERR_NO_RECORDS, with several
//! ERR_TOO_MANY_RECORDS; an error response copies the request's header,
//! turns Set into GetResp, zeroes a GetTable's AttributeOffset and SM_Key;
//! an attribute or method the SA does not serve is MAD status 0x000c.

mod db;
mod inform;
mod mcast;
mod multipath;
mod path;
mod records;
mod services;
mod tables;

pub(crate) mod fixture;
#[cfg(test)]
mod tests;

use super::subnet_db::SubnetDb;
use crate::engine::{
    AgentId, AgentSpec, Engine, EngineConfig, Event, RecvMeta, SendRequest, Transmit,
};
use crate::time::Instant;
use crate::types::{MadAddr, Qp, GSI_QKEY};
use crate::wire::mad::{self, MadStatus, Method, MgmtClass};
use crate::wire::sa::{self as wsa, notice, AttrId, SaStatus};
use crate::wire::{rmpp, MAD_SIZE};

/// Methods the SA agent takes: Get, Set, GetTable, GetTraceTable,
/// GetMulti, Delete (the two it does not serve are answered 0x000c, as
/// OpenSM answers them for the attributes it lacks, rather than dropped).
const SERVED: [u8; 6] = [0x01, 0x02, 0x12, 0x13, 0x14, 0x15];
/// The SA's SM_Key: OpenSM's default `sa_key` (`OSM_DEFAULT_SA_KEY`), so
/// a client configured for OpenSM's default is trusted here too.
pub(super) const SA_KEY: u64 = 1;
/// Resends of each unacknowledged RMPP window (OpenSM's default `--retries`).
const RMPP_RETRIES: u32 = 3;
/// How long a Report waits for its ReportResp (OpenSM's default transaction timeout).
const REPORT_TIMEOUT_MS: u32 = 200;
/// Resends of an unanswered Report (OpenSM's default `--retries`).
const REPORT_RETRIES: u32 = 3;

/// What a query produced: records to return, or an error status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// Matching records, each `record_len` bytes (8-byte aligned), back to back.
    Records {
        /// Bytes of one record on the wire.
        record_len: usize,
        /// The records.
        data: Vec<u8>,
    },
    /// An error response with this status.
    Error(MadStatus),
}

impl Outcome {
    /// An error outcome carrying an SA status code.
    pub(crate) fn sa(status: SaStatus) -> Outcome {
        Outcome::Error(status.to_mad_status())
    }
}

/// One SA request as the handlers see it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Query<'a> {
    /// The method (Get, Set, GetTable, Delete).
    pub(crate) method: Method,
    /// The ComponentMask.
    pub(crate) comp_mask: u64,
    /// The record of the request (the SA data, zero-padded to 200 bytes).
    pub(crate) record: &'a [u8],
    /// Who asked.
    pub(crate) from: MadAddr,
    /// The request's SM_Key (OpenSM hides ServiceKeys from a request without one).
    pub(crate) sm_key: u64,
    /// Whether the request came with RMPPFlags.Active (a GetMulti must).
    pub(crate) rmpp_active: bool,
    /// The request's AttributeModifier (bit 31 of a PortInfoRecord query:
    /// CapabilityMask matches as a subset rather than exactly).
    pub(crate) attr_mod: u32,
}

/// Counters of what the SA did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct SaStats {
    /// Requests answered (with records or an error).
    pub(crate) answered: u64,
    /// Requests answered with an error status.
    pub(crate) errors: u64,
    /// MADs that were not SA requests (responses, bad headers) and were dropped.
    pub(crate) dropped: u64,
    /// Reports sent to InformInfo subscribers.
    pub(crate) reports_sent: u64,
    /// ReportResps received for them.
    pub(crate) reports_acked: u64,
    /// Reports that no ReportResp answered after every retry.
    pub(crate) reports_timed_out: u64,
}

/// For `benches/sa.rs`: an SA over a fat-tree subnet and one client engine,
/// joined back to back in virtual time (the fabric's types stay private).
#[doc(hidden)]
#[derive(Debug)]
pub struct SaBench {
    sa: SaService,
    db: SubnetDb,
    client: fixture::Client,
}

impl SaBench {
    /// A two-level fat tree (`leaves` leaf switches of `hosts` CAs, each
    /// leaf linked to every one of `spines` spines); both engines allow
    /// RMPP messages of `max_message` bytes.
    pub fn fat_tree(leaves: u8, hosts: u8, spines: u8, max_message: usize) -> SaBench {
        let mut config = EngineConfig::default();
        config.rmpp.max_message = max_message;
        SaBench {
            sa: SaService::new(config),
            db: fixture::fat_tree(leaves, hosts, spines),
            client: fixture::Client::new(2, max_message),
        }
    }

    /// Nodes in the subnet.
    pub fn nodes(&self) -> usize {
        self.db.nodes.len()
    }

    /// One GetTable of every PathRecord (ComponentMask 0, as `saquery -p`
    /// asks): the records the client reassembled, or `None` if it failed.
    pub fn all_path_records(&mut self) -> Option<usize> {
        let m = self
            .client
            .request(Method::GetTable, AttrId::PathRecord, 0, &[0; 64]);
        let reply = self.client.ask(&mut self.sa, &self.db, &m)?;
        // Let both engines forget the finished transfer (their 10 s linger)
        // so that runs do not pile up.
        self.client.now += core::time::Duration::from_secs(11);
        self.client.engine.handle_timeout(self.client.now);
        self.sa.handle_timeout(self.client.now, &self.db);
        (reply.hdr.status == MadStatus::OK).then(|| reply.records().len())
    }
}

/// The SA of the embedded fabric: its engine and its state.
#[derive(Debug)]
pub(crate) struct SaService {
    engine: Engine,
    agent: AgentId,
    stats: SaStats,
    groups: mcast::Groups,
    services: services::Services,
    informs: inform::Informs,
    /// Low 32 bits of the next Report's TID (the engine adds the agent's high word).
    next_report_tid: u32,
}

impl SaService {
    /// A new SA whose engine runs with `config` (raise
    /// `config.rmpp.max_message` for GetTables larger than 16 MiB).
    pub(crate) fn new(config: EngineConfig) -> SaService {
        let mut engine = Engine::new(config);
        let mut mask = [0u64; 2];
        for m in SERVED {
            mask[usize::from(m / 64)] |= 1 << (m % 64);
        }
        let agent = engine
            .register(AgentSpec {
                qp: Qp::Gsi,
                mgmt_class: MgmtClass::SubnAdm,
                class_version: wsa::CLASS_VERSION,
                rmpp_version: rmpp::VERSION,
                method_mask: mask,
                oui: 0,
                user_rmpp: false,
            })
            .expect("the SA is the only agent of a fresh engine");
        SaService {
            engine,
            agent,
            stats: SaStats::default(),
            groups: mcast::Groups::default(),
            services: services::Services::default(),
            informs: inform::Informs::default(),
            next_report_tid: 1,
        }
    }

    /// An SA MAD arrived on the SM port's QP1 (`meta` as the transport saw
    /// it); any answer is queued for [`SaService::poll_transmit`].
    pub(crate) fn handle_datagram(
        &mut self,
        now: Instant,
        meta: RecvMeta,
        mad: &[u8],
        db: &SubnetDb,
    ) {
        self.engine.handle_datagram(now, meta, mad);
        self.serve(now, db);
    }

    /// For a fabric that answers each MAD synchronously: fire what is due
    /// at `now`, take `mad`, and return every MAD the SA then wants sent
    /// (an RMPP window, an ACK, a Report), in order. Equivalent to
    /// [`SaService::handle_timeout`], [`SaService::handle_datagram`], then
    /// [`SaService::poll_transmit`] until `None`.
    pub(crate) fn exchange(
        &mut self,
        now: Instant,
        meta: RecvMeta,
        mad: &[u8],
        db: &SubnetDb,
    ) -> Vec<(Transmit, Box<[u8; MAD_SIZE]>)> {
        self.handle_timeout(now, db);
        self.handle_datagram(now, meta, mad, db);
        self.drain(now)
    }

    /// Every MAD the SA wants sent now, in order.
    pub(crate) fn drain(&mut self, now: Instant) -> Vec<(Transmit, Box<[u8; MAD_SIZE]>)> {
        let mut out = Vec::new();
        let mut buf = Box::new([0u8; MAD_SIZE]);
        while let Some(tx) = self.poll_transmit(now, &mut buf) {
            out.push((tx, core::mem::replace(&mut buf, Box::new([0u8; MAD_SIZE]))));
        }
        out
    }

    /// Time passed: RMPP resends and Report retries.
    pub(crate) fn handle_timeout(&mut self, now: Instant, db: &SubnetDb) {
        self.engine.handle_timeout(now);
        self.serve(now, db);
    }

    /// The next MAD to send, written into `out`.
    pub(crate) fn poll_transmit(
        &mut self,
        now: Instant,
        out: &mut [u8; MAD_SIZE],
    ) -> Option<Transmit> {
        self.engine.poll_transmit(now, out)
    }

    /// When [`SaService::handle_timeout`] is next due.
    pub(crate) fn poll_timeout(&self) -> Option<Instant> {
        self.engine.poll_timeout()
    }

    /// The SM received a trap: report its Notice to every InformInfo
    /// subscriber that asked for it. `notice` is the Trap SMP's data (the
    /// first 64 bytes of the Notice) or a whole 80-byte Notice; a shorter
    /// one is ignored.
    pub(crate) fn handle_trap(&mut self, now: Instant, notice: &[u8]) {
        let Ok(n) = notice::Packet::new_checked(notice).and_then(|p| notice::Repr::parse(&p))
        else {
            return;
        };
        self.report(now, &n);
    }

    /// InformInfo subscriptions held.
    #[cfg(test)]
    pub(crate) fn subscriptions(&self) -> usize {
        self.informs.len()
    }

    /// What the SA did so far.
    #[cfg(test)]
    pub(crate) fn stats(&self) -> SaStats {
        self.stats
    }

    /// Answer every request the engine delivered.
    fn serve(&mut self, now: Instant, db: &SubnetDb) {
        while let Some(event) = self.engine.poll_event() {
            match event {
                Event::Recv { addr, mad, .. } => self.answer(now, addr, &mad, db),
                // Responses need no answer (the engine expects none), so a
                // timeout is always a Report that no ReportResp answered.
                Event::SendTimedOut { .. } => self.stats.reports_timed_out += 1,
            }
        }
    }

    fn answer(&mut self, now: Instant, from: MadAddr, req: &[u8], db: &SubnetDb) {
        let Ok(hdr) = mad::Packet::new_checked(req).and_then(|p| mad::Repr::parse(&p)) else {
            self.stats.dropped += 1;
            return;
        };
        if hdr.method == Method::ReportResp {
            self.stats.reports_acked += 1;
            return;
        }
        if hdr.method.is_response_bit() || req.len() < wsa::DATA_OFFSET {
            self.stats.dropped += 1;
            return;
        }
        let sa_hdr = wsa::Packet::new_unchecked(req);
        // OpenSM's SA MAD controller ignores a request whose SM_Key is
        // neither 0 nor its SA key (C15-0.1.5's "discard").
        if sa_hdr.sm_key() != 0 && sa_hdr.sm_key() != SA_KEY {
            self.stats.dropped += 1;
            return;
        }
        let mut record = [0u8; wsa::DATA_LEN];
        let data = sa_hdr.data();
        let n = data.len().min(record.len());
        record[..n].copy_from_slice(&data[..n]);
        let query = Query {
            method: hdr.method,
            comp_mask: sa_hdr.comp_mask(),
            record: &record,
            from,
            sm_key: sa_hdr.sm_key(),
            attr_mod: hdr.attr_mod,
            rmpp_active: req
                .get(rmpp::OFFSET + 2)
                .is_some_and(|f| f & rmpp::FLAG_ACTIVE != 0),
        };
        // (Other class versions never get here: the engine routes by class
        // version, and answers an unclaimed Get/Set itself with 0x000c.)
        let outcome = self.dispatch(now, AttrId::from(hdr.attr_id), &query, db);
        self.respond(now, from, req, hdr.method, outcome);
    }

    fn dispatch(&mut self, now: Instant, attr: AttrId, q: &Query<'_>, db: &SubnetDb) -> Outcome {
        let read_only = matches!(q.method, Method::Get | Method::GetTable);
        match attr {
            AttrId::ClassPortInfo => records::class_port_info(q),
            AttrId::NodeRecord if read_only => records::node_records(db, q),
            AttrId::PortInfoRecord if read_only => records::port_info_records(db, q),
            AttrId::PathRecord if read_only => path::path_records(db, q),
            AttrId::MultiPathRecord => multipath::multipath_records(db, q),
            AttrId::McMemberRecord => {
                let (outcome, event) = self.groups.handle(db, q);
                if let Some(event) = event {
                    self.report_group(now, event, db);
                }
                outcome
            }
            AttrId::InformInfo => {
                let gid = db::port_gid_of(db, &q.from);
                self.informs.handle(q, gid)
            }
            AttrId::InformInfoRecord => self.informs.records(q),
            AttrId::ServiceRecord => self.services.handle(now, q),
            AttrId::LinkRecord if read_only => records::link_records(db, q),
            AttrId::SwitchInfoRecord if read_only => records::switch_info_records(db, q),
            AttrId::GuidInfoRecord if read_only => records::guid_info_records(db, q),
            AttrId::SmInfoRecord => tables::sm_info_records(db, q, super::sm::PRIORITY),
            AttrId::LinearFdbRecord => tables::lft_records(db, q),
            AttrId::MulticastFdbRecord => tables::mft_records(q),
            AttrId::PKeyTableRecord => tables::pkey_table_records(db, q),
            AttrId::SlToVlRecord => tables::sl_to_vl_records(db, q),
            AttrId::VlArbRecord => tables::vl_arb_records(db, q),
            _ => Outcome::Error(MadStatus::UNSUPPORTED_METHOD_ATTR),
        }
    }

    /// Trap 66/67 for a multicast group created or deleted, issued by the SM.
    fn report_group(&mut self, now: Instant, event: mcast::GroupEvent, db: &SubnetDb) {
        let (trap, mgid) = match event {
            mcast::GroupEvent::Created(g) => (inform::TRAP_MCG_CREATED, g),
            mcast::GroupEvent::Deleted(g) => (inform::TRAP_MCG_DELETED, g),
        };
        let mut details = [0u8; notice::DETAILS_LEN];
        details[6..22].copy_from_slice(&mgid); // reserved 48 bits, then the GID
        let mut issuer_gid = [0u8; 16];
        issuer_gid[..8].copy_from_slice(&db.subnet_prefix.to_be_bytes());
        issuer_gid[8..].copy_from_slice(&db.sm_port_guid.to_be_bytes());
        let n = notice::Repr {
            is_generic: true,
            notice_type: inform::TYPE_INFO,
            producer: inform::PRODUCER_CLASS_MANAGER,
            trap_number: trap,
            issuer_lid: db.sm_lid,
            toggle: false,
            count: 0,
            details,
            issuer_gid,
        };
        self.report(now, &n);
    }

    /// SubnAdmReport(Notice) to each subscriber of `n`; the ReportResp
    /// comes back through the engine, which resends until it does.
    fn report(&mut self, now: Instant, n: &notice::Repr) {
        let to: Vec<MadAddr> = self.informs.subscribers(n).collect();
        for addr in to {
            let mut m = [0u8; MAD_SIZE];
            mad::Repr {
                base_version: mad::BASE_VERSION,
                mgmt_class: MgmtClass::SubnAdm,
                class_version: wsa::CLASS_VERSION,
                method: Method::Report,
                status: MadStatus::OK,
                class_specific: 0,
                tid: u64::from(self.next_report_tid),
                attr_id: AttrId::Notice.into(),
                attr_mod: 0,
            }
            .emit(&mut mad::Packet::new_unchecked(&mut m[..]));
            self.next_report_tid = self.next_report_tid.wrapping_add(1);
            wsa::Repr {
                sm_key: 0,
                attr_offset: wsa::Repr::attr_offset_for(notice::LEN),
                comp_mask: 0,
            }
            .emit(&mut wsa::Packet::new_unchecked(&mut m[..]));
            n.emit(&mut notice::Packet::new_unchecked(
                &mut m[wsa::DATA_OFFSET..],
            ));
            let req = SendRequest {
                addr,
                mad: &m,
                timeout_ms: REPORT_TIMEOUT_MS,
                retries: REPORT_RETRIES,
            };
            if self.engine.send(now, self.agent, req).is_ok() {
                self.stats.reports_sent += 1;
            }
        }
    }

    /// Send the response to `req` as OpenSM's `osm_sa_respond` /
    /// `osm_sa_send_error` shape it.
    fn respond(&mut self, now: Instant, to: MadAddr, req: &[u8], method: Method, outcome: Outcome) {
        let outcome = match outcome {
            Outcome::Records { data, record_len }
                if !matches!(method, Method::GetTable | Method::GetMulti) =>
            {
                match data.len() / record_len.max(1) {
                    0 => Outcome::sa(SaStatus::NoRecords),
                    1 => Outcome::Records { record_len, data },
                    _ => Outcome::sa(SaStatus::TooManyRecords),
                }
            }
            // Too large for one RMPP message: OpenSM answers
            // ERR_NO_RESOURCES when it cannot get a response buffer.
            Outcome::Records { data, .. }
                if wsa::DATA_OFFSET + data.len() > self.engine.config().rmpp.max_message =>
            {
                Outcome::sa(SaStatus::NoResources)
            }
            other => other,
        };
        let resp_method = match method {
            Method::Set => Method::Get.response(),
            m => m.response(),
        };
        let (status, attr_offset, data) = match &outcome {
            Outcome::Records { record_len, data } => {
                let offset = if data.is_empty() {
                    0
                } else {
                    wsa::Repr::attr_offset_for(*record_len)
                };
                (MadStatus::OK, offset, &data[..])
            }
            Outcome::Error(s) => {
                self.stats.errors += 1;
                let offset = if method == Method::GetTable {
                    0
                } else {
                    wsa::Packet::new_unchecked(req).attr_offset()
                };
                // OpenSM's error answer is the request MAD itself, record
                // included, with the status and method changed.
                (*s, offset, &req[wsa::DATA_OFFSET..req.len().min(MAD_SIZE)])
            }
        };
        self.stats.answered += 1;
        // GetTable and GetMulti answers are RMPP messages (a GetMulti's
        // records are PathRecords, under that attribute ID, as o15-0.2.7 says).
        let table =
            matches!(method, Method::GetTable | Method::GetMulti) && status == MadStatus::OK;
        let len = if table {
            wsa::DATA_OFFSET + data.len()
        } else {
            MAD_SIZE
        };
        let mut out = vec![0u8; len];
        out[..wsa::DATA_OFFSET].copy_from_slice(&req[..wsa::DATA_OFFSET]);
        {
            let mut p = mad::Packet::new_unchecked(&mut out[..]);
            p.set_method(resp_method);
            p.set_status(status);
            // A MultiPathRecord's answer, records or error, names PathRecord
            // (o15-0.2.7 for the records; OpenSM's errors do too).
            if AttrId::from(p.attr_id()) == AttrId::MultiPathRecord {
                p.set_attr_id(AttrId::PathRecord.into());
            }
        }
        // The request's RMPP header is not the response's: a GetTable answer
        // is one RMPP message (the engine fills type, flags and lengths),
        // anything else a single MAD.
        out[rmpp::OFFSET..rmpp::END].fill(0);
        if table {
            out[rmpp::OFFSET] = rmpp::VERSION;
            out[rmpp::OFFSET + 2] = rmpp::FLAG_ACTIVE;
        }
        {
            let mut p = wsa::Packet::new_unchecked(&mut out[..]);
            p.set_sm_key(0); // C15-0.1.5: responses carry SM_Key 0
            p.set_attr_offset(attr_offset);
            let n = data.len().min(p.data_mut().len());
            p.data_mut()[..n].copy_from_slice(&data[..n]);
        }
        let addr = MadAddr {
            qkey: GSI_QKEY,
            ..to
        };
        // The only send error left is an engine refusing the message (larger
        // than its RMPP limit was checked above): nothing to answer with.
        let _ = self.engine.send(
            now,
            self.agent,
            SendRequest {
                addr,
                mad: &out,
                timeout_ms: 0,
                retries: RMPP_RETRIES,
            },
        );
    }
}
