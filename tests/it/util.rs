//! Helpers shared by the integration tests (public API only).

use std::time::{Duration, Instant};

use vmad::engine::{RecvMeta, Transmit};
use vmad::transport::Transport;
use vmad::types::{MadAddr, Qp};

/// Generous bound for anything that should happen "at once": tests never assert on timing,
/// this only keeps a broken build from hanging.
pub(crate) const PATIENCE: Duration = Duration::from_secs(10);

/// Send one 256-byte MAD from `t` on `qp` to `dest`.
pub(crate) fn send(t: &mut dyn Transport, qp: Qp, dest: MadAddr, mad: &[u8; 256]) {
    let sent = t
        .transmit(&mut |slot| {
            slot.copy_from_slice(mad);
            Some(Transmit {
                qp,
                dest,
                len: 256,
                timeout_ms: 0,
            })
        })
        .unwrap();
    assert!(sent);
}

/// Wait for the next MAD on `t` (panics after [`PATIENCE`]).
pub(crate) fn recv(t: &mut dyn Transport) -> (RecvMeta, Vec<u8>) {
    try_recv_for(t, PATIENCE).expect("no MAD arrived")
}

/// The next MAD on `t` within `limit`, if any.
pub(crate) fn try_recv_for(t: &mut dyn Transport, limit: Duration) -> Option<(RecvMeta, Vec<u8>)> {
    let start = Instant::now();
    loop {
        let mut got = None;
        t.recv_burst(1, &mut |meta, bytes| got = Some((meta, bytes.to_vec())))
            .unwrap();
        if got.is_some() {
            return got;
        }
        let left = limit.checked_sub(start.elapsed())?;
        t.wait(Some(left)).unwrap();
    }
}

/// Every MAD `t` holds now, without waiting. The sim fabric walks a frame (and any
/// answer of an SMA, PMA or the SA) in the sending thread, so what was sent has arrived
/// by now, unless a fault holds it back until a due time on the fabric's clock.
pub(crate) fn drain(t: &mut dyn Transport) -> Vec<(RecvMeta, Vec<u8>)> {
    let mut got = Vec::new();
    while t
        .recv_burst(64, &mut |meta, bytes| got.push((meta, bytes.to_vec())))
        .unwrap()
        > 0
    {}
    got
}

/// A DR SMP SubnGet(attr) along `path` (`path[0]` is the first hop's out port), as it
/// leaves the sending port: the sender's SMI has set the hop pointer to 1 (IBA C14-9:1).
pub(crate) fn dr_get(tid: u64, attr: u16, attr_mod: u32, path: &[u8]) -> [u8; 256] {
    let mut m = [0u8; 256];
    m[0] = 1;
    m[1] = 0x81;
    m[2] = 1;
    m[3] = 0x01;
    m[6] = 1;
    m[7] = path.len() as u8;
    m[8..16].copy_from_slice(&tid.to_be_bytes());
    m[16..18].copy_from_slice(&attr.to_be_bytes());
    m[20..24].copy_from_slice(&attr_mod.to_be_bytes());
    m[32..34].copy_from_slice(&0xffffu16.to_be_bytes());
    m[34..36].copy_from_slice(&0xffffu16.to_be_bytes());
    for (i, p) in path.iter().enumerate() {
        m[128 + 1 + i] = *p;
    }
    m
}

/// A LID-routed SMP SubnGet(attr).
pub(crate) fn lid_get(tid: u64, attr: u16, attr_mod: u32) -> [u8; 256] {
    let mut m = [0u8; 256];
    m[0] = 1;
    m[1] = 0x01;
    m[2] = 1;
    m[3] = 0x01;
    m[8..16].copy_from_slice(&tid.to_be_bytes());
    m[16..18].copy_from_slice(&attr.to_be_bytes());
    m[20..24].copy_from_slice(&attr_mod.to_be_bytes());
    m
}

