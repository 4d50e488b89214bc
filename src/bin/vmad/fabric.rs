//! `vmad fabric serve|up|down|ctl`: the embedded managed subnet as a server other
//! processes attach to (`vmad::fabric`, docs/fabric.md).

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};

use clap::{Args, Subcommand};
use serde_json::json;

use crate::exit::Exit;
use crate::{CmdResult, Failure, Output};
use vmad::fabric::{self, Server, ServerConfig};
use vmad::subnet::{Fabric, FabricBuilder};

/// The line `serve` prints after the environment, once the subnet is up and served.
const UP_LINE: &str = "# vmad fabric: up";

#[derive(Debug, Args)]
pub(crate) struct FabricArgs {
    #[command(subcommand)]
    cmd: FabricCmd,
}

#[derive(Debug, Subcommand)]
enum FabricCmd {
    /// Serve a subnet in the foreground; prints the clients' environment once it is up.
    Serve(ServeArgs),
    /// Start a server in the background and print its environment: eval "$(vmad fabric up FILE)".
    Up(ServeArgs),
    /// Stop the server $VMAD_FABRIC (or --socket) names; prints the `unset` for eval.
    Down(SocketArg),
    /// Control a running server: status, clients, link NODE PORT up|down, faults NODE PORT SPEC,
    /// counters NODE PORT, sweep, wait-up [all] [MS], wait-clients N [MS], wait-delivered N [MS],
    /// node add|remove NODE, hold N|none, stop (docs/fabric.md).
    Ctl(CtlArgs),
}

#[derive(Debug, Args)]
struct ServeArgs {
    /// An ibsim topology file (tests/topo/*.net); default: two CAs on one switch.
    file: Option<PathBuf>,
    /// The server's name (its sockets' names); default: f<pid>.
    #[arg(long)]
    name: Option<String>,
    /// After a MAD, poll without sleeping for this many microseconds: spares each
    /// exchange the wake-up from an idle CPU, costs a core while clients are busy.
    #[arg(long, value_name = "US")]
    spin_us: Option<u64>,
}

#[derive(Debug, Args)]
struct SocketArg {
    /// The server's control socket [default: $VMAD_FABRIC].
    #[arg(long)]
    socket: Option<PathBuf>,
}

#[derive(Debug, Args)]
struct CtlArgs {
    #[command(flatten)]
    socket: SocketArg,
    /// The command and its arguments.
    #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
    words: Vec<String>,
}

pub(crate) fn run(a: &FabricArgs) -> CmdResult {
    match &a.cmd {
        FabricCmd::Serve(s) => serve(s),
        FabricCmd::Up(s) => up(s),
        FabricCmd::Down(s) => down(s),
        FabricCmd::Ctl(c) => ctl(c),
    }
}

fn text(t: String) -> Output {
    Output {
        json: json!({ "text": t }),
        text: t,
        exit: None,
    }
}

fn build(file: Option<&PathBuf>) -> Result<Fabric, Failure> {
    let builder = match file {
        Some(path) => {
            let t = std::fs::read_to_string(path)
                .map_err(|e| Failure::new(Exit::NoInput, format!("{}: {e}", path.display())))?;
            FabricBuilder::from_topology(&t)?
        }
        None => Fabric::default_builder(),
    };
    // Not in this process's registry: the server's clients are other processes.
    Ok(builder.build_private()?)
}

fn serve(a: &ServeArgs) -> CmdResult {
    let name = a
        .name
        .clone()
        .unwrap_or_else(|| format!("f{}", std::process::id()));
    let fabric = build(a.file.as_ref())?;
    let no_lid = fabric.ports_without_lid();
    let mut config = ServerConfig::new(&name);
    config.spin = a.spin_us.map(std::time::Duration::from_micros);
    let server = Server::bind(fabric, &config)?;
    {
        // Once this is out, clients may attach; a reader gone (`up` has returned) is fine.
        let mut out = std::io::stdout().lock();
        // A comment to sh: `up` passes it on with the environment, eval skips it.
        if no_lid > 0 {
            let _ = writeln!(
                out,
                "# vmad fabric: the 49,151 unicast LIDs ran out: {no_lid} ports have no LID"
            );
        }
        let _ = writeln!(out, "{}{UP_LINE}", server.env());
        let _ = out.flush();
    }
    server.run()?;
    Ok(text(String::new()))
}

fn up(a: &ServeArgs) -> CmdResult {
    let name = a
        .name
        .clone()
        .unwrap_or_else(|| format!("f{}", std::process::id()));
    let dir = fabric::runtime_dir()?;
    let log = dir.join(format!("{name}.log"));
    let exe = std::env::current_exe()?;
    let mut cmd = Command::new(exe);
    cmd.args(["fabric", "serve", "--name", &name]);
    if let Some(us) = a.spin_us {
        cmd.args(["--spin-us", &us.to_string()]);
    }
    if let Some(f) = &a.file {
        cmd.arg(f);
    }
    use std::os::unix::process::CommandExt;
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&log)?)
        // Its own process group: a Ctrl-C meant for the shell's next command spares it.
        .process_group(0)
        .spawn()?;
    let mut env = String::new();
    if let Some(out) = child.stdout.take() {
        for line in BufReader::new(out).lines() {
            let line = line?;
            if line == UP_LINE {
                return Ok(text(env));
            }
            env.push_str(&line);
            env.push('\n');
        }
    }
    let _ = child.wait();
    let why = std::fs::read_to_string(&log).unwrap_or_default();
    Err(Failure::new(
        Exit::NoDevice,
        format!("the fabric server did not come up: {}", why.trim()),
    ))
}

fn socket(a: &SocketArg) -> Result<PathBuf, Failure> {
    a.socket
        .clone()
        .or_else(|| std::env::var_os(fabric::ENV).map(PathBuf::from))
        .ok_or_else(|| {
            Failure::usage(format!(
                "no fabric server: ${} is unset and no --socket",
                fabric::ENV
            ))
        })
}

fn down(a: &SocketArg) -> CmdResult {
    let path = socket(a)?;
    fabric::request(&path, "stop")?;
    Ok(text(format!("unset {} IBSIM_SOCKNAME;\n", fabric::ENV)))
}

fn ctl(a: &CtlArgs) -> CmdResult {
    let path = socket(&a.socket)?;
    let answer = fabric::request(&path, &a.words.join(" "))?;
    let body = answer.strip_prefix("ok").unwrap_or(&answer);
    Ok(text(body.trim_start_matches(' ').to_string()))
}
