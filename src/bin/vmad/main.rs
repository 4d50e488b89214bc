//! `vmad`: infiniband-diags-like tools on vmad's own MAD stack.
//!
//! ```text
//! vmad [--transport sim|ibsim|kernel|hybrid|verbs|roce] [-C ca] [-P port] [-t ms] [-G] [-v] [--pcap FILE] [--json] <command>
//!   ping LID           vendor-class ping-pong with a latency histogram (ibping)
//!   sa-query [TYPE]    NodeRecord / PathRecord tables from the SA (saquery)
//!   smp-query ATTR ADDR  NodeInfo / NodeDesc / PortInfo by LID or -D path (smpquery)
//!   discover           directed-route sweep of the fabric (ibnetdiscover; --dot for Graphviz)
//!   bench LID          latency, throughput and RMPP runs with the port counters
//!   dump FILE.pcap     decode a capture with vmad's pretty-printer
//! ```
//!
//! `--transport` defaults to `VMAD_TRANSPORT`, then to what the C drop-in would
//! choose: the host's CAs (`hybrid` where built in and permitted, else `kernel`)
//! when `/sys/class/infiniband` lists any, else `sim`, an in-process demo fabric:
//! the library's default pair, with its built-in SM and SA, and a ping responder on
//! `vmadsim1`; with
//! `VMAD_SIM_TOPO=file.net`, the subnet of that ibsim topology instead, brought up by the
//! fabric's built-in SM, the port being `-C ca` (default: the file's first CA).
//! Exit statuses tell failures apart (`exit.rs`, `docs/tools.md`).

mod addr;
mod client;
mod demo;
mod discover;
mod docs;
mod dump;
mod exit;
mod fabric;
mod host;
mod perf;
mod ping;
mod progress;
mod query;

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Parser, Subcommand, ValueEnum};
use serde_json::Value;

pub(crate) use exit::Failure;

use vmad::pcap::{self, PcapConfig};
use vmad::port::{Port, PortConfig};

/// Which transport the port is opened on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum TransportKind {
    /// The in-process demo fabric (two CAs, a switch, SA and ping responders).
    Sim,
    /// A running ibsim (IBSIM_SOCKNAME / IBSIM_SERVER_NAME as umad2sim reads them).
    Ibsim,
    /// The host's CAs through the kernel's umad devices (`-C`: default the first CA).
    Kernel,
    /// The host's CAs: client GMPs over vmad's own UD QP, the rest through the kernel
    /// (needs the `verbs` feature and CAP_NET_RAW or `privileged-qkey on`).
    Hybrid,
    /// An RDMA device through libibverbs (needs the `verbs` feature).
    Verbs,
    /// RoCE v2 over UDP: vmad is QP1 of `--roce-addr` (no SMPs; address peers with `--gid`).
    Roce,
}

#[derive(Debug, Parser)]
#[command(
    name = "vmad",
    version,
    about = "InfiniBand management tools on vmad's userspace MAD stack",
    after_long_help = exit::EXIT_HELP
)]
struct Cli {
    /// Transport to open the port on [default: $VMAD_TRANSPORT (which selects the C library's too), else ibsim if $VMAD_FABRIC names a `vmad fabric` server, else what the C library picks: the host's CAs (hybrid or kernel) if it has any, else sim].
    #[arg(long, value_enum, global = true)]
    transport: Option<TransportKind>,
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
    /// Machine-readable JSON output (a document with `"schema": 1`).
    #[arg(long, global = true)]
    json: bool,
    /// Destination arguments are port GUIDs, resolved to LIDs by a sweep (as infiniband-diags' -G).
    #[arg(short = 'G', long = "Guid", global = true, conflicts_with = "by_lid")]
    by_guid: bool,
    /// Destination arguments are LIDs (the default; as infiniband-diags' -L).
    #[arg(short = 'L', long = "Lid", global = true)]
    by_lid: bool,
    /// More detail on stderr: the port opened, and its counters at the end (-vv: every counter).
    #[arg(short = 'v', long = "verbose", action = clap::ArgAction::Count, global = true)]
    verbose: u8,
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
    /// Port counters (PortCounters, PortCountersExtended) of every linked port, as perfquery/ibqueryerrors.
    Perf(perf::PerfArgs),
    /// Serve the embedded managed subnet to other processes (ibsim's protocol): serve, up, down, ctl.
    Fabric(fabric::FabricArgs),
    /// Write the man pages (vmad.1 and one per subcommand) into a directory.
    #[command(hide = true)]
    Man(docs::ManArgs),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    #[command(hide = true)]
    Completions(docs::CompletionArgs),
}

