//! What real hardware does to the verbs transport, as far as rxe can show it:
//! the link going down and up under traffic, the device removed under a
//! blocked receive, a QP in the error state, the receive ring running dry,
//! the address-handle bound, and an idle port that must not burn a core.
//!
//! Waiting here is for conditions, never for time: each loop polls the
//! transport (whose `wait` sleeps in the kernel) until the condition holds,
//! with a generous limit that only a broken build reaches.

use std::process::{Child, Command};
use std::time::{Duration, Instant};

use vmad::engine::{Event, Transmit};
use vmad::port::{Port, PortConfig};
use vmad::transport::verbs::{VerbsConfig, VerbsTransport};
use vmad::transport::Transport;
use vmad::types::{MadAddr, Qp};

use super::super::kernel_peer::*;
use super::{kernel_qp1, vmad_port};

/// Drive `t` (receiving and dropping whatever comes) until `done` holds.
fn drive_until(t: &mut VerbsTransport, what: &str, mut done: impl FnMut(&VerbsTransport) -> bool) {
    let limit = Instant::now() + Duration::from_secs(30);
    while !done(t) {
        assert!(Instant::now() < limit, "{what}: not within 30 s");
        t.recv_burst(64, &mut |_, _| {}).expect("recv_burst");
        t.wait(Some(Duration::from_millis(100))).expect("wait");
    }
}

fn open(dev: &str, tune: impl FnOnce(&mut VerbsConfig)) -> VerbsTransport {
    let mut c = VerbsConfig {
        device: Some(dev.into()),
        ..Default::default()
    };
    tune(&mut c);
    VerbsTransport::open(c).expect("open the verbs transport")
}

/// Send one 256-byte MAD from `t` to `to`, tagged with `tag` in its TID.
fn send_raw(t: &mut VerbsTransport, to: MadAddr, tag: u64) {
    let m = mad(0x09, 0x01, tag, ECHO, 0, false, &[]);
    let sent = t
        .transmit(&mut |slot| {
            slot.copy_from_slice(&m[..256]);
            Some(Transmit {
                qp: Qp::Gsi,
                dest: to,
                len: 256,
                timeout_ms: 0,
            })
        })
        .expect("transmit");
    assert!(sent);
    // Posted at the next call that flushes: a receive burst does.
    t.recv_burst(0, &mut |_, _| {}).expect("flush");
}

/// The TIDs `t` receives until `n` have come (or 30 s pass: then the test fails).
fn receive_tids(t: &mut VerbsTransport, n: usize) -> Vec<u64> {
    let mut got = Vec::new();
    let limit = Instant::now() + Duration::from_secs(30);
    while got.len() < n {
        assert!(Instant::now() < limit, "got only {got:x?} of {n}");
        t.recv_burst(64, &mut |_, m| got.push(tid_of(m)))
            .expect("recv_burst");
        if got.len() < n {
            t.wait(Some(Duration::from_millis(100))).expect("wait");
        }
    }
    got
}

