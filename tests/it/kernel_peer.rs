//! What the soft-RoCE VM tests share (`rxe.rs`: the verbs transport;
//! `roce.rs`: the roce transport): MAD builders, the kernel-side agent
//! fixture, and the one-test-at-a-time lock. The far side in both is the
//! Linux kernel's QP1 and MAD layer on rdma_rxe, through
//! `tests/rxe/umad_agent.c` (system libibumad).

use std::io::{BufRead, BufReader};
use std::net::Ipv6Addr;
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use vmad::engine::{AgentId, AgentSpec, Event, Footprint, SendRequest};
use vmad::port::audit::PortAudit;
use vmad::port::Port;
use vmad::types::{GrhAddr, MadAddr, Qp, GSI_QKEY};

/// The OUI `umad_agent.c` registers its vendor range 2 class with.
pub(crate) const OUI: u32 = 0x00_14_05;
/// Attributes `umad_agent.c` serves: echo the data back; never answer;
/// count the unanswered ones.
pub(crate) const ECHO: u16 = 0xff10;
pub(crate) const SILENT: u16 = 0xff20;
#[cfg_attr(not(feature = "verbs"), allow(dead_code))]
pub(crate) const SILENT_COUNT: u16 = 0xff21;
/// MAD + RMPP + vendor header (OUI) of vendor range 2 classes.
pub(crate) const VENDOR_HDR: usize = 40;
/// Window resends for an RMPP transfer that must complete. Each ACK wait is
/// 2 s (the engine's and the kernel's); under TCG on a loaded host a peer's ACK
/// can come later than that, and with no resends one late ACK ends the transfer
/// (a roce 1 MiB request timed out so in a flake hunt). `umad_agent.c` answers
/// with the same 15.
pub(crate) const RMPP_RETRIES: u32 = 15;

/// The kernel agent registers fixed methods: one test at a time.
static SERIAL: Mutex<()> = Mutex::new(());

pub(crate) fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(PoisonError::into_inner)
}

/// An environment variable the VM scripts set.
pub(crate) fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| {
        panic!(
            "{name} is not set: these tests run inside the rxe VM \
             (scripts/rxe-test, scripts/rxe-roce-test)"
        )
    })
}

/// The GID in environment variable `name`.
pub(crate) fn gid(name: &str) -> [u8; 16] {
    let v = env(name);
    v.parse::<Ipv6Addr>()
        .unwrap_or_else(|_| panic!("{name}={v} is not a GID"))
        .octets()
}

/// A C fixture the VM scripts build (`tests/rxe/*.c`).
pub(crate) fn fixture(name: &str) -> String {
    format!("{}/target/rxe/{name}", env!("CARGO_MANIFEST_DIR"))
}

/// The shared data pattern (same formula as umad_agent.c).
pub(crate) fn pattern(i: usize) -> u8 {
    (i as u32)
        .wrapping_mul(7)
        .wrapping_add((i as u32 >> 8).wrapping_mul(13))
        .wrapping_add(3) as u8
}

/// Where `data` first departs from the pattern, if it does.
pub(crate) fn off_pattern_at(data: &[u8]) -> Option<usize> {
    data.iter().enumerate().position(|(i, &b)| b != pattern(i))
}

/// QP1 (or any QP) behind `gid`.
pub(crate) fn dest(gid: [u8; 16], qpn: u32) -> MadAddr {
    MadAddr {
        qpn,
        qkey: GSI_QKEY,
        grh: Some(GrhAddr {
            gid,
            hop_limit: 64,
            ..Default::default()
        }),
        ..Default::default()
    }
}

pub(crate) fn spec(class: u8, rmpp: bool, methods: &[u8]) -> AgentSpec {
    let mut mask = [0u64; 2];
    for &m in methods {
        mask[usize::from(m / 64)] |= 1 << (m % 64);
    }
    AgentSpec {
        qp: Qp::Gsi,
        mgmt_class: class.into(),
        class_version: 1,
        rmpp_version: u8::from(rmpp),
        method_mask: mask,
        oui: if class >= 0x30 { OUI } else { 0 },
        user_rmpp: false,
    }
}

