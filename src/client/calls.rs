//! The typed calls: SMPs by LID, by directed route and by directed route from a LID;
//! SA Get, GetTable, Set and Delete; PerfMgt counters; ClassPortInfo; resolving GUIDs,
//! GIDs and node descriptions to LIDs. Each has a blocking form and an `_async` form
//! returning a [`Pending`]; the blocking form is the async one waited for.

use super::attr::{
    Attribute, Class, ClassPortInfo, NodeInfo, PortCounters, PortCountersExt, SaRecord,
};
use super::request::{Request, Response};
use super::{Client, Pending};
use crate::types::{MadAddr, GSI_QKEY};
use crate::wire::mad::{self, MadStatus, Method, MgmtClass};
use crate::wire::sa::{self, inform_info, mcmember_record, node_record};
use crate::wire::{class_port_info, names, perf, smp, MAD_SIZE};
use crate::{Error, Result};

/// Where an SMP goes.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Target {
    /// LID-routed to this LID.
    Lid(u16),
    /// Directed route from this port: the out port of each hop (empty: this node).
    Dr(Vec<u8>),
    /// LID-routed to `lid`, then directed from there along `path`.
    DrFrom {
        /// Where the directed part starts.
        lid: u16,
        /// The out port of each hop from there.
        path: Vec<u8>,
    },
}

impl Target {
    /// LID-routed.
    pub fn lid(lid: u16) -> Target {
        Target::Lid(lid)
    }
    /// Directed route along `path` (out ports, first hop first).
    pub fn dr(path: &[u8]) -> Target {
        Target::Dr(path.to_vec())
    }
    /// LID-routed to `lid`, then directed along `path`.
    pub fn dr_from(lid: u16, path: &[u8]) -> Target {
        Target::DrFrom {
            lid,
            path: path.to_vec(),
        }
    }
}

/// An SA GetTable answer: every record of the (reassembled RMPP) message.
#[derive(Debug, Clone)]
pub struct Table<R> {
    mad: Vec<u8>,
    size: usize,
    /// Records there are: fewer than the bytes hold for an unsegmented answer.
    count: usize,
    unsegmented: bool,
    _records: core::marker::PhantomData<fn() -> R>,
}

impl<R: SaRecord> Table<R> {
    fn new(resp: Response) -> Result<Table<R>> {
        let header = sa::Packet::new_checked(&resp.mad[..])?;
        let size = usize::from(header.attr_offset()) * 8;
        // Check the framing once, so iterating cannot fail on it.
        header.records()?;
        if size != 0 && size < R::LEN {
            return Err(Error::Malformed(crate::wire::Error::BadAttrOffset));
        }
        // An SA that left segmentation to a kernel's RMPP, seen where nothing segments
        // (OpenSM under umad2sim), sends one MAD whatever the table's length: only its
        // first record is certain.
        let found = crate::discover::table_records(&resp.mad)?;
        let (count, unsegmented) = (found.records.len(), found.unsegmented);
        Ok(Table {
            mad: resp.mad,
            size,
            count,
            unsegmented,
            _records: core::marker::PhantomData,
        })
    }

    /// How many records.
    pub fn len(&self) -> usize {
        self.count
    }

    /// Whether the answer came as one MAD whose RMPP header was never filled in
    /// (OpenSM's SA under umad2sim): its length was lost, so the table holds its
    /// first record only and whether more followed is unknown.
    pub fn unsegmented(&self) -> bool {
        self.unsegmented
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Record `i`'s bytes (its padded size).
    pub fn raw(&self, i: usize) -> Option<&[u8]> {
        (i < self.len()).then(|| &self.mad[sa::DATA_OFFSET + i * self.size..][..self.size])
    }

    /// The records, parsed one by one.
    pub fn iter(&self) -> impl Iterator<Item = R> + '_ {
        (0..self.len()).filter_map(|i| self.raw(i).and_then(|b| R::decode(b).ok()))
    }
}

