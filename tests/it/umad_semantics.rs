//! libibumad semantics through `vmad::umad`: one test per clause of umad_recv(3),
//! umad_poll(3), umad_status(3) and the registration/send rules.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use vmad::error::errno::*;
use vmad::umad::{self, AgentId, RegAttr};
use vmad::wire::umad::Packet;

use crate::util::*;

const PERF: u8 = 0x04;
const GET: u8 = 0x01;
const SEND: u8 = 0x03;
const GET_RESP: u8 = 0x81;

fn mask(methods: &[u8]) -> [u64; 2] {
    let mut m = [0u64; 2];
    for &x in methods {
        m[usize::from(x / 64)] |= 1 << (x % 64);
    }
    m
}

/// A client agent on `a` and a Get server on `b`.
fn client_server(p: &Pair) -> (AgentId, AgentId) {
    let client = umad::register(p.a, PERF, 1, 0, None).unwrap();
    let server = umad::register(p.b, PERF, 1, 0, Some(&mask(&[GET, SEND]))).unwrap();
    (client, server)
}

#[test]
fn recv_returns_the_agent_id_and_length() {
    let p = pair("urid");
    // A second agent first, so the server's id is not 0.
    let _other = umad::register(p.b, 0x05, 1, 0, None).unwrap();
    let (client, server) = client_server(&p);
    assert_ne!(server, AgentId(0));
    let mut req = umad_with(&gmp_mad(PERF, 1, GET, 0x1234, 0x10), 2, 1);
    umad::send(p.a, client, &mut req, 256, 1000, 0).unwrap();
    let (agent, len, buf) = umad_recv(p.b, 256, -1).unwrap();
    assert_eq!(agent, server);
    assert_eq!(len, 256);
    assert_eq!(umad::status(&buf).unwrap(), 0);
    let hdr = Packet::new_checked(&buf[..]).unwrap();
    assert_eq!(hdr.agent_id(), server.0);
    assert_eq!(hdr.length(), 64 + 256);
    let addr = umad::get_mad_addr(&buf).unwrap();
    assert_eq!((addr.lid, addr.qpn, addr.qkey), (1, 1, 0));
    // Reply; the client gets it on its own agent.
    let mut resp = buf.clone();
    resp[64 + 3] = GET_RESP;
    umad::send(p.b, server, &mut resp, 256, 0, 0).unwrap();
    let (agent, _, got) = umad_recv(p.a, 256, -1).unwrap();
    assert_eq!(agent, client);
    assert_eq!(got[64 + 3], GET_RESP);
    assert_eq!(be64(&got[64..], 8) & 0xffff_ffff, 0x1234);
}

#[test]
fn recv_length_under_256_is_einval() {
    let p = pair("urln");
    let mut buf = vec![0u8; 64 + 255];
    let mut len = 255;
    let err = umad::recv(p.a, &mut buf, &mut len, 0).unwrap_err();
    assert_eq!(err.errno(), EINVAL);
    // A buffer shorter than 64 + *length is refused too.
    let mut small = vec![0u8; 64 + 100];
    let mut len = 256;
    assert_eq!(
        umad::recv(p.a, &mut small, &mut len, 0)
            .unwrap_err()
            .errno(),
        EINVAL
    );
}

#[test]
fn recv_timeout_zero_is_nonblocking() {
    let p = pair("urnb");
    let err = umad_recv(p.a, 256, 0).unwrap_err();
    assert_eq!(err.errno(), EWOULDBLOCK);
}

#[test]
fn recv_positive_timeout_expires_with_etimedout() {
    let p = pair("urto");
    let err = umad_recv(p.a, 256, 20).unwrap_err();
    assert_eq!(err.errno(), ETIMEDOUT);
}

#[test]
fn recv_negative_timeout_blocks_until_a_message() {
    let p = pair("urbl");
    let (client, server) = client_server(&p);
    let b = p.b;
    let waiter = std::thread::spawn(move || umad_recv(b, 256, -1));
    let mut req = umad_with(&gmp_mad(PERF, 1, SEND, 7, 0x10), 2, 1);
    umad::send(p.a, client, &mut req, 256, 0, 0).unwrap();
    let (agent, len, buf) = waiter.join().unwrap().unwrap();
    assert_eq!((agent, len), (server, 256));
    assert_eq!(be64(&buf[64..], 8) & 0xffff_ffff, 7);
}

