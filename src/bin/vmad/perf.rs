//! `perf`: PortCounters and PortCountersExtended of every linked port in the
//! fabric (perfquery / ibqueryerrors), as a table, JSON, or a Prometheus
//! text file for node_exporter's textfile collector.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use clap::Args;
use serde_json::{json, Map, Value};

use vmad::client::Client;
use vmad::wire::perf::{port_counters, port_counters_ext};

use crate::exit::Failure;
use crate::{addr, CmdResult, Output, Session};
use vmad::discover::Topology;

#[derive(Debug, Args)]
pub(crate) struct PerfArgs {
    /// Only this LID (hex or decimal; with -G a port GUID) instead of every node found by a sweep.
    lid: Option<String>,
    /// With a LID: the port to read (default 1).
    port: Option<u8>,
    /// Also write the counters as Prometheus text exposition to FILE (replaced atomically).
    #[arg(long, value_name = "FILE")]
    prometheus: Option<PathBuf>,
}

/// Reads one counter out of its attribute's data.
type Read = fn(&[u8]) -> u64;

fn pc(d: &[u8]) -> port_counters::Packet<&[u8]> {
    port_counters::Packet::new_unchecked(d)
}

fn pce(d: &[u8]) -> port_counters_ext::Packet<&[u8]> {
    port_counters_ext::Packet::new_unchecked(d)
}

/// PortCounters (IBA 16.1.3.5): name, reader, Prometheus help.
const COUNTERS: &[(&str, Read, &str)] = &[
    (
        "symbol_errors",
        |d| u64::from(pc(d).symbol_errors()),
        "SymbolErrorCounter: minor link errors",
    ),
    (
        "link_error_recovery",
        |d| u64::from(pc(d).link_error_recovery()),
        "LinkErrorRecoveryCounter: link retrainings",
    ),
    (
        "link_downed",
        |d| u64::from(pc(d).link_downed()),
        "LinkDownedCounter: links that went down",
    ),
    (
        "rcv_errors",
        |d| u64::from(pc(d).rcv_errors()),
        "PortRcvErrors: packets received with errors",
    ),
    (
        "rcv_remote_physical_errors",
        |d| u64::from(pc(d).rcv_remote_physical_errors()),
        "PortRcvRemotePhysicalErrors: packets marked bad by the sender",
    ),
    (
        "rcv_switch_relay_errors",
        |d| u64::from(pc(d).rcv_switch_relay_errors()),
        "PortRcvSwitchRelayErrors: packets a switch could not forward",
    ),
    (
        "xmit_discards",
        |d| u64::from(pc(d).xmit_discards()),
        "PortXmitDiscards: outbound packets discarded",
    ),
    (
        "xmit_constraint_errors",
        |d| u64::from(pc(d).xmit_constraint_errors()),
        "PortXmitConstraintErrors: outbound packets dropped by partition or raw filters",
    ),
    (
        "rcv_constraint_errors",
        |d| u64::from(pc(d).rcv_constraint_errors()),
        "PortRcvConstraintErrors: inbound packets dropped by partition or raw filters",
    ),
    (
        "local_link_integrity_errors",
        |d| u64::from(pc(d).local_link_integrity_errors()),
        "LocalLinkIntegrityErrors: physical errors past the threshold",
    ),
    (
        "excessive_buffer_overrun_errors",
        |d| u64::from(pc(d).excessive_buffer_overrun_errors()),
        "ExcessiveBufferOverrunErrors: buffer overruns in a row",
    ),
    (
        "vl15_dropped",
        |d| u64::from(pc(d).vl15_dropped()),
        "VL15Dropped: SMPs dropped for lack of buffers",
    ),
    (
        "xmit_data",
        |d| u64::from(pc(d).xmit_data()),
        "PortXmitData: data octets sent, divided by 4",
    ),
    (
        "rcv_data",
        |d| u64::from(pc(d).rcv_data()),
        "PortRcvData: data octets received, divided by 4",
    ),
    (
        "xmit_pkts",
        |d| u64::from(pc(d).xmit_pkts()),
        "PortXmitPkts: packets sent",
    ),
    (
        "rcv_pkts",
        |d| u64::from(pc(d).rcv_pkts()),
        "PortRcvPkts: packets received",
    ),
    (
        "xmit_wait",
        |d| u64::from(pc(d).xmit_wait()),
        "PortXmitWait: ticks with data to send and no credit",
    ),
];