impl<R: SaRecord> IntoIterator for Table<R> {
    type Item = R;
    type IntoIter = std::vec::IntoIter<R>;
    fn into_iter(self) -> Self::IntoIter {
        self.iter().collect::<Vec<_>>().into_iter()
    }
}

/// The error for an answer with a non-zero status.
pub(super) fn status_error(resp: &Response) -> Result<()> {
    let status = resp.status();
    if status == MadStatus::OK {
        return Ok(());
    }
    let h = mad::Packet::new_checked(&resp.mad[..])?;
    let class = u8::from(h.mgmt_class());
    let sa_code = sa::SaStatus::of(status);
    let name = if class == MgmtClass::SubnAdm.raw() && sa_code != sa::SaStatus::Ok {
        names::sa_status_str(sa_code)
    } else {
        names::mad_status_str(status)
    };
    Err(Error::MadStatus {
        class,
        attr: h.attr_id(),
        status: status.0,
        name,
    })
}

/// A 256-byte request with its common header.
pub(super) fn header(class: u8, version: u8, method: Method, attr: u16, attr_mod: u32) -> Vec<u8> {
    let mut m = vec![0u8; MAD_SIZE];
    mad::Repr {
        base_version: mad::BASE_VERSION,
        mgmt_class: MgmtClass::from(class),
        class_version: version,
        method,
        status: MadStatus::OK,
        class_specific: 0,
        tid: 0,
        attr_id: attr,
        attr_mod,
    }
    .emit(&mut mad::Packet::new_unchecked(&mut m[..]));
    m
}

pub(super) fn gsi(lid: u16) -> MadAddr {
    MadAddr {
        qpn: 1,
        qkey: GSI_QKEY,
        lid,
        ..MadAddr::default()
    }
}

fn legal<A: Attribute>(class: Class, method: Method) -> Result<()> {
    if A::CLASS != class {
        return Err(Error::InvalidArgument("attribute of another class"));
    }
    if !A::METHODS.contains(&method) {
        return Err(Error::InvalidArgument(
            "method not legal for this attribute",
        ));
    }
    Ok(())
}

fn smp_decode<A: Attribute>(resp: Response) -> Result<A> {
    status_error(&resp)?;
    Ok(A::decode(&resp.mad[smp::DATA_OFFSET..])?)
}

fn gmp_decode<A: Attribute>(resp: Response) -> Result<A> {
    status_error(&resp)?;
    let data = mad::Packet::new_checked(&resp.mad[..])?
        .mgmt_class()
        .attr_offset();
    Ok(A::decode(resp.mad.get(data..).unwrap_or_default())?)
}

fn sa_decode<R: SaRecord>(resp: Response) -> Result<R> {
    status_error(&resp)?;
    Ok(R::decode(&resp.mad[sa::DATA_OFFSET..])?)
}

fn table_decode<R: SaRecord>(resp: Response) -> Result<Table<R>> {
    status_error(&resp)?;
    Table::new(resp)
}

fn nothing(resp: Response) -> Result<()> {
    status_error(&resp)
}