#[test]
fn send_writes_agent_timeout_retries_into_the_header() {
    let p = pair("ushd");
    let (client, _) = client_server(&p);
    let mut req = umad_with(&gmp_mad(PERF, 1, GET, 1, 0x10), 2, 1);
    umad::send(p.a, client, &mut req, 256, 1500, 3).unwrap();
    let h = Packet::new_checked(&req[..]).unwrap();
    assert_eq!(
        (h.agent_id(), h.timeout_ms(), h.retries()),
        (client.0, 1500, 3)
    );
    assert_eq!(h.length(), 0, "length is not written, as libibumad");
    let mut req = umad_with(&gmp_mad(PERF, 1, GET, 2, 0x10), 2, 1);
    umad::send(p.a, client, &mut req, 256, -1, 0).unwrap();
    assert_eq!(
        Packet::new_checked(&req[..]).unwrap().timeout_ms(),
        u32::MAX
    );
}

#[test]
fn status_etimedout_carries_the_original_tid() {
    let (p, clock) = pair_in_virtual_time("usto", Default::default(), Default::default());
    let client = umad::register(p.a, PERF, 1, 0, None).unwrap();
    let handle = umad::port(p.a).unwrap();
    let hi = u64::from(handle.hi_tid(client).unwrap());
    // LID 9 does not exist: every attempt is lost.
    let mad = gmp_mad(PERF, 1, GET, 0xabcd_0042, 0x10);
    let mut req = umad_with(&mad, 9, 1);
    umad::send(p.a, client, &mut req, 256, 10, 1).unwrap();
    // Two attempts of 10 ms: the report comes when the second has timed out, not before.
    clock.advance(Duration::from_micros(9_999));
    assert_eq!(umad::poll(p.a, 0).unwrap_err().errno(), ETIMEDOUT);
    clock.advance(Duration::from_micros(1));
    assert_eq!(
        handle.stats().retries,
        1,
        "the first attempt timed out: resent"
    );
    clock.advance(Duration::from_micros(9_999));
    assert_eq!(umad::poll(p.a, 0).unwrap_err().errno(), ETIMEDOUT);
    clock.advance(Duration::from_micros(1));
    let (agent, len, buf) = umad_recv(p.a, 256, 0).unwrap();
    assert_eq!(agent, client);
    assert_eq!(umad::status(&buf).unwrap(), ETIMEDOUT);
    assert_eq!(len, 24, "data length of a timeout report");
    assert_eq!(Packet::new_checked(&buf[..]).unwrap().length(), 64 + 24);
    let data = umad::get_mad(&buf).unwrap();
    assert_eq!(be64(data, 8), (hi << 32) | 0xabcd_0042, "TID as sent");
    assert_eq!(&data[..8], &mad[..8]);
    assert_eq!(&data[16..24], &mad[16..24]);
    assert_eq!(
        umad::get_mad_addr(&buf).unwrap().lid,
        9,
        "original destination"
    );
}

#[test]
fn poll_ready_timeout_and_bad_port() {
    let p = pair("upol");
    let (client, _) = client_server(&p);
    assert_eq!(umad::poll(p.b, 0).unwrap_err().errno(), ETIMEDOUT);
    assert_eq!(umad::poll(p.b, 10).unwrap_err().errno(), ETIMEDOUT);
    let mut req = umad_with(&gmp_mad(PERF, 1, SEND, 1, 0x10), 2, 1);
    umad::send(p.a, client, &mut req, 256, 0, 0).unwrap();
    umad::poll(p.b, -1).unwrap();
    // Polling does not consume.
    umad::poll(p.b, 0).unwrap();
    umad_recv(p.b, 256, 0).unwrap();
    assert_eq!(umad::poll(p.b, 0).unwrap_err().errno(), ETIMEDOUT);
    assert_eq!(umad::poll(umad::PortId(-7), 0).unwrap_err().errno(), EINVAL);
}