/// PortCountersExtended (IBA 16.1.4.11): the 64-bit data and packet counters.
const EXTENDED: &[(&str, Read, &str)] = &[
    (
        "xmit_data",
        |d| pce(d).xmit_data(),
        "PortXmitData (64-bit): data octets sent, divided by 4",
    ),
    (
        "rcv_data",
        |d| pce(d).rcv_data(),
        "PortRcvData (64-bit): data octets received, divided by 4",
    ),
    (
        "xmit_pkts",
        |d| pce(d).xmit_pkts(),
        "PortXmitPkts (64-bit): packets sent",
    ),
    (
        "rcv_pkts",
        |d| pce(d).rcv_pkts(),
        "PortRcvPkts (64-bit): packets received",
    ),
    (
        "unicast_xmit_pkts",
        |d| pce(d).unicast_xmit_pkts(),
        "PortUnicastXmitPkts: unicast packets sent",
    ),
    (
        "unicast_rcv_pkts",
        |d| pce(d).unicast_rcv_pkts(),
        "PortUnicastRcvPkts: unicast packets received",
    ),
    (
        "multicast_xmit_pkts",
        |d| pce(d).multicast_xmit_pkts(),
        "PortMulticastXmitPkts: multicast packets sent",
    ),
    (
        "multicast_rcv_pkts",
        |d| pce(d).multicast_rcv_pkts(),
        "PortMulticastRcvPkts: multicast packets received",
    ),
];

/// The counters that count errors: what ibqueryerrors reports.
const ERRORS: &[&str] = &[
    "symbol_errors",
    "link_error_recovery",
    "link_downed",
    "rcv_errors",
    "rcv_remote_physical_errors",
    "rcv_switch_relay_errors",
    "xmit_discards",
    "xmit_constraint_errors",
    "rcv_constraint_errors",
    "local_link_integrity_errors",
    "excessive_buffer_overrun_errors",
    "vl15_dropped",
];

/// One port to read: where its PMA is and what to call it.
struct Target {
    node: String,
    /// The node GUID, when a sweep found the port (not for a bare LID).
    guid: Option<u64>,
    lid: u16,
    port: u8,
}

