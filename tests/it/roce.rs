//! vmad's roce transport as QP1 of its own RoCE v2 address, against the
//! Linux kernel's MAD layer on rdma_rxe.
//!
//! These run only inside the rxe VM in RoCE mode (`scripts/rxe-roce-test`, via
//! `run-in-rxe-vm --roce`), in network namespace ns1 where vmad owns UDP
//! 4791 on 2001:db8::2 and the kernel's rxe0 is 2001:db8::1. Nothing is
//! faked: the far side is the kernel's QP1, its MAD layer and its RMPP
//! (`tests/rxe/umad_agent.c`, `tests/rxe/roce_client.c`, system libibumad).
//!
//! `cargo test --test it -- --ignored --test-threads=1 roce_`

use std::io::{BufRead, BufReader};
use std::net::{IpAddr, Ipv6Addr, SocketAddr, UdpSocket};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use vmad::engine::{AgentId, Event, SendRequest};
use vmad::port::{Port, PortConfig};
use vmad::transport::roce::codec::{self, Flow, Header};
use vmad::transport::roce::{self, RoceConfig, RoceStats, RoceTransport};
use vmad::transport::Transport;
use vmad::types::{MadAddr, GSI_QKEY};

use super::kernel_peer::*;

/// vmad's RoCE port on ROCE_ADDR, and its counters.
fn vmad_port() -> (Port, std::sync::Arc<RoceStats>) {
    let addr: IpAddr = env("ROCE_ADDR").parse().expect("ROCE_ADDR");
    let t = RoceTransport::open(RoceConfig::new(addr)).expect("bind UDP 4791 in the netns");
    assert!(!t.caps().smi && t.caps().gsi);
    let stats = t.stats();
    (
        Port::open(Box::new(t), PortConfig::default()).expect("port"),
        stats,
    )
}

fn kernel_gid() -> [u8; 16] {
    gid("RXE0_GID")
}

fn kernel_qp1() -> MadAddr {
    dest(kernel_gid(), 1)
}

/// A request to the kernel's QP1 (rxe0).
fn to_kernel(port: &Port, agent: AgentId, m: &[u8], timeout_ms: u32, retries: u32) {
    request(port, agent, kernel_qp1(), m, timeout_ms, retries);
}

fn start_kernel_agent() -> KernelAgent {
    KernelAgent::start("RXE0_DEV", "RXE0_PORT")
}

// ---------------------------------------------------------------- vmad -> kernel

#[test]
#[ignore = "needs the rxe VM in RoCE mode: run by scripts/rxe-roce-test"]
fn roce_vmad_requests_answered_by_kernel_qp1() {
    let _g = serial();
    let _agent = start_kernel_agent();
    let (port, stats) = vmad_port();
    let a = port.register(spec(0x09, false, &[])).unwrap();
    for k in 0..20u64 {
        let data: Vec<u8> = (0..232).map(|i| (i + k as usize) as u8).collect();
        to_kernel(
            &port,
            a,
            &mad(0x09, 0x01, 0x100 + k, ECHO, 0, false, &data),
            2000,
            2,
        );
        let (_, resp) = recv_mad(&port, Duration::from_secs(10));
        assert_eq!(resp[3], 0x81);
        assert_eq!(tid_of(&resp) & 0xffff_ffff, 0x100 + k);
        assert_eq!(&resp[24..32], b"RESPONSE");
        assert_eq!(&resp[32..256], &data[8..]);
    }
    assert_eq!(
        RoceStats::get(&stats.bad_icrc),
        0,
        "the kernel's ICRCs verify"
    );
    assert!(RoceStats::get(&stats.received) >= 20);
}