#[test]
fn several_threads_get_each_message_exactly_once() {
    const N: usize = 300;
    let p = pair("umtr");
    let (client, _) = client_server(&p);
    let seen = Arc::new(Mutex::new(Vec::new()));
    let count = Arc::new(AtomicUsize::new(0));
    let workers: Vec<_> = (0..4)
        .map(|_| {
            let (seen, count, b) = (seen.clone(), count.clone(), p.b);
            std::thread::spawn(move || {
                while count.load(Ordering::SeqCst) < N {
                    match umad_recv(b, 256, 50) {
                        Ok((_, _, buf)) => {
                            seen.lock().unwrap().push(be64(&buf[64..], 8) & 0xffff_ffff);
                            count.fetch_add(1, Ordering::SeqCst);
                        }
                        Err(e) => assert_eq!(e.errno(), ETIMEDOUT),
                    }
                }
            })
        })
        .collect();
    for tid in 0..N as u64 {
        let mut req = umad_with(&gmp_mad(PERF, 1, SEND, tid, 0x10), 2, 1);
        umad::send(p.a, client, &mut req, 256, 0, 0).unwrap();
    }
    for w in workers {
        w.join().unwrap();
    }
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), N);
    let unique: BTreeSet<u64> = seen.iter().copied().collect();
    assert_eq!(unique, (0..N as u64).collect());
    assert_eq!(umad_recv(p.b, 256, 0).unwrap_err().errno(), EWOULDBLOCK);
}

#[test]
fn get_fd_is_readable_exactly_while_a_message_is_queued() {
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    use std::os::fd::BorrowedFd;
    let p = pair("ufd");
    let (client, _) = client_server(&p);
    let fd = umad::get_fd(p.b).unwrap();
    let readable = move |timeout: PollTimeout| {
        // SAFETY: the port owns the descriptor and stays open until the end of the test.
        let bfd = unsafe { BorrowedFd::borrow_raw(fd) };
        let mut fds = [PollFd::new(bfd, PollFlags::POLLIN)];
        poll(&mut fds, timeout).unwrap() == 1
            && fds[0].revents().unwrap().contains(PollFlags::POLLIN)
    };
    assert!(!readable(PollTimeout::ZERO));
    let watcher = std::thread::spawn(move || readable(PollTimeout::NONE));
    let mut req = umad_with(&gmp_mad(PERF, 1, SEND, 5, 0x10), 2, 1);
    umad::send(p.a, client, &mut req, 256, 0, 0).unwrap();
    assert!(
        watcher.join().unwrap(),
        "poll(2) from another thread saw POLLIN"
    );
    assert!(readable(PollTimeout::ZERO), "still readable until received");
    umad_recv(p.b, 256, 0).unwrap();
    assert!(
        !readable(PollTimeout::ZERO),
        "not readable once the queue is empty"
    );
}

#[test]
fn register_rules() {
    let p = pair("ureg");
    // QP0 classes go to QP0; vendor range 2 via register_oui only in 0x30..=0x4f.
    umad::register(p.a, 0x81, 1, 0, None).unwrap();
    let err = umad::register_oui(p.a, 0x09, 0, [0, 0x14, 0x05], None).unwrap_err();
    assert_eq!(err.errno(), EINVAL);
    umad::register_oui(p.a, 0x31, 1, [0x00, 0x02, 0xc9], Some(&mask(&[GET]))).unwrap();
    // A second server for the same method is refused.
    let err = umad::register_oui(p.a, 0x31, 1, [0x00, 0x02, 0xc9], Some(&mask(&[GET])));
    assert_eq!(err.unwrap_err().errno(), EINVAL);
    // register2: unknown flags, missing or oversized OUI.
    let attr = RegAttr {
        mgmt_class: 0x32,
        mgmt_class_version: 1,
        oui: 0,
        ..RegAttr::default()
    };
    assert_eq!(umad::register2(p.a, &attr).unwrap_err().errno(), EINVAL);
    let big = RegAttr {
        oui: 0x0100_0000,
        ..attr
    };
    assert_eq!(umad::register2(p.a, &big).unwrap_err().errno(), EINVAL);
    let flags = RegAttr {
        oui: 0x1405,
        flags: 2,
        ..attr
    };
    assert_eq!(umad::register2(p.a, &flags).unwrap_err().errno(), EINVAL);
    let ok = RegAttr {
        oui: 0x1405,
        flags: umad::USER_RMPP,
        rmpp_version: 1,
        ..attr
    };
    let agent = umad::register2(p.a, &ok).unwrap();
    umad::unregister(p.a, agent).unwrap();
    assert_eq!(umad::unregister(p.a, agent).unwrap_err().errno(), EINVAL);
    // 32 agents per port, then ENOMEM.
    let mut n = 0;
    let last = loop {
        match umad::register(p.b, PERF, 1, 0, None) {
            Ok(_) => n += 1,
            Err(e) => break e,
        }
    };
    assert_eq!((n, last.errno()), (32, ENOMEM));
}