/// A MAD header; vendor range 2 classes get the RMPP header (Active when `rmpp`) and the OUI.
pub(crate) fn mad(
    class: u8,
    method: u8,
    tid: u64,
    attr: u16,
    attr_mod: u32,
    rmpp: bool,
    data: &[u8],
) -> Vec<u8> {
    let hdr = if class >= 0x30 { VENDOR_HDR } else { 24 };
    let mut m = vec![0u8; (hdr + data.len()).max(256)];
    m[0] = 1;
    m[1] = class;
    m[2] = 1;
    m[3] = method;
    m[8..16].copy_from_slice(&tid.to_be_bytes());
    m[16..18].copy_from_slice(&attr.to_be_bytes());
    m[20..24].copy_from_slice(&attr_mod.to_be_bytes());
    if class >= 0x30 {
        m[24] = 1;
        m[25] = 1;
        m[26] = u8::from(rmpp);
        m[37..40].copy_from_slice(&OUI.to_be_bytes()[1..]);
    }
    m[hdr..hdr + data.len()].copy_from_slice(data);
    if rmpp {
        m.truncate(hdr + data.len());
    }
    m
}

pub(crate) fn tid_of(m: &[u8]) -> u64 {
    u64::from_be_bytes(m[8..16].try_into().unwrap())
}

/// The next received message (tests are serial: nothing else is skipped).
pub(crate) fn recv(port: &Port, within: Duration) -> Event {
    port.recv(Some(within)).expect("a message in time")
}

/// The next received message, which must be a MAD: where from, and its bytes.
pub(crate) fn recv_mad(port: &Port, within: Duration) -> (MadAddr, Vec<u8>) {
    match recv(port, within) {
        Event::Recv { addr, mad, .. } => (addr, mad),
        other => panic!("expected a MAD, got {other:?}"),
    }
}

pub(crate) fn request(
    port: &Port,
    agent: AgentId,
    to: MadAddr,
    m: &[u8],
    timeout_ms: u32,
    retries: u32,
) {
    port.send(
        agent,
        SendRequest {
            addr: to,
            mad: m,
            timeout_ms,
            retries,
        },
    )
    .expect("send");
}

/// The kernel-side agent (`umad_agent serve`) on the device and port named by
/// the environment variables `dev` and `port`, killed on drop.
pub(crate) struct KernelAgent(Child);

impl KernelAgent {
    pub(crate) fn start(dev: &str, port: &str) -> KernelAgent {
        Self::start_on(dev, port, None)
    }

    /// The same agent on vmad's drop-in `libibumad.so.3` (`target/rxe/vmad-lib`,
    /// its default transport, `kernel`): a vmad process as the peer.
    #[cfg_attr(not(feature = "verbs"), allow(dead_code))]
    pub(crate) fn start_vmad(dev: &str, port: &str) -> KernelAgent {
        let lib = fixture("vmad-lib");
        assert!(
            std::path::Path::new(&lib).join("libibumad.so.3").exists(),
            "{lib}/libibumad.so.3 is missing (scripts/rxe-test builds it)"
        );
        Self::start_on(dev, port, Some(&lib))
    }

    fn start_on(dev: &str, port: &str, dropin: Option<&str>) -> KernelAgent {
        let path = std::env::var("RXE_AGENT").unwrap_or_else(|_| fixture("umad_agent"));
        let mut cmd = Command::new(&path);
        cmd.env_remove("LD_LIBRARY_PATH")
            .env_remove("VMAD_TRANSPORT");
        if let Some(lib) = dropin {
            cmd.env("LD_LIBRARY_PATH", lib);
        }
        let mut child = cmd
            .args(["serve", &env(dev), &env(port), "600"])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {path} (built by the VM scripts): {e}"));
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("piped"))
            .read_line(&mut line)
            .expect("agent output");
        assert_eq!(line.trim(), "READY", "umad_agent did not come up");
        KernelAgent(child)
    }
}