#[test]
#[ignore = "needs the rxe VM in RoCE mode: run by scripts/rxe-roce-test"]
fn roce_silent_kernel_agent_times_out_after_all_attempts() {
    let _g = serial();
    let _agent = start_kernel_agent();
    let (port, stats) = vmad_port();
    let a = port.register(spec(0x09, false, &[])).unwrap();
    let sent0 = RoceStats::get(&stats.sent);
    // How far apart the attempts are is the engine's, tested in virtual time
    // (tests/it/counters.rs); here, that all three go out.
    to_kernel(
        &port,
        a,
        &mad(0x09, 0x01, 0x52, SILENT, 0, false, &[]),
        300,
        2,
    );
    match port.recv(Some(Duration::from_secs(20))).expect("an event") {
        Event::SendTimedOut { agent, header, .. } => {
            assert_eq!(agent, a);
            assert_eq!(tid_of(&header) & 0xffff_ffff, 0x52);
        }
        other => panic!("expected ETIMEDOUT, got {other:?}"),
    }
    assert_eq!(
        RoceStats::get(&stats.sent) - sent0,
        3,
        "first attempt + 2 retries"
    );
}

#[test]
#[ignore = "needs the rxe VM in RoCE mode: run by scripts/rxe-roce-test"]
fn roce_kernel_rmpp_responses_reassembled_by_vmad() {
    let _g = serial();
    let _agent = start_kernel_agent();
    let (port, _) = vmad_port();
    let a = port.register(spec(0x30, true, &[])).unwrap();
    for (k, size) in [4096usize, 64 << 10, 1 << 20].into_iter().enumerate() {
        let t0 = Instant::now();
        let tid = 0x3000 + k as u64;
        to_kernel(
            &port,
            a,
            &mad(0x30, 0x01, tid, ECHO, size as u32, false, &[]),
            60_000,
            2,
        );
        let (_, resp) = recv_mad(&port, Duration::from_secs(120));
        assert_eq!(tid_of(&resp) & 0xffff_ffff, tid);
        assert_eq!(resp.len(), VENDOR_HDR + size);
        let bad = off_pattern_at(&resp[VENDOR_HDR..]);
        assert_eq!(bad, None, "byte-exact reassembly of {size} bytes");
        eprintln!(
            "roce: kernel RMPP -> vmad: {size} bytes in {:?}",
            t0.elapsed()
        );
    }
    assert_eq!(port.rmpp_aborts(), 0);
}

#[test]
#[ignore = "needs the rxe VM in RoCE mode: run by scripts/rxe-roce-test"]
fn roce_vmad_rmpp_requests_reassembled_by_the_kernel() {
    let _g = serial();
    let _agent = start_kernel_agent();
    let (port, _) = vmad_port();
    let a = port.register(spec(0x30, true, &[])).unwrap();
    for (k, size) in [4096usize, 64 << 10, 1 << 20].into_iter().enumerate() {
        let t0 = Instant::now();
        let tid = 0x4000 + k as u64;
        let data: Vec<u8> = (0..size).map(pattern).collect();
        to_kernel(
            &port,
            a,
            &mad(0x30, 0x02, tid, ECHO, size as u32, true, &data),
            60_000,
            RMPP_RETRIES,
        );
        let (_, resp) = recv_mad(&port, Duration::from_secs(120));
        assert_eq!(tid_of(&resp) & 0xffff_ffff, tid);
        let got = u32::from_be_bytes(resp[VENDOR_HDR..VENDOR_HDR + 4].try_into().unwrap());
        assert_eq!(
            got as usize, size,
            "the kernel reassembled all {size} bytes"
        );
        assert_eq!(
            resp[VENDOR_HDR + 4],
            1,
            "the kernel agent found the pattern intact"
        );
        eprintln!(
            "roce: vmad RMPP -> kernel: {size} bytes in {:?}",
            t0.elapsed()
        );
    }
    assert_eq!(port.rmpp_aborts(), 0);
}

// ---------------------------------------------------------------- kernel -> vmad