#[test]
fn closed_port_is_einval() {
    let p = pair("ucls");
    let id = p.a;
    umad::close_port(id).unwrap();
    assert_eq!(umad::close_port(id).unwrap_err().errno(), EINVAL);
    assert_eq!(umad_recv(id, 256, 0).unwrap_err().errno(), EINVAL);
    assert_eq!(
        umad::register(id, PERF, 1, 0, None).unwrap_err().errno(),
        EINVAL
    );
    // The CA port can be opened again.
    let again = umad::open_port("ucls0", 1).unwrap();
    umad::close_port(again).unwrap();
}

#[test]
fn close_wakes_a_blocked_receiver() {
    let p = pair("uclw");
    let handle = umad::port(p.a).unwrap();
    let waiter = std::thread::spawn(move || handle.recv(None).map(|_| ()));
    umad::close_port(p.a).unwrap();
    assert_eq!(waiter.join().unwrap().unwrap_err().errno(), EINVAL);
}

#[test]
fn unclaimed_get_is_answered_0x000c_by_the_peer() {
    let p = pair("uunc");
    let client = umad::register(p.a, PERF, 1, 0, None).unwrap();
    let mut req = umad_with(&gmp_mad(PERF, 1, GET, 3, 0x10), 2, 1);
    umad::send(p.a, client, &mut req, 256, 1000, 0).unwrap();
    let (_, _, buf) = umad_recv(p.a, 256, -1).unwrap();
    assert_eq!(umad::status(&buf).unwrap(), 0);
    assert_eq!(buf[64 + 3], GET_RESP);
    assert_eq!(be16(&buf[64..], 4), 0x000c);
}

#[test]
fn default_fabric_and_ca_queries() {
    let names = umad::get_cas_names();
    assert!(names.contains(&"vmadsim0".to_string()) && names.contains(&"vmadsim1".to_string()));
    let p0 = umad::get_port("vmadsim0", 1).unwrap();
    let p1 = umad::get_port("vmadsim1", 0).unwrap();
    assert_eq!((p0.lid, p1.lid, p1.port_num), (1, 2, 1));
    assert_eq!(p0.state, 4);
    let ca = umad::get_ca("vmadsim1").unwrap();
    assert_eq!((ca.node_type, ca.ports.len()), (1, 1));
    // ENODEV, and the message says what is missing.
    let e = umad::get_ca("no-such-ca").unwrap_err();
    assert_eq!(e.errno(), ENODEV);
    assert!(e.to_string().contains("\"no-such-ca\""), "{e}");
    let e = umad::get_port("vmadsim0", 2).unwrap_err();
    assert_eq!(e.errno(), ENODEV);
    assert!(e.to_string().contains("vmadsim0 has no port 2"), "{e}");
    let a = umad::open_port("vmadsim0", 1).unwrap();
    let b = umad::open_port("vmadsim1", 1).unwrap();
    let client = umad::register(a, PERF, 1, 0, None).unwrap();
    let server = umad::register(b, PERF, 1, 0, Some(&mask(&[SEND]))).unwrap();
    let mut req = umad_with(&gmp_mad(PERF, 1, SEND, 9, 0x10), 2, 1);
    umad::send(a, client, &mut req, 256, 0, 0).unwrap();
    assert_eq!(umad_recv(b, 256, -1).unwrap().0, server);
    umad::close_port(a).unwrap();
    umad::close_port(b).unwrap();
}

