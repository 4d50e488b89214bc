//! Faults in the middle of a 1 MiB RMPP transfer, on each host transport
//! (`kernel`, `hybrid`, `verbs`): the peer (the kernel's agent `umad_agent`, a
//! child process on rxe1) killed with SIGKILL, and rxe0's link taken down, each
//! while vmad sends 1 MiB and while it receives 1 MiB. Each case ends the
//! request with an answer or ETIMEDOUT (never a hang), the engine's footprint
//! (transactions, sessions, buffers, timers, events) returns to zero, and
//! traffic resumes (a restarted peer, the link back up) on the same port.
//!
//! "In the middle" is made certain by events: the fault comes once rxe0's own
//! packet counters (`hw_counters/sent_pkts`, `rcvd_pkts`) show 64 packets of the
//! transfer gone out or come in, and the transfer must then not complete (1 MiB
//! is about 4,800 segments). Nothing waits for time.

use std::io::Write;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use vmad::engine::rmpp::RmppConfig;
use vmad::engine::{AgentId, EngineConfig, Footprint, SendRequest};
use vmad::port::audit::PortAudit;
use vmad::port::{Port, PortConfig};
use vmad::transport::hybrid::HybridTransport;
use vmad::transport::kernel::sysfs::Sysfs;
use vmad::transport::kernel::KernelTransport;
use vmad::transport::verbs::{VerbsConfig, VerbsTransport};
use vmad::transport::Transport;
use vmad::types::MadAddr;

use super::super::kernel_peer::*;

/// Packets of the transfer seen on rxe0 before the fault.
const UNDER_WAY: u64 = 64;

#[derive(Debug, Clone, Copy)]
enum Via {
    Kernel,
    Hybrid,
    Verbs,
}

#[derive(Debug, Clone, Copy)]
enum Fault {
    /// The peer is the classic agent (system libibumad, the kernel's RMPP).
    KillPeer,
    /// The peer is the same agent on vmad's drop-in (vmad's RMPP, `kernel` transport).
    KillVmadPeer,
    LinkDown,
    /// `rdma link delete rxe0`: the port's device goes; a new port on the device
    /// added back carries the traffic.
    DeleteDevice,
}

/// A port on rxe0 through `via`, with an RMPP receive limit of 10 s (not the
/// kernel's 40 s) so that an abandoned reassembly ends soon; and where the peer is.
fn open(via: Via) -> (Port, MadAddr) {
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
    let dev = env("RXE0_DEV");
    let t: Box<dyn Transport> = match via {
        Via::Kernel => Box::new(KernelTransport::open(&Sysfs::host(), &dev, 1).expect("kernel")),
        Via::Hybrid => Box::new(HybridTransport::open(&Sysfs::host(), &dev, 1).expect("hybrid")),
        Via::Verbs => Box::new(
            VerbsTransport::open(VerbsConfig {
                device: Some(dev),
                ..Default::default()
            })
            .expect("verbs"),
        ),
    };
    let mut to = dest(gid("RXE1_GID"), 1);
    if !matches!(via, Via::Verbs) {
        if let Some(g) = to.grh.as_mut() {
            g.gid_index = env("RXE0_GID_INDEX").parse().expect("a GID index");
        }
    }
    (Port::open(t, config).expect("port"), to)
}

/// One of rxe0's packet counters (rdma_rxe counts every packet, QP1's included).
fn rxe0_packets(name: &str) -> u64 {
    let path = format!(
        "/sys/class/infiniband/{}/ports/{}/hw_counters/{name}",
        env("RXE0_DEV"),
        env("RXE0_PORT")
    );
    std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{path}: {e}"))
        .trim()
        .parse()
        .unwrap()
}

/// Wait (polling rxe0's counter, no sleeping) until `n` more packets went the
/// transfer's way than `from`.
fn until_under_way(counter: &str, from: u64) {
    let limit = Instant::now() + Duration::from_secs(60);
    while rxe0_packets(counter) < from + UNDER_WAY {
        assert!(
            Instant::now() < limit,
            "the transfer never got under way: {counter} {} from {from}",
            rxe0_packets(counter)
        );
        std::thread::yield_now();
    }
}