/// One port's result.
struct Row {
    target: Target,
    counters: Result<Vec<(&'static str, u64)>, Failure>,
    extended: Option<Vec<(&'static str, u64)>>,
}

fn targets_from(topo: &Topology) -> Vec<Target> {
    let mut v = Vec::new();
    for n in &topo.nodes {
        for (&num, p) in &n.ports {
            if p.remote.is_none() {
                continue;
            }
            // A switch has one LID (port 0's) and its PMA answers for every port.
            let lid = if n.is_switch() { n.lid() } else { p.lid };
            v.push(Target {
                node: n.desc.clone(),
                guid: Some(n.guid),
                lid,
                port: num,
            });
        }
    }
    v
}

fn decode(
    table: &'static [(&'static str, Read, &'static str)],
    d: &[u8],
) -> Vec<(&'static str, u64)> {
    table.iter().map(|&(n, read, _)| (n, read(d))).collect()
}

/// Every target's counters, asked all at once under the client's windows: PortCounters,
/// then PortCountersExtended of the ports whose PMA answered.
fn read(s: &Session, client: &Client, targets: Vec<Target>) -> Result<Vec<Row>, Failure> {
    let what =
        |t: &Target, attr: &str| format!("PerfMgt Get({attr}) of LID {} port {}", t.lid, t.port);
    let asked = targets
        .iter()
        .map(|t| client.port_counters_async(t.lid, t.port))
        .collect::<Result<Vec<_>, _>>()?;
    let counters: Vec<_> = asked
        .into_iter()
        .zip(&targets)
        .map(|(p, t)| {
            p.wait()
                .map(|c| decode(COUNTERS, &c.bytes))
                .map_err(|e| s.failure(&what(t, "PortCounters"), e))
        })
        .collect();
    // Optional (CapabilityMask bit 9): a PMA without it answers with a status.
    let asked = targets
        .iter()
        .zip(&counters)
        .map(|(t, c)| match c {
            Ok(_) => client.port_counters_ext_async(t.lid, t.port).map(Some),
            Err(_) => Ok(None),
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(targets
        .into_iter()
        .zip(counters)
        .zip(asked)
        .map(|((target, counters), ext)| Row {
            target,
            counters,
            extended: ext
                .and_then(|p| p.wait().ok())
                .map(|e| decode(EXTENDED, &e.bytes)),
        })
        .collect())
}

fn value(list: &[(&str, u64)], name: &str) -> u64 {
    list.iter().find(|(n, _)| *n == name).map_or(0, |(_, v)| *v)
}

fn text(rows: &[Row]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<20} {:>5} {:>4} {:>7} {:>7} {:>8} {:>7} {:>8} {:>8} {:>14} {:>14} {:>12} {:>12}",
        "node",
        "lid",
        "port",
        "symerr",
        "linkrec",
        "linkdown",
        "rcverr",
        "xmitdisc",
        "vl15drop",
        "xmit_data",
        "rcv_data",
        "xmit_pkts",
        "rcv_pkts"
    );
    let mut with_errors = 0;
    for r in rows {
        let t = &r.target;
        match &r.counters {
            Ok(c) => {
                if ERRORS.iter().any(|e| value(c, e) != 0) {
                    with_errors += 1;
                }
                // The 64-bit counters when the PMA has them: the 32-bit ones stop at 2^32-1.
                let big = |n: &str| r.extended.as_ref().map_or(value(c, n), |e| value(e, n));
                let _ = writeln!(
                    out,
                    "{:<20} {:>5} {:>4} {:>7} {:>7} {:>8} {:>7} {:>8} {:>8} {:>14} {:>14} {:>12} {:>12}",
                    t.node, t.lid, t.port,
                    value(c, "symbol_errors"), value(c, "link_error_recovery"),
                    value(c, "link_downed"), value(c, "rcv_errors"), value(c, "xmit_discards"),
                    value(c, "vl15_dropped"),
                    big("xmit_data"), big("rcv_data"), big("xmit_pkts"), big("rcv_pkts"),
                );
            }
            Err(e) => {
                let _ = writeln!(out, "{:<20} {:>5} {:>4} {}", t.node, t.lid, t.port, e.msg);
            }
        }
    }
    let failed = rows.iter().filter(|r| r.counters.is_err()).count();
    let _ = writeln!(
        out,
        "# {} ports read, {with_errors} with error counters above 0, {failed} unreadable",
        rows.len() - failed
    );
    out
}

fn guid_text(g: u64) -> String {
    format!("0x{g:016x}")
}

fn row_json(r: &Row) -> Value {
    let t = &r.target;
    let map = |l: &[(&str, u64)]| -> Value {
        Value::Object(
            l.iter()
                .map(|(n, v)| ((*n).to_owned(), json!(v)))
                .collect::<Map<_, _>>(),
        )
    };
    let mut o = json!({
        "node": t.node,
        "guid": t.guid.map(guid_text),
        "lid": t.lid,
        "port": t.port,
    });
    match &r.counters {
        Ok(c) => {
            o["counters"] = map(c);
            o["extended"] = r.extended.as_deref().map_or(Value::Null, map);
        }
        Err(e) => o["error"] = json!(e.msg),
    }
    o
}

/// Prometheus text exposition (version 0.0.4): one counter family per field.
fn prometheus(rows: &[Row]) -> String {
    let mut out = String::new();
    let families = [
        ("vmad_perf_", COUNTERS, false),
        ("vmad_perf_ext_", EXTENDED, true),
    ];
    for (prefix, table, ext) in families {
        for &(name, _, help) in table {
            let _ = writeln!(out, "# HELP {prefix}{name}_total {help}");
            let _ = writeln!(out, "# TYPE {prefix}{name}_total counter");
            for r in rows {
                let list = match (&r.counters, ext) {
                    (Ok(c), false) => c,
                    (Ok(_), true) => match &r.extended {
                        Some(e) => e,
                        None => continue,
                    },
                    (Err(_), _) => continue,
                };
                let t = &r.target;
                let node = t.node.replace('\\', "\\\\").replace('"', "\\\"");
                let _ = writeln!(
                    out,
                    "{prefix}{name}_total{{guid=\"{}\",node=\"{node}\",lid=\"{}\",port=\"{}\"}} {}",
                    t.guid.map(guid_text).unwrap_or_default(),
                    t.lid,
                    t.port,
                    value(list, name)
                );
            }
        }
    }
    out
}

/// Write through a temporary name, so the collector never reads half a file.
fn write_atomically(path: &Path, body: &str) -> Result<(), Failure> {
    let tmp = path.with_extension("prom.tmp");
    std::fs::write(&tmp, body)?;
    std::fs::rename(&tmp, path)?;
    Ok(())
}

pub(crate) fn run(s: &Session, a: &PerfArgs) -> CmdResult {
    let targets = match &a.lid {
        Some(arg) => {
            let lid = addr::resolve_lid(s, arg)?;
            vec![Target {
                node: format!("lid {lid}"),
                guid: None,
                lid,
                port: a.port.unwrap_or(1),
            }]
        }
        None => {
            let topo = vmad::discover::discover(&s.port, &crate::discover::config(s))?;
            targets_from(&topo)
        }
    };
    let rows = read(s, &s.client()?, targets)?;
    if let Some(first) = rows.iter().find_map(|r| r.counters.as_ref().err()) {
        if rows.iter().all(|r| r.counters.is_err()) {
            return Err(Failure::new(
                first.exit,
                format!("no PMA answered: {}", first.msg),
            ));
        }
    }
    if let Some(path) = &a.prometheus {
        write_atomically(path, &prometheus(&rows))?;
    }
    Ok(Output {
        text: text(&rows),
        json: json!({ "ports": rows.iter().map(row_json).collect::<Vec<Value>>() }),
        exit: None,
    })
}