#[test]
fn buffer_helpers_match_libibumad() {
    let mut buf = vec![0u8; 64 + 256];
    assert_eq!(umad::size(), 64);
    umad::set_addr(&mut buf, 0x1234, 1, 5, 0x8001_0000).unwrap();
    assert_eq!(&buf[20..32], &[0, 0, 0, 1, 0x80, 1, 0, 0, 0x12, 0x34, 5, 0]);
    let grh = vmad::types::GrhAddr {
        gid: [0xfe; 16],
        gid_index: 9,
        hop_limit: 64,
        traffic_class: 2,
        flow_label: 0x12345,
    };
    umad::set_grh(&mut buf, Some(&grh)).unwrap();
    let a = umad::get_mad_addr(&buf).unwrap();
    let g = a.grh.unwrap();
    assert_eq!(
        (g.gid, g.hop_limit, g.traffic_class, g.flow_label),
        (grh.gid, 64, 2, 0x12345)
    );
    assert_eq!(g.gid_index, 0, "set_grh does not copy the GID index");
    umad::set_grh(&mut buf, None).unwrap();
    assert_eq!(buf[32], 0);
    umad::set_pkey(&mut buf, 3).unwrap();
    assert_eq!(umad::get_pkey(&buf).unwrap(), 3);
    assert_eq!(umad::get_mad(&buf).unwrap().len(), 256);
    assert_eq!(umad::status(&buf[..10]).unwrap_err().errno(), EINVAL);
}

/// An RMPP Set of `data_len` bytes from `a` to an SA agent serving Set on `b`.
fn rmpp_set(p: &Pair, data_len: usize) -> (AgentId, Vec<u8>) {
    let sender = umad::register(p.a, 0x03, 2, 1, None).unwrap();
    let server = umad::register(p.b, 0x03, 2, 1, Some(&mask(&[0x02]))).unwrap();
    let mut mad = vec![0u8; 56 + data_len];
    mad[..4].copy_from_slice(&[1, 0x03, 2, 0x02]);
    mad[8..16].copy_from_slice(&0x77u64.to_be_bytes());
    mad[16..18].copy_from_slice(&0x0011u16.to_be_bytes());
    mad[24] = 1; // RMPP version
    mad[26] = 0x01; // RMPPFlags.Active
    for (i, b) in mad[56..].iter_mut().enumerate() {
        *b = (i % 253) as u8;
    }
    let mut buf = umad_with(&mad, 2, 1);
    umad::send(p.a, sender, &mut buf, mad.len(), 0, 3).unwrap();
    (server, mad)
}

#[test]
fn recv_enospc_reports_the_needed_length_and_keeps_the_message() {
    let p = pair("uens");
    let (server, sent) = rmpp_set(&p, 1000);
    let mut buf = vec![0u8; 64 + 256];
    let mut len = 256;
    let err = umad::recv(p.b, &mut buf, &mut len, -1).unwrap_err();
    assert_eq!(err.errno(), ENOSPC);
    assert_eq!(len, 56 + 1000, "*length = the data length needed");
    // Still queued: a non-blocking retry with the same small buffer says the same.
    let mut len = 256;
    assert_eq!(
        umad::recv(p.b, &mut buf, &mut len, 0).unwrap_err().errno(),
        ENOSPC
    );
    assert_eq!(len, 1056);
    umad::poll(p.b, 0).unwrap();
    // A big enough buffer gets it, once.
    let (agent, len, got) = umad_recv(p.b, 1056, 0).unwrap();
    assert_eq!((agent, len), (server, 1056));
    assert_eq!(&got[64 + 56..64 + 1056], &sent[56..]);
    assert_eq!(umad_recv(p.b, 4096, 0).unwrap_err().errno(), EWOULDBLOCK);
}

#[test]
fn rmpp_message_arrives_coalesced() {
    let p = pair("ucoa");
    // 5 segments of 200 data bytes, the last one short.
    let (_, sent) = rmpp_set(&p, 900);
    let (_, len, got) = umad_recv(p.b, 4096, -1).unwrap();
    assert_eq!(len, 56 + 900, "one header, then all the data");
    let mad = umad::get_mad(&got).unwrap();
    assert_eq!(&mad[..8], &sent[..8], "the first segment's MAD header");
    assert_eq!(be64(mad, 8) & 0xffff_ffff, 0x77);
    assert_eq!(mad[24], 1, "its RMPP header");
    assert_eq!(
        mad[26] & 0x03,
        0x03,
        "Active | First: the header of the first segment"
    );
    assert_eq!(
        &mad[56..56 + 900],
        &sent[56..],
        "the data of every segment, in order"
    );
    assert_eq!(
        Packet::new_checked(&got[..]).unwrap().length() as usize,
        64 + 956
    );
}

