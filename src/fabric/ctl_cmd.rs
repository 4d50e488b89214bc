//! The server's control socket: one text command per connection, one answer.
//!
//! ```text
//! status                    up|down, nodes, clients, who holds the SM role
//! clients                   the count, then a line per client: slot node port pid sm sent delivered
//! link NODE PORT up|down    take a link down (the SM sweeps around it) or bring it back
//! faults NODE PORT SPEC     loss=P,dup=P,reorder=P,corrupt=P,delay_us=N,seed=N or none
//! counters NODE PORT        the link's frames and faults, the port's refusals and state
//! sweep                     the built-in SM sweeps again
//! wait-up [all] [MS]        answers once the subnet is up (default 10000 ms); with
//!                           `all`, once every CA port with a link is Active (an SM's
//!                           sweep, the built-in one's or a client's, has finished)
//! wait-clients N [MS]       answers once exactly N clients are attached
//! wait-delivered N [MS]     answers once some client has been handed N MADs
//! hold N|none               each client is handed at most N MADs in all; the rest wait
//!                           (in order) until `hold none` (or a higher N) lets them go
//! stop                      the server closes every port and exits
//! ```
//!
//! An answer starts with `ok` or `error:`.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{lock, Shared};
use crate::subnet::FaultConfig;
use crate::{Error, Result};

/// How long a connection may take to send its command.
const READ_LIMIT: Duration = Duration::from_secs(5);
/// The longest command line taken.
const MAX_LINE: u64 = 512;

/// Send `command` to the server whose control socket is `path`, and return its
/// answer (the whole text; `stop` returns once the server has closed everything).
///
/// # Errors
/// EIO if the server cannot be reached; EINVAL-like [`Error::Io`] carrying the
/// server's `error:` line.
pub fn request(path: &Path, command: &str) -> Result<String> {
    let mut s = UnixStream::connect(path)?;
    s.write_all(command.trim().as_bytes())?;
    s.write_all(b"\n")?;
    s.shutdown(std::net::Shutdown::Write)?;
    let mut answer = String::new();
    s.read_to_string(&mut answer)?;
    match answer.strip_prefix("error: ") {
        Some(e) => Err(Error::Io(std::io::Error::other(e.trim().to_string()))),
        None if answer.is_empty() => Err(Error::Io(std::io::Error::other(
            "the fabric server closed the connection without an answer",
        ))),
        None => Ok(answer),
    }
}

pub(crate) fn accept_loop(shared: &Arc<Shared>, listener: &UnixListener) {
    for conn in listener.incoming() {
        if shared.stop.load(Ordering::Acquire) {
            return;
        }
        let Ok(conn) = conn else {
            continue;
        };
        let s = shared.clone();
        let _ = std::thread::Builder::new()
            .name("vmad-fabric-cmd".into())
            .spawn(move || serve(&s, conn));
    }
}

fn serve(shared: &Arc<Shared>, mut conn: UnixStream) {
    let _ = conn.set_read_timeout(Some(READ_LIMIT));
    let mut line = String::new();
    {
        let Ok(c) = conn.try_clone() else {
            return;
        };
        if BufReader::new(c.take(MAX_LINE))
            .read_line(&mut line)
            .is_err()
        {
            return;
        }
    }
    let words: Vec<&str> = line.split_whitespace().collect();
    if words.first() == Some(&"stop") {
        let _ = conn.write_all(b"ok stopping\n");
        // The connection closes after the ports: the caller's read ends when all is down.
        lock(&shared.stoppers).push(conn);
        shared.stop.store(true, Ordering::Release);
        shared.wake();
        return;
    }
    let answer = match command(shared, &words) {
        Ok(text) => format!("ok{}{text}\n", if text.is_empty() { "" } else { " " }),
        Err(e) => format!("error: {e}\n"),
    };
    let _ = conn.write_all(answer.as_bytes());
}

