//! SA-only discovery: the fabric as the SM knows it, from three GetTables
//! (NodeRecord, PortInfoRecord, LinkRecord) instead of an SMP per port.
//!
//! The three requests go out at once, each answered over RMPP; nothing is sent
//! to the fabric's nodes. What it shows is what the SM swept last, so a node the
//! SM has not seen, or a link it has not brought up, is not there.

use std::collections::HashMap;
use std::time::Duration;

use super::{Config, Node, NodePort, Topology};
use crate::engine::{AgentSpec, Event, SendRequest};
use crate::port::Port;
use crate::types::{MadAddr, Qp, GSI_QKEY};
use crate::wire::mad::{self, MadStatus, Method, MgmtClass};
use crate::wire::sa::{self, link_record, node_record, port_info_record, AttrId, Records};
use crate::wire::{rmpp, MAD_SIZE};
use crate::{Error, Result};

/// The three tables, by attribute, each a record length.
const TABLES: [(AttrId, usize); 3] = [
    (AttrId::NodeRecord, node_record::RECORD_LEN),
    (AttrId::PortInfoRecord, port_info_record::RECORD_LEN),
    (AttrId::LinkRecord, link_record::RECORD_LEN),
];

/// Read the fabric from the SA at `sa_lid` (the port's SM LID, as
/// [`Port::attrs`] reports it, where the SA runs with the SM).
///
/// Nodes come in the SA's order, the port's own node first, with an empty [`Node::route`]; a switch's ports
/// and a CA's are those PortInfoRecords list, their remotes those LinkRecords
/// list. [`Topology::smps`] is 0.
///
/// # Errors
/// ETIMEDOUT when a table does not come within every attempt; EIO
/// ([`Error::Io`]) for an SA that answers with an error status, or with a table that
/// came as one MAD without RMPP, its length lost ([`TableRecords::unsegmented`]); the
/// port's errors.
pub fn discover_sa(port: &Port, sa_lid: u16, config: &Config) -> Result<Topology> {
    let agent = port.register(AgentSpec {
        qp: Qp::Gsi,
        mgmt_class: MgmtClass::SubnAdm,
        class_version: sa::CLASS_VERSION,
        rmpp_version: rmpp::VERSION,
        method_mask: [0; 2],
        oui: 0,
        user_rmpp: false,
    })?;
    let result = tables(port, agent, sa_lid, config);
    let _ = port.unregister(agent);
    let mut got = result?;
    let links = got.pop().unwrap_or_default();
    let ports = got.pop().unwrap_or_default();
    let nodes = got.pop().unwrap_or_default();
    let mut topo = build(&nodes, &ports, &links)?;
    // The port's own node first, as the sweep has it (the topology file names it
    // as where discovery started).
    let own = port.attrs().node_guid;
    if let Some(i) = topo.nodes.iter().position(|n| n.guid == own) {
        let node = topo.nodes.remove(i);
        topo.nodes.insert(0, node);
        topo.index = topo
            .nodes
            .iter()
            .enumerate()
            .map(|(i, n)| (n.guid, i))
            .collect();
    }
    Ok(topo)
}