impl Client {
    fn smp<A: Attribute>(
        &self,
        method: Method,
        to: &Target,
        attr_mod: u32,
        value: Option<&A>,
    ) -> Result<Pending<A>> {
        legal::<A>(Class::Smp, method)?;
        let (class, addr_lid, dr) = match to {
            Target::Lid(lid) => (MgmtClass::SubnLid, *lid, None),
            Target::Dr(path) => (
                MgmtClass::SubnDirectedRoute,
                smp::PERMISSIVE_LID,
                Some((smp::PERMISSIVE_LID, path)),
            ),
            Target::DrFrom { lid, path } => (
                MgmtClass::SubnDirectedRoute,
                *lid,
                Some((self.port().attrs().lid, path)),
            ),
        };
        let mut m = header(class.raw(), smp::CLASS_VERSION, method, A::ID, attr_mod);
        let mut data = [0u8; smp::DATA_LEN];
        if let Some(v) = value {
            v.encode(&mut data);
        }
        let dr = match dr {
            None => None,
            Some((slid, path)) => {
                if path.len() > usize::from(smp::MAX_HOPS) {
                    return Err(Error::InvalidArgument(
                        "a directed route has at most 63 hops",
                    ));
                }
                let mut dr = smp::DirectedRoute {
                    hop_count: path.len() as u8,
                    dr_slid: slid,
                    ..smp::DirectedRoute::default()
                };
                dr.initial_path[1..=path.len()].copy_from_slice(path);
                Some(dr)
            }
        };
        smp::Repr {
            m_key: self.m_key(to),
            data,
            dr,
        }
        .emit(&mut smp::Packet::new_unchecked(&mut m[..]));
        let req = Request {
            class: class.raw(),
            version: smp::CLASS_VERSION,
            rmpp: false,
            oui: 0,
            addr: MadAddr {
                qpn: 0,
                lid: addr_lid,
                ..MadAddr::default()
            },
            mad: m,
            timeout_ms: None,
            retries: None,
        };
        let tid = self.inner.submit(req)?;
        Ok(Pending::new(self.inner.clone(), tid, smp_decode::<A>))
    }

    /// SubnGet(`A`) with attribute modifier `attr_mod`, without waiting.
    ///
    /// # Errors
    /// EINVAL if `A` is not an SMP attribute that may be read; as [`Client::submit`].
    pub fn get_async<A: Attribute>(&self, to: &Target, attr_mod: u32) -> Result<Pending<A>> {
        self.smp(Method::Get, to, attr_mod, None)
    }

    /// SubnGet(`A`): the attribute as `to` answers it.
    ///
    /// # Errors
    /// ETIMEDOUT when nothing answers; EPROTO ([`Error::MadStatus`]) for an error
    /// status; as [`Client::get_async`].
    pub fn get<A: Attribute>(&self, to: &Target, attr_mod: u32) -> Result<A> {
        self.get_async(to, attr_mod)?.wait()
    }

    /// SubnSet(`A`), without waiting.
    ///
    /// # Errors
    /// As [`Client::get_async`], for an attribute that may be set.
    pub fn set_async<A: Attribute>(
        &self,
        to: &Target,
        attr_mod: u32,
        value: &A,
    ) -> Result<Pending<A>> {
        self.smp(Method::Set, to, attr_mod, Some(value))
    }

    /// SubnSet(`A`): returns the attribute as the node has it afterwards.
    ///
    /// # Errors
    /// As [`Client::get`].
    pub fn set<A: Attribute>(&self, to: &Target, attr_mod: u32, value: &A) -> Result<A> {
        self.set_async(to, attr_mod, value)?.wait()
    }

    /// The SA's LID: the configured one, else the port's SM LID (asked again if none yet).
    fn sa_lid(&self) -> Result<u16> {
        if let Some(lid) = self.inner.config.sa_lid {
            return Ok(lid);
        }
        let lid = self.port().attrs().sm_lid;
        if lid != 0 {
            return Ok(lid);
        }
        match self.port().refresh_attrs()?.sm_lid {
            0 => Err(Error::NoDevice(
                "the port has no SM LID yet: no SA to ask".into(),
            )),
            lid => Ok(lid),
        }
    }

    fn sa<R: SaRecord, T>(
        &self,
        method: Method,
        record: &R,
        comp_mask: u64,
        decode: fn(Response) -> Result<T>,
    ) -> Result<Pending<T>> {
        legal::<R>(Class::Sa, method)?;
        let lid = self.sa_lid()?;
        let mut m = header(
            MgmtClass::SubnAdm.raw(),
            sa::CLASS_VERSION,
            method,
            R::ID,
            0,
        );
        sa::Repr {
            sm_key: self.sm_key(lid),
            attr_offset: sa::Repr::attr_offset_for(R::LEN),
            comp_mask,
        }
        .emit(&mut sa::Packet::new_unchecked(&mut m[..]));
        record.encode(&mut m[sa::DATA_OFFSET..]);
        let req = Request {
            class: MgmtClass::SubnAdm.raw(),
            version: sa::CLASS_VERSION,
            rmpp: true,
            oui: 0,
            addr: gsi(lid),
            mad: m,
            timeout_ms: None,
            retries: None,
        };
        let tid = self.inner.submit(req)?;
        Ok(Pending::new(self.inner.clone(), tid, decode))
    }

