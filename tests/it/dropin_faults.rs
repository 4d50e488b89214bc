//! What the host does to the drop-in `libibumad.so.3` on its real CAs: the link
//! going down and up under traffic, and the device removed under a blocked
//! `umad_recv(..., -1)`, through an unmodified C program (`umad_agent steps` and
//! `umad_agent block`) on the kernel transport and, built with the hybrid
//! feature, on the default (hybrid) one, beside the system libibumad running
//! the same program.
//!
//! Only inside the rxe VM (`scripts/rxe-test`). Waiting here is for conditions
//! (a line from the program, the port's state), each with a limit only a broken
//! build reaches.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use super::kernel::{on, Lib};
use super::kernel_peer::*;

/// `umad_agent steps` on `lib`: one command line in, one answer line out.
struct Steps {
    child: Child,
    to: ChildStdin,
    from: BufReader<ChildStdout>,
}

impl Steps {
    fn start(lib: Lib) -> Steps {
        let mut child = on(lib, "umad_agent")
            .args([
                "steps",
                &env("RXE0_DEV"),
                &env("RXE0_PORT"),
                &env("RXE1_GID"),
                &env("RXE0_GID_INDEX"),
            ])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("umad_agent steps");
        let to = child.stdin.take().expect("piped");
        let from = BufReader::new(child.stdout.take().expect("piped"));
        Steps { child, to, from }
    }

    fn ask(&mut self, cmd: &str) -> String {
        writeln!(self.to, "{cmd}").expect("to umad_agent");
        let mut line = String::new();
        self.from.read_line(&mut line).expect("from umad_agent");
        assert!(!line.is_empty(), "umad_agent ended at {cmd:?}");
        line.trim().to_owned()
    }

    fn send(&mut self, tid: u32, timeout_ms: u32, retries: u32) {
        let got = self.ask(&format!("send {tid} {timeout_ms} {retries}"));
        assert_eq!(got, format!("sent {tid} r=0"));
    }

    /// The TID and status of the next MAD umad_recv returns (an answer: 0; a
    /// request that timed out: 110).
    fn recv(&mut self, timeout_ms: u32) -> (u32, u32) {
        let got = self.ask(&format!("recv {timeout_ms}"));
        let parse = |key: &str| {
            got.split_whitespace()
                .find_map(|w| w.strip_prefix(key))
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("umad_recv: {got}"))
        };
        (parse("tid="), parse("status="))
    }

    /// umad_get_port's state, polled until `ok` (30 s at most).
    fn state_until(&mut self, what: &str, ok: impl Fn(u32) -> bool) {
        let give_up = Instant::now() + Duration::from_secs(30);
        loop {
            let got = self.ask("state");
            let state: u32 = got
                .strip_prefix("state=")
                .and_then(|r| r.split_whitespace().next())
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("umad_get_port: {got}"));
            if ok(state) {
                return;
            }
            // Each look is a round trip to the program and a sysfs read: no sleep.
            assert!(Instant::now() < give_up, "{what}: never ({got})");
        }
    }
}