#[test]
fn send_errors() {
    let p = pair("userr");
    let (client, _) = client_server(&p);
    let mut req = umad_with(&gmp_mad(PERF, 1, GET, 1, 0x10), 2, 1);
    // Shorter than 64 + length.
    let err = umad::send(p.a, client, &mut req, 300, 1000, 0).unwrap_err();
    assert_eq!(err.errno(), EINVAL);
    // More than 256 bytes on an agent without RMPP.
    let mut big = umad_with(&[0u8; 300], 2, 1);
    big[64..68].copy_from_slice(&[1, PERF, 1, GET]);
    assert_eq!(
        umad::send(p.a, client, &mut big, 300, 1000, 0)
            .unwrap_err()
            .errno(),
        EMSGSIZE
    );
    // An agent that is not registered.
    assert_eq!(
        umad::send(p.a, AgentId(31), &mut req, 256, 0, 0)
            .unwrap_err()
            .errno(),
        EINVAL
    );
    // A duplicate of an outstanding request (same TID and class).
    let mut again = req.clone();
    umad::send(p.a, client, &mut req, 256, 5000, 0).unwrap();
    assert_eq!(
        umad::send(p.a, client, &mut again, 256, 5000, 0)
            .unwrap_err()
            .errno(),
        EINVAL
    );
}

/// Several opens of one CA port, as libibmad 56 and later make (an SMI and a GSI
/// port of the same CA): each has its own agents, queue and descriptor.
#[test]
fn several_opens_of_one_port_each_get_their_own_agents_and_messages() {
    let p = pair("umo");
    let b1 = p.b;
    let b2 = umad::open_port("umo1", 1).expect("a second open of the port");
    assert_ne!(b1, b2);
    assert_ne!(umad::get_fd(b1).unwrap(), umad::get_fd(b2).unwrap());
    let client = umad::register(p.a, PERF, 1, 0, None).unwrap();
    let server = umad::register(b1, PERF, 1, 0, Some(&mask(&[SEND]))).unwrap();
    // A method served by the first open cannot be taken by the second (one MAD layer).
    assert_eq!(
        umad::register(b2, PERF, 1, 0, Some(&mask(&[SEND])))
            .unwrap_err()
            .errno(),
        EINVAL
    );
    let b2_client = umad::register(b2, 0x05, 1, 0, None).unwrap();
    // An agent is only usable through the open that registered it.
    let mut req = umad_with(&gmp_mad(0x05, 1, GET, 1, 0x10), 1, 1);
    assert_eq!(
        umad::send(b1, b2_client, &mut req, 256, 0, 0)
            .unwrap_err()
            .errno(),
        EINVAL
    );
    assert_eq!(umad::unregister(b1, b2_client).unwrap_err().errno(), EINVAL);

    // An unsolicited request goes to the open whose agent serves it, and only there.
    let mut req = umad_with(&gmp_mad(PERF, 1, SEND, 7, 0x10), 2, 1);
    umad::send(p.a, client, &mut req, 256, 0, 0).unwrap();
    assert_eq!(umad_recv(b1, 256, -1).unwrap().0, server);
    assert_eq!(umad_recv(b2, 256, 0).unwrap_err().errno(), EWOULDBLOCK);

    // The second open's request: its response and its timeout come back to it alone.
    let b2_perf = umad::register(b2, PERF, 1, 0, None).unwrap();
    let peer = umad::register(p.a, PERF, 1, 0, Some(&mask(&[GET]))).unwrap();
    let mut req = umad_with(&gmp_mad(PERF, 1, GET, 8, 0x10), 1, 1);
    umad::send(b2, b2_perf, &mut req, 256, 2000, 0).unwrap();
    let (agent, _, got) = umad_recv(p.a, 256, -1).unwrap();
    assert_eq!(agent, peer);
    let mut resp = got.clone();
    resp[64 + 3] = GET_RESP;
    umad::send(p.a, peer, &mut resp, 256, 0, 0).unwrap();
    assert_eq!(umad_recv(b2, 256, -1).unwrap().0, b2_perf);
    assert_eq!(umad::poll(b1, 0).unwrap_err().errno(), ETIMEDOUT);

    // Closing one open leaves the other working; its agents are gone with it.
    umad::close_port(b1).unwrap();
    let server2 = umad::register(b2, PERF, 1, 0, Some(&mask(&[SEND])))
        .expect("the method is free once its open closed");
    let mut req = umad_with(&gmp_mad(PERF, 1, SEND, 9, 0x10), 2, 1);
    umad::send(p.a, client, &mut req, 256, 0, 0).unwrap();
    assert_eq!(umad_recv(b2, 256, -1).unwrap().0, server2);
    umad::close_port(b2).unwrap();
    // The last close released the port: it opens afresh.
    let again = umad::open_port("umo1", 1).unwrap();
    umad::close_port(again).unwrap();
}