    /// SubnAdmGet, without waiting.
    ///
    /// # Errors
    /// As [`Client::sa_get`].
    pub fn sa_get_async<R: SaRecord>(&self, template: &R, comp_mask: u64) -> Result<Pending<R>> {
        self.sa(Method::Get, template, comp_mask, sa_decode::<R>)
    }

    /// SubnAdmGet: the one record matching `template` on the fields `comp_mask` names.
    ///
    /// # Errors
    /// EPROTO with the SA's status (No records, Too many records, …); as [`Client::get`].
    pub fn sa_get<R: SaRecord>(&self, template: &R, comp_mask: u64) -> Result<R> {
        self.sa_get_async(template, comp_mask)?.wait()
    }

    /// SubnAdmGetTable, without waiting.
    ///
    /// # Errors
    /// As [`Client::sa_get`].
    pub fn sa_get_table_async<R: SaRecord>(
        &self,
        template: &R,
        comp_mask: u64,
    ) -> Result<Pending<Table<R>>> {
        self.sa(Method::GetTable, template, comp_mask, table_decode::<R>)
    }

    /// SubnAdmGetTable: every record matching `template` on `comp_mask`'s fields (0:
    /// all), however many RMPP segments they take.
    ///
    /// # Errors
    /// As [`Client::sa_get`]; ECONNABORTED when the SA aborts the transfer.
    pub fn sa_get_table<R: SaRecord>(&self, template: &R, comp_mask: u64) -> Result<Table<R>> {
        self.sa_get_table_async(template, comp_mask)?.wait()
    }

    /// SubnAdmSet: returns the record as the SA keeps it.
    ///
    /// # Errors
    /// As [`Client::sa_get`].
    pub fn sa_set<R: SaRecord>(&self, record: &R, comp_mask: u64) -> Result<R> {
        self.sa(Method::Set, record, comp_mask, sa_decode::<R>)?
            .wait()
    }

    /// SubnAdmDelete.
    ///
    /// # Errors
    /// As [`Client::sa_get`].
    pub fn sa_delete<R: SaRecord>(&self, record: &R, comp_mask: u64) -> Result<()> {
        self.sa(Method::Delete, record, comp_mask, nothing)?.wait()
    }

    /// Join a multicast group: SubnAdmSet(MCMemberRecord); the answer carries the MLID.
    ///
    /// # Errors
    /// As [`Client::sa_get`].
    pub fn mc_join(
        &self,
        record: &mcmember_record::Repr,
        comp_mask: u64,
    ) -> Result<mcmember_record::Repr> {
        self.sa_set(record, comp_mask)
    }

    /// Leave a multicast group: SubnAdmDelete(MCMemberRecord).
    ///
    /// # Errors
    /// As [`Client::sa_get`].
    pub fn mc_leave(&self, record: &mcmember_record::Repr, comp_mask: u64) -> Result<()> {
        self.sa_delete(record, comp_mask)
    }

    /// The LID of the port whose GUID is `port_guid` (its NodeRecord, through the SA).
    ///
    /// # Errors
    /// EPROTO "No records" when the SA knows no such port; as [`Client::sa_get`].
    pub fn resolve_guid(&self, port_guid: u64) -> Result<u16> {
        let mut t = node_record::Repr::template();
        t.node_info.port_guid = port_guid;
        // Bit 8: NodeInfo's PortGUID (`node_record::COMPONENTS`).
        let table = self.sa_get_table(&t, 1 << 8)?;
        table
            .iter()
            .map(|r| r.lid)
            .min()
            .ok_or_else(|| no_records(sa::AttrId::NodeRecord))
    }

