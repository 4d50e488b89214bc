//! `sa-query` (saquery) and `smp-query` (smpquery).

use std::fmt::Write as _;
use std::net::Ipv6Addr;
use std::time::Duration;

use clap::Args;
use serde_json::{json, Value};

use vmad::wire::sa::{node_record, path_record};

use vmad::client::{Client, NodeDesc, NodeInfo, PortInfo, SaRecord, Target};

use crate::client;
use crate::{addr, CmdResult, Failure, Output, Session};

#[derive(Debug, Args)]
pub(crate) struct SaArgs {
    /// Record type: NodeRecord (node, default) or PathRecord (path).
    #[arg(default_value = "NodeRecord")]
    record: String,
    /// NodeRecord: only the node with this LID (hex or decimal).
    #[arg(long, value_parser = addr::lid)]
    lid: Option<u16>,
    /// PathRecord: source LID.
    #[arg(long, value_parser = addr::lid)]
    slid: Option<u16>,
    /// PathRecord: destination LID.
    #[arg(long, value_parser = addr::lid)]
    dlid: Option<u16>,
    /// SA LID (default: the port's SM LID); -s as saquery's --sm_port.
    #[arg(short = 's', long, alias = "smlid", value_parser = addr::lid)]
    sa_lid: Option<u16>,
}

#[derive(Debug, Args)]
pub(crate) struct SmpArgs {
    /// Attribute: nodeinfo (ni), nodedesc (nd) or portinfo (pi).
    attr: String,
    /// Destination: a LID (hex or decimal), with -G a port GUID, or with -D a directed route like 0,1,2.
    addr: String,
    /// PortInfo: the port number (the attribute modifier).
    port_num: Option<u8>,
    /// The destination is a directed route.
    #[arg(short = 'D', long = "direct")]
    direct: bool,
}

fn node_type_name(t: u8) -> &'static str {
    match t {
        1 => "Channel Adapter",
        2 => "Switch",
        3 => "Router",
        _ => "Unknown",
    }
}

fn gid_text(g: &[u8]) -> String {
    let mut a = [0u8; 16];
    a.copy_from_slice(&g[..16]);
    Ipv6Addr::from(a).to_string()
}

/// NodeInfo as JSON.
fn node_info_json(ni: &NodeInfo) -> Value {
    let node_type = u8::from(ni.node_type);
    json!({
        "base_version": ni.base_version,
        "class_version": ni.class_version,
        "node_type": node_type,
        "node_type_name": node_type_name(node_type),
        "num_ports": ni.num_ports,
        "sys_image_guid": format!("0x{:016x}", ni.sys_image_guid),
        "node_guid": format!("0x{:016x}", ni.node_guid),
        "port_guid": format!("0x{:016x}", ni.port_guid),
        "partition_cap": ni.partition_cap,
        "device_id": ni.device_id,
        "revision": ni.revision,
        "local_port_num": ni.local_port_num,
        "vendor_id": ni.vendor_id,
    })
}

fn kv(out: &mut String, indent: &str, key: &str, width: usize, value: impl std::fmt::Display) {
    let dots = width.saturating_sub(key.len());
    let _ = writeln!(out, "{indent}{key}{}{value}", ".".repeat(dots));
}

/// The record types `sa-query` prints.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Record {
    Node,
    Path,
}

/// The records of a GetTable, as their bytes (each `AttributeOffset * 8` long).
fn table<R: SaRecord>(
    s: &Session,
    client: &Client,
    template: &R,
    mask: u64,
    one: bool,
) -> Result<Vec<Vec<u8>>, Failure> {
    let table = client
        .sa_get_table(template, mask)
        .map_err(|e| s.failure("SA GetTable", e))?;
    // One NodeRecord by LID is the whole answer; any other table may have had more.
    if table.unsegmented() && !one {
        eprintln!(
            "vmad: the SA's answer came as one MAD without RMPP (its RMPP header never filled \
             in, as OpenSM's under umad2sim): its length was lost, only its first record is shown"
        );
    }
    Ok((0..table.len())
        .filter_map(|i| table.raw(i).map(<[u8]>::to_vec))
        .collect())
}

