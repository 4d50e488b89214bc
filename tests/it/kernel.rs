//! The kernel transport on two soft-RoCE ports, against the real libibumad.
//!
//! These run only inside the rxe VM (`scripts/rxe-test`): rxe0 and rxe1 wired
//! to each other, the C fixtures of `tests/rxe/` built against the system
//! libibumad, and vmad's drop-in `libibumad.so.3` in `target/rxe/vmad-lib`.
//! The same unmodified C programs run on either library.
//!
//! `cargo test --test it -- --ignored --test-threads=1 kernel::`

use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use vmad::engine::Event;
use vmad::port::{Port, PortConfig};
use vmad::transport::kernel::sysfs::Sysfs;
use vmad::transport::kernel::KernelTransport;
use vmad::transport::Transport;
use vmad::types::{MadAddr, Qp};

use super::kernel_peer::*;

/// Which libibumad a C fixture runs on.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Lib {
    /// The system's (rdma-core).
    Classic,
    /// vmad's drop-in, `VMAD_TRANSPORT` unset (the host's CAs: kernel).
    VmadDefault,
    /// vmad's drop-in, `VMAD_TRANSPORT=kernel`.
    VmadKernel,
    /// vmad's drop-in built with the `hybrid` feature, `VMAD_TRANSPORT` unset (root in
    /// the VM has CAP_NET_RAW: hybrid). Used by tests/it/hybrid.rs (feature `verbs`).
    #[cfg_attr(not(feature = "verbs"), allow(dead_code))]
    HybridDefault,
    /// vmad's drop-in built with the `hybrid` feature, `VMAD_TRANSPORT=hybrid`.
    #[cfg_attr(not(feature = "verbs"), allow(dead_code))]
    Hybrid,
    /// As `HybridDefault`, the program run without CAP_NET_RAW (setpriv), on a
    /// kernel without `privileged-qkey` (the VM's 6.1).
    #[cfg_attr(not(feature = "verbs"), allow(dead_code))]
    HybridDefaultWithoutNetRaw,
    /// vmad's drop-in built with the `hybrid` feature, `VMAD_TRANSPORT=verbs`.
    #[cfg_attr(not(feature = "verbs"), allow(dead_code))]
    Verbs,
}

fn dropin_dir(lib: Lib) -> PathBuf {
    match lib {
        Lib::HybridDefault | Lib::Hybrid | Lib::HybridDefaultWithoutNetRaw | Lib::Verbs => {
            PathBuf::from(fixture("vmad-hybrid-lib"))
        }
        _ => PathBuf::from(fixture("vmad-lib")),
    }
}

/// A fixture command on `lib`.
pub(crate) fn on(lib: Lib, program: &str) -> Command {
    let mut cmd = if lib == Lib::HybridDefaultWithoutNetRaw {
        let mut c = Command::new("setpriv");
        c.args(["--bounding-set=-net_raw", "--inh-caps=-net_raw", "--"])
            .arg(fixture(program));
        c
    } else {
        Command::new(fixture(program))
    };
    cmd.env_remove("VMAD_TRANSPORT")
        .env_remove("LD_LIBRARY_PATH");
    if lib != Lib::Classic {
        let so = dropin_dir(lib).join("libibumad.so.3");
        assert!(
            so.exists(),
            "{} is missing (scripts/rxe-test builds it)",
            so.display()
        );
        cmd.env("LD_LIBRARY_PATH", dropin_dir(lib))
            .env("VMAD_LOG", "1");
    }
    match lib {
        Lib::VmadKernel => drop(cmd.env("VMAD_TRANSPORT", "kernel")),
        Lib::Hybrid => drop(cmd.env("VMAD_TRANSPORT", "hybrid")),
        Lib::Verbs => drop(cmd.env("VMAD_TRANSPORT", "verbs")),
        _ => {}
    }
    cmd
}

pub(crate) fn run(lib: Lib, program: &str, args: &[&str]) -> Output {
    let mut cmd = on(lib, program);
    cmd.args(args);
    output_of(cmd, &format!("{program} {args:?} on {lib:?}"))
}