#[test]
#[ignore = "needs the rxe VM: run by scripts/rxe-test"]
fn rxe_link_down_and_up_during_traffic() {
    let _g = serial();
    let _agent = KernelAgent::start("RXE1_DEV", "RXE1_PORT");
    sh("echo 1 > /proc/sys/net/ipv6/conf/veth0/keep_addr_on_down");
    // A second transport on the same port, outside a Port, to watch its state.
    let mut watch = open(&env("RXE0_DEV"), |_| {});
    assert_eq!(watch.attrs().state, 4, "Active before");
    let (port, _, _) = vmad_port(&env("RXE0_DEV"));
    let a = port.register(spec(0x09, false, &[])).unwrap();
    const N: u64 = 16;
    for k in 0..N {
        request(
            &port,
            a,
            kernel_qp1(),
            &mad(0x09, 0x01, 0x900 + k, ECHO, 0, false, &[]),
            1000,
            1,
        );
    }
    sh("ip link set veth0 down");
    drive_until(&mut watch, "port down seen", |t| t.attrs().state != 4);
    assert!(watch.stats().events.port_err >= 1);
    // More requests while the link is down: they cannot be answered.
    const M: u64 = 8;
    for k in 0..M {
        request(
            &port,
            a,
            kernel_qp1(),
            &mad(0x09, 0x01, 0x980 + k, ECHO, 0, false, &[]),
            500,
            1,
        );
    }
    // Every request ends: answered (before the link went) or timed out.
    let (mut answered, mut timed_out) = (0, Vec::new());
    for _ in 0..N + M {
        match recv(&port, Duration::from_secs(30)) {
            Event::Recv { .. } => answered += 1,
            Event::SendTimedOut { header, .. } => timed_out.push(tid_of(&header) & 0xffff_ffff),
        }
    }
    eprintln!(
        "link down: {answered} answered, {} timed out",
        timed_out.len()
    );
    for k in 0..M {
        assert!(
            timed_out.contains(&(0x980 + k)),
            "request {k} sent while the link was down ended without ETIMEDOUT: {timed_out:x?}"
        );
    }
    // The port itself shows it too: its transport re-read the attributes on the event.
    port_state_until(&port, "the port shows the link down", |s| s != 4);
    sh("ip link set veth0 up");
    restore_routes();
    drive_until(&mut watch, "port up seen", |t| t.attrs().state == 4);
    assert!(watch.stats().events.port_active >= 1);
    assert!(watch.stats().port_refreshes >= 2);
    port_state_until(&port, "the port shows the link up", |s| s == 4);
    // Traffic resumes on the same port, same QP.
    request(
        &port,
        a,
        kernel_qp1(),
        &mad(0x09, 0x01, 0x9ff, ECHO, 0, false, &[]),
        1000,
        5,
    );
    let (_, resp) = recv_mad(&port, Duration::from_secs(30));
    assert_eq!(tid_of(&resp) & 0xffff_ffff, 0x9ff);
}

/// Drive `port` (polls of 50 ms, each a turn that reads the async events) until its
/// attributes' state satisfies `ok`, for at most 30 s.
fn port_state_until(port: &vmad::port::Port, what: &str, ok: impl Fn(u8) -> bool) {
    let give_up = std::time::Instant::now() + Duration::from_secs(30);
    while !ok(port.attrs().state) {
        assert!(std::time::Instant::now() < give_up, "{what}: never");
        let _ = port.poll(Some(Duration::from_millis(50)));
    }
}

/// The rdma tool deleting a device; it blocks until every user closed it.
struct Deleting(Child);

impl Drop for Deleting {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
#[ignore = "needs the rxe VM: run by scripts/rxe-test"]
fn rxe_device_removed_under_a_blocked_receive_gives_eio() {
    let _g = serial();
    // A device of its own (rxe0/rxe1 serve the other tests), on a new veth pair.
    sh(
        "ip link add veth8 type veth peer name veth9 && ip link set veth8 up && \
        ip link set veth9 up && ip addr add 2001:db8:9::1/64 dev veth8 nodad && \
        rdma link add rxe9 type rxe netdev veth8",
    );
    let limit = Instant::now() + Duration::from_secs(30);
    // The GID comes from the address asynchronously: open once it is there.
    let t = loop {
        match VerbsTransport::open(VerbsConfig {
            device: Some("rxe9".into()),
            ..Default::default()
        }) {
            Ok(t) => break t,
            Err(e) => {
                assert!(Instant::now() < limit, "rxe9 unusable: {e}");
                std::thread::yield_now();
            }
        }
    };
    let port = Port::open(Box::new(t), PortConfig::default()).unwrap();
    let (done, result) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let got = port.recv(None);
        // Closing the port closes the device, so that the removal can finish.
        drop(port);
        let _ = done.send(got);
    });
    let mut deleting = Deleting(
        Command::new("rdma")
            .args(["link", "delete", "rxe9"])
            .spawn()
            .expect("rdma"),
    );
    let e = result
        .recv_timeout(Duration::from_secs(60))
        .expect("the receive is still blocked a minute after the device went")
        .expect_err("a removed device cannot receive");
    assert_eq!(e.errno(), 5, "EIO, got {e}");
    let status = deleting.0.wait().expect("rdma link delete");
    assert!(status.success(), "rdma link delete: {status}");
    assert!(!std::path::Path::new("/sys/class/infiniband/rxe9").exists());
    let _ = Command::new("ip").args(["link", "del", "veth8"]).status();
}