/// Run `roce_client <test> <arg>` on rxe0 against vmad's GID while serving
/// its requests on `port` (0x09 Get: echo; 0x30 Get: RMPP pattern); its stdout.
fn client_against_vmad(port: &Port, agents: (AgentId, AgentId), test: &str, arg: &str) -> String {
    let mut child = Command::new(fixture("roce_client"))
        .args([
            &env("RXE0_DEV"),
            &env("RXE0_PORT"),
            &env("ROCE_GID"),
            &env("RXE0_GID_INDEX"),
            test,
            arg,
        ])
        .stdout(Stdio::piped())
        .spawn()
        .expect("roce_client (built by scripts/rxe-roce-test)");
    let deadline = Instant::now() + Duration::from_secs(300);
    let status = loop {
        if let Some(st) = child.try_wait().expect("wait") {
            break st;
        }
        assert!(Instant::now() < deadline, "roce_client {test} {arg} hangs");
        let Ok(Event::Recv {
            agent,
            addr,
            mad: req,
        }) = port.recv(Some(Duration::from_millis(100)))
        else {
            continue;
        };
        let resp = if agent == agents.0 {
            let mut r = req.clone();
            r[3] = 0x81;
            r[24..32].copy_from_slice(b"RESPONSE");
            r
        } else {
            assert_eq!(agent, agents.1);
            let n = u32::from_be_bytes(req[20..24].try_into().unwrap()) as usize;
            let data: Vec<u8> = (0..n).map(pattern).collect();
            let mut r = mad(0x30, 0x81, tid_of(&req), ECHO, n as u32, true, &data);
            r[16..18].copy_from_slice(&req[16..18]);
            r
        };
        match port.send(
            agent,
            SendRequest {
                addr,
                mad: &resp,
                timeout_ms: 0,
                retries: 0,
            },
        ) {
            // A retry of a request whose (RMPP) answer is still going out.
            Ok(()) | Err(vmad::Error::DuplicateRequest(_)) => {}
            Err(e) => panic!("respond: {e}"),
        }
    };
    let mut out = String::new();
    std::io::Read::read_to_string(&mut child.stdout.take().unwrap(), &mut out).unwrap();
    assert!(status.success(), "roce_client {test} {arg} failed: {out}");
    eprintln!("roce: {}", out.trim());
    out
}

#[test]
#[ignore = "needs the rxe VM in RoCE mode: run by scripts/rxe-roce-test"]
fn roce_kernel_client_answered_by_vmad_agent() {
    let _g = serial();
    let (port, stats) = vmad_port();
    let echo = port.register(spec(0x09, false, &[0x01])).unwrap();
    let rmpp = port.register(spec(0x30, true, &[0x01])).unwrap();
    let out = client_against_vmad(&port, (echo, rmpp), "echo", "20");
    assert!(out.starts_with("OK echo n=20"), "{out}");
    for size in ["4096", "65536", "1048576"] {
        let out = client_against_vmad(&port, (echo, rmpp), "rmpp", size);
        assert!(out.contains(&format!("bytes={size} byte-exact")), "{out}");
    }
    assert_eq!(port.rmpp_aborts(), 0);
    assert_eq!(RoceStats::get(&stats.bad_icrc), 0);
}

#[test]
#[ignore = "needs the rxe VM in RoCE mode: run by scripts/rxe-roce-test"]
fn roce_unsolicited_request_for_an_unclaimed_class_gets_unsupported_status() {
    let _g = serial();
    let (port, _) = vmad_port();
    let out = client_against_vmad(
        &port,
        (AgentId(u32::MAX), AgentId(u32::MAX)),
        "unclaimed",
        "1",
    );
    assert!(out.contains("status=0x000c"), "{out}");
    assert!(port.stats().auto_replies >= 1);
}

// ---------------------------------------------------------------- ICRC

/// An rxe0 hardware counter (per port or per device), if the kernel exposes it.
fn rxe0_counter(name: &str) -> Option<u64> {
    let dev = env("RXE0_DEV");
    let paths = [
        format!("/sys/class/infiniband/{dev}/ports/1/hw_counters/{name}"),
        format!("/sys/class/infiniband/{dev}/hw_counters/{name}"),
    ];
    // This process's /sys is ns1's (ip netns exec remounts it): read the
    // root namespace's through PID 1's mount namespace as well.
    let v = paths
        .iter()
        .find_map(|p| {
            std::fs::read_to_string(p).ok().or_else(|| {
                let out = Command::new("nsenter")
                    .args(["--mount=/proc/1/ns/mnt", "cat", p])
                    .stderr(Stdio::null())
                    .output()
                    .ok()?;
                out.status
                    .success()
                    .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
            })
        })
        .map(|t| t.trim().parse().unwrap());
    if v.is_none() {
        let ls = std::fs::read_dir(format!("/sys/class/infiniband/{dev}/ports/1")).map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.file_name())
                .collect::<Vec<_>>()
        });
        eprintln!("roce: no {name} counter for {dev} (port dir: {ls:?})");
    }
    v
}