/// Everything a command needs: the open port and the settings.
pub(crate) struct Session {
    pub(crate) port: Arc<Port>,
    pub(crate) timeout_ms: u32,
    pub(crate) retries: u32,
    /// `-G`: destination arguments are GUIDs ([`addr::resolve_lid`]).
    pub(crate) by_guid: bool,
    /// `--json`: the command's JSON document is printed (else only its text: a command
    /// whose document is costly may leave it empty).
    pub(crate) json: bool,
    /// Keeps the demo fabric's responders alive while the command runs.
    _demo: Option<demo::Demo>,
}

pub(crate) type CmdResult = Result<Output, Failure>;

/// What a command prints: text for people, a JSON value for scripts.
pub(crate) struct Output {
    pub(crate) text: String,
    pub(crate) json: Value,
    /// A failure status that still comes with output (a ping nobody answered); None: 0.
    pub(crate) exit: Option<exit::Exit>,
}

fn pcap_config(cli: &Cli) -> Result<Option<PcapConfig>, Failure> {
    let Some(path) = &cli.pcap else {
        return Ok(None);
    };
    let mut c = PcapConfig::new(path);
    c.link = pcap::parse_link(&cli.pcap_linktype).ok_or_else(|| {
        Failure::usage(format!(
            "unknown --pcap-linktype {:?} (roce or ib)",
            cli.pcap_linktype
        ))
    })?;
    if let Some(s) = &cli.pcap_max_bytes {
        c.max_bytes = pcap::parse_size(s)
            .ok_or_else(|| Failure::usage(format!("bad --pcap-max-bytes {s:?}")))?;
    }
    Ok(Some(c))
}

/// `--transport`, else `VMAD_TRANSPORT`, else what the C drop-in picks (`capi/src/select.rs`).
/// Read here, not through clap's `env`, which would reject a bad variable even under an
/// explicit flag.
fn transport(cli: &Cli) -> Result<TransportKind, Failure> {
    if let Some(t) = cli.transport {
        return Ok(t);
    }
    match std::env::var("VMAD_TRANSPORT") {
        Ok(v) if !v.is_empty() => TransportKind::from_str(&v, true).map_err(|_| {
            Failure::usage(format!(
                "VMAD_TRANSPORT={v:?}: not sim, ibsim, kernel, hybrid, verbs or roce"
            ))
        }),
        // `eval "$(vmad fabric up FILE)"`: the server it started, through its ibsim protocol.
        _ if vmad::fabric::selected_by_env() => Ok(TransportKind::Ibsim),
        _ => Ok(host::default_kind()),
    }
}