/// Two ports (like two processes) by default stamp different TID high words, as the
/// kernel's global hi_tid allocator guarantees; with a seed asked for, they repeat.
#[test]
fn ports_draw_different_tid_high_words_unless_seeded() {
    let first_hi_tid = |p: &Pair| {
        let a = umad::register(p.a, PERF, 1, 0, None).unwrap();
        let b = umad::register(p.b, PERF, 1, 0, None).unwrap();
        let hi = |id, agent: AgentId| umad::port(id).unwrap().hi_tid(agent).unwrap();
        (hi(p.a, a), hi(p.b, b))
    };
    let (a, b) = first_hi_tid(&pair("utida"));
    assert_ne!(a, b, "two default ports share a TID high word");
    let seeded = umad::PortConfig {
        engine: vmad::engine::EngineConfig {
            rng_seed: Some(7),
            ..Default::default()
        },
        ..Default::default()
    };
    let p = pair_config("utidb", Default::default(), seeded);
    let (a, b) = first_hi_tid(&p);
    assert_eq!(a, b, "the same seed gives the same TID high words");
}

/// A `Umad` handle over a registry of its own: it sees only that registry's CAs (no
/// default fabric), the process-wide instance does not see them, and a request and its
/// response cross between its ports.
#[test]
fn a_umad_handle_opens_the_cas_of_its_own_registry() {
    use vmad::engine::{AgentSpec, Event, SendRequest};
    use vmad::subnet::Fabric;
    use vmad::types::Qp;
    use vmad::umad::{Registry, Umad};

    let empty = Umad::new(Arc::new(Registry::new()));
    assert!(empty.get_cas_names().is_empty());
    assert_eq!(empty.open_port("", 0).unwrap_err().errno(), ENODEV);

    let registry = Arc::new(Registry::new());
    let _fabric = Fabric::builder()
        .ca("uhnd0")
        .ca("uhnd1")
        .link("uhnd0", 1, "uhnd1", 1)
        .build_in(&registry)
        .unwrap();
    let own = Umad::new(registry);
    assert_eq!(own.get_cas_names(), ["uhnd0", "uhnd1"]);
    assert_eq!(umad::get_ca("uhnd0").unwrap_err().errno(), ENODEV);
    assert_eq!(own.get_ca("").unwrap().name, "uhnd0");

    let (a_id, a) = own.open("uhnd0", 1).unwrap();
    let (b_id, b) = own.open("uhnd1", 0).unwrap();
    let spec = |method_mask| AgentSpec {
        qp: Qp::Gsi,
        mgmt_class: PERF.into(),
        class_version: 1,
        rmpp_version: 0,
        method_mask,
        oui: 0,
        user_rmpp: false,
    };
    let client = a.register(spec([0, 0])).unwrap();
    let server = b.register(spec(mask(&[GET]))).unwrap();
    let dest = gsi(b.attrs().lid);
    let req = gmp_mad(PERF, 1, GET, 0x77, 0x10);
    a.send(
        client,
        SendRequest {
            addr: dest,
            mad: &req,
            timeout_ms: 1000,
            retries: 0,
        },
    )
    .unwrap();
    let Event::Recv { agent, addr, mad } = b.recv(None).unwrap() else {
        panic!("the server got no request");
    };
    assert_eq!(agent, server);
    let mut resp = mad.clone();
    resp[3] = GET_RESP;
    b.send(
        server,
        SendRequest {
            addr,
            mad: &resp,
            timeout_ms: 0,
            retries: 0,
        },
    )
    .unwrap();
    let Event::Recv { agent, mad, .. } = a.recv(None).unwrap() else {
        panic!("the client got no response");
    };
    assert_eq!((agent, mad[3]), (client, GET_RESP));

    // The handle's ids are its own.
    assert!(own.port(a_id).is_ok());
    own.close_port(a_id).unwrap();
    own.close_port(b_id).unwrap();
    assert_eq!(own.close_port(a_id).unwrap_err().errno(), EINVAL);
}

