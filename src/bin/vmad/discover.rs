//! `discover`: the fabric as [`vmad::discover`] sweeps it, printed like
//! ibnetdiscover's topology file, as Graphviz or as JSON.

use clap::{Args, ValueEnum};
use serde_json::{json, Value};

use vmad::discover::{self, Config, Node, Reason, Topology};

use crate::exit::Exit;
use crate::progress::Progress;
use crate::{CmdResult, Output, Session};

/// How `discover` prints the fabric.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum Format {
    /// ibnetdiscover's topology file (ibsim loads it, and so does VMAD_SIM_TOPO).
    Ibnetdiscover,
    /// Graphviz (`vmad discover --format dot | dot -Tpng -o fabric.png`).
    Dot,
    /// The library's JSON (`--json` wraps the CLI's own document instead).
    Json,
}

#[derive(Debug, Args)]
pub(crate) struct DiscoverArgs {
    /// Show a progress line on stderr (on by default when stderr is a terminal).
    #[arg(long)]
    progress: bool,
    /// Output format.
    #[arg(long, value_enum, default_value = "ibnetdiscover")]
    format: Format,
    /// Short for --format dot.
    #[arg(long, conflicts_with = "format")]
    dot: bool,
    /// SMPs in flight at once on the port.
    #[arg(long, default_value_t = Config::default().window)]
    window: usize,
    /// SMPs in flight at once to one node.
    #[arg(long = "per-node", default_value_t = Config::default().per_node)]
    per_node: usize,
    /// Read the fabric from the SA (NodeRecord, PortInfoRecord, LinkRecord tables)
    /// instead of sweeping it with SMPs: what the SM last swept.
    #[arg(long)]
    sa: bool,
    /// Every SMP by directed route: no switch to LID routing once the SM has
    /// assigned LIDs.
    #[arg(long = "dr-only")]
    dr_only: bool,
    /// Microseconds to poll for the next answer before sleeping (0: sleep at once).
    #[arg(long = "spin-us", default_value_t = Config::default().spin.as_micros() as u64)]
    spin_us: u64,
}

/// The CLI's JSON document (`--json`): per node its links, as `perf` and scripts read them.
fn node_json(topo: &Topology, n: &Node) -> Value {
    json!({
        "name": n.name(),
        "guid": format!("0x{:016x}", n.guid),
        "type": if n.is_switch() { "switch" } else { "ca" },
        "desc": n.desc,
        "lid": n.lid(),
        "num_ports": n.num_ports,
        "route": n.route,
        "links": n.ports.iter().filter_map(|(&num, p)| {
            let (rguid, rport) = p.remote?;
            Some(json!({
                "port": num,
                "remote": topo.node(rguid).map(Node::name),
                "remote_port": rport,
            }))
        }).collect::<Vec<Value>>(),
    })
}

/// The sweep with the session's timeout and retries, for the commands that need the fabric.
pub(crate) fn config(s: &Session) -> Config {
    Config {
        timeout_ms: s.timeout_ms,
        retries: s.retries,
        ..Config::default()
    }
}

pub(crate) fn run(s: &Session, a: &DiscoverArgs) -> CmdResult {
    let config = Config {
        window: a.window,
        per_node: a.per_node,
        lid_routing: !a.dr_only,
        spin: std::time::Duration::from_micros(a.spin_us),
        ..config(s)
    };
    let mut progress = Progress::new(a.progress);
    let start = std::time::Instant::now();
    let topo = if a.sa {
        let attempts = std::time::Duration::from_millis(u64::from(s.timeout_ms)) * (s.retries + 1);
        let sa_lid = crate::client::sm_lid(&s.port, attempts)?;
        discover::discover_sa(&s.port, sa_lid, &config)?
    } else {
        discover::discover_with(&s.port, &config, &mut |p| {
            progress.show(format_args!(
                "discover: {} nodes, {} SMPs sent, {} in flight, {} queued",
                p.nodes, p.smps, p.in_flight, p.queued
            ));
        })?
    };
    progress.done();
    let secs = start.elapsed().as_secs_f64();
    let switches = topo.nodes.iter().filter(|n| n.is_switch()).count();
    let cas = topo.nodes.len() - switches;
    let format = if a.dot { Format::Dot } else { a.format };
    let text = match format {
        Format::Ibnetdiscover => format!(
            "{}\n# {} nodes ({switches} switches, {cas} CAs), {} links, {} SMPs in {secs:.3} s\n",
            topo.to_ibnetdiscover(),
            topo.nodes.len(),
            topo.links().len(),
            topo.smps
        ),
        Format::Dot => topo.to_dot(),
        Format::Json => topo.to_json() + "\n",
    };
    let failures: Vec<String> = topo.failures.iter().map(|f| topo.describe(f)).collect();
    for f in &failures {
        eprintln!("vmad: discover: {f}");
    }
    // A partial fabric is still printed; the status says why it is partial.
    let exit = topo.failures.first().map(|_| {
        if topo.failures.iter().any(|f| f.reason == Reason::Timeout) {
            Exit::Timeout
        } else {
            Exit::Protocol
        }
    });
    if !s.json {
        // Not printed: building and freeing it was 41 % of the process's CPU time on
        // 1,612 nodes (docs/performance.md).
        return Ok(Output {
            text,
            json: Value::Null,
            exit,
        });
    }
    let json = json!({
        "nodes": topo.nodes.iter().map(|n| node_json(&topo, n)).collect::<Vec<Value>>(),
        "switches": switches,
        "cas": cas,
        "links": topo.links().len(),
        "smps": topo.smps,
        "lid_routed": topo.lid_routed,
        "sweep_s": secs,
        "complete": topo.is_complete(),
        "failures": failures,
    });
    Ok(Output { text, json, exit })
}