fn open_session(cli: &Cli) -> Result<Session, Failure> {
    let kind = transport(cli)?;
    let config = PortConfig {
        pcap: pcap_config(cli)?,
        ..PortConfig::default()
    };
    let (port, demo) = match kind {
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
            // Whatever the socket says, for a script it means "no fabric there".
            let t = vmad::transport::ibsim::IbsimTransport::connect(ic).map_err(|e| {
                let f = Failure::from(e);
                match f.exit {
                    exit::Exit::Io => Failure::new(
                        exit::Exit::NoDevice,
                        format!("cannot attach to ibsim: {}", f.msg),
                    ),
                    _ => f,
                }
            })?;
            (Arc::new(Port::open(Box::new(t), config)?), None)
        }
        TransportKind::Kernel => (host::open_kernel(cli, config)?, None),
        TransportKind::Hybrid => (host::open_hybrid(cli, config)?, None),
        TransportKind::Verbs => (open_verbs(cli, config)?, None),
        TransportKind::Roce => (open_roce(cli, config)?, None),
    };
    if cli.verbose > 0 {
        let a = port.attrs();
        eprintln!(
            "vmad: {} transport, CA {} port {}, LID {}, SM LID {}",
            kind.to_possible_value()
                .map_or_else(String::new, |v| v.get_name().to_owned()),
            a.ca_name,
            a.port_num,
            a.lid,
            a.sm_lid
        );
    }
    Ok(Session {
        port,
        timeout_ms: cli.timeout,
        retries: cli.retries,
        by_guid: cli.by_guid,
        json: cli.json,
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
        .ok_or_else(|| Failure::usage("--transport roce needs --roce-addr"))?;
    let t = RoceTransport::open(RoceConfig {
        udp_port: cli.roce_udp_port,
        peer_port: cli.roce_peer_port,
        ..RoceConfig::new(addr)
    })?;
    Ok(Arc::new(Port::open(Box::new(t), config)?))
}

#[cfg(not(feature = "roce"))]
fn open_roce(_cli: &Cli, _config: PortConfig) -> Result<Arc<Port>, Failure> {
    Err(Failure::new(
        exit::Exit::Unsupported,
        "this vmad was built without the `roce` feature",
    ))
}

#[cfg(not(feature = "verbs"))]
fn open_verbs(_cli: &Cli, _config: PortConfig) -> Result<Arc<Port>, Failure> {
    Err(Failure::new(
        exit::Exit::Unsupported,
        "this vmad was built without the `verbs` feature (cargo build --features verbs)",
    ))
}

fn run(cli: &Cli) -> CmdResult {
    match &cli.cmd {
        Cmd::Dump(a) => return dump::run(a),
        Cmd::Man(a) => return docs::man(a),
        Cmd::Completions(a) => return docs::completions(a),
        Cmd::Fabric(a) => return fabric::run(a),
        _ => {}
    }
    let s = open_session(cli)?;
    let out = match &cli.cmd {
        Cmd::Ping(a) => ping::ping(&s, a),
        Cmd::SaQuery(a) => query::sa_query(&s, a),
        Cmd::SmpQuery(a) => query::smp_query(&s, a),
        Cmd::Discover(a) => discover::run(&s, a),
        Cmd::Bench(a) => ping::bench(&s, a),
        Cmd::Serve(a) => ping::serve(&s, a),
        Cmd::Perf(a) => perf::run(&s, a),
        Cmd::Dump(_) | Cmd::Man(_) | Cmd::Completions(_) | Cmd::Fabric(_) => {
            unreachable!("handled above")
        }
    };
    if cli.verbose > 0 {
        let st = s.port.stats();
        if cli.verbose > 1 {
            eprintln!("vmad: port counters {st:?}");
        } else {
            eprintln!(
                "vmad: sent {} received {} retries {} timeouts {}",
                st.sent, st.received, st.retries, st.timeouts
            );
        }
    }
    // Close before the demo fabric's responders stop, so the capture holds everything.
    s.port.close();
    out
}

/// The version of the `--json` documents' layout; raised when a field changes meaning or goes.
const JSON_SCHEMA: u32 = 1;

/// Every JSON document carries `"schema"`, so a script can refuse one it does not know.
fn with_schema(v: Value) -> Value {
    match v {
        Value::Object(mut m) => {
            m.insert("schema".into(), JSON_SCHEMA.into());
            Value::Object(m)
        }
        other => serde_json::json!({ "schema": JSON_SCHEMA, "data": other }),
    }
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) if !e.use_stderr() => e.exit(), // --help, --version: 0
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(exit::Exit::Usage as u8);
        }
    };
    match run(&cli) {
        Ok(out) => {
            if cli.json {
                let mut doc = with_schema(out.json);
                if let Some(e) = out.exit {
                    doc["exit"] = (e as u8).into();
                }
                println!("{}", serde_json::to_string_pretty(&doc).unwrap_or_default());
            } else {
                print!("{}", out.text);
            }
            out.exit
                .map_or(ExitCode::SUCCESS, |e| ExitCode::from(e as u8))
        }
        Err(Failure { msg, exit }) => {
            if cli.json {
                let doc = serde_json::json!({ "error": msg, "exit": exit as u8 });
                println!("{}", with_schema(doc));
            }
            eprintln!("vmad: {msg}");
            ExitCode::from(exit as u8)
        }
    }
}