#[test]
#[ignore = "needs the rxe VM: run by scripts/rxe-test"]
fn rxe_a_qp_in_the_error_state_is_reset_and_receives_again() {
    let _g = serial();
    let mut tx = open(&env("RXE0_DEV"), |_| {});
    let mut rx = open(&env("RXE1_DEV"), |_| {});
    let to = dest(rx.source_gid().0, rx.qpn());
    send_raw(&mut tx, to, 0xa1);
    assert_eq!(receive_tids(&mut rx, 1), vec![0xa1]);
    rx.inject_qp_error().expect("QP to ERR");
    drive_until(&mut rx, "recovery", |t| t.stats().qp_recoveries >= 1);
    assert!(rx.stats().recv_flushed >= 1, "{:?}", rx.stats());
    send_raw(&mut tx, to, 0xa2);
    assert_eq!(receive_tids(&mut rx, 1), vec![0xa2]);
}

#[test]
#[ignore = "needs the rxe VM: run by scripts/rxe-test"]
fn rxe_receive_ring_exhaustion_is_counted() {
    let _g = serial();
    let mut tx = open(&env("RXE0_DEV"), |_| {});
    let mut rx = open(&env("RXE1_DEV"), |c| {
        c.recv_slots = 2;
        c.repost_batch = 2;
    });
    let to = dest(rx.source_gid().0, rx.qpn());
    assert_eq!(rx.stats().recv_ring_empty, 0);
    for k in 0..2 {
        send_raw(&mut tx, to, 0xb0 + k);
    }
    let mut got = receive_tids(&mut rx, 2);
    got.sort_unstable();
    assert_eq!(got, vec![0xb0, 0xb1]);
    assert_eq!(rx.stats().recv_ring_empty, 1, "{:?}", rx.stats());
}

#[test]
#[ignore = "needs the rxe VM: run by scripts/rxe-test"]
fn rxe_address_handles_stay_within_the_bound() {
    let _g = serial();
    let mut tx = open(&env("RXE0_DEV"), |c| c.max_address_handles = 2);
    let mut rx = open(&env("RXE1_DEV"), |_| {});
    // Five destinations for the cache (the hop limit is part of an AH), one peer.
    for k in 0..10u64 {
        let mut to = dest(rx.source_gid().0, rx.qpn());
        to.grh.as_mut().unwrap().hop_limit = 60 + (k % 5) as u8;
        send_raw(&mut tx, to, 0xc0 + k);
        assert_eq!(receive_tids(&mut rx, 1), vec![0xc0 + k]);
    }
    let s = tx.stats();
    assert_eq!(s.ah_created, 10, "each send needed a new AH: {s:?}");
    assert_eq!(s.ah_evicted, 8, "two live at most: {s:?}");
    // A burst: AHs are evicted while sends that use them are queued or in
    // flight; each must still reach its destination (an AH destroyed too
    // early would fail or misroute the send).
    for k in 0..20u64 {
        let mut to = dest(rx.source_gid().0, rx.qpn());
        to.grh.as_mut().unwrap().hop_limit = 40 + (k % 5) as u8;
        let m = mad(0x09, 0x01, 0xe0 + k, ECHO, 0, false, &[]);
        let queued = tx
            .transmit(&mut |slot| {
                slot.copy_from_slice(&m[..256]);
                Some(Transmit {
                    qp: Qp::Gsi,
                    dest: to,
                    len: 256,
                    timeout_ms: 0,
                })
            })
            .expect("transmit");
        assert!(queued);
    }
    tx.recv_burst(0, &mut |_, _| {}).expect("flush");
    let mut got = receive_tids(&mut rx, 20);
    got.sort_unstable();
    assert_eq!(got, (0xe0..0xe0 + 20).collect::<Vec<u64>>());
    let s = tx.stats();
    assert_eq!(s.ah_evicted, 8 + 20, "{s:?}");
    assert_eq!(s.send_errors, 0, "{s:?}");
}