/// Send the three GetTables and collect their responses, in [`TABLES`] order.
fn tables(
    port: &Port,
    agent: crate::engine::AgentId,
    sa_lid: u16,
    config: &Config,
) -> Result<Vec<Vec<u8>>> {
    let addr = MadAddr {
        qpn: 1,
        qkey: GSI_QKEY,
        lid: sa_lid,
        ..MadAddr::default()
    };
    for (i, &(attr, len)) in TABLES.iter().enumerate() {
        let mut m = [0u8; MAD_SIZE];
        mad::Repr {
            base_version: mad::BASE_VERSION,
            mgmt_class: MgmtClass::SubnAdm,
            class_version: sa::CLASS_VERSION,
            method: Method::GetTable,
            status: MadStatus::OK,
            class_specific: 0,
            tid: i as u64 + 1,
            attr_id: attr.into(),
            attr_mod: 0,
        }
        .emit(&mut mad::Packet::new_unchecked(&mut m[..]));
        // Every record: no component is matched.
        sa::Packet::new_unchecked(&mut m[..]).set_attr_offset(sa::Repr::attr_offset_for(len));
        port.send(
            agent,
            SendRequest {
                addr,
                mad: &m,
                timeout_ms: config.timeout_ms,
                retries: config.retries,
            },
        )?;
    }
    let attempts = u64::from(config.retries) + 1;
    let patience = Duration::from_millis(u64::from(config.timeout_ms) * attempts + 10_000);
    let mut got: Vec<Option<Vec<u8>>> = vec![None; TABLES.len()];
    while got.iter().any(Option::is_none) {
        match port.recv(Some(patience))? {
            Event::Recv { agent: a, mad, .. } if a == agent => {
                let h = mad::Packet::new_checked(&mad[..])?;
                let i = (h.tid() as u32 as usize).wrapping_sub(1);
                if i < got.len() {
                    let status = h.status().0;
                    if status != 0 {
                        return Err(Error::Io(std::io::Error::other(format!(
                            "the SA answered GetTable({:?}) with status 0x{status:04x}",
                            TABLES[i].0
                        ))));
                    }
                    if table_records(&mad)?.unsegmented {
                        return Err(Error::Io(std::io::Error::other(format!(
                            "the SA's GetTable({:?}) answer came as one MAD without RMPP \
                             (its RMPP header never filled in, as OpenSM's under umad2sim): \
                             the table's length was lost",
                            TABLES[i].0
                        ))));
                    }
                    got[i] = Some(mad);
                }
            }
            Event::SendTimedOut { agent: a, .. } if a == agent => return Err(Error::TimedOut),
            _ => {}
        }
    }
    Ok(got.into_iter().flatten().collect())
}

/// The records of an SA GetTableResp (or GetResp).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableRecords<'a> {
    /// Each record, `AttributeOffset * 8` bytes.
    pub records: Vec<&'a [u8]>,
    /// The answer came as one MAD whose RMPP header was never filled in, so the
    /// table's length was lost: `records` holds its first record only (none when
    /// AttributeOffset is 0), and whether more followed is unknown.
    pub unsegmented: bool,
}

/// Whether `resp` is one MAD with RMPPFlags.Active but RMPPVersion 0: an SA
/// that left segmentation to a kernel's RMPP, seen where nothing segments (OpenSM
/// under umad2sim on ibsim, which carries the first 256 bytes of its buffer).
fn unsegmented(resp: &[u8]) -> bool {
    resp.len() == MAD_SIZE
        && rmpp::Packet::new_checked(resp).is_ok_and(|r| r.is_active() && r.rmpp_version() == 0)
}

/// The records of a GetTableResp (or GetResp). An RMPP answer's length is the
/// table's. An unsegmented one ([`TableRecords::unsegmented`]) is 256 bytes
/// whatever the table's length: after the SA's message come whatever bytes its
/// buffer held (OpenSM's are not zeroed), so only the first record is certain,
/// and an AttributeOffset of 0 (OpenSM's empty table) means none.
///
/// # Errors
/// [`Error::Malformed`] for a MAD too short for the SA header or an
/// AttributeOffset of 0 with data in an RMPP answer.
pub fn table_records(resp: &[u8]) -> Result<TableRecords<'_>> {
    let p = sa::Packet::new_checked(resp)?;
    let (data, offset) = (p.data(), p.attr_offset());
    // The view borrows `resp`; re-slice so the records outlive the packet view.
    let data = &resp[resp.len() - data.len()..];
    if !unsegmented(resp) {
        return Ok(TableRecords {
            records: Records::new(data, offset)?.collect(),
            unsegmented: false,
        });
    }
    let records = match offset {
        0 => Vec::new(),
        _ => Records::new(data, offset)?.take(1).collect(),
    };
    Ok(TableRecords {
        records,
        unsegmented: true,
    })
}

fn records(resp: &[u8]) -> Result<Vec<&[u8]>> {
    Ok(table_records(resp)?.records)
}