fn port_arg(words: &[&str]) -> Result<(String, u8)> {
    match (words.get(1), words.get(2).and_then(|p| p.parse().ok())) {
        (Some(node), Some(port)) => Ok(((*node).to_string(), port)),
        _ => Err(Error::InvalidArgument("expected NODE PORT")),
    }
}

fn count_arg<T: std::str::FromStr>(words: &[&str]) -> Result<T> {
    words
        .get(1)
        .and_then(|n| n.parse().ok())
        .ok_or(Error::InvalidArgument("expected a count"))
}

/// Answer once `cond` holds, or fail after `ms` (default 10 s). The state changes
/// inside the fabric and the server's other threads: look again every few ms (the
/// caller waits on one read).
fn wait_until(ms: Option<&&str>, what: &str, cond: impl Fn() -> bool) -> Result<()> {
    let ms = ms.and_then(|m| m.parse().ok()).unwrap_or(10_000);
    let until = Instant::now() + Duration::from_millis(ms);
    while !cond() {
        if Instant::now() >= until {
            return Err(Error::Io(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                what.to_string(),
            )));
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    Ok(())
}

fn is_up(shared: &Shared) -> bool {
    shared.fabric.port_state(&shared.default_ca, 1) == Some(4)
}

/// Every CA port that has a link: what an SM's sweep brings to Active.
fn linked_ca_ports(fabric: &crate::subnet::Fabric) -> Vec<(String, u8)> {
    let mut out = Vec::new();
    for ca in fabric.ca_names() {
        for port in 1..=u8::MAX {
            if fabric.port_state(&ca, port).is_none() {
                break;
            }
            if fabric.link_stats(&ca, port).is_some() {
                out.push((ca.clone(), port));
            }
        }
    }
    out
}

fn command(shared: &Shared, words: &[&str]) -> Result<String> {
    let fabric = &shared.fabric;
    match words.first().copied().unwrap_or("") {
        "status" => {
            let st = lock(&shared.state);
            let sm = st
                .clients
                .iter()
                .find(|(_, c)| c.out.issm.load(Ordering::Relaxed))
                .map_or("built-in".to_string(), |(s, _)| format!("client {s}"));
            Ok(format!(
                "{} pid={} swept_nodes={} no_lid={} clients={} sm={sm} ibsim_sockname={}",
                if is_up(shared) { "up" } else { "down" },
                std::process::id(),
                fabric.swept_nodes(),
                fabric.ports_without_lid(),
                st.clients.len(),
                shared.sockname
            ))
        }
        "clients" => {
            let st = lock(&shared.state);
            let mut out = format!("{}", st.clients.len());
            for (slot, c) in &st.clients {
                let sm = c.out.issm.load(Ordering::Relaxed);
                out.push_str(&format!(
                    "\n{slot} {} {} {} {} {} {}",
                    c.node,
                    c.port,
                    c.pid,
                    u8::from(sm),
                    c.out.sent.load(Ordering::Relaxed),
                    c.out.delivered.load(Ordering::Relaxed)
                ));
            }
            Ok(out)
        }
        "link" => {
            let (node, port) = port_arg(words)?;
            let up = match words.get(3).copied() {
                Some("up") => true,
                Some("down") => false,
                _ => return Err(Error::InvalidArgument("link NODE PORT up|down")),
            };
            fabric.set_link(&node, port, up)?;
            Ok(String::new())
        }
        "node" => {
            let up = match words.get(1).copied() {
                Some("add") => true,
                Some("remove") => false,
                _ => return Err(Error::InvalidArgument("node add|remove NODE")),
            };
            let node = words
                .get(2)
                .ok_or(Error::InvalidArgument("node add|remove NODE"))?;
            let links = fabric.set_node(node, up)?;
            Ok(format!("{links} links {}", if up { "up" } else { "down" }))
        }
        "faults" => {
            let (node, port) = port_arg(words)?;
            let spec = words.get(3).copied().unwrap_or("none");
            fabric.set_faults(&node, port, parse_faults(spec)?)?;
            Ok(String::new())
        }
        "counters" => {
            let (node, port) = port_arg(words)?;
            let link = fabric
                .link_stats(&node, port)
                .ok_or(Error::InvalidArgument("no link at that port"))?;
            let mut out = format!(
                "frames={} lost={} duplicated={} reordered={} corrupted={}",
                link.frames, link.lost, link.duplicated, link.reordered, link.corrupted
            );
            if let Some(state) = fabric.port_state(&node, port) {
                out.push_str(&format!(" state={state}"));
            }
            if let Some(c) = fabric.port_counters(&node, port) {
                out.push_str(&format!(
                    " pkey_violations={} qkey_violations={} mkey_violations={}",
                    c.pkey_violations, c.qkey_violations, c.mkey_violations
                ));
            }
            Ok(out)
        }
        "sweep" => {
            let s = fabric.sweep()?;
            Ok(format!("{s:?}"))
        }
        "wait-up" if words.get(1) == Some(&"all") => {
            let ports = linked_ca_ports(fabric);
            wait_until(words.get(2), "some CA port is not Active", || {
                ports.iter().all(|(n, p)| fabric.port_state(n, *p) == Some(4))
            })?;
            Ok(format!("up {} ports", ports.len()))
        }
        "wait-up" => {
            wait_until(words.get(1), "the subnet is not up", || is_up(shared))?;
            Ok("up".into())
        }
        "wait-clients" => {
            let n: usize = count_arg(words)?;
            wait_until(words.get(2), "the clients did not come or go", || {
                lock(&shared.state).clients.len() == n
            })?;
            Ok(n.to_string())
        }
        "wait-delivered" => {
            let n: u64 = count_arg(words)?;
            wait_until(words.get(2), "no client was handed that many MADs", || {
                let st = lock(&shared.state);
                st.clients
                    .values()
                    .any(|c| c.out.delivered.load(Ordering::Relaxed) >= n)
            })?;
            Ok(n.to_string())
        }
        "hold" => {
            let limit = match words.get(1).copied() {
                Some("none") => u64::MAX,
                _ => count_arg(words)?,
            };
            shared.hold.store(limit, Ordering::Relaxed);
            let st = lock(&shared.state);
            for c in st.clients.values() {
                c.out.set_hold(limit);
            }
            Ok(String::new())
        }
        _ => Err(Error::InvalidArgument(
            "commands: status, clients, link, faults, counters, sweep, wait-up, wait-clients, wait-delivered, hold, stop",
        )),
    }
}

/// `loss=P,dup=P,reorder=P,corrupt=P,delay_us=N,seed=N`, or `none`.
pub(crate) fn parse_faults(spec: &str) -> Result<FaultConfig> {
    let bad = || {
        Error::InvalidArgument(
            "faults: none, or key=value[,key=value] with keys loss, dup, reorder, corrupt, delay_us, seed",
        )
    };
    let mut f = FaultConfig::default();
    if spec == "none" {
        return Ok(f);
    }
    for item in spec.split(',').filter(|s| !s.is_empty()) {
        let (k, v) = item.split_once('=').ok_or_else(bad)?;
        let p = || {
            v.parse::<f64>()
                .ok()
                .filter(|p| (0.0..=1.0).contains(p))
                .ok_or_else(bad)
        };
        match k {
            "loss" => f.loss = p()?,
            "dup" => f.dup = p()?,
            "reorder" => f.reorder = p()?,
            "corrupt" => f.corrupt = p()?,
            "delay_us" => f.delay = Duration::from_micros(v.parse().map_err(|_| bad())?),
            "seed" => f.seed = v.parse().map_err(|_| bad())?,
            _ => return Err(bad()),
        }
    }
    Ok(f)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fault_specs_parse_and_bad_ones_are_refused() {
        let f = parse_faults("loss=0.5,delay_us=200,seed=3").unwrap();
        assert_eq!(
            (f.loss, f.delay, f.seed),
            (0.5, Duration::from_micros(200), 3)
        );
        assert!(!parse_faults("none").unwrap().is_active());
        assert!(parse_faults("loss=2").is_err());
        assert!(parse_faults("speed=1").is_err());
    }
}