/// Wait until `n` copies of requests have reached the server's engine, delivered or
/// dropped as duplicates (nothing else is sent to it in these tests); its counters then.
fn copies_reached(server: vmad::umad::PortId, n: u64) -> vmad::engine::EngineStats {
    let handle = umad::port(server).unwrap();
    loop {
        let s = handle.stats();
        if s.delivered + s.dropped_duplicates >= n {
            return s;
        }
        std::thread::yield_now();
    }
}

/// A request the responder read and left unanswered (OpenSM's SA reads and ignores
/// the queries that come during its first sweep) is not a reason to drop the
/// requester's retry: only a copy that comes while the first still waits unread in
/// the queue is a duplicate. Before, every retry within 10 s was dropped, so a client
/// that asked an SA too early never got an answer.
#[test]
fn a_retry_of_a_request_read_and_left_unanswered_is_delivered() {
    let (p, clock) = pair_in_virtual_time("urtr", Default::default(), Default::default());
    let (client, server) = client_server(&p);
    let mad = gmp_mad(PERF, 1, GET, 0x5151, 0x10);
    let mut req = umad_with(&mad, 2, 1);
    // Three attempts of 10 ms.
    umad::send(p.a, client, &mut req, 256, 10, 2).unwrap();
    // The first copy, read; no answer.
    let (agent, _, first) = umad_recv(p.b, 256, -1).unwrap();
    assert_eq!(agent, server);
    let tid = be64(umad::get_mad(&first).unwrap(), 8);
    // The first retry: delivered, and this time answered.
    clock.advance(Duration::from_millis(10));
    let s = copies_reached(p.b, 2);
    assert_eq!(
        (s.delivered, s.dropped_duplicates),
        (2, 0),
        "the retry of a read request is delivered"
    );
    let (agent, _, retry) = umad_recv(p.b, 256, 0).unwrap();
    assert_eq!(agent, server);
    assert_eq!(be64(umad::get_mad(&retry).unwrap(), 8), tid);
    let mut resp = retry.clone();
    resp[64 + 3] = GET_RESP;
    umad::send(p.b, server, &mut resp, 256, 0, 0).unwrap();
    let (agent, _, answer) = umad_recv(p.a, 256, -1).unwrap();
    assert_eq!(agent, client);
    assert_eq!(
        umad::status(&answer).unwrap(),
        0,
        "the client has its answer"
    );
    assert_eq!(be64(umad::get_mad(&answer).unwrap(), 8), tid);
}

/// The other side of the same rule: copies that come while the first is still queued,
/// unread, are dropped (a busy responder would otherwise find the query twice), and
/// once it is read the next retry is delivered.
#[test]
fn retries_of_a_request_still_queued_unread_are_dropped() {
    let (p, clock) = pair_in_virtual_time("urtq", Default::default(), Default::default());
    let (client, server) = client_server(&p);
    let mut req = umad_with(&gmp_mad(PERF, 1, GET, 0x5252, 0x10), 2, 1);
    // Four attempts of 10 ms; nobody reads until two retries have come.
    umad::send(p.a, client, &mut req, 256, 10, 3).unwrap();
    copies_reached(p.b, 1);
    for n in 2..=3 {
        clock.advance(Duration::from_millis(10));
        copies_reached(p.b, n);
    }
    let s = copies_reached(p.b, 3);
    assert_eq!(
        (s.delivered, s.dropped_duplicates),
        (1, 2),
        "two retries while unread"
    );
    let (agent, _, _) = umad_recv(p.b, 256, 0).unwrap();
    assert_eq!(agent, server);
    assert_eq!(
        umad::poll(p.b, 0).unwrap_err().errno(),
        ETIMEDOUT,
        "one copy queued, not three"
    );
    // Read now: the last retry is delivered.
    clock.advance(Duration::from_millis(10));
    let s = copies_reached(p.b, 4);
    assert_eq!((s.delivered, s.dropped_duplicates), (2, 2));
    let _ = client;
}