    /// The LID of the port with GID `gid` (its interface ID is the port GUID).
    ///
    /// # Errors
    /// As [`Client::resolve_guid`].
    pub fn resolve_gid(&self, gid: [u8; 16]) -> Result<u16> {
        let mut guid = [0u8; 8];
        guid.copy_from_slice(&gid[8..]);
        self.resolve_guid(u64::from_be_bytes(guid))
    }

    /// The LIDs of the nodes whose NodeDescription is `desc` (a CA has one per port).
    ///
    /// # Errors
    /// As [`Client::resolve_guid`].
    pub fn resolve_node_desc(&self, desc: &str) -> Result<Vec<u16>> {
        let mut t = node_record::Repr::template();
        t.node_desc = smp::node_desc::Repr::from_text(desc.as_bytes());
        let table = self.sa_get_table(&t, 1 << 14)?;
        let mut lids: Vec<u16> = table.iter().map(|r| r.lid).collect();
        lids.sort_unstable();
        if lids.is_empty() {
            return Err(no_records(sa::AttrId::NodeRecord));
        }
        Ok(lids)
    }

    fn gmp<A: Attribute>(
        &self,
        class: MgmtClass,
        version: u8,
        method: Method,
        lid: u16,
        value: &A,
    ) -> Result<Pending<A>> {
        let mut m = header(class.raw(), version, method, A::ID, 0);
        value.encode(&mut m[class.attr_offset()..]);
        let req = Request {
            class: class.raw(),
            version,
            rmpp: false,
            oui: 0,
            addr: gsi(lid),
            mad: m,
            timeout_ms: None,
            retries: None,
        };
        let tid = self.inner.submit(req)?;
        Ok(Pending::new(self.inner.clone(), tid, gmp_decode::<A>))
    }

    /// PortCounters of `port` at `lid` ([`perf::ALL_PORTS`]: summed), without waiting.
    ///
    /// # Errors
    /// As [`Client::submit`].
    pub fn port_counters_async(&self, lid: u16, port: u8) -> Result<Pending<PortCounters>> {
        let mut pc = PortCounters::default();
        pc.view_mut().set_port_select(port);
        self.gmp(MgmtClass::Perf, perf::CLASS_VERSION, Method::Get, lid, &pc)
    }

    /// PortCounters of `port` at `lid`.
    ///
    /// # Errors
    /// As [`Client::get`].
    pub fn port_counters(&self, lid: u16, port: u8) -> Result<PortCounters> {
        self.port_counters_async(lid, port)?.wait()
    }

    /// Reset the PortCounters that `select` names (CounterSelect; 0xffff: all).
    ///
    /// # Errors
    /// As [`Client::get`].
    pub fn reset_port_counters(&self, lid: u16, port: u8, select: u16) -> Result<PortCounters> {
        let mut pc = PortCounters::default();
        pc.view_mut().set_port_select(port);
        pc.view_mut().set_counter_select(select);
        self.gmp(MgmtClass::Perf, perf::CLASS_VERSION, Method::Set, lid, &pc)?
            .wait()
    }

    /// PortCountersExtended of `port` at `lid`, without waiting.
    ///
    /// # Errors
    /// As [`Client::submit`].
    pub fn port_counters_ext_async(&self, lid: u16, port: u8) -> Result<Pending<PortCountersExt>> {
        let mut pc = PortCountersExt::default();
        pc.view_mut().set_port_select(port);
        self.gmp(MgmtClass::Perf, perf::CLASS_VERSION, Method::Get, lid, &pc)
    }

    /// PortCountersExtended of `port` at `lid`.
    ///
    /// # Errors
    /// As [`Client::get`].
    pub fn port_counters_ext(&self, lid: u16, port: u8) -> Result<PortCountersExt> {
        self.port_counters_ext_async(lid, port)?.wait()
    }