/// Big-endian u64 at `at`.
pub(crate) fn be64(b: &[u8], at: usize) -> u64 {
    u64::from_be_bytes(b[at..at + 8].try_into().unwrap())
}

/// Big-endian u16 at `at`.
pub(crate) fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes(b[at..at + 2].try_into().unwrap())
}

/// Address of QP0 behind `lid` (permissive for DR).
pub(crate) fn smi(lid: u16) -> MadAddr {
    MadAddr {
        qpn: 0,
        lid,
        ..MadAddr::default()
    }
}

/// Address of QP1 behind `lid`.
pub(crate) fn gsi(lid: u16) -> MadAddr {
    MadAddr {
        qpn: 1,
        qkey: vmad::types::GSI_QKEY,
        lid,
        ..MadAddr::default()
    }
}

/// Two CAs `{prefix}0` (LID 1) and `{prefix}1` (LID 2), linked, registered, both ports open.
pub(crate) struct Pair {
    pub(crate) fabric: vmad::subnet::Fabric,
    pub(crate) a: vmad::umad::PortId,
    pub(crate) b: vmad::umad::PortId,
}

impl Drop for Pair {
    fn drop(&mut self) {
        let _ = vmad::umad::close_port(self.a);
        let _ = vmad::umad::close_port(self.b);
        self.fabric.unregister();
    }
}

pub(crate) fn pair(prefix: &str) -> Pair {
    pair_with(prefix, vmad::subnet::FaultConfig::default())
}

pub(crate) fn pair_with(prefix: &str, faults: vmad::subnet::FaultConfig) -> Pair {
    pair_config(prefix, faults, vmad::umad::PortConfig::default())
}

pub(crate) fn pair_config(
    prefix: &str,
    faults: vmad::subnet::FaultConfig,
    config: vmad::umad::PortConfig,
) -> Pair {
    pair_built(prefix, faults, config, vmad::subnet::Fabric::builder())
}

/// A [`Pair`] whose fabric and ports run in virtual time, on the clock returned.
pub(crate) fn pair_in_virtual_time(
    prefix: &str,
    faults: vmad::subnet::FaultConfig,
    config: vmad::umad::PortConfig,
) -> (Pair, vmad::clock::VirtualClock) {
    let clock = vmad::clock::VirtualClock::new();
    let builder = vmad::subnet::Fabric::builder().clock(clock.clone());
    (pair_built(prefix, faults, config, builder), clock)
}

fn pair_built(
    prefix: &str,
    faults: vmad::subnet::FaultConfig,
    config: vmad::umad::PortConfig,
    builder: vmad::subnet::FabricBuilder,
) -> Pair {
    let (n0, n1) = (format!("{prefix}0"), format!("{prefix}1"));
    let fabric = builder
        .ca(&n0)
        .ca(&n1)
        .link(&n0, 1, &n1, 1)
        .faults(&n0, 1, faults)
        .build()
        .unwrap();
    let a = vmad::umad::open_with(&n0, 1, config.clone()).unwrap().0;
    let b = vmad::umad::open_with(&n1, 1, config).unwrap().0;
    Pair { fabric, a, b }
}

/// A GSI agent that only sends requests of `class` (version `version`) and gets their
/// answers: no methods registered, no RMPP.
pub(crate) fn client_spec(class: u8, version: u8) -> vmad::engine::AgentSpec {
    server_spec(class, version, 0)
}

/// A GSI agent of `class`/`version` (no RMPP) serving the methods whose bits `methods`
/// sets (methods 0–63).
pub(crate) fn server_spec(class: u8, version: u8, methods: u64) -> vmad::engine::AgentSpec {
    vmad::engine::AgentSpec {
        qp: Qp::Gsi,
        mgmt_class: class.into(),
        class_version: version,
        rmpp_version: 0,
        method_mask: [methods, 0],
        oui: 0,
        user_rmpp: false,
    }
}