#[test]
#[ignore = "needs the rxe VM in RoCE mode: run by scripts/rxe-roce-test"]
fn roce_corrupted_icrc_is_dropped_on_both_sides() {
    let _g = serial();
    let _agent = start_kernel_agent();
    let me: IpAddr = env("ROCE_ADDR").parse().unwrap();
    let kernel = SocketAddr::new(IpAddr::V6(Ipv6Addr::from(kernel_gid())), 4791);
    let h = Header {
        pkey: 0xffff,
        dest_qp: 1,
        psn: 0,
        qkey: GSI_QKEY,
        src_qp: 1,
    };
    // Kernel side: a forged Get from UDP 4791 of our address (where its answer goes).
    {
        // rxe sends IPv6 UDP checksum 0: a socket set up as the transport's.
        let sock = roce::udp_socket(me, 4791).expect("bind 4791");
        sock.set_nonblocking(false).unwrap();
        sock.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
        let flow = Flow {
            src: (me, 4791),
            dst: (kernel.ip(), 4791),
        };
        let get = mad(0x09, 0x01, 0xbad, ECHO, 0, false, &[7; 232]);
        let mut buf = [0u8; 400];
        for corrupt in [true, false] {
            let before = rxe0_counter("rcvd_pkts");
            let n = codec::emit(&mut buf, &h, &get, &flow);
            if corrupt {
                buf[n - 1] ^= 0x01;
            }
            sock.send_to(&buf[..n], kernel).unwrap();
            let mut rb = [0u8; 2048];
            let got = sock.recv_from(&mut rb);
            let counted = rxe0_counter("rcvd_pkts").zip(before).map(|(a, b)| a - b);
            eprintln!("roce: rxe0 rcvd_pkts delta {counted:?} (corrupt ICRC: {corrupt})");
            if corrupt {
                assert!(got.is_err(), "rxe answered a datagram with a bad ICRC");
                assert_ne!(
                    counted,
                    Some(1),
                    "rxe counted a bad-ICRC datagram as received"
                );
            } else {
                let (len, from) = got.expect("rxe answers the same Get with a good ICRC");
                assert_eq!(from.ip(), kernel.ip());
                let ud = codec::parse(
                    &rb[..len],
                    Some(&Flow {
                        src: (from.ip(), from.port()),
                        dst: (me, 4791),
                    }),
                )
                .expect("the kernel's answer verifies");
                assert_eq!(rb[ud.payload.start + 3], 0x81);
                assert!(
                    matches!(counted, None | Some(1..)),
                    "rxe did not count a good datagram"
                );
            }
        }
    }
    // vmad side: a forged Get to vmad's QP1 with a bad ICRC is dropped and counted.
    let (port, stats) = vmad_port();
    let sock = UdpSocket::bind(SocketAddr::new(me, 0)).unwrap();
    let to = SocketAddr::new(me, 4791);
    let flow = Flow {
        src: (me, sock.local_addr().unwrap().port()),
        dst: (me, 4791),
    };
    let get = mad(0x0b, 0x01, 0xbad, ECHO, 0, false, &[]);
    let mut buf = [0u8; 400];
    let n = codec::emit(&mut buf, &h, &get, &flow);
    buf[100] ^= 0x04;
    sock.send_to(&buf[..n], to).unwrap();
    // Until the port has read it: each poll blocks on the transport's descriptor and
    // runs a turn (nothing is queued for the application, so each ends ETIMEDOUT). A
    // minute only guards against a hang.
    let give_up = Instant::now() + Duration::from_secs(60);
    while RoceStats::get(&stats.bad_icrc) == 0 {
        assert!(
            Instant::now() < give_up,
            "the forged datagram never arrived"
        );
        let _ = port.poll(Some(Duration::from_millis(50)));
    }
    assert_eq!(RoceStats::get(&stats.bad_icrc), 1);
    assert_eq!(
        port.stats().auto_replies,
        0,
        "a bad datagram never reaches the engine"
    );
}

// ---------------------------------------------------------------- C ABI

