//! InformInfo subscriptions (IBA 13.4.8.3, 15.2.5.12; as OpenSM keeps them):
//! SubnAdmSet(InformInfo) subscribes or unsubscribes the requester; a
//! Notice (a trap the SM received, or one the SA raises itself, such as
//! trap 66/67 for multicast groups) goes as a SubnAdmReport to every
//! subscriber whose InformInfo matches it.

use super::{Outcome, Query};
use crate::types::{MadAddr, GSI_QKEY};
use crate::wire::mad::{MadStatus, Method};
use crate::wire::sa::inform_info::{self as ii, ALL_LIDS, ANY, ANY_PRODUCER};
use crate::wire::sa::inform_info_record as iir;
use crate::wire::sa::{comp, notice, SaStatus};

/// Notice type "informational" (IBA table 125).
pub(super) const TYPE_INFO: u8 = 4;
/// ProducerType "class manager" (the SM/SA itself).
pub(super) const PRODUCER_CLASS_MANAGER: u32 = 4;
/// Trap 66: a multicast group was created.
pub(super) const TRAP_MCG_CREATED: u16 = 66;
/// Trap 67: a multicast group was deleted.
pub(super) const TRAP_MCG_DELETED: u16 = 67;

#[derive(Debug, Clone)]
struct Subscription {
    /// Where Reports go: the subscriber's address, its InformInfo QPN.
    to: MadAddr,
    /// The subscriber's port GID.
    gid: [u8; 16],
    /// Its number among the subscriber's subscriptions (InformInfoRecord's Enum).
    id: u16,
    /// What it asked for (Subscribe set).
    info: ii::Repr,
}

/// The SA's InformInfo subscriptions, in subscription order.
#[derive(Debug, Clone, Default)]
pub(super) struct Informs {
    subs: Vec<Subscription>,
}

/// Whether a subscription wants a notice.
fn wants(info: &ii::Repr, n: &notice::Repr) -> bool {
    let from = if info.gid != [0; 16] {
        info.gid == n.issuer_gid
    } else {
        info.lid_range_begin == ALL_LIDS
            || (info.lid_range_begin..=info.lid_range_end.max(info.lid_range_begin))
                .contains(&n.issuer_lid)
    };
    from && info.is_generic == n.is_generic
        && (info.trap_type == ANY || info.trap_type == u16::from(n.notice_type))
        && (info.trap_number == ANY || info.trap_number == n.trap_number)
        && (info.producer == ANY_PRODUCER || info.producer == n.producer)
}

impl Informs {
    /// Serve SubnAdmSet(InformInfo) from `q.from`, whose port GID is `gid`.
    pub(super) fn handle(&mut self, q: &Query<'_>, gid: [u8; 16]) -> Outcome {
        if q.method != Method::Set {
            return Outcome::Error(MadStatus::UNSUPPORTED_METHOD_ATTR);
        }
        let Ok(info) = ii::Repr::parse(&ii::Packet::new_unchecked(q.record)) else {
            return Outcome::sa(SaStatus::ReqInvalid);
        };
        let to = MadAddr {
            qpn: info.qpn,
            qkey: GSI_QKEY,
            ..q.from
        };
        // The same subscriber asking for the same thing is one subscription.
        let same = |s: &Subscription| {
            s.to.lid == to.lid
                && s.to.qpn == to.qpn
                && ii::Repr {
                    subscribe: info.subscribe,
                    resp_time_value: info.resp_time_value,
                    ..s.info
                } == info
        };
        let pos = self.subs.iter().position(same);
        match (info.subscribe, pos) {
            (true, None) => {
                // The lowest Enum this subscriber does not use yet.
                let id = (0..=u16::MAX)
                    .find(|n| !self.subs.iter().any(|s| s.gid == gid && s.id == *n))
                    .unwrap_or(u16::MAX);
                self.subs.push(Subscription { to, gid, id, info });
            }
            (true, Some(_)) => {}
            (false, Some(i)) => {
                self.subs.remove(i);
            }
            (false, None) => return Outcome::sa(SaStatus::ReqInvalid),
        }
        let mut data = vec![0u8; ii::RECORD_LEN];
        info.emit(&mut ii::Packet::new_unchecked(&mut data[..]));
        Outcome::Records {
            record_len: ii::RECORD_LEN,
            data,
        }
    }

    /// Where a notice must be reported.
    pub(super) fn subscribers<'a>(
        &'a self,
        n: &'a notice::Repr,
    ) -> impl Iterator<Item = MadAddr> + 'a {
        self.subs.iter().filter(|s| wants(&s.info, n)).map(|s| s.to)
    }

    /// InformInfoRecords (Get/GetTable) of the subscriptions.
    pub(super) fn records(&self, q: &Query<'_>) -> Outcome {
        if !matches!(q.method, Method::Get | Method::GetTable) {
            return Outcome::Error(MadStatus::UNSUPPORTED_METHOD_ATTR);
        }
        let mut data = Vec::new();
        let mut rec = [0u8; iir::RECORD_LEN];
        for s in &self.subs {
            // C15-0.2-1.16: the QPN only to a trusted request (OpenSM too).
            let qpn = if q.sm_key == 0 { 0 } else { s.info.qpn };
            iir::Repr {
                subscriber_gid: s.gid,
                subscriber_enum: s.id,
                inform_info: ii::Repr { qpn, ..s.info },
            }
            .emit(&mut iir::Packet::new_unchecked(&mut rec[..]));
            if comp::matches(&iir::COMPONENTS, q.comp_mask, q.record, &rec) {
                data.extend_from_slice(&rec);
            }
        }
        Outcome::Records {
            record_len: iir::RECORD_LEN,
            data,
        }
    }

    /// Subscriptions held.
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.subs.len()
    }
}
