//! `vmad`: infiniband-diags-like tools on vmad's own MAD stack.
//!
//! ```text
//! vmad [--transport sim|ibsim|verbs] [-C ca] [-P port] [-t ms] [--pcap FILE] [--json] <command>
//!   ping LID           vendor-class ping-pong with a latency histogram (ibping)
//!   sa-query [TYPE]    NodeRecord / PathRecord tables from the SA (saquery)
//!   smp-query ATTR ADDR  NodeInfo / NodeDesc / PortInfo by LID or -D path (smpquery)
//!   discover           directed-route sweep of the fabric (ibnetdiscover)
//!   bench LID          latency, throughput and RMPP runs with the port counters
//!   dump FILE.pcap     decode a capture with vmad's pretty-printer
//! ```
//!
//! `--transport sim` (the default) runs against an in-process demo fabric:
//! two CAs behind a switch, with an SA and a ping responder on `vmadsim1`; with
//! `VMAD_SIM_TOPO=file.net`, the subnet of that ibsim topology instead, brought up by the
//! fabric's built-in SM, the port being `-C ca` (default: the file's first CA).

mod demo;
mod discover;
mod dump;
mod mads;
mod ping;
mod query;
mod sweep;

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Parser, Subcommand, ValueEnum};
use serde_json::Value;

use vmad::pcap::{self, PcapConfig};
use vmad::port::{Port, PortConfig};

/// Which transport the port is opened on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum TransportKind {
    /// The in-process demo fabric (two CAs, a switch, SA and ping responders).
    Sim,
    /// A running ibsim (IBSIM_SOCKNAME / IBSIM_SERVER_NAME as umad2sim reads them).
    Ibsim,
    /// An RDMA device through libibverbs (needs the `verbs` feature).
    Verbs,
    /// RoCE v2 over UDP: vmad is QP1 of `--roce-addr` (no SMPs; address peers with `--gid`).
    Roce,
}

#[derive(Debug, Parser)]
#[command(
    name = "vmad",
    version,
    about = "InfiniBand management tools on vmad's userspace MAD stack"
)]
struct Cli {
    /// Transport to open the port on.
    #[arg(long, value_enum, default_value = "sim", global = true)]
    transport: TransportKind,
    /// CA name (sim: vmadsim0; ibsim: the node to attach to; verbs: the device).
    #[arg(short = 'C', long = "ca", global = true)]
    ca: Option<String>,
    /// Port number (0: the first port).
    #[arg(short = 'P', long = "port", default_value_t = 1, global = true)]
    port: u8,
    /// Response timeout per attempt, milliseconds.
    #[arg(short = 't', long = "timeout", default_value_t = 1000, global = true)]
    timeout: u32,
    /// Retries after the first attempt.
    #[arg(long, default_value_t = 2, global = true)]
    retries: u32,
    /// Record every MAD the port sends and receives to this pcap file.
    #[arg(long, global = true)]
    pcap: Option<PathBuf>,
    /// Capture framing: roce (Ethernet + RoCE v2, default) or ib (link type 247).
    #[arg(long = "pcap-linktype", default_value = "roce", global = true)]
    pcap_linktype: String,
    /// Size bound of each capture file (k/M/G suffixes); older files rotate to FILE.1, FILE.2, ...
    #[arg(long = "pcap-max-bytes", global = true)]
    pcap_max_bytes: Option<String>,
    /// Machine-readable JSON output.
    #[arg(long, global = true)]
    json: bool,
    /// RoCE: the local address that is this port's GID (no kernel RoCE device may own it).
    #[arg(long = "roce-addr", global = true)]
    roce_addr: Option<std::net::IpAddr>,
    /// RoCE: the UDP port to bind (default 4791).
    #[arg(long = "roce-udp-port", default_value_t = 4791, global = true)]
    roce_udp_port: u16,
    /// RoCE: the UDP port peers listen on (default 4791).
    #[arg(long = "roce-peer-port", default_value_t = 4791, global = true)]
    roce_peer_port: u16,
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// Vendor-class ping-pong (class 0x32, OUI 00:14:05, as ibping) with a latency histogram.
    Ping(ping::PingArgs),
    /// Query the SA: NodeRecord (default) or PathRecord, as saquery.
    SaQuery(query::SaArgs),
    /// Query an SMA: NodeInfo, NodeDesc or PortInfo, as smpquery.
    SmpQuery(query::SmpArgs),
    /// Directed-route sweep of the fabric, as ibnetdiscover.
    Discover(discover::DiscoverArgs),
    /// Latency, throughput and RMPP runs; prints a table with the port counters.
    Bench(ping::BenchArgs),
    /// Decode a pcap file (vmad's own captures, or any RoCE v2 / link type 247 capture of MADs).
    Dump(dump::DumpArgs),
    /// Answer ping (class 0x32) and bulk RMPP (class 0x33) requests on this port.
    Serve(ping::ServeArgs),
}

/// Everything a command needs: the open port and the settings.
pub(crate) struct Session {
    pub(crate) port: Arc<Port>,
    pub(crate) timeout_ms: u32,
    pub(crate) retries: u32,
    /// Keeps the demo fabric's responders alive while the command runs.
    _demo: Option<demo::Demo>,
}

/// A command's failure: the message printed, and the exit code.
#[derive(Debug)]
pub(crate) struct Failure(pub(crate) String);

