//! The demo fabric behind `--transport sim`: `vmadsim0` (LID 1) and
//! `vmadsim1` (LID 3) on switch `vmadsw0` (LID 2). `vmadsim1` runs real
//! responders on vmad's own port API:
//!
//! - an SA (class 0x03): it sweeps the fabric with directed-route SMPs at
//!   start, as an SM does, and answers Get/GetTable of NodeRecord and
//!   PathRecord from what it found, over RMPP;
//! - an ibping responder (class 0x32, OUI 00:14:05): GetResp with its node
//!   description;
//! - a bulk responder (class 0x33): an RMPP GetResp of AttributeModifier bytes.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use vmad::engine::{AgentId, AgentSpec, Event, SendRequest};
use vmad::port::{Port, PortConfig};
use vmad::subnet::{Fabric, FabricBuilder};
use vmad::types::{MadAddr, Qp};
use vmad::wire::mad::{self, MadStatus};
use vmad::wire::sa::{self, node_record, path_record};
use vmad::wire::{rmpp, vendor};

use crate::mads::{self, CLASS_BULK, CLASS_PING, CLASS_SA, GET, GET_TABLE, OPENIB_OUI};
use crate::sweep::{self, Topology};
use crate::Failure;

/// The CA the CLI uses by default.
pub(crate) const CLIENT_CA: &str = "vmadsim0";
/// The CA the responders run on.
pub(crate) const SERVER_CA: &str = "vmadsim1";
/// The switch between them.
pub(crate) const SWITCH: &str = "vmadsw0";
/// LID of `vmadsim1`, the SM/SA LID of the demo fabric.
pub(crate) const SERVER_LID: u16 = 3;

/// SA status NoRecords (class-specific code 3, status bits 8..14).
const SA_NO_RECORDS: u16 = 3 << 8;
/// Unsupported method/attribute.
const UNSUPPORTED: u16 = 0x000c;
/// The pattern byte `i` of a bulk response.
pub(crate) fn bulk_byte(i: usize) -> u8 {
    (i * 7) as u8
}