    /// Reset the PortCountersExtended that `select` names.
    ///
    /// # Errors
    /// As [`Client::get`].
    pub fn reset_port_counters_ext(
        &self,
        lid: u16,
        port: u8,
        select: u16,
    ) -> Result<PortCountersExt> {
        let mut pc = PortCountersExt::default();
        pc.view_mut().set_port_select(port);
        pc.view_mut().set_counter_select(select);
        self.gmp(MgmtClass::Perf, perf::CLASS_VERSION, Method::Set, lid, &pc)?
            .wait()
    }

    /// ClassPortInfo of `class` (version `version`) at `lid`: the SA's (with the SM_Key
    /// given for `lid`), a PMA's, a vendor range-1 class's, …. A range-2 vendor class
    /// needs its OUI: `vendor_get(&v, lid, ClassPortInfo::ID, 0, &[])?.attr()`.
    ///
    /// # Errors
    /// As [`Client::get`].
    pub fn class_port_info(&self, class: u8, version: u8, lid: u16) -> Result<ClassPortInfo> {
        let zero = ClassPortInfo::decode(&[0u8; class_port_info::LEN])?;
        let rmpp = MgmtClass::from(class).is_rmpp_class();
        let mut m = header(class, version, Method::Get, ClassPortInfo::ID, 0);
        zero.encode(&mut m[MgmtClass::from(class).attr_offset()..]);
        if class == MgmtClass::SubnAdm.raw() {
            // The SA's ClassPortInfo is an SA request: it carries the SA's SM_Key.
            sa::Packet::new_unchecked(&mut m[..]).set_sm_key(self.sm_key(lid));
        }
        let req = Request {
            class,
            version,
            rmpp,
            oui: 0,
            addr: gsi(lid),
            mad: m,
            timeout_ms: None,
            retries: None,
        };
        let tid = self.inner.submit(req)?;
        Pending::new(self.inner.clone(), tid, gmp_decode::<ClassPortInfo>).wait()
    }

    /// The NodeInfo of this port's own node (a directed route of no hops).
    ///
    /// # Errors
    /// As [`Client::get`].
    pub fn local_node_info(&self) -> Result<NodeInfo> {
        self.get(&Target::dr(&[]), 0)
    }
}

impl Client {
    /// Subscribe to traps and notices numbered `trap_number` (generic ones, from any
    /// LID; [`inform_info::ANY`]: every one) through SubnAdmSet(InformInfo). The SA
    /// then sends each as a Report, which the client answers and queues for
    /// [`Client::next_report`].
    ///
    /// # Errors
    /// As [`Client::sa_set`]; as [`Port::register`](crate::port::Port::register) for
    /// the agent that serves Reports.
    pub fn subscribe(&self, trap_number: u16) -> Result<inform_info::Repr> {
        self.inner.serve_reports()?;
        self.sa_set(&Self::inform(trap_number, true), 0)
    }

    /// End a subscription made with [`Client::subscribe`].
    ///
    /// # Errors
    /// As [`Client::sa_set`].
    pub fn unsubscribe(&self, trap_number: u16) -> Result<()> {
        self.sa_set(&Self::inform(trap_number, false), 0).map(drop)
    }

    fn inform(trap_number: u16, subscribe: bool) -> inform_info::Repr {
        inform_info::Repr {
            gid: [0; 16],
            lid_range_begin: inform_info::ALL_LIDS,
            lid_range_end: 0,
            is_generic: true,
            subscribe,
            trap_type: inform_info::ANY,
            trap_number,
            qpn: 1,
            resp_time_value: 0,
            producer: inform_info::ANY_PRODUCER,
        }
    }

    /// The next Notice the SA reported to this client's subscriptions, waiting up to
    /// `wait` for one; `None` if none came (or the port failed).
    pub fn next_report(&self, wait: std::time::Duration) -> Option<sa::notice::Repr> {
        self.inner.next_report(wait)
    }
}

fn no_records(attr: sa::AttrId) -> Error {
    let status = sa::SaStatus::NoRecords.to_mad_status();
    Error::MadStatus {
        class: MgmtClass::SubnAdm.raw(),
        attr: attr.raw(),
        status: status.0,
        name: names::sa_status_str(sa::SaStatus::NoRecords),
    }
}