impl<E: std::fmt::Display> From<E> for Failure {
    fn from(e: E) -> Failure {
        Failure(e.to_string())
    }
}

pub(crate) type CmdResult = Result<Output, Failure>;

/// What a command prints: text for people, a JSON value for scripts.
pub(crate) struct Output {
    pub(crate) text: String,
    pub(crate) json: Value,
}

fn pcap_config(cli: &Cli) -> Result<Option<PcapConfig>, Failure> {
    let Some(path) = &cli.pcap else {
        return Ok(None);
    };
    let mut c = PcapConfig::new(path);
    c.link = pcap::parse_link(&cli.pcap_linktype).ok_or_else(|| {
        Failure(format!(
            "unknown --pcap-linktype {:?} (roce or ib)",
            cli.pcap_linktype
        ))
    })?;
    if let Some(s) = &cli.pcap_max_bytes {
        c.max_bytes =
            pcap::parse_size(s).ok_or_else(|| Failure(format!("bad --pcap-max-bytes {s:?}")))?;
    }
    Ok(Some(c))
}

fn open_session(cli: &Cli) -> Result<Session, Failure> {
    let config = PortConfig {
        pcap: pcap_config(cli)?,
        ..PortConfig::default()
    };
    let (port, demo) = match cli.transport {
        TransportKind::Sim => match std::env::var("VMAD_SIM_TOPO") {
            Ok(path) => {
                let ca = demo::topology(&path, cli.ca.as_deref())?;
                (vmad::umad::open_with(&ca, cli.port, config)?.1, None)
            }
            Err(_) => {
                let demo = demo::Demo::start()?;
                let ca = cli.ca.clone().unwrap_or_else(|| demo::CLIENT_CA.to_owned());
                let (_, port) = vmad::umad::open_with(&ca, cli.port, config)?;
                (port, Some(demo))
            }
        },
        TransportKind::Ibsim => {
            let mut ic = vmad::transport::ibsim::IbsimConfig::from_env();
            if cli.ca.is_some() {
                ic.node.clone_from(&cli.ca);
            }
            let t = vmad::transport::ibsim::IbsimTransport::connect(ic)?;
            (Arc::new(Port::open(Box::new(t), config)?), None)
        }
        TransportKind::Verbs => (open_verbs(cli, config)?, None),
        TransportKind::Roce => (open_roce(cli, config)?, None),
    };
    Ok(Session {
        port,
        timeout_ms: cli.timeout,
        retries: cli.retries,
        _demo: demo,
    })
}

#[cfg(feature = "verbs")]
fn open_verbs(cli: &Cli, config: PortConfig) -> Result<Arc<Port>, Failure> {
    let t = vmad::transport::verbs::VerbsTransport::open(vmad::transport::verbs::VerbsConfig {
        device: cli.ca.clone(),
        port: (cli.port != 0).then_some(cli.port),
        ..Default::default()
    })?;
    Ok(Arc::new(Port::open(Box::new(t), config)?))
}

#[cfg(feature = "roce")]
fn open_roce(cli: &Cli, config: PortConfig) -> Result<Arc<Port>, Failure> {
    use vmad::transport::roce::{RoceConfig, RoceTransport};
    let addr = cli
        .roce_addr
        .ok_or_else(|| Failure("--transport roce needs --roce-addr".into()))?;
    let t = RoceTransport::open(RoceConfig {
        udp_port: cli.roce_udp_port,
        peer_port: cli.roce_peer_port,
        ..RoceConfig::new(addr)
    })?;
    Ok(Arc::new(Port::open(Box::new(t), config)?))
}

#[cfg(not(feature = "roce"))]
fn open_roce(_cli: &Cli, _config: PortConfig) -> Result<Arc<Port>, Failure> {
    Err(Failure(
        "this vmad was built without the `roce` feature".into(),
    ))
}

#[cfg(not(feature = "verbs"))]
fn open_verbs(_cli: &Cli, _config: PortConfig) -> Result<Arc<Port>, Failure> {
    Err(Failure(
        "this vmad was built without the `verbs` feature (cargo build --features verbs)".into(),
    ))
}

fn run(cli: &Cli) -> CmdResult {
    if let Cmd::Dump(a) = &cli.cmd {
        return dump::run(a);
    }
    let s = open_session(cli)?;
    let out = match &cli.cmd {
        Cmd::Ping(a) => ping::ping(&s, a),
        Cmd::SaQuery(a) => query::sa_query(&s, a),
        Cmd::SmpQuery(a) => query::smp_query(&s, a),
        Cmd::Discover(a) => discover::run(&s, a),
        Cmd::Bench(a) => ping::bench(&s, a),
        Cmd::Serve(a) => ping::serve(&s, a),
        Cmd::Dump(_) => unreachable!("handled above"),
    };
    // Close before the demo fabric's responders stop, so the capture holds everything.
    s.port.close();
    out
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(&cli) {
        Ok(out) => {
            if cli.json {
                println!(
                    "{}",
                    serde_json::to_string_pretty(&out.json).unwrap_or_default()
                );
            } else {
                print!("{}", out.text);
            }
            ExitCode::SUCCESS
        }
        Err(Failure(msg)) => {
            if cli.json {
                println!("{}", serde_json::json!({ "error": msg }));
            }
            eprintln!("vmad: {msg}");
            ExitCode::FAILURE
        }
    }
}