/// A 256-byte GMP header + zero data.
pub(crate) fn gmp_mad(class: u8, version: u8, method: u8, tid: u64, attr: u16) -> [u8; 256] {
    let mut m = [0u8; 256];
    m[0] = 1;
    m[1] = class;
    m[2] = version;
    m[3] = method;
    m[8..16].copy_from_slice(&tid.to_be_bytes());
    m[16..18].copy_from_slice(&attr.to_be_bytes());
    m
}

/// An `ib_user_mad` buffer (64-byte header) holding `mad`, addressed to QP `qpn` at `lid`.
pub(crate) fn umad_with(mad: &[u8], lid: u16, qpn: u32) -> Vec<u8> {
    let mut buf = vec![0u8; vmad::umad::size() + mad.len()];
    buf[64..].copy_from_slice(mad);
    vmad::umad::set_addr(&mut buf, lid, qpn, 0, vmad::types::GSI_QKEY).unwrap();
    buf
}

/// Receive into a fresh 64 + `cap` buffer: (agent, data length, buffer).
pub(crate) fn umad_recv(
    id: vmad::umad::PortId,
    cap: usize,
    timeout_ms: i32,
) -> vmad::Result<(vmad::umad::AgentId, usize, Vec<u8>)> {
    let mut buf = vec![0u8; 64 + cap];
    let mut len = cap;
    let agent = vmad::umad::recv(id, &mut buf, &mut len, timeout_ms)?;
    Ok((agent, len, buf))
}

/// A thread's result, waited for as an event: `what` fails the test loudly if it has
/// not come within `limit` (a hang guard, generous: never a timing goal).
pub(crate) fn join_within<T: Send + 'static>(
    h: std::thread::JoinHandle<T>,
    limit: Duration,
    what: &str,
) -> T {
    let give_up = Instant::now() + limit;
    let (tx, rx) = std::sync::mpsc::channel();
    // The joiner reports the join; waiting on its channel has a deadline, a join has not.
    std::thread::spawn(move || {
        let _ = tx.send(h.join());
    });
    match rx.recv_timeout(give_up.saturating_duration_since(Instant::now())) {
        Ok(Ok(v)) => v,
        Ok(Err(panic)) => std::panic::resume_unwind(panic),
        Err(_) => panic!("{what}: not done after {limit:?}"),
    }
}

/// Waits until the file at `path` contains `needle` (a log line a child process
/// writes), waking on each write to its directory rather than polling on a timer.
/// `check` runs before each look (e.g. that the writer is still alive); the bound
/// only keeps a broken run from hanging.
pub(crate) fn wait_for_text(
    path: &std::path::Path,
    needle: &str,
    patience: Duration,
    mut check: impl FnMut(),
) {
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify};
    use std::os::fd::AsFd;
    // The directory is watched (the file may not exist yet), before the first look,
    // so that no write between the look and the poll is missed.
    let inotify = Inotify::init(InitFlags::IN_NONBLOCK | InitFlags::IN_CLOEXEC).unwrap();
    let dir = path.parent().expect("a file in a directory");
    inotify
        .add_watch(dir, AddWatchFlags::IN_MODIFY | AddWatchFlags::IN_CREATE)
        .unwrap();
    let give_up = Instant::now() + patience;
    loop {
        check();
        if std::fs::read_to_string(path).is_ok_and(|t| t.contains(needle)) {
            return;
        }
        let left = give_up.saturating_duration_since(Instant::now());
        assert!(
            !left.is_zero(),
            "{needle:?} not in {} within {patience:?}",
            path.display()
        );
        let mut fds = [PollFd::new(inotify.as_fd(), PollFlags::POLLIN)];
        let ms =
            PollTimeout::try_from(left.as_millis().min(60_000) as i32).unwrap_or(PollTimeout::MAX);
        let _ = poll(&mut fds, ms);
        let _ = inotify.read_events();
    }
}
