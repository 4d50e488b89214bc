//! Faults in the middle of a 1 MiB RMPP transfer on the `roce` transport (vmad as
//! QP1 of 2001:db8::2 in netns ns1, the kernel's agent on rxe0): the peer killed
//! with SIGKILL, and the wire between them made to carry nothing, each while vmad
//! sends 1 MiB and while it receives 1 MiB. As on the other host transports
//! (`tests/it/rxe/rmpp_faults.rs`): the request ends (ETIMEDOUT or an error
//! answer, never a hang), the footprint returns to zero, and traffic resumes on
//! the same port (the peer restarted, the wire carrying again).
//!
//! The wire fault is not `ip link set veth0 down`: bringing roce mode's veth0
//! back up (its addresses, neighbours, routes in two namespaces, rxe0's GID)
//! failed in 2 of 11 boots (2026-12-03; veth0 came back carrying nothing, for a
//! cause not found) and took every later roce test with it. Here both veths
//! keep their carrier, addresses, neighbours and routes; a `tc netem loss 100%`
//! qdisc on each drops every frame it would send (veth0 first: the kernel's
//! side, then veth1: vmad's), and the restore deletes the two qdiscs. So no
//! link state changes and nothing needs putting back: a link that carries
//! nothing, not a link that is down (no carrier loss, no PORT_ERR on rxe0).
//!
//! "In the middle" is an event: vmad's own datagram counters (`RoceStats`) show
//! 64 packets of the transfer sent or received; and while the case runs both
//! veths are shaped (a token bucket, as the rxe link-down cases, at half their
//! rate) so that the transfer lasts seconds, not the tenths of a second in
//! which vmad could take the whole 1 MiB before the qdisc is in place.
//!
//! There is no `rdma link delete` here: the roce transport has no RDMA device
//! (a UDP socket is its port), so nothing of vmad's can be deleted that way.

use std::io::Write;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::{Duration, Instant};

use vmad::engine::rmpp::RmppConfig;
use vmad::engine::EngineConfig;
use vmad::port::{Port, PortConfig};
use vmad::transport::roce::{RoceConfig, RoceStats, RoceTransport};

use super::super::kernel_peer::*;

/// Packets of the transfer counted by vmad before the fault.
const UNDER_WAY: u64 = 64;

/// vmad's RoCE port (an RMPP receive limit of 10 s, as the other transports' cases).
fn open() -> (Port, Arc<RoceStats>) {
    let addr = env("ROCE_ADDR").parse().expect("ROCE_ADDR");
    let t = RoceTransport::open(RoceConfig::new(addr)).expect("bind UDP 4791 in the netns");
    let stats = t.stats();
    let config = PortConfig {
        engine: EngineConfig {
            rmpp: RmppConfig {
                total_timeout: Duration::from_secs(10),
                linger: Duration::from_secs(1),
                ..RmppConfig::default()
            },
            ..EngineConfig::default()
        },
        ..PortConfig::default()
    };
    (Port::open(Box::new(t), config).expect("port"), stats)
}

/// A shell in the root network and mount namespaces (this test runs in ns1).
fn root_ns(script: &str) -> Command {
    let mut c = Command::new("nsenter");
    c.args([
        "--net=/proc/1/ns/net",
        "--mount=/proc/1/ns/mnt",
        "sh",
        "-c",
        script,
    ]);
    c
}