/// Start the transfer of `dir` with `tid` (after reading the counter it moves).
fn start(port: &Port, a: AgentId, to: MadAddr, dir: Dir, tid: u64) -> (&'static str, u64) {
    let counter = match dir {
        Dir::Send => "sent_pkts",
        Dir::Receive => "rcvd_pkts",
    };
    let from = rxe0_packets(counter);
    request(port, a, to, &transfer(dir, tid), 3000, 0);
    (counter, from)
}

/// How the faulted request ended: it must end, and not with the whole transfer done.
fn outcome(port: &Port, dir: Dir, tid: u64) -> &'static str {
    outcome_of(recv(port, Duration::from_secs(120)), dir, tid)
}

/// Takes rxe0's link down when told, through a shell started beforehand (so that
/// the fault follows the event closely); puts the link back up when dropped, so
/// that a failed case does not take the next ones with it.
///
/// While armed, both veths send at most `SHAPED_RATE` (a token bucket): the 1 MiB
/// transfer then lasts seconds, not the tenths of a second `verbs` took unshaped,
/// which the `ip` command could outlast under TCG (process creation is slow there),
/// so that 1 run in 3 found the transfer already done when the link went down.
/// The assertion in `outcome` still fails a case whose fault missed the middle.
struct LinkDown(Option<Child>, bool);

/// About 6 s for the ~13 Mbit a 1 MiB RMPP transfer puts on the wire; 64 packets
/// (the "under way" mark) take about 0.1 s of it.
const SHAPED_RATE: &str = "2mbit";

fn shape(on: bool) {
    for dev in ["veth0", "veth1"] {
        let cmd = if on {
            format!("tc qdisc replace dev {dev} root tbf rate {SHAPED_RATE} burst 16kb limit 4mb")
        } else {
            format!("tc qdisc del dev {dev} root 2>/dev/null || true")
        };
        sh(&cmd);
    }
}

impl LinkDown {
    fn armed() -> LinkDown {
        sh("echo 1 > /proc/sys/net/ipv6/conf/veth0/keep_addr_on_down");
        shape(true);
        let child = Command::new("sh")
            .args(["-c", "read _ && ip link set veth0 down"])
            .stdin(Stdio::piped())
            .spawn()
            .expect("sh");
        LinkDown(Some(child), false)
    }

    fn now(&mut self) {
        let mut child = self.0.take().expect("armed");
        child
            .stdin
            .take()
            .unwrap()
            .write_all(b"go\n")
            .expect("tell sh");
        self.1 = true;
        assert!(child.wait().unwrap().success(), "ip link set veth0 down");
    }

    fn up(&mut self) {
        if std::mem::take(&mut self.1) {
            sh("ip link set veth0 up");
            restore_routes();
        }
        shape(false);
    }
}

impl Drop for LinkDown {
    fn drop(&mut self) {
        if let Some(mut c) = self.0.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        if self.1 {
            let _ = Command::new("sh")
                .args(["-c", "ip link set veth0 up"])
                .status();
            restore_routes();
        }
        let _ = Command::new("sh")
            .args([
                "-c",
                "tc qdisc del dev veth0 root; tc qdisc del dev veth1 root",
            ])
            .stderr(Stdio::null())
            .status();
    }
}

fn case(via: Via, dir: Dir, fault: Fault) {
    let _g = serial();
    let peer = || match fault {
        Fault::KillVmadPeer => KernelAgent::start_vmad("RXE1_DEV", "RXE1_PORT"),
        _ => KernelAgent::start("RXE1_DEV", "RXE1_PORT"),
    };
    let mut agent = Some(peer());
    if matches!(fault, Fault::DeleteDevice) {
        return device_deleted(via, dir, agent);
    }
    let mut link = matches!(fault, Fault::LinkDown).then(LinkDown::armed);
    // The async events a link down raises on rxe0 (printed: the control for the
    // device_deleted cases' watch, which sees none).
    let mut watch = matches!((via, fault), (Via::Verbs, Fault::LinkDown)).then(AsyncWatch::start);
    let (port, to) = open(via);
    let a = port.register(spec(0x30, true, &[])).unwrap();
    // The path works before the fault.
    traffic_resumes(&port, a, to, 0x5000);
    footprint_returns_to_zero(&port, "before");

    let tid = 0x5001;
    let (counter, from) = start(&port, a, to, dir, tid);
    until_under_way(counter, from);
    match fault {
        Fault::KillPeer | Fault::KillVmadPeer => drop(agent.take()), // SIGKILL, then reaped
        Fault::LinkDown => link.as_mut().unwrap().now(),
        Fault::DeleteDevice => unreachable!(),
    }
    let told = Instant::now();
    let ended = outcome(&port, dir, tid);
    if let Some(w) = watch.take() {
        eprintln!(
            "{via:?} {dir:?} {fault:?}: async events on rxe0 (ms after the link went down): {:?}",
            w.stop(told)
        );
    }
    eprintln!(
        "{via:?} {dir:?} {fault:?}: {ended} after {} packets, {} RMPP aborts",
        rxe0_packets(counter) - from,
        port.rmpp_aborts()
    );
    footprint_returns_to_zero(&port, "after the fault");

    match fault {
        Fault::KillPeer | Fault::KillVmadPeer => agent = Some(peer()),
        Fault::LinkDown => {
            link.as_mut().unwrap().up();
            let limit = Instant::now() + Duration::from_secs(30);
            while port.attrs().state != 4 {
                assert!(Instant::now() < limit, "the port never came back up");
                let _ = port.poll(Some(Duration::from_millis(50)));
            }
        }
        Fault::DeleteDevice => unreachable!(),
    }
    traffic_resumes(&port, a, to, 0x5002);
    footprint_returns_to_zero(&port, "after traffic resumed");
    drop(agent);
}