fn build(nodes: &[u8], ports: &[u8], links: &[u8]) -> Result<Topology> {
    let mut topo = Topology::default();
    // Every LID names one node (a switch's port 0, a CA's port): LID -> (node index, port).
    let mut by_lid: HashMap<u16, usize> = HashMap::new();
    for r in records(nodes)? {
        let rec = node_record::Packet::new_checked(r)?;
        let info = rec.node_info();
        let guid = info.node_guid();
        let idx = match topo.index.get(&guid) {
            Some(&i) => i,
            None => {
                let nd = rec.node_desc();
                let raw = nd.raw();
                let desc = &raw[..raw.iter().position(|&c| c == 0).unwrap_or(raw.len())];
                topo.push(Node::from_info(
                    &info,
                    String::from_utf8_lossy(desc).into_owned(),
                    Vec::new(),
                ))
            }
        };
        by_lid.insert(rec.lid(), idx);
        let port = topo.nodes[idx]
            .ports
            .entry(info.local_port_num())
            .or_default();
        port.guid = info.port_guid();
        port.lid = rec.lid();
    }
    for r in records(ports)? {
        let rec = port_info_record::Packet::new_checked(r)?;
        let Some(&idx) = by_lid.get(&rec.endport_lid()) else {
            continue;
        };
        let n = &mut topo.nodes[idx];
        let switch = n.is_switch();
        let base = n.ports.get(&0).copied().unwrap_or_default();
        let pi = rec.port_info();
        let p = n.ports.entry(rec.port_num()).or_insert(NodePort {
            // A switch's ports carry its port-0 GUID and LID.
            guid: if switch { base.guid } else { 0 },
            lid: rec.endport_lid(),
            ..NodePort::default()
        });
        p.lmc = pi.lmc();
        p.state = pi.port_state_raw();
        p.width = pi.link_width_active();
        p.speed = pi.link_speed_active();
        p.speed_ext = pi.link_speed_ext_active();
    }
    for r in records(links)? {
        let rec = link_record::Packet::new_checked(r)?;
        let (Some(&a), Some(&b)) = (by_lid.get(&rec.from_lid()), by_lid.get(&rec.to_lid())) else {
            continue;
        };
        let (ga, gb) = (topo.nodes[a].guid, topo.nodes[b].guid);
        let from = (ga, rec.from_port());
        let to = (gb, rec.to_port());
        topo.nodes[a].ports.entry(from.1).or_default().remote = Some(to);
        topo.nodes[b].ports.entry(to.1).or_default().remote = Some(from);
    }
    Ok(topo)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A GetTableResp of `n` NodeRecords (112 bytes), each record's bytes `i + 1`.
    fn resp(n: usize) -> Vec<u8> {
        let mut m = vec![0u8; 56 + n * 112];
        m[..4].copy_from_slice(&[1, 0x03, 2, 0x92]);
        m[44..46].copy_from_slice(&14u16.to_be_bytes());
        for i in 0..n {
            m[56 + i * 112..56 + (i + 1) * 112].fill(i as u8 + 1);
        }
        m
    }

    #[test]
    fn rmpp_answer_gives_every_record() {
        let mut m = resp(3);
        m[24] = 1; // RMPP version 1
        m[26] = 0x01; // Active
        let t = table_records(&m).unwrap();
        assert!(!t.unsegmented);
        assert_eq!(t.records.len(), 3);
        assert!(t.records[2].iter().all(|&b| b == 3));
    }

    #[test]
    fn unsegmented_answer_gives_its_first_record_only() {
        // As OpenSM under umad2sim: Active, version 0, 256 bytes whatever the
        // table's length, its buffer's leftovers after the records.
        for n in [1, 2, 5] {
            let mut m = resp(n);
            m.resize(MAD_SIZE, 0xa5);
            m[26] = 0x01;
            let t = table_records(&m[..MAD_SIZE]).unwrap();
            assert!(t.unsegmented);
            assert_eq!(t.records, vec![&[1u8; 112][..]], "{n} records sent");
        }
        // AttributeOffset 0: OpenSM's empty table.
        let mut m = resp(0);
        m.resize(MAD_SIZE, 0xa5);
        m[26] = 0x01;
        m[44..46].fill(0);
        let t = table_records(&m).unwrap();
        assert!(t.unsegmented && t.records.is_empty());
    }

    #[test]
    fn plain_getresp_is_not_unsegmented() {
        let mut m = resp(1);
        m.resize(MAD_SIZE, 0);
        m[3] = 0x81;
        let t = table_records(&m).unwrap();
        assert!(!t.unsegmented);
        assert_eq!(t.records.len(), 1);
    }
}