fn root_sh(script: &str) {
    let out = root_ns(script).output().expect("nsenter");
    assert!(
        out.status.success(),
        "{script}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// About 13 s for the ~13 Mbit a 1 MiB RMPP transfer puts on the wire: at 2 Mbit/s,
/// the cut once came 3,503 segments (of about 4,800) after the 64 that start it, on
/// a loaded machine under TCG.
const SHAPED: &str = "tbf rate 1mbit burst 16kb limit 4mb";
/// What the wire does once cut: drop every frame.
const CUT: &str = "netem loss 100%";

/// Shapes both veths while armed; cuts the wire when told, through a `tc -batch`
/// already running in the root namespace (the cut follows the event closely);
/// restores (deletes both qdiscs) when told or dropped, so that a failed case
/// does not take the next ones with it.
struct WireCut(Option<Child>);

impl WireCut {
    fn armed() -> WireCut {
        // netem's module loaded now (a qdisc on lo, at once deleted), not by the cut:
        // loading it over 9p under TCG takes seconds, the transfer's middle with it.
        root_sh("tc qdisc add dev lo root netem loss 0% && tc qdisc del dev lo root");
        root_sh(&format!("tc qdisc replace dev veth0 root {SHAPED}"));
        sh(&format!("tc qdisc replace dev veth1 root {SHAPED}"));
        let child = root_ns("exec tc -batch -")
            .stdin(Stdio::piped())
            .spawn()
            .expect("nsenter");
        WireCut(Some(child))
    }

    fn now(&mut self) {
        let mut child = self.0.take().expect("armed");
        let mut stdin = child.stdin.take().unwrap();
        writeln!(stdin, "qdisc replace dev veth0 root {CUT}").expect("tell tc");
        drop(stdin); // the end of tc's batch
        assert!(child.wait().unwrap().success(), "tc: veth0 {CUT}");
        sh(&format!("tc qdisc replace dev veth1 root {CUT}"));
    }

    fn restore(&mut self) {
        root_sh("tc qdisc del dev veth0 root");
        sh("tc qdisc del dev veth1 root");
    }
}

impl Drop for WireCut {
    fn drop(&mut self) {
        if let Some(mut c) = self.0.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        let _ = root_ns("tc qdisc del dev veth0 root 2>/dev/null").status();
        let _ = Command::new("sh")
            .args(["-c", "tc qdisc del dev veth1 root 2>/dev/null"])
            .status();
    }
}

/// Wait (no sleeping) until `counter` moved `UNDER_WAY` past `from`.
fn until_under_way(counter: &AtomicU64, from: u64) {
    let limit = Instant::now() + Duration::from_secs(60);
    while RoceStats::get(counter) < from + UNDER_WAY {
        assert!(
            Instant::now() < limit,
            "the transfer never got under way: {} from {from}",
            RoceStats::get(counter)
        );
        std::thread::yield_now();
    }
}

#[derive(Debug, Clone, Copy)]
enum Fault {
    KillPeer,
    /// Both veths drop every frame (see the module docs).
    CutWire,
}

fn case(dir: Dir, fault: Fault) {
    let _g = serial();
    let mut agent = Some(KernelAgent::start("RXE0_DEV", "RXE0_PORT"));
    let mut wire = matches!(fault, Fault::CutWire).then(WireCut::armed);
    let (port, stats) = open();
    let to = dest(gid("RXE0_GID"), 1);
    let a = port.register(spec(0x30, true, &[])).unwrap();
    traffic_resumes(&port, a, to, 0x6000);
    footprint_returns_to_zero(&port, "before");

    let tid = 0x6001;
    let counter = match dir {
        Dir::Send => &stats.sent,
        Dir::Receive => &stats.received,
    };
    let from = RoceStats::get(counter);
    request(&port, a, to, &transfer(dir, tid), 3000, 0);
    until_under_way(counter, from);
    match fault {
        Fault::KillPeer => drop(agent.take()), // SIGKILL, then reaped
        Fault::CutWire => wire.as_mut().unwrap().now(),
    }
    // Packets counted once the fault is in place (printed: how close it followed).
    let at_fault = RoceStats::get(counter) - from;
    let ended = outcome_of(recv(&port, Duration::from_secs(120)), dir, tid);
    eprintln!(
        "roce {dir:?} {fault:?}: {ended} after {} packets ({at_fault} when the fault was in \
         place), {} RMPP aborts",
        RoceStats::get(counter) - from,
        port.rmpp_aborts()
    );
    footprint_returns_to_zero(&port, "after the fault");

    match fault {
        Fault::KillPeer => agent = Some(KernelAgent::start("RXE0_DEV", "RXE0_PORT")),
        Fault::CutWire => wire.as_mut().unwrap().restore(),
    }
    traffic_resumes(&port, a, to, 0x6002);
    footprint_returns_to_zero(&port, "after traffic resumed");
    drop(wire);
    drop(agent);
}

macro_rules! cases {
    ($($name:ident: $dir:ident $fault:ident;)*) => {$(
        #[test]
        #[ignore = "needs the rxe VM in RoCE mode: run by scripts/rxe-roce-test"]
        fn $name() {
            case(Dir::$dir, Fault::$fault);
        }
    )*};
}

cases! {
    rmpp_roce_peer_killed_during_a_send: Send KillPeer;
    rmpp_roce_peer_killed_during_a_receive: Receive KillPeer;
    rmpp_roce_wire_cut_during_a_send: Send CutWire;
    rmpp_roce_wire_cut_during_a_receive: Receive CutWire;
}