/// Deletes rxe0 when told, through a shell started beforehand (`rdma link delete`
/// returns once the last verbs user closed the device); adds it back on veth0 and
/// waits until it is as guest-init left it (same GID index, umad device, ACTIVE),
/// also when a failed case drops it, so that the next cases have their rxe0.
struct Deleting {
    armed: Option<Child>,
    done: Option<mpsc::Receiver<std::process::ExitStatus>>,
    gone: bool,
}

impl Deleting {
    fn armed() -> Deleting {
        let child = Command::new("sh")
            .args([
                "-c",
                &format!("read _ && rdma link delete {}", env("RXE0_DEV")),
            ])
            .stdin(Stdio::piped())
            .spawn()
            .expect("sh");
        Deleting {
            armed: Some(child),
            done: None,
            gone: false,
        }
    }

    fn now(&mut self) {
        let mut child = self.armed.take().expect("armed");
        child
            .stdin
            .take()
            .unwrap()
            .write_all(b"go\n")
            .expect("tell sh");
        self.gone = true;
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(child.wait().expect("rdma link delete"));
        });
        self.done = Some(rx);
    }

    /// The deletion finished (a hang guard of a minute).
    fn finished(&mut self) {
        let status = self
            .done
            .take()
            .expect("told")
            .recv_timeout(Duration::from_secs(60))
            .expect("rdma link delete still blocked a minute after the port closed");
        assert!(status.success(), "rdma link delete: {status}");
        let dev = env("RXE0_DEV");
        assert!(!std::path::Path::new(&format!("/sys/class/infiniband/{dev}")).exists());
    }

    fn add_back(&mut self) {
        if !std::mem::take(&mut self.gone) {
            return;
        }
        let dev = env("RXE0_DEV");
        sh(&format!(
            "rdma link add {dev} type rxe netdev {}",
            env("RXE0_NETDEV")
        ));
        let port = format!("/sys/class/infiniband/{dev}/ports/{}", env("RXE0_PORT"));
        let gid_path = format!("{port}/gids/{}", env("RXE0_GID_INDEX"));
        let want = gid("RXE0_GID");
        let umad = env("RXE0_UMAD");
        let umad_dev = format!(
            "/sys/class/infiniband_mad/{}/ibdev",
            umad.rsplit('/').next().unwrap()
        );
        let read = |p: &str| std::fs::read_to_string(p).unwrap_or_default();
        let limit = Instant::now() + Duration::from_secs(60);
        // The GIDs come from veth0's addresses asynchronously.
        loop {
            let g = read(&gid_path).trim().parse::<std::net::Ipv6Addr>().ok();
            let ready = g.map(|g| g.octets()) == Some(want)
                && read(&umad_dev).trim() == dev
                && read(&format!("{port}/state")).contains("ACTIVE");
            if ready {
                break;
            }
            assert!(
                Instant::now() < limit,
                "{dev} added back is not as before: GID {g:?} at {gid_path}, \
                 {umad_dev} {:?}, state {:?}",
                read(&umad_dev),
                read(&format!("{port}/state"))
            );
            std::thread::yield_now();
        }
    }
}

