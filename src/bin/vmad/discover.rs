//! `discover`: a directed-route sweep printed like ibnetdiscover's topology file.

use std::fmt::Write as _;
use std::io::{IsTerminal, Write as _};

use clap::Args;
use serde_json::{json, Value};

use crate::sweep::{self, Node, Topology};
use crate::{mads, CmdResult, Output, Session};

#[derive(Debug, Args)]
pub(crate) struct DiscoverArgs {
    /// Show a progress line on stderr (on by default when stderr is a terminal).
    #[arg(long)]
    progress: bool,
    /// Print the fabric as a Graphviz graph (`vmad discover --dot | dot -Tpng -o fabric.png`).
    #[arg(long)]
    dot: bool,
}

fn name(n: &Node) -> String {
    let kind = if n.is_switch() { "S" } else { "H" };
    format!("{kind}-{:016x}", n.guid())
}

fn write_node(out: &mut String, topo: &Topology, n: &Node) {
    let _ = writeln!(
        out,
        "vendid=0x{:x}",
        mads::be32(&n.node_info, 36) & 0xff_ffff
    );
    let _ = writeln!(out, "devid=0x{:x}", mads::be16(&n.node_info, 30));
    let _ = writeln!(out, "sysimgguid=0x{:016x}", mads::be64(&n.node_info, 4));
    if n.is_switch() {
        let _ = writeln!(
            out,
            "switchguid=0x{:016x}(0x{:016x})",
            n.guid(),
            n.port_guid()
        );
        let _ = writeln!(
            out,
            "Switch\t{} \"{}\"\t\t# \"{}\" base port 0 lid {} lmc 0",
            n.num_ports(),
            name(n),
            n.desc(),
            n.lid()
        );
    } else {
        let _ = writeln!(out, "caguid=0x{:016x}", n.guid());
        let _ = writeln!(
            out,
            "Ca\t{} \"{}\"\t\t# \"{}\"",
            n.num_ports(),
            name(n),
            n.desc()
        );
    }
    for (&num, p) in &n.ports {
        let Some((rguid, rport)) = p.remote else {
            continue;
        };
        let Some(r) = topo.by_guid(rguid) else {
            continue;
        };
        let rlid = r.ports.get(&rport).map_or(0, |rp| rp.lid);
        if n.is_switch() {
            let _ = writeln!(
                out,
                "[{num}]\t\"{}\"[{rport}]\t\t# \"{}\" lid {rlid}",
                name(r),
                r.desc()
            );
        } else {
            let _ = writeln!(
                out,
                "[{num}]({:x})\t\"{}\"[{rport}]\t\t# lid {} lmc 0 \"{}\" lid {rlid}",
                n.port_guid(),
                name(r),
                p.lid,
                r.desc()
            );
        }
    }
    let _ = writeln!(out);
}

/// Graphviz text: switches as boxes, CAs as ellipses, one edge per link
/// labelled with both port numbers.
fn dot(topo: &Topology) -> String {
    let mut out = String::from("graph fabric {\n\trankdir=LR;\n\tnode [fontname=\"monospace\"];\n");
    for n in &topo.nodes {
        let shape = if n.is_switch() { "box" } else { "ellipse" };
        let _ = writeln!(
            out,
            "\t\"{}\" [shape={shape}, label=\"{}\\nlid {}\\n0x{:016x}\"];",
            name(n),
            n.desc().replace(['"', '\\'], "_"),
            n.lid(),
            n.guid()
        );
    }
    for n in &topo.nodes {
        for (&num, p) in &n.ports {
            let Some((rguid, rport)) = p.remote else {
                continue;
            };
            let Some(r) = topo.by_guid(rguid) else {
                continue;
            };
            // Each link is seen from both ends; draw it from the lower (GUID, port).
            if (n.guid(), num) > (rguid, rport) {
                continue;
            }
            let _ = writeln!(
                out,
                "\t\"{}\" -- \"{}\" [taillabel=\"{num}\", headlabel=\"{rport}\"];",
                name(n),
                name(r)
            );
        }
    }
    out.push_str("}\n");
    out
}

fn node_json(topo: &Topology, n: &Node) -> Value {
    json!({
        "name": name(n),
        "guid": format!("0x{:016x}", n.guid()),
        "type": if n.is_switch() { "switch" } else { "ca" },
        "desc": n.desc(),
        "lid": n.lid(),
        "num_ports": n.num_ports(),
        "route": n.path,
        "links": n.ports.iter().filter_map(|(&num, p)| {
            let (rguid, rport) = p.remote?;
            Some(json!({
                "port": num,
                "remote": topo.by_guid(rguid).map(name),
                "remote_port": rport,
            }))
        }).collect::<Vec<Value>>(),
    })
}

pub(crate) fn run(s: &Session, a: &DiscoverArgs) -> CmdResult {
    let agent = mads::client(&s.port, mads::CLASS_DR, 1, false, 0)?;
    let show = a.progress || std::io::stderr().is_terminal();
    let mut err = std::io::stderr();
    let topo = sweep::sweep(
        &s.port,
        agent,
        s.timeout_ms,
        s.retries,
        &mut |found, pending| {
            if show {
                let _ = write!(
                    err,
                    "\rdiscover: {found} nodes found, {pending} routes pending   "
                );
                let _ = err.flush();
            }
        },
    )?;
    if show {
        let _ = writeln!(err);
    }
    let mut text = String::new();
    let _ = writeln!(text, "#\n# Topology file: generated by vmad discover\n#");
    if let Some(local) = topo.nodes.first() {
        let _ = writeln!(
            text,
            "# Initiated from node 0x{:016x} port 0x{:016x}\n",
            local.guid(),
            local.port_guid()
        );
    }
    // Switches first, as ibnetdiscover prints them.
    for n in topo.nodes.iter().filter(|n| n.is_switch()) {
        write_node(&mut text, &topo, n);
    }
    for n in topo.nodes.iter().filter(|n| !n.is_switch()) {
        write_node(&mut text, &topo, n);
    }
    let switches = topo.nodes.iter().filter(|n| n.is_switch()).count();
    let _ = writeln!(
        text,
        "# {} nodes ({} switches, {} CAs), {} SMPs",
        topo.nodes.len(),
        switches,
        topo.nodes.len() - switches,
        topo.smps
    );
    if a.dot {
        text = dot(&topo);
    }
    let json = json!({
        "nodes": topo.nodes.iter().map(|n| node_json(&topo, n)).collect::<Vec<Value>>(),
        "switches": switches,
        "cas": topo.nodes.len() - switches,
        "smps": topo.smps,
    });
    Ok(Output {
        text,
        json,
        exit: None,
    })
}