pub(crate) fn sa_query(s: &Session, a: &SaArgs) -> CmdResult {
    let kind = a.record.to_ascii_lowercase();
    let record = match kind.as_str() {
        "noderecord" | "node" | "nr" => Record::Node,
        "pathrecord" | "path" | "pr" => Record::Path,
        _ => {
            return Err(Failure::usage(format!(
                "unsupported record type {:?}",
                a.record
            )))
        }
    };
    // As long as the request's own attempts would take: an SA that is still coming up
    // is waited for as it would be retried.
    let attempts = Duration::from_millis(u64::from(s.timeout_ms)) * (s.retries + 1);
    let sa_lid = match a.sa_lid {
        Some(lid) => lid,
        None => client::sm_lid(&s.port, attempts)?,
    };
    let client = s.client_with(|c| c.sa_lid = Some(sa_lid))?;
    let records = if record == Record::Node {
        let mut q = node_record::Repr::template();
        let mut mask = 0u64;
        if let Some(l) = a.lid {
            mask |= node_record::COMP_LID;
            q.lid = l;
        }
        table(s, &client, &q, mask, a.lid.is_some())?
    } else {
        let q = path_record::Repr {
            slid: a.slid.unwrap_or(0),
            dlid: a.dlid.unwrap_or(0),
            ..path_record::Repr::default()
        };
        let mut mask = 0u64;
        if a.slid.is_some() {
            mask |= path_record::comp::SLID;
        }
        if a.dlid.is_some() {
            mask |= path_record::comp::DLID;
        }
        table(s, &client, &q, mask, false)?
    };
    let mut text = String::new();
    let mut list = Vec::new();
    for r in &records {
        let r = &r[..];
        if record == Record::Node {
            let rec = node_record::Packet::new_checked(r)?;
            let ni = rec.node_info();
            let desc = client::desc_text(rec.node_desc().raw());
            let _ = writeln!(text, "NodeRecord dump:");
            let w = 24;
            let t = "\t\t";
            kv(&mut text, t, "lid", w, format_args!("0x{:x}", rec.lid()));
            kv(
                &mut text,
                t,
                "base_version",
                w,
                format_args!("0x{:x}", ni.base_version()),
            );
            kv(
                &mut text,
                t,
                "class_version",
                w,
                format_args!("0x{:x}", ni.class_version()),
            );
            kv(
                &mut text,
                t,
                "node_type",
                w,
                node_type_name(u8::from(ni.node_type())),
            );
            kv(&mut text, t, "num_ports", w, ni.num_ports());
            kv(
                &mut text,
                t,
                "sys_guid",
                w,
                format_args!("0x{:016x}", ni.sys_image_guid()),
            );
            kv(
                &mut text,
                t,
                "node_guid",
                w,
                format_args!("0x{:016x}", ni.node_guid()),
            );
            kv(
                &mut text,
                t,
                "port_guid",
                w,
                format_args!("0x{:016x}", ni.port_guid()),
            );
            kv(&mut text, t, "port_num", w, ni.local_port_num());
            kv(&mut text, t, "NodeDescription", w, &desc);
            let mut j = node_info_json(&NodeInfo::parse(&ni)?);
            j["lid"] = json!(rec.lid());
            j["node_desc"] = json!(desc);
            list.push(j);
        } else {
            let p = path_record::Packet::new_unchecked(r);
            let pr = path_record::Repr::parse(&p)?;
            let _ = writeln!(text, "PathRecord dump:");
            let (w, t) = (24, "\t\t");
            kv(&mut text, t, "dgid", w, gid_text(&pr.dgid));
            kv(&mut text, t, "sgid", w, gid_text(&pr.sgid));
            kv(&mut text, t, "dlid", w, format_args!("0x{:x}", pr.dlid));
            kv(&mut text, t, "slid", w, format_args!("0x{:x}", pr.slid));
            kv(&mut text, t, "reversible", w, u8::from(pr.reversible));
            kv(&mut text, t, "pkey", w, format_args!("0x{:04x}", pr.pkey));
            kv(&mut text, t, "sl", w, pr.sl);
            kv(&mut text, t, "mtu", w, pr.mtu);
            kv(&mut text, t, "rate", w, pr.rate);
            kv(&mut text, t, "pkt_life", w, pr.pkt_life);
            list.push(json!({
                "dgid": gid_text(&pr.dgid), "sgid": gid_text(&pr.sgid),
                "dlid": pr.dlid, "slid": pr.slid, "reversible": pr.reversible,
                "pkey": pr.pkey, "sl": pr.sl, "mtu": pr.mtu, "rate": pr.rate,
                "pkt_life": pr.pkt_life,
            }));
        }
    }
    let name = if record == Record::Node {
        "NodeRecord"
    } else {
        "PathRecord"
    };
    Ok(Output {
        text,
        json: json!({ "sa_lid": sa_lid, "attribute": name, "records": list }),
        exit: None,
    })
}

/// A directed route `0,1,3` (the leading 0 is the local port, as smpquery writes it).
fn parse_path(s: &str) -> Result<Vec<u8>, Failure> {
    let mut v = s
        .split(',')
        .map(|p| {
            p.trim()
                .parse::<u8>()
                .map_err(|_| Failure::usage(format!("bad route {s:?}")))
        })
        .collect::<Result<Vec<u8>, Failure>>()?;
    if v.first() == Some(&0) {
        v.remove(0);
    }
    Ok(v)
}

/// The attributes `smp-query` prints.
#[derive(Clone, Copy)]
enum SmpAttr {
    NodeInfo,
    NodeDesc,
    PortInfo,
}

