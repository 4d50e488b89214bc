//! Service records (IBA 15.2.5.14, as OpenSM's SA keeps them):
//! SubnAdmSet registers or replaces a service (keyed by ServiceID,
//! ServiceGID and ServiceP_Key), Delete removes it, Get/GetTable find them
//! by ComponentMask. A record whose lease runs out is forgotten; `now`
//! comes with each request, so no timer is needed: expired records are
//! dropped before each answer, and the lease a query sees is what is left.

use core::time::Duration;

use super::{Outcome, Query};
use crate::time::Instant;
use crate::wire::mad::{MadStatus, Method};
use crate::wire::sa::service_record::{self as sr, comp as c, LEASE_INFINITE};
use crate::wire::sa::{comp, SaStatus};

#[derive(Debug, Clone)]
struct Entry {
    rec: sr::Repr,
    /// When the lease ends (`None`: never).
    expires: Option<Instant>,
}

/// The SA's registered services.
#[derive(Debug, Clone, Default)]
pub(super) struct Services {
    entries: Vec<Entry>,
}

/// The answer with `recs`: as OpenSM's `sr_rcv_respond`, ServiceKeys are
/// zeroed unless the request carried an SM_Key (p. 923: only a trusted
/// request sees them).
fn answer(recs: &[sr::Repr], sm_key: u64) -> Outcome {
    let mut data = vec![0u8; sr::RECORD_LEN * recs.len()];
    for (rec, out) in recs.iter().zip(data.chunks_exact_mut(sr::RECORD_LEN)) {
        let key = if sm_key == 0 { [0; 16] } else { rec.key };
        sr::Repr { key, ..*rec }.emit(&mut sr::Packet::new_unchecked(out));
    }
    Outcome::Records {
        record_len: sr::RECORD_LEN,
        data,
    }
}

impl Services {
    /// Serve one ServiceRecord request at `now`.
    pub(super) fn handle(&mut self, now: Instant, q: &Query<'_>) -> Outcome {
        self.entries.retain(|e| e.expires.is_none_or(|t| t > now));
        let Ok(mut req) = sr::Repr::parse(&sr::Packet::new_unchecked(q.record)) else {
            return Outcome::sa(SaStatus::ReqInvalid);
        };
        let rid = c::ID | c::GID;
        match q.method {
            // OpenSM (`sr_rcv_process_set_method`): a Set names the record
            // by ServiceID and ServiceGID or is ERR_REQ_INVALID; no lease
            // given is an infinite one.
            Method::Set if q.comp_mask & rid != rid => Outcome::sa(SaStatus::ReqInvalid),
            Method::Set => {
                if q.comp_mask & c::LEASE == 0 {
                    req.lease = LEASE_INFINITE;
                }
                let expires = (req.lease != LEASE_INFINITE)
                    .then(|| now + Duration::from_secs(u64::from(req.lease)));
                let entry = Entry { rec: req, expires };
                match self.find(&req) {
                    Some(i) => self.entries[i] = entry,
                    None => self.entries.push(entry),
                }
                // The answer shows the default P_Key when none was given
                // (what is stored keeps the request's, as OpenSM's does).
                if q.comp_mask & c::PKEY == 0 {
                    req.pkey = 0xffff;
                }
                answer(&[req], q.sm_key)
            }
            Method::Delete => match self.find(&req) {
                Some(i) => answer(&[self.entries.remove(i).rec], q.sm_key),
                None => Outcome::sa(SaStatus::NoRecords),
            },
            Method::Get | Method::GetTable => self.query(now, q),
            _ => Outcome::Error(MadStatus::UNSUPPORTED_METHOD_ATTR),
        }
    }

    /// The entry with the request's record ID: ServiceID, ServiceGID and
    /// ServiceP_Key, whatever the mask (OpenSM's `osm_svcr_get_by_rid`).
    fn find(&self, req: &sr::Repr) -> Option<usize> {
        self.entries
            .iter()
            .position(|e| e.rec.id == req.id && e.rec.gid == req.gid && e.rec.pkey == req.pkey)
    }

    fn query(&self, now: Instant, q: &Query<'_>) -> Outcome {
        let mut found = Vec::new();
        let mut rec = [0u8; sr::RECORD_LEN];
        for e in &self.entries {
            let left = e.expires.map_or(LEASE_INFINITE, |t| {
                u32::try_from((t - now).as_secs().max(1)).unwrap_or(LEASE_INFINITE - 1)
            });
            let r = sr::Repr {
                lease: left,
                ..e.rec
            };
            r.emit(&mut sr::Packet::new_unchecked(&mut rec[..]));
            if comp::matches(&sr::COMPONENTS, q.comp_mask, q.record, &rec) {
                found.push(r);
            }
        }
        answer(&found, q.sm_key)
    }
}