impl Drop for Deleting {
    fn drop(&mut self) {
        if let Some(mut c) = self.armed.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        if let Some(rx) = self.done.take() {
            let _ = rx.recv_timeout(Duration::from_secs(60));
        }
        if self.gone && !std::thread::panicking() {
            self.add_back();
        } else if self.gone {
            let _ = Command::new("rdma")
                .args(["link", "add", &env("RXE0_DEV"), "type", "rxe", "netdev"])
                .arg(env("RXE0_NETDEV"))
                .status();
        }
    }
}

/// Both veths shaped to [`SHAPED_RATE`] while it lives (a failed case included).
struct Shaped;

impl Shaped {
    fn on() -> Shaped {
        shape(true);
        Shaped
    }
}

impl Drop for Shaped {
    fn drop(&mut self) {
        let _ = Command::new("sh")
            .args([
                "-c",
                "tc qdisc del dev veth0 root; tc qdisc del dev veth1 root",
            ])
            .stderr(Stdio::null())
            .status();
    }
}

/// `ibv_asyncwatch` on rxe0: the async events it reports, each with when it came.
struct AsyncWatch {
    child: Child,
    lines: mpsc::Receiver<(Instant, String)>,
}

impl AsyncWatch {
    fn start() -> AsyncWatch {
        let mut child = Command::new("stdbuf")
            .args(["-oL", "ibv_asyncwatch", "-d", &env("RXE0_DEV")])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("ibv_asyncwatch");
        let out = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            use std::io::BufRead;
            for line in std::io::BufReader::new(out).lines().map_while(Result::ok) {
                let _ = tx.send((Instant::now(), line));
            }
        });
        AsyncWatch { child, lines }
    }

    /// Ends the watch (it holds rxe0 open); its event lines, timed from `from`.
    fn stop(mut self, from: Instant) -> Vec<(i128, String)> {
        let _ = self.child.kill();
        let _ = self.child.wait();
        // The reader ends at the pipe's end (the watch is gone): every line is in.
        self.lines
            .iter()
            .filter(|(_, l)| l.contains("event_type"))
            .map(|(t, l)| {
                let ms = if t >= from {
                    t.duration_since(from).as_millis() as i128
                } else {
                    -(from.duration_since(t).as_millis() as i128)
                };
                (ms, l)
            })
            .collect()
    }
}

