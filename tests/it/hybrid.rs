//! The hybrid transport on two soft-RoCE ports: client GMPs over vmad's UD QP,
//! unsolicited requests through the kernel, against the real libibumad.
//!
//! These run only inside the rxe VM (`scripts/rxe-test`, which builds the
//! drop-in with the `hybrid` feature into `target/rxe/vmad-hybrid-lib`).
//!
//! `cargo test --features verbs --test it -- --ignored --test-threads=1 hybrid::`

use std::time::Duration;

use vmad::engine::{Event, SendRequest};
use vmad::pcap::{decode, LinkType, PcapConfig, Reader};
use vmad::port::{Port, PortConfig};
use vmad::transport::hybrid::{HybridTransport, PathCounters};
use vmad::transport::kernel::sysfs::Sysfs;
use vmad::transport::kernel::KernelTransport;
use vmad::types::MadAddr;

use super::kernel::{on, pingpong, pingpong_with, run, Agent, Lib};
use super::kernel_peer::*;

fn announced(out: &std::process::Output, what: &str) {
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(
        log.contains(what),
        "the selection is announced ({what:?}): {log}"
    );
}

#[test]
#[ignore = "needs the rxe VM: run by scripts/rxe-test"]
fn hybrid_pingpong_dropin_client_forced_to_classic_agent() {
    let out = pingpong(Lib::Classic, Lib::Hybrid);
    announced(&out, "vmad: transport hybrid");
}

#[test]
#[ignore = "needs the rxe VM: run by scripts/rxe-test"]
fn hybrid_pingpong_dropin_client_default_to_classic_agent() {
    let out = pingpong(Lib::Classic, Lib::HybridDefault);
    announced(
        &out,
        "vmad: transport hybrid (client GMPs over vmad's UD QP, the rest through the kernel): VMAD_TRANSPORT unset",
    );
}

/// Without CAP_NET_RAW the default asks the kernel (a probe QP with the GSI
/// Q_Key): the VM's 6.1 kernel has no `privileged-qkey` and refuses, so the
/// drop-in takes the kernel transport and says why. (Where `privileged-qkey on`
/// lets the probe through, the same path selects hybrid: not testable on 6.1.)
#[test]
#[ignore = "needs the rxe VM: run by scripts/rxe-test"]
fn hybrid_default_without_cap_net_raw_probes_the_qkey_and_takes_kernel() {
    let _g = serial();
    let classic = super::kernel::run(Lib::Classic, "ca_dump", &[]);
    let out = super::kernel::run(Lib::HybridDefaultWithoutNetRaw, "ca_dump", &[]);
    assert!(out.status.success());
    announced(
        &out,
        "vmad: transport kernel: VMAD_TRANSPORT unset and the host has CAs",
    );
    announced(
        &out,
        "not hybrid: not permitted: the kernel refused the controlled Q_Key",
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&classic.stdout),
        "the kernel transport lists the CAs as libibumad does"
    );
}

#[test]
#[ignore = "needs the rxe VM: run by scripts/rxe-test"]
fn hybrid_pingpong_classic_client_to_dropin_agent() {
    pingpong(Lib::Hybrid, Lib::Classic);
}

/// `VMAD_TRANSPORT=verbs`: the drop-in client over vmad's own UD QP only, against
/// a classic agent at rxe1's QP1 (the kernel's RMPP on that side), byte-exact.
#[test]
#[ignore = "needs the rxe VM: run by scripts/rxe-test"]
fn verbs_pingpong_dropin_client_to_classic_agent() {
    let out = pingpong(Lib::Classic, Lib::Verbs);
    announced(&out, "vmad: transport verbs (vmad's own UD QP per port");
    announced(&out, "open over vmad's UD QP, QPN ");
}

/// A drop-in agent on `VMAD_TRANSPORT=verbs` listens on its own UD QP, not QP1: a
/// classic client that addresses that QPN gets its answers (RMPP both ways through
/// the client's kernel), byte-exact.
#[test]
#[ignore = "needs the rxe VM: run by scripts/rxe-test"]
fn verbs_dropin_agent_answers_a_classic_client_at_its_qpn() {
    let _g = serial();
    let (_agent, qpn) = Agent::start_verbs();
    assert!(qpn > 1, "a UD QP of its own, not QP0/QP1: {qpn}");
    let mut cmd = on(Lib::Classic, "umad_agent");
    cmd.env("UMAD_AGENT_DQPN", qpn.to_string());
    pingpong_with(cmd, Lib::Classic, &format!("the verbs agent at QPN {qpn}"));
}