impl Drop for Steps {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// veth0 (under rxe0) down with requests in flight, more requests while it is
/// down, then up again: every request ends answered or with ETIMEDOUT, umad_get_port
/// shows the port down and then active, and traffic resumes on the same open port.
fn link_down_and_up(lib: Lib) {
    let _g = serial();
    let _agent = KernelAgent::start("RXE1_DEV", "RXE1_PORT");
    sh("echo 1 > /proc/sys/net/ipv6/conf/veth0/keep_addr_on_down");
    let mut p = Steps::start(lib);
    p.state_until("active before", |s| s == 4);
    const N: u32 = 16;
    const M: u32 = 8;
    for k in 0..N {
        p.send(0x900 + k, 1000, 1);
    }
    sh("ip link set veth0 down");
    p.state_until("the port shows the link down", |s| s != 4);
    for k in 0..M {
        p.send(0x980 + k, 500, 1);
    }
    let (mut answered, mut timed_out) = (Vec::new(), Vec::new());
    for _ in 0..N + M {
        match p.recv(30_000) {
            (tid, 0) => answered.push(tid),
            (tid, 110) => timed_out.push(tid),
            (tid, status) => panic!("request {tid:#x} ended with status {status}"),
        }
    }
    eprintln!("{lib:?}, link down: answered {answered:x?}, timed out {timed_out:x?}");
    let mut all: Vec<u32> = answered.iter().chain(&timed_out).copied().collect();
    all.sort_unstable();
    let want: Vec<u32> = (0x900..0x900 + N).chain(0x980..0x980 + M).collect();
    assert_eq!(all, want, "each request ends once");
    for k in 0..M {
        assert!(
            timed_out.contains(&(0x980 + k)),
            "request {:#x}, sent while the link was down, was not ETIMEDOUT",
            0x980 + k
        );
    }
    sh("ip link set veth0 up");
    restore_routes();
    p.state_until("the port shows the link up", |s| s == 4);
    // The same open port, the same agent: traffic resumes.
    p.send(0x9ff, 1000, 5);
    assert_eq!(
        p.recv(30_000),
        (0x9ff, 0),
        "answered after the link came back"
    );
}

/// A device of its own (rxe0 and rxe1 serve the other tests) on a new veth pair,
/// once its RoCE v2 GID (from the address) is in its table.
fn spare_device(name: &str) {
    sh(&format!(
        "ip link add veth6 type veth peer name veth7 && ip link set veth6 up && \
        ip link set veth7 up && ip addr add 2001:db8:6::1/64 dev veth6 nodad && \
        rdma link add {name} type rxe netdev veth6"
    ));
    let gids = format!("/sys/class/infiniband/{name}/ports/1/gids");
    let give_up = Instant::now() + Duration::from_secs(30);
    loop {
        let found = std::fs::read_dir(&gids).into_iter().flatten().any(|e| {
            e.ok()
                .and_then(|e| std::fs::read_to_string(e.path()).ok())
                .is_some_and(|g| g.starts_with("2001:0db8:0006"))
        });
        if found {
            return;
        }
        assert!(Instant::now() < give_up, "{name} got no GID");
        std::thread::yield_now();
    }
}

/// `rdma link delete` of the device under `umad_agent block` on `lib`: its
/// umad_recv(..., -1) returns -EIO (errno EIO), and the removal completes once
/// the program has closed the port.
fn device_removed_under_a_blocked_recv(lib: Lib) {
    let _g = serial();
    let dev = "rxe6";
    spare_device(dev);
    let mut child = on(lib, "umad_agent")
        .args(["block", dev, "1"])
        .stdout(Stdio::piped())
        .spawn()
        .expect("umad_agent block");
    let mut out = BufReader::new(child.stdout.take().expect("piped"));
    let mut line = String::new();
    out.read_line(&mut line).expect("umad_agent output");
    assert_eq!(
        line.trim(),
        "READY",
        "umad_agent block on {dev} did not come up"
    );
    let mut deleting = Command::new("rdma")
        .args(["link", "delete", dev])
        .spawn()
        .expect("rdma");
    let (done, result) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = out.read_line(&mut line);
        let _ = done.send(line);
    });
    let got = result
        .recv_timeout(Duration::from_secs(60))
        .expect("umad_recv(-1) still blocked a minute after the device went");
    let _ = child.wait();
    let status = deleting.wait().expect("rdma link delete");
    let _ = Command::new("ip").args(["link", "del", "veth6"]).status();
    eprintln!("{lib:?}: {}", got.trim());
    assert_eq!(got.trim(), "recv=-5 errno=5", "{lib:?}: -EIO");
    assert!(status.success(), "rdma link delete: {status}");
}

#[test]
#[ignore = "needs the rxe VM: run by scripts/rxe-test"]
fn dropin_faults_classic_link_down_and_up_baseline() {
    link_down_and_up(Lib::Classic);
}

#[test]
#[ignore = "needs the rxe VM: run by scripts/rxe-test"]
fn dropin_faults_kernel_link_down_and_up() {
    link_down_and_up(Lib::VmadKernel);
}

#[cfg(feature = "verbs")]
#[test]
#[ignore = "needs the rxe VM: run by scripts/rxe-test"]
fn dropin_faults_hybrid_default_link_down_and_up() {
    link_down_and_up(Lib::HybridDefault);
}

#[test]
#[ignore = "needs the rxe VM: run by scripts/rxe-test"]
fn dropin_faults_classic_device_removed_under_blocked_recv_baseline() {
    device_removed_under_a_blocked_recv(Lib::Classic);
}

#[test]
#[ignore = "needs the rxe VM: run by scripts/rxe-test"]
fn dropin_faults_kernel_device_removed_under_blocked_recv() {
    device_removed_under_a_blocked_recv(Lib::VmadKernel);
}

#[cfg(feature = "verbs")]
#[test]
#[ignore = "needs the rxe VM: run by scripts/rxe-test"]
fn dropin_faults_hybrid_default_device_removed_under_blocked_recv() {
    device_removed_under_a_blocked_recv(Lib::HybridDefault);
}