pub(crate) fn smp_query(s: &Session, a: &SmpArgs) -> CmdResult {
    let attr = match a.attr.to_ascii_lowercase().as_str() {
        "nodeinfo" | "ni" => SmpAttr::NodeInfo,
        "nodedesc" | "nd" => SmpAttr::NodeDesc,
        "portinfo" | "pi" => SmpAttr::PortInfo,
        other => return Err(Failure::usage(format!("unsupported attribute {other:?}"))),
    };
    let attr_mod = u32::from(a.port_num.unwrap_or(0));
    let (to, target) = if a.direct {
        (
            Target::dr(&parse_path(&a.addr)?),
            format!("DR path {}", a.addr),
        )
    } else {
        let lid = addr::resolve_lid(s, &a.addr)?;
        (Target::lid(lid), format!("Lid {lid}"))
    };
    let client = s.client()?;
    let fail = |e| s.failure("SMP Get", e);
    let mut text = String::new();
    let w = 33;
    let json = match attr {
        SmpAttr::NodeInfo => {
            let ni: NodeInfo = client.get(&to, attr_mod).map_err(fail)?;
            let _ = writeln!(text, "# Node info: {target}");
            kv(&mut text, "", "BaseVers:", w, ni.base_version);
            kv(&mut text, "", "ClassVers:", w, ni.class_version);
            kv(
                &mut text,
                "",
                "NodeType:",
                w,
                node_type_name(u8::from(ni.node_type)),
            );
            kv(&mut text, "", "NumPorts:", w, ni.num_ports);
            kv(
                &mut text,
                "",
                "SystemGuid:",
                w,
                format_args!("0x{:016x}", ni.sys_image_guid),
            );
            kv(
                &mut text,
                "",
                "Guid:",
                w,
                format_args!("0x{:016x}", ni.node_guid),
            );
            kv(
                &mut text,
                "",
                "PortGuid:",
                w,
                format_args!("0x{:016x}", ni.port_guid),
            );
            kv(&mut text, "", "PartCap:", w, ni.partition_cap);
            kv(
                &mut text,
                "",
                "DevId:",
                w,
                format_args!("0x{:04x}", ni.device_id),
            );
            kv(
                &mut text,
                "",
                "Revision:",
                w,
                format_args!("0x{:08x}", ni.revision),
            );
            kv(&mut text, "", "LocalPort:", w, ni.local_port_num);
            kv(
                &mut text,
                "",
                "VendorId:",
                w,
                format_args!("0x{:06x}", ni.vendor_id),
            );
            node_info_json(&ni)
        }
        SmpAttr::NodeDesc => {
            let nd: NodeDesc = client.get(&to, attr_mod).map_err(fail)?;
            let desc = client::desc_text(&nd.raw);
            let _ = writeln!(text, "Node Description:.{}{desc}", ".".repeat(16));
            json!({ "node_desc": desc })
        }
        SmpAttr::PortInfo => {
            let pi: PortInfo = client.get(&to, attr_mod).map_err(fail)?;
            let _ = writeln!(text, "# Port info: {target} port {attr_mod}");
            let (state, phys) = (u8::from(pi.port_state), u8::from(pi.phys_state));
            // Byte 31 (LinkWidthActive) as smp-query has always printed it under
            // LocalPort; PortInfo's LocalPortNum is byte 28.
            let local_port = pi.link_width_active;
            kv(
                &mut text,
                "",
                "Mkey:",
                w,
                format_args!("0x{:016x}", pi.m_key),
            );
            kv(
                &mut text,
                "",
                "GidPrefix:",
                w,
                format_args!("0x{:016x}", pi.gid_prefix),
            );
            kv(&mut text, "", "Lid:", w, pi.lid);
            kv(&mut text, "", "SMLid:", w, pi.master_sm_lid);
            kv(
                &mut text,
                "",
                "CapMask:",
                w,
                format_args!("0x{:x}", pi.capability_mask),
            );
            kv(&mut text, "", "LocalPort:", w, local_port);
            kv(&mut text, "", "LinkState:", w, port_state_name(state));
            kv(&mut text, "", "PhysLinkState:", w, phys_state_name(phys));
            json!({
                "m_key": format!("0x{:016x}", pi.m_key),
                "gid_prefix": format!("0x{:016x}", pi.gid_prefix),
                "lid": pi.lid, "sm_lid": pi.master_sm_lid, "capability_mask": pi.capability_mask,
                "local_port_num": local_port, "port_state": state, "port_state_name": port_state_name(state),
                "phys_state": phys, "phys_state_name": phys_state_name(phys),
            })
        }
    };
    Ok(Output {
        text,
        json,
        exit: None,
    })
}

fn port_state_name(s: u8) -> &'static str {
    match s {
        1 => "Down",
        2 => "Initialize",
        3 => "Armed",
        4 => "Active",
        _ => "?",
    }
}

fn phys_state_name(s: u8) -> &'static str {
    match s {
        1 => "Sleep",
        2 => "Polling",
        3 => "Disabled",
        4 => "PortConfigurationTraining",
        5 => "LinkUp",
        6 => "LinkErrorRecovery",
        7 => "PhyTest",
        _ => "?",
    }
}