/// Run `cmd` to its end; its status and output go to the test log under `what`.
fn output_of(mut cmd: Command, what: &str) -> Output {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {what}: {e}"));
    eprintln!(
        "--- {what}: {}\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

#[test]
#[ignore = "needs the rxe VM: run by scripts/rxe-test"]
fn kernel_ca_listing_matches_the_system_libibumad_field_by_field() {
    let _g = serial();
    let classic = run(Lib::Classic, "ca_dump", &[]);
    let vmad = run(Lib::VmadDefault, "ca_dump", &[]);
    assert!(classic.status.success() && vmad.status.success());
    let (want, got) = (
        String::from_utf8_lossy(&classic.stdout),
        String::from_utf8_lossy(&vmad.stdout),
    );
    for ca in ["rxe0", "rxe1"] {
        assert!(
            want.contains(&format!("ca {ca} node_type=1")),
            "{ca} listed by libibumad"
        );
    }
    for (i, (w, g)) in want.lines().zip(got.lines()).enumerate() {
        assert_eq!(g, w, "line {i}: vmad (left) differs from libibumad (right)");
    }
    assert_eq!(got.lines().count(), want.lines().count());
    let log = String::from_utf8_lossy(&vmad.stderr);
    assert!(
        log.contains("vmad: transport kernel: VMAD_TRANSPORT unset and the host has CAs"),
        "the default selection is announced: {log}"
    );
}

/// `umad_agent serve` on rxe1 on `lib`, until dropped.
pub(crate) struct Agent(Child);

impl Agent {
    pub(crate) fn start(lib: Lib) -> Agent {
        Agent::start_with(lib, Stdio::inherit())
    }

    /// As [`Agent::start`], on vmad's own UD QP (`VMAD_TRANSPORT=verbs`): also the
    /// QPN it listens on, from the drop-in's announcement.
    #[cfg_attr(not(feature = "verbs"), allow(dead_code))]
    pub(crate) fn start_verbs() -> (Agent, u32) {
        use std::io::{BufRead, BufReader};
        let mut agent = Agent::start_with(Lib::Verbs, Stdio::piped());
        let mut err = BufReader::new(agent.0.stderr.take().expect("piped"));
        let mut qpn = None;
        let mut line = String::new();
        while qpn.is_none() && err.read_line(&mut line).expect("agent stderr") > 0 {
            eprint!("[verbs agent] {line}");
            qpn = line
                .split_once("open over vmad's UD QP, QPN ")
                .and_then(|(_, rest)| rest.split_whitespace().next()?.parse().ok());
            line.clear();
        }
        let qpn = qpn.expect("the verbs agent announces its QPN");
        // Keep draining, so that the agent never blocks on a full pipe.
        std::thread::spawn(move || {
            for l in err.lines().map_while(std::result::Result::ok) {
                eprintln!("[verbs agent] {l}");
            }
        });
        (agent, qpn)
    }

    fn start_with(lib: Lib, stderr: Stdio) -> Agent {
        use std::io::{BufRead, BufReader};
        let mut child = on(lib, "umad_agent")
            .args(["serve", &env("RXE1_DEV"), &env("RXE1_PORT"), "600"])
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .expect("start umad_agent");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("piped"))
            .read_line(&mut line)
            .expect("agent output");
        assert_eq!(
            line.trim(),
            "READY",
            "umad_agent on {lib:?} did not come up"
        );
        Agent(child)
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The ping-pong (RMPP 64 KiB and 1 MiB both ways, byte-exact): `client` on rxe0
/// against an agent on `server` on rxe1.
pub(crate) fn pingpong(server: Lib, client: Lib) -> Output {
    let _g = serial();
    let _agent = Agent::start(server);
    pingpong_with(
        on(client, "umad_agent"),
        client,
        &format!("{server:?} agent"),
    )
}

/// The ping-pong of `cmd` (`umad_agent` on `client`, addressed as the caller set it
/// up) against the agent already serving on rxe1.
pub(crate) fn pingpong_with(mut cmd: Command, client: Lib, server: &str) -> Output {
    let args = [
        "pingpong".to_owned(),
        env("RXE0_DEV"),
        env("RXE0_PORT"),
        env("RXE1_GID"),
        env("RXE0_GID_INDEX"),
        "65536".to_owned(),
        "1048576".to_owned(),
    ];
    cmd.args(&args);
    let out = output_of(
        cmd,
        &format!("umad_agent {args:?} on {client:?} against {server}"),
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    for bytes in [65536, 1048576] {
        assert!(
            stdout.contains(&format!("pingpong {bytes} set=ok get=ok")),
            "{bytes} bytes both ways, {client:?} client against {server}"
        );
    }
    assert!(out.status.success());
    out
}

#[test]
#[ignore = "needs the rxe VM: run by scripts/rxe-test"]
fn kernel_pingpong_classic_to_classic_baseline() {
    pingpong(Lib::Classic, Lib::Classic);
}

#[test]
#[ignore = "needs the rxe VM: run by scripts/rxe-test"]
fn kernel_pingpong_dropin_client_default_to_classic_agent() {
    pingpong(Lib::Classic, Lib::VmadDefault);
}

#[test]
#[ignore = "needs the rxe VM: run by scripts/rxe-test"]
fn kernel_pingpong_dropin_client_kernel_to_classic_agent() {
    pingpong(Lib::Classic, Lib::VmadKernel);
}

#[test]
#[ignore = "needs the rxe VM: run by scripts/rxe-test"]
fn kernel_pingpong_classic_client_to_dropin_agent_default() {
    pingpong(Lib::VmadDefault, Lib::Classic);
}

#[test]
#[ignore = "needs the rxe VM: run by scripts/rxe-test"]
fn kernel_pingpong_classic_client_to_dropin_agent_kernel() {
    pingpong(Lib::VmadKernel, Lib::Classic);
}

/// A Rust port on rxe0 through the kernel transport.
fn kernel_port() -> Port {
    let t = KernelTransport::open(&Sysfs::host(), &env("RXE0_DEV"), 1).expect("open rxe0");
    assert!(t.caps().gsi && !t.caps().smi, "RoCE: QP1, no QP0");
    Port::open(Box::new(t), PortConfig::default()).expect("port")
}

fn to_rxe1() -> MadAddr {
    let mut d = dest(gid("RXE1_GID"), 1);
    if let Some(g) = d.grh.as_mut() {
        g.gid_index = env("RXE0_GID_INDEX").parse().expect("a GID index");
    }
    d
}

#[test]
#[ignore = "needs the rxe VM: run by scripts/rxe-test"]
fn kernel_qp0_agent_is_refused_on_rxe() {
    let _g = serial();
    let port = kernel_port();
    let smi = vmad::engine::AgentSpec {
        qp: Qp::Smi,
        mgmt_class: 0x81.into(),
        oui: 0,
        ..spec(0x09, false, &[])
    };
    let err = port.register(smi).expect_err("RoCE has no QP0");
    eprintln!("QP0 agent on rxe0: {err}");
    assert_eq!(err.errno(), vmad::error::errno::EOPNOTSUPP);
}

/// The engine's timeout and retries through the kernel: each attempt reaches the
/// agent (the kernel lets a retry with the same TID through once its own copy of
/// the previous attempt expired), and a response matches after the kernel's TID
/// rewrite.
#[test]
#[ignore = "needs the rxe VM: run by scripts/rxe-test"]
fn kernel_request_response_timeout_and_retries_through_the_kernel() {
    let _g = serial();
    let _agent = Agent::start(Lib::Classic);
    let port = kernel_port();
    let a = port.register(spec(0x09, false, &[])).unwrap();
    let hi = u64::from(port.hi_tid(a).unwrap());
    let count = |tid: u64| {
        request(
            &port,
            a,
            to_rxe1(),
            &mad(0x09, 0x01, tid, SILENT_COUNT, 0, false, &[]),
            2000,
            2,
        );
        let (_, resp) = recv_mad(&port, Duration::from_secs(10));
        assert_eq!(
            tid_of(&resp),
            (hi << 32) | tid,
            "the engine's TID, high word included"
        );
        u32::from_be_bytes(resp[24..28].try_into().unwrap())
    };
    let before = count(0x61);
    // How far apart the attempts are is the engine's, tested in virtual time
    // (tests/it/counters.rs); here, that all three reach the kernel's agent.
    request(
        &port,
        a,
        to_rxe1(),
        &mad(0x09, 0x01, 0x62, SILENT, 0, false, &[]),
        300,
        2,
    );
    match recv(&port, Duration::from_secs(20)) {
        Event::SendTimedOut { agent, header, .. } => {
            assert_eq!(agent, a);
            assert_eq!(tid_of(&header) & 0xffff_ffff, 0x62);
        }
        other => panic!("expected a timeout, got {other:?}"),
    }
    assert_eq!(
        count(0x63) - before,
        3,
        "the first attempt and 2 retries reached the agent"
    );
}

/// rdma-core 56's own test of `umad_register2` (libibumad/tests/umad_register2.c,
/// built by scripts/rxe-test from the source scripts/rdma-core caches, its kernel
/// probe aimed at the umad device: tests/rxe/register2_probe.h) on the drop-in's
/// kernel transport, and on the system libibumad as the baseline: invalid flags,
/// RMPP version and OUI refused, a second agent for one OUI and mask refused, valid
/// OUIs (with and without UMAD_USER_RMPP) taken. It exits with its failure count.
#[test]
#[ignore = "needs the rxe VM: run by scripts/rxe-test"]
fn kernel_rdma_core_umad_register2_test_passes_on_the_dropin() {
    let _g = serial();
    let program = fixture("umad_register2");
    assert!(
        std::path::Path::new(&program).exists(),
        "{program} is missing (scripts/rxe-test builds it)"
    );
    let runs = [Lib::Classic, Lib::VmadKernel].map(|lib| (lib, run(lib, "umad_register2", &[])));
    for (lib, out) in &runs {
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            !stdout.contains("Aborting"),
            "umad_register2 on {lib:?} stopped before its tests"
        );
        assert!(
            stdout.contains("umad_register2 had 0 failures"),
            "umad_register2 on {lib:?} counts failures"
        );
        assert!(out.status.success(), "umad_register2 on {lib:?}");
    }
}