impl Drop for AsyncWatch {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `rdma link delete` of rxe0 in the middle of the transfer: the caller sees EIO
/// (the port's transport failed) or the request's own end short of the whole
/// transfer, the dead port fails every later call at once and holds nothing
/// (footprint zero: the port abandons its engine when its transport fails), and a
/// new port on rxe0 added back carries traffic with a footprint of zero.
///
/// The veths are shaped as for the link-down cases, so that the transfer lasts
/// seconds: on `verbs` and `hybrid` (whose requests, and so their RMPP, use verbs)
/// the removal is seen only at the transport's next look (once a second) at the
/// uverbs node, since rxe cannot disassociate a verbs user (no DEVICE_FATAL; the
/// kernel keeps the device working until the port closes it). Unshaped, the
/// transfer often ended before that look.
fn device_deleted(via: Via, dir: Dir, agent: Option<KernelAgent>) {
    let shaped = Shaped::on();
    let mut deleting = Deleting::armed();
    let (port, to) = open(via);
    // Which async events rxe0 raises as it goes (a measurement, printed): another
    // verbs user, so only where the port is one already (the deletion waits for both).
    let mut watch = matches!(via, Via::Verbs | Via::Hybrid).then(AsyncWatch::start);
    let a = port.register(spec(0x30, true, &[])).unwrap();
    traffic_resumes(&port, a, to, 0x5000);
    footprint_returns_to_zero(&port, "before");

    let tid = 0x5001;
    let (counter, from) = start(&port, a, to, dir, tid);
    until_under_way(counter, from);
    let seen = rxe0_packets(counter) - from;
    deleting.now();
    let told = Instant::now();
    let ended = match port.recv(Some(Duration::from_secs(120))) {
        Ok(event) => outcome_of(event, dir, tid),
        Err(e) => {
            assert_eq!(e.errno(), 5, "EIO, got {e}");
            "EIO"
        }
    };
    // Whatever ended the request, the port is dead: the next receive fails (EIO)
    // within the hang guard, and so does a send.
    if ended != "EIO" {
        let e = port
            .recv(Some(Duration::from_secs(60)))
            .expect_err("a receive on a deleted device");
        assert_eq!(e.errno(), 5, "EIO, got {e}");
    }
    // A measurement, not a limit: how long the port took to see the removal.
    let seen_after = told.elapsed();
    let e = port
        .send(
            a,
            SendRequest {
                addr: to,
                mad: &mad(0x30, 0x01, 0x5003, ECHO, 0, false, &[]),
                timeout_ms: 100,
                retries: 0,
            },
        )
        .expect_err("a send on a deleted device");
    assert_eq!(e.errno(), 5, "EIO, got {e}");
    // Nothing drives a dead port's engine any more, so it keeps nothing: the
    // faulted transfer (its transaction, sessions, reassembly, unsent segments,
    // timers) went when the transport failed.
    let dead = port.footprint();
    eprintln!(
        "{via:?} {dir:?} DeleteDevice: {ended} after at least {seen} packets, \
         the removal seen {} ms after the deletion began; the dead port's footprint {dead:?}",
        seen_after.as_millis()
    );
    assert_eq!(dead, Footprint::default(), "the dead port's footprint");
    port.check_invariants().expect("engine invariants");
    if let Some(w) = watch.take() {
        eprintln!(
            "{via:?} {dir:?} DeleteDevice: async events on rxe0 (ms after the deletion began): {:?}",
            w.stop(told)
        );
    }
    drop(shaped);
    drop(port); // the last verbs user of rxe0: the deletion can finish
    deleting.finished();
    deleting.add_back();

    let (port, to) = open(via);
    let a = port.register(spec(0x30, true, &[])).unwrap();
    let limit = Instant::now() + Duration::from_secs(30);
    while port.attrs().state != 4 {
        assert!(Instant::now() < limit, "the new port never came up");
        let _ = port.poll(Some(Duration::from_millis(50)));
    }
    traffic_resumes(&port, a, to, 0x5002);
    footprint_returns_to_zero(&port, "on the device added back");
    drop(agent);
}

macro_rules! cases {
    ($($name:ident: $via:ident $dir:ident $fault:ident;)*) => {$(
        #[test]
        #[ignore = "needs the rxe VM: run by scripts/rxe-test"]
        fn $name() {
            case(Via::$via, Dir::$dir, Fault::$fault);
        }
    )*};
}

cases! {
    rmpp_kernel_peer_killed_during_a_send: Kernel Send KillPeer;
    rmpp_kernel_peer_killed_during_a_receive: Kernel Receive KillPeer;
    rmpp_kernel_link_down_during_a_send: Kernel Send LinkDown;
    rmpp_kernel_link_down_during_a_receive: Kernel Receive LinkDown;
    rmpp_hybrid_peer_killed_during_a_send: Hybrid Send KillPeer;
    rmpp_hybrid_peer_killed_during_a_receive: Hybrid Receive KillPeer;
    rmpp_hybrid_link_down_during_a_send: Hybrid Send LinkDown;
    rmpp_hybrid_link_down_during_a_receive: Hybrid Receive LinkDown;
    rmpp_verbs_peer_killed_during_a_send: Verbs Send KillPeer;
    rmpp_verbs_peer_killed_during_a_receive: Verbs Receive KillPeer;
    rmpp_verbs_link_down_during_a_send: Verbs Send LinkDown;
    rmpp_verbs_link_down_during_a_receive: Verbs Receive LinkDown;
    rmpp_kernel_vmad_peer_killed_during_a_send: Kernel Send KillVmadPeer;
    rmpp_kernel_vmad_peer_killed_during_a_receive: Kernel Receive KillVmadPeer;
    rmpp_verbs_vmad_peer_killed_during_a_send: Verbs Send KillVmadPeer;
    rmpp_verbs_vmad_peer_killed_during_a_receive: Verbs Receive KillVmadPeer;
    rmpp_kernel_device_deleted_during_a_send: Kernel Send DeleteDevice;
    rmpp_kernel_device_deleted_during_a_receive: Kernel Receive DeleteDevice;
    rmpp_hybrid_device_deleted_during_a_send: Hybrid Send DeleteDevice;
    rmpp_hybrid_device_deleted_during_a_receive: Hybrid Receive DeleteDevice;
    rmpp_verbs_device_deleted_during_a_send: Verbs Send DeleteDevice;
    rmpp_verbs_device_deleted_during_a_receive: Verbs Receive DeleteDevice;
}