/// vmad's own UD QP cannot be QP0: a QP0 agent on `VMAD_TRANSPORT=verbs` is refused
/// (libibumad's -EPERM, errno EOPNOTSUPP) and the log says why; nor has it the SM
/// role: `umad_get_issm_path` fails EOPNOTSUPP.
#[test]
#[ignore = "needs the rxe VM: run by scripts/rxe-test"]
fn verbs_dropin_refuses_a_qp0_agent() {
    let _g = serial();
    let out = run(
        Lib::Verbs,
        "umad_agent",
        &["smi", &env("RXE0_DEV"), &env("RXE0_PORT")],
    );
    assert!(out.status.success());
    let eopnotsupp = vmad::error::errno::EOPNOTSUPP;
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        format!("smi_register=-1 errno={eopnotsupp}\nissm=-{eopnotsupp}"),
        "umad_register of class 0x81, then umad_get_issm_path, on verbs"
    );
    announced(&out, "no QP0");
}

/// A hybrid port on `dev`, capturing to `pcap` if given; its counters and its verbs
/// QP's number.
fn hybrid_port_capturing(
    dev: &str,
    pcap: Option<&std::path::Path>,
) -> (Port, std::sync::Arc<PathCounters>, u32) {
    let t = HybridTransport::open(&Sysfs::host(), &env(dev), 1).expect("open hybrid");
    let counters = t.counters();
    let qpn = t.verbs_qpn();
    let config = PortConfig {
        pcap: pcap.map(|p| {
            let mut c = PcapConfig::new(p);
            c.link = LinkType::Ethernet;
            c
        }),
        ..PortConfig::default()
    };
    let port = Port::open(Box::new(t), config).expect("port");
    (port, counters, qpn)
}

/// (destination QP, source QP, TID) of each packet in a capture.
fn captured_qps(path: &std::path::Path) -> Vec<(u32, u32, u64)> {
    let mut r = Reader::new(std::fs::File::open(path).expect("the capture")).expect("pcap");
    let mut out = Vec::new();
    while let Some(rec) = r.next_record().expect("a record") {
        let d = decode(LinkType::Ethernet, &rec.data).expect("decodes");
        out.push((d.dest_qp, d.src_qp, tid_of(d.mad)));
    }
    out
}

fn to(gid_var: &str) -> MadAddr {
    let mut d = dest(gid(gid_var), 1);
    if let Some(g) = d.grh.as_mut() {
        g.gid_index = env("RXE0_GID_INDEX").parse().expect("a GID index");
    }
    d
}

/// A request the port sends as a client leaves through verbs, and its answer
/// (from the kernel's QP1 on rxe1, a classic agent behind it) comes back to the
/// verbs QP with the engine's TID, high word included: nothing through the kernel.
#[test]
#[ignore = "needs the rxe VM: run by scripts/rxe-test"]
fn hybrid_client_request_goes_over_verbs() {
    let _g = serial();
    let _agent = Agent::start(Lib::Classic);
    let pcap = std::env::temp_dir().join(format!("vmad-hybrid-{}.pcap", std::process::id()));
    let (port, counters, qpn) = hybrid_port_capturing("RXE0_DEV", Some(&pcap));
    let a = port.register(spec(0x09, false, &[])).unwrap();
    let hi = u64::from(port.hi_tid(a).unwrap());
    request(
        &port,
        a,
        to("RXE1_GID"),
        &mad(0x09, 0x01, 0x71, SILENT_COUNT, 0, false, &[]),
        2000,
        2,
    );
    let (_, resp) = recv_mad(&port, Duration::from_secs(10));
    assert_eq!(tid_of(&resp), (hi << 32) | 0x71);
    // Counted after the write returns, so possibly after the answer came: read once the
    // port (its thread) is closed.
    drop(port);
    let (vs, vr, ks, kr) = counters.snapshot();
    eprintln!("client paths: verbs {vs} sent {vr} received, kernel {ks} sent {kr} received");
    assert!(vs >= 1 && vr >= 1, "request and answer over verbs");
    assert_eq!((ks, kr), (0, 0), "nothing through the kernel");
    // The capture shows the path too: the request left from the verbs QP (to QP1) and
    // its answer came to it.
    let tid = (hi << 32) | 0x71;
    let packets = captured_qps(&pcap);
    let _ = std::fs::remove_file(&pcap);
    eprintln!("captured (dest QP, source QP, TID): {packets:x?}");
    assert!(
        packets.contains(&(1, qpn, tid)),
        "the request from QP {qpn:#x}"
    );
    assert!(
        packets.contains(&(qpn, 1, tid)),
        "the answer to QP {qpn:#x}"
    );
}