/// The directory holding vmad's libibumad.so.3 (made by scripts/rxe-roce-test).
fn vmad_lib_dir() -> String {
    let dir = fixture("vmad-lib");
    assert!(
        std::path::Path::new(&format!("{dir}/libibumad.so.3")).exists(),
        "{dir}/libibumad.so.3 missing (scripts/rxe-roce-test builds it)"
    );
    dir
}

/// `cmd` with vmad's libibumad.so.3 selecting the roce transport on ROCE_ADDR.
fn with_vmad(cmd: &mut Command) -> &mut Command {
    cmd.env("LD_LIBRARY_PATH", vmad_lib_dir())
        .env("VMAD_TRANSPORT", "roce")
        .env("VMAD_ROCE_ADDR", env("ROCE_ADDR"))
}

fn run_ok(cmd: &mut Command, what: &str) -> String {
    let out = cmd.stderr(Stdio::inherit()).output().expect(what);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{what} failed: {text}");
    eprintln!("roce: {what}: {}", text.trim());
    text
}

#[test]
#[ignore = "needs the rxe VM in RoCE mode: run by scripts/rxe-roce-test"]
fn roce_capi_unmodified_libibumad_programs_are_qp1_of_vmadroce0() {
    let _g = serial();
    // As a client: roce_client linked to libibumad.so.3, loaded from vmad,
    // asks the kernel's QP1 (umad_agent on rxe0, system libibumad).
    {
        let _agent = start_kernel_agent();
        let kernel = env("RXE0_GID");
        for (test, arg) in [("echo", "10"), ("rmpp", "65536")] {
            let out = run_ok(
                with_vmad(Command::new(fixture("roce_client")).args([
                    "vmadroce0",
                    "1",
                    &kernel,
                    "0",
                    test,
                    arg,
                ])),
                &format!("vmad C ABI client {test} {arg}"),
            );
            assert!(out.starts_with("OK"), "{out}");
        }
    }
    // As an agent: umad_agent on vmadroce0 answers roce_client on rxe0.
    let mut agent =
        with_vmad(Command::new(fixture("umad_agent")).args(["serve", "vmadroce0", "1", "120"]))
            .stdout(Stdio::piped())
            .spawn()
            .expect("umad_agent");
    let mut line = String::new();
    BufReader::new(agent.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(
        line.trim(),
        "READY",
        "umad_agent on vmadroce0 did not come up"
    );
    let result = std::panic::catch_unwind(|| {
        for (test, arg) in [("echo", "10"), ("rmpp", "65536"), ("unclaimed", "1")] {
            let out = run_ok(
                Command::new(fixture("roce_client")).args([
                    &env("RXE0_DEV"),
                    &env("RXE0_PORT"),
                    &env("ROCE_GID"),
                    &env("RXE0_GID_INDEX"),
                    test,
                    arg,
                ]),
                &format!("kernel client {test} {arg} -> vmad C ABI agent"),
            );
            assert!(out.starts_with("OK"), "{out}");
        }
    });
    let _ = agent.kill();
    let _ = agent.wait();
    if let Err(p) = result {
        std::panic::resume_unwind(p);
    }
}

#[test]
#[ignore = "needs the rxe VM in RoCE mode: run by scripts/rxe-roce-test"]
fn roce_an_address_rxe_owns_is_refused_with_eaddrinuse() {
    let _g = serial();
    // In the root netns (PID 1's), rxe0 owns UDP 4791 on every address.
    let out = with_vmad(Command::new("nsenter").args([
        "--net=/proc/1/ns/net",
        &fixture("roce_client"),
        "vmadroce0",
        "1",
        &env("ROCE_GID"),
        "0",
        "echo",
        "1",
    ]))
    .env("VMAD_ROCE_ADDR", env("RXE0_GID"))
    .output()
    .expect("nsenter");
    let err = String::from_utf8_lossy(&out.stderr);
    eprintln!("roce: open on rxe0's own address: {}", err.trim());
    assert!(!out.status.success(), "vmad took rxe0's UDP 4791");
    assert!(
        err.contains("Address already in use"),
        "umad_open_port must fail with EADDRINUSE: {err}"
    );
    // The explanation travels in vmad::Error (unit test a_taken_port_is_address_in_use);
    // libibumad's API carries only the errno.
}

mod rmpp_faults;