/// The running demo fabric; dropping it stops the responders.
pub(crate) struct Demo {
    fabric: Fabric,
    port: Arc<Port>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

pub(crate) struct Agents {
    /// The SA, where there is a topology to serve.
    sa: Option<AgentId>,
    ping: AgentId,
    bulk: AgentId,
}

fn serve(
    port: &Port,
    spec_class: u8,
    version: u8,
    rmpp: bool,
    methods: &[u8],
    oui: u32,
) -> Result<AgentId, Failure> {
    Ok(port.register(AgentSpec {
        qp: Qp::Gsi,
        mgmt_class: spec_class.into(),
        class_version: version,
        rmpp_version: u8::from(rmpp),
        method_mask: mads::mask(methods),
        oui,
        user_rmpp: false,
    })?)
}

impl Demo {
    /// Build the fabric, sweep it from `vmadsim1`, and start the responders.
    pub(crate) fn start() -> Result<Demo, Failure> {
        let fabric = Fabric::builder()
            .ca(CLIENT_CA)
            .switch(SWITCH, 8)
            .ca(SERVER_CA)
            .link(CLIENT_CA, 1, SWITCH, 1)
            .link(SWITCH, 2, SERVER_CA, 1)
            .sm_lid(SERVER_LID)
            .build()?;
        let (_, port) = vmad::umad::open_with(SERVER_CA, 1, PortConfig::default())?;
        let smi = mads::client(&port, mads::CLASS_DR, 1, false, 0)?;
        let topo = sweep::sweep(&port, smi, 500, 2, &mut |_, _| {})?;
        port.unregister(smi)?;
        let mut agents = responders(&port)?;
        agents.sa = Some(serve(&port, CLASS_SA, 2, true, &[GET, GET_TABLE], 0)?);
        let stop = Arc::new(AtomicBool::new(false));
        let (p, s) = (port.clone(), stop.clone());
        let thread = std::thread::Builder::new()
            .name("vmad-demo".into())
            .spawn(move || respond_loop(&p, &s, &agents, &topo))?;
        Ok(Demo {
            fabric,
            port,
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for Demo {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        self.port.close();
        self.fabric.unregister();
    }
}

/// The ping and bulk responders (no SA) on `port`.
pub(crate) fn responders(port: &Port) -> Result<Agents, Failure> {
    Ok(Agents {
        sa: None,
        ping: serve(port, CLASS_PING, 1, false, &[GET], OPENIB_OUI)?,
        bulk: serve(port, CLASS_BULK, 1, true, &[GET], OPENIB_OUI)?,
    })
}

/// Answer requests until `stop` is set or the port closes.
pub(crate) fn respond_loop(port: &Port, stop: &AtomicBool, agents: &Agents, topo: &Topology) {
    while !stop.load(Ordering::Relaxed) {
        match port.recv(Some(Duration::from_millis(20))) {
            Ok(Event::Recv { agent, addr, mad }) => {
                let reply = if Some(agent) == agents.sa {
                    sa_reply(&mad, topo)
                } else if agent == agents.ping {
                    Some(ping_reply(&mad, &port.attrs().ca_name))
                } else if agent == agents.bulk {
                    Some(bulk_reply(&mad))
                } else {
                    None
                };
                if let Some(r) = reply {
                    send_reply(port, agent, addr, &r);
                }
            }
            Ok(_) | Err(vmad::Error::TimedOut) => {}
            Err(_) => break,
        }
    }
}

fn send_reply(port: &Port, agent: AgentId, addr: MadAddr, mad: &[u8]) {
    // A failed reply is the requester's timeout, as on a real fabric.
    let _ = port.send(
        agent,
        SendRequest {
            addr,
            mad,
            timeout_ms: 0,
            retries: 0,
        },
    );
}

/// The request's header as a response's, `hdr` bytes of it.
fn response_header(req: &[u8], hdr: usize, status: u16) -> Vec<u8> {
    let mut r = req[..hdr.min(req.len())].to_vec();
    r.resize(hdr, 0);
    let mut h = mad::Packet::new_unchecked(&mut r[..]);
    h.set_method(h.method().response());
    h.set_status(MadStatus(status));
    r[rmpp::OFFSET..rmpp::END].fill(0);
    r
}

/// ibping's answer: the responder's name in the data.
fn ping_reply(req: &[u8], name: &str) -> Vec<u8> {
    let mut r = response_header(req, 256, 0);
    let text = &name.as_bytes()[..name.len().min(64)];
    vendor::Packet::new_unchecked(&mut r[..]).data_mut()[..text.len()].copy_from_slice(text);
    r
}

fn bulk_reply(req: &[u8]) -> Vec<u8> {
    let n = (mad::Packet::new_unchecked(req).attr_mod() as usize).min(1 << 24);
    let mut r = response_header(req, 40, 0);
    mads::set_rmpp_active(&mut r);
    r.extend((0..n).map(bulk_byte));
    r
}

/// NodeRecord: LID, reserved, NodeInfo (40), NodeDescription (64), padded to 112.
fn node_records(topo: &Topology, lid_filter: Option<u16>) -> Vec<Vec<u8>> {
    topo.nodes
        .iter()
        .filter(|n| lid_filter.is_none_or(|l| l == n.lid()))
        .map(|n| {
            let mut r = vec![0u8; node_record::RECORD_LEN];
            let mut rec = node_record::Packet::new_unchecked(&mut r[..]);
            rec.set_lid(n.lid());
            rec.node_info_mut()
                .into_inner()
                .copy_from_slice(&n.node_info);
            rec.node_desc_mut()
                .into_inner()
                .copy_from_slice(&n.node_desc);
            r
        })
        .collect()
}

/// End ports: every CA port and every switch's port 0: (lid, gid).
fn end_ports(topo: &Topology) -> Vec<(u16, [u8; 16])> {
    let mut v = Vec::new();
    for n in &topo.nodes {
        for (&num, p) in &n.ports {
            if n.is_switch() && num != 0 {
                continue;
            }
            v.push((p.lid, n.gid(num)));
        }
    }
    v
}

fn path_records(topo: &Topology, query: &[u8], mask: u64) -> Vec<Vec<u8>> {
    use path_record::comp;
    let q = path_record::Packet::new_unchecked(query);
    let q = path_record::Repr::parse(&q).unwrap_or_default();
    let ends = end_ports(topo);
    let mut out = Vec::new();
    for &(slid, sgid) in &ends {
        for &(dlid, dgid) in &ends {
            let keep = (mask & comp::SLID == 0 || q.slid == slid)
                && (mask & comp::DLID == 0 || q.dlid == dlid)
                && (mask & comp::SGID == 0 || q.sgid == sgid)
                && (mask & comp::DGID == 0 || q.dgid == dgid);
            if !keep {
                continue;
            }
            let r = path_record::Repr {
                sgid,
                dgid,
                slid,
                dlid,
                reversible: true,
                numb_path: 1,
                pkey: 0xffff,
                mtu_selector: 2,
                mtu: 4,
                rate_selector: 2,
                rate: 2,
                pkt_life_selector: 2,
                pkt_life: 18,
                ..path_record::Repr::default()
            };
            let mut b = vec![0u8; path_record::LEN];
            r.emit(&mut path_record::Packet::new_unchecked(&mut b[..]));
            out.push(b);
        }
    }
    out
}

fn sa_reply(req: &[u8], topo: &Topology) -> Option<Vec<u8>> {
    let sa_req = sa::Packet::new_checked(req).ok()?;
    let hdr = mad::Packet::new_unchecked(req);
    if hdr.method().is_response_bit() {
        return None;
    }
    let (method, attr, mask) = (u8::from(hdr.method()), hdr.attr_id(), sa_req.comp_mask());
    let query = sa_req.data();
    let (records, len) = match attr {
        mads::ATTR_NODE_RECORD => {
            let lid = (mask & node_record::COMP_LID != 0)
                .then(|| node_record::Packet::new_unchecked(query).lid());
            (node_records(topo, lid), node_record::RECORD_LEN)
        }
        mads::ATTR_PATH_RECORD => (path_records(topo, query, mask), path_record::LEN),
        _ => return Some(response_header(req, 256, UNSUPPORTED)),
    };
    let records = if method == GET {
        records.into_iter().take(1).collect()
    } else {
        records
    };
    if method == GET && records.is_empty() {
        return Some(response_header(req, 256, SA_NO_RECORDS));
    }
    let mut r = response_header(req, 56, 0);
    sa::Packet::new_unchecked(&mut r[..]).set_attr_offset(sa::Repr::attr_offset_for(len));
    if method == GET_TABLE {
        mads::set_rmpp_active(&mut r);
    }
    for rec in records {
        r.extend_from_slice(&rec);
    }
    if method == GET {
        r.resize(256, 0);
    }
    Some(r)
}

/// Build the subnet of the ibsim topology file `path` (its built-in SM sweeps it) and
/// register `ca` (default: the file's first CA) for the CLI to open; the registry keeps
/// the fabric alive.
pub(crate) fn topology(path: &str, ca: Option<&str>) -> Result<String, Failure> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        Failure::new(
            crate::exit::Exit::NoInput,
            format!("VMAD_SIM_TOPO={path}: {e}"),
        )
    })?;
    let builder = FabricBuilder::from_topology(&text)?;
    let ca = match ca {
        Some(ca) => ca.to_owned(),
        None => builder
            .ca_names()
            .into_iter()
            .next()
            .ok_or_else(|| Failure::usage(format!("{path} has no CA")))?,
    };
    builder.register_only(&[&ca]).build()?;
    Ok(ca)
}