/// A request that arrives unsolicited at rxe1's QP1 reaches the hybrid port's
/// agent through the kernel, and its response goes back the same way. The
/// idle port sleeps (the umad descriptor is watched beside the completion
/// channel: `src/transport/verbs/ready.rs` tests that it makes the port's
/// descriptor readable). How soon a request wakes it is timing, which this test
/// does not assert.
#[test]
#[ignore = "needs the rxe VM: run by scripts/rxe-test"]
fn hybrid_unsolicited_request_arrives_through_the_kernel() {
    let _g = serial();
    let pcap = std::env::temp_dir().join(format!("vmad-hybrid-srv-{}.pcap", std::process::id()));
    let (server, counters, qpn) = hybrid_port_capturing("RXE1_DEV", Some(&pcap));
    let agent = server.register(spec(0x09, false, &[0x01])).unwrap();
    let t = KernelTransport::open(&Sysfs::host(), &env("RXE0_DEV"), 1).expect("open rxe0");
    let client = Port::open(Box::new(t), PortConfig::default()).expect("port");
    let c = client.register(spec(0x09, false, &[])).unwrap();
    for tid in 0x72..0x75 {
        request(
            &client,
            c,
            to("RXE1_GID"),
            &mad(0x09, 0x01, tid, 0xff30, 0, false, &[]),
            5000,
            1,
        );
        let (from, req) = recv_mad(&server, Duration::from_secs(10));
        assert_eq!(tid_of(&req) & 0xffff_ffff, tid);
        let mut resp = req.clone();
        resp[3] |= 0x80;
        server
            .send(
                agent,
                SendRequest {
                    addr: from,
                    mad: &resp,
                    timeout_ms: 0,
                    retries: 0,
                },
            )
            .expect("respond");
        match client
            .recv(Some(Duration::from_secs(10)))
            .expect("the answer")
        {
            Event::Recv { mad, .. } => assert_eq!(tid_of(&mad) & 0xffff_ffff, tid),
            other => panic!("expected the response, got {other:?}"),
        }
    }
    // The server's port thread counts a send after its write returns, which can be
    // after the client already holds the answer: read the counters once the port is
    // closed (its thread joined), not before.
    drop(server);
    let (vs, vr, ks, kr) = counters.snapshot();
    eprintln!("server paths: verbs {vs} sent {vr} received, kernel {ks} sent {kr} received");
    assert!(
        kr >= 3 && ks >= 3,
        "requests in and responses out through the kernel"
    );
    assert_eq!((vs, vr), (0, 0), "nothing over verbs");
    // The capture says so too: each request and response between QP1s, none through
    // the verbs QP.
    let packets = captured_qps(&pcap);
    let _ = std::fs::remove_file(&pcap);
    eprintln!("captured (dest QP, source QP, TID): {packets:x?}");
    for tid in 0x72..0x75u64 {
        let n = packets
            .iter()
            .filter(|&&(d, s, t)| (d, s) == (1, 1) && t & 0xffff_ffff == tid)
            .count();
        assert_eq!(n, 2, "request and response {tid:#x}, QP1 to QP1");
    }
    assert!(
        packets.iter().all(|&(d, s, _)| d != qpn && s != qpn),
        "nothing through the verbs QP {qpn:#x}"
    );
}

/// A request the verbs QP cannot address (no GID on a RoCE port) is dropped there and
/// times out; it was counted as sent over verbs. Now nothing is counted on either path.
#[test]
#[ignore = "needs the rxe VM: run by scripts/rxe-test"]
fn hybrid_unroutable_request_is_not_counted_as_sent() {
    let _g = serial();
    let (port, counters, _) = hybrid_port_capturing("RXE0_DEV", None);
    let a = port.register(spec(0x09, false, &[])).unwrap();
    let no_gid = MadAddr {
        grh: None,
        ..to("RXE1_GID")
    };
    request(
        &port,
        a,
        no_gid,
        &mad(0x09, 0x01, 0x7e, SILENT_COUNT, 0, false, &[]),
        300,
        0,
    );
    match port.recv(Some(Duration::from_secs(20))).expect("an event") {
        Event::SendTimedOut { header, .. } => assert_eq!(tid_of(&header) & 0xffff_ffff, 0x7e),
        other => panic!("expected the request to time out, got {other:?}"),
    }
    drop(port);
    let (vs, vr, ks, kr) = counters.snapshot();
    assert_eq!(
        (vs, vr, ks, kr),
        (0, 0, 0, 0),
        "nothing was sent or received"
    );
}