/// The scheduler state (`R`, `S`, `D`, …) of the calling process's threads whose
/// name starts with `prefix`.
pub(super) fn thread_states(prefix: &str) -> Vec<char> {
    let mut states = Vec::new();
    for task in std::fs::read_dir("/proc/self/task").unwrap() {
        let dir = task.unwrap().path();
        let comm = std::fs::read_to_string(dir.join("comm")).unwrap_or_default();
        if comm.starts_with(prefix) {
            let stat = std::fs::read_to_string(dir.join("stat")).unwrap_or_default();
            // The state is the first field after the ")" that ends the name.
            if let Some(i) = stat.rfind(')') {
                states.extend(stat[i + 1..].trim_start().chars().next());
            }
        }
    }
    states
}

/// An idle port with a caller blocked in a receive: both threads sleep (the port
/// thread and the caller are seen in state `S` at once). A thread that busy-polls,
/// yielding between polls, stays runnable (`R`): it would never be seen asleep, and
/// the receive's timeout would end the test first. How much CPU an idle port uses
/// is for a benchmark to measure, not asserted here.
#[test]
#[ignore = "needs the rxe VM: run by scripts/rxe-test"]
fn rxe_an_idle_busy_polling_port_sleeps() {
    let _g = serial();
    let dev = env("RXE0_DEV");
    let (port, _, _) = vmad_port(&dev);
    let name = format!("vmad-port {dev}");
    let port = std::sync::Arc::new(port);
    let caller = {
        let port = port.clone();
        std::thread::Builder::new()
            .name("idle-caller".into())
            .spawn(move || port.recv(Some(Duration::from_secs(5))).map(|_| ()))
            .unwrap()
    };
    let mut asleep = false;
    while !caller.is_finished() {
        let (p, c) = (thread_states(&name), thread_states("idle-caller"));
        if p == ['S'] && c == ['S'] {
            asleep = true;
            break;
        }
        std::thread::yield_now();
    }
    assert!(
        asleep,
        "the port thread and the blocked caller were never seen asleep at once"
    );
    assert!(
        matches!(caller.join().unwrap(), Err(vmad::Error::TimedOut)),
        "nothing to receive: the blocked receive times out"
    );
}

#[test]
#[ignore = "needs the rxe VM: run by scripts/rxe-test"]
fn rxe_port_rate_is_the_kernels() {
    let dev = env("RXE0_DEV");
    let t = open(&dev, |_| {});
    let a = t.attrs();
    let sysfs = std::fs::read_to_string(format!(
        "/sys/class/infiniband/{dev}/ports/{}/rate",
        a.port_num
    ))
    .unwrap();
    // "10 Gb/sec (1X QDR)": the kernel's rate from the same width and speed.
    let gbps: f64 = sysfs.split_whitespace().next().unwrap().parse().unwrap();
    assert!(a.rate > 0, "{sysfs}");
    assert_eq!(a.rate, gbps as u32, "sysfs says {sysfs}");
}

#[test]
#[ignore = "needs the rxe VM: run by scripts/rxe-test"]
fn rxe_sends_it_cannot_address_time_out_and_the_port_lives_on() {
    let _g = serial();
    let _agent = KernelAgent::start("RXE1_DEV", "RXE1_PORT");
    let (port, _, _) = vmad_port(&env("RXE0_DEV"));
    let a = port.register(spec(0x09, false, &[])).unwrap();
    let no_gid = MadAddr {
        grh: None,
        ..kernel_qp1()
    };
    let other_pkey = MadAddr {
        pkey_index: 1,
        ..kernel_qp1()
    };
    for (tid, to) in [(0xd1, no_gid), (0xd2, other_pkey)] {
        request(
            &port,
            a,
            to,
            &mad(0x09, 0x01, tid, ECHO, 0, false, &[]),
            300,
            0,
        );
        match recv(&port, Duration::from_secs(20)) {
            Event::SendTimedOut { header, .. } => assert_eq!(tid_of(&header) & 0xffff_ffff, tid),
            other => panic!("expected a timeout for {tid:#x}, got {other:?}"),
        }
    }
    request(
        &port,
        a,
        kernel_qp1(),
        &mad(0x09, 0x01, 0xd3, ECHO, 0, false, &[]),
        2000,
        2,
    );
    let (_, resp) = recv_mad(&port, Duration::from_secs(20));
    assert_eq!(tid_of(&resp) & 0xffff_ffff, 0xd3);
}