impl Drop for KernelAgent {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Run a command in the guest; it must succeed.
#[cfg_attr(not(any(feature = "verbs", feature = "kernel")), allow(dead_code))]
pub(crate) fn sh(cmd: &str) {
    let out = Command::new("sh").args(["-c", cmd]).output().expect("sh");
    assert!(
        out.status.success(),
        "{cmd}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// After `ip link set veth0 down` and up: put back what guest-init set up.
#[cfg_attr(not(any(feature = "verbs", feature = "kernel")), allow(dead_code))]
pub(crate) fn restore_routes() {
    // Taking veth0 down drops its routes and permanent neighbours (the
    // addresses stay: keep_addr_on_down); put back what guest-init set up.
    sh(
        "ip route replace 192.0.2.2/32 dev veth0 src 192.0.2.1 table 100 && \
        ip -6 route replace 2001:db8::2/128 dev veth0 src 2001:db8::1 table 100 && \
        ip neigh replace 192.0.2.2 lladdr 02:00:c0:00:02:02 dev veth0 nud permanent && \
        ip -6 neigh replace 2001:db8::2 lladdr 02:00:c0:00:02:02 dev veth0 nud permanent && \
        ip route replace 192.0.2.1/32 dev veth1 src 192.0.2.2 table 101 && \
        ip -6 route replace 2001:db8::1/128 dev veth1 src 2001:db8::2 table 101 && \
        ip neigh replace 192.0.2.1 lladdr 02:00:c0:00:02:01 dev veth1 nud permanent && \
        ip -6 neigh replace 2001:db8::1 lladdr 02:00:c0:00:02:01 dev veth1 nud permanent",
    );
}

// ---------------------------------------------------------------- faults mid-RMPP
// Shared by the cases of tests/it/rxe/rmpp_faults.rs and tests/it/roce/rmpp_faults.rs.

/// The size of the faulted transfers.
pub(crate) const SIZE: usize = 1 << 20;

#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Dir {
    /// vmad sends 1 MiB (Set, RMPP), the peer reassembles it.
    Send,
    /// vmad asks for 1 MiB (Get), the peer's kernel sends it with RMPP.
    Receive,
}

/// The request of the 1 MiB transfer of `dir` (class 0x30, ECHO).
pub(crate) fn transfer(dir: Dir, tid: u64) -> Vec<u8> {
    match dir {
        Dir::Send => {
            let data: Vec<u8> = (0..SIZE).map(pattern).collect();
            mad(0x30, 0x02, tid, ECHO, SIZE as u32, true, &data)
        }
        Dir::Receive => mad(0x30, 0x01, tid, ECHO, SIZE as u32, false, &[]),
    }
}

/// Drive `port` until its footprint is zero (the port thread runs the timers;
/// a limit only a leak reaches), and check its invariants.
pub(crate) fn footprint_returns_to_zero(port: &Port, what: &str) {
    let limit = Instant::now() + Duration::from_secs(60);
    while port.footprint() != Footprint::default() {
        assert!(
            Instant::now() < limit,
            "{what}: the footprint stays at {:?}",
            port.footprint()
        );
        let _ = port.poll(Some(Duration::from_millis(50)));
    }
    port.check_invariants().expect("engine invariants");
}

/// Whether `mad` answers the transfer of `dir` in full (1 MiB taken, or returned).
pub(crate) fn completes(mad: &[u8], dir: Dir) -> bool {
    let status = u16::from_be_bytes([mad[4], mad[5]]);
    match dir {
        Dir::Send => {
            status == 0
                && mad.len() > VENDOR_HDR + 4
                && mad[VENDOR_HDR..VENDOR_HDR + 4] == (SIZE as u32).to_be_bytes()
        }
        Dir::Receive => mad.len() == VENDOR_HDR + SIZE,
    }
}

/// How the faulted request ended: it must end, and not with the whole transfer done.
pub(crate) fn outcome_of(event: Event, dir: Dir, tid: u64) -> &'static str {
    match event {
        Event::SendTimedOut { header, .. } => {
            assert_eq!(tid_of(&header) & 0xffff_ffff, tid);
            "ETIMEDOUT"
        }
        Event::Recv { mad, .. } => {
            assert_eq!(tid_of(&mad) & 0xffff_ffff, tid);
            let complete = completes(&mad, dir);
            assert!(
                !complete,
                "the whole transfer completed: the fault was not in its middle"
            );
            "an error answer"
        }
    }
}

/// A 2 KiB RMPP Get answered: traffic flows again.
pub(crate) fn traffic_resumes(port: &Port, a: AgentId, to: MadAddr, tid: u64) {
    request(
        port,
        a,
        to,
        &mad(0x30, 0x01, tid, ECHO, 2048, false, &[]),
        2000,
        5,
    );
    let (_, resp) = recv_mad(port, Duration::from_secs(60));
    assert_eq!(tid_of(&resp) & 0xffff_ffff, tid);
    assert_eq!(resp.len(), VENDOR_HDR + 2048);
    assert_eq!(off_pattern_at(&resp[VENDOR_HDR..]), None);
}
