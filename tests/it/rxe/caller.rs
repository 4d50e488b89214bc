//! The caller drives the CQ (`src/transport/verbs/ready.rs`): a thread blocked in a
//! receive polls the port's ready descriptor and runs the turn itself, with the port
//! thread asleep; several threads and opens receive on one port, each message once;
//! a program polling the open's descriptor (`umad_get_fd`) sees its message.
//!
//! Waiting here is for conditions, never for time (as in `faults.rs`).

use std::collections::BTreeSet;
use std::os::fd::BorrowedFd;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nix::poll::{PollFd, PollFlags, PollTimeout};
use vmad::engine::Event;
use vmad::port::Port;

use super::super::kernel_peer::*;
use super::faults::thread_states;
use super::vmad_port;

/// A request from `client`'s agent to `to`, no answer expected.
fn post(
    client: &Port,
    agent: vmad::engine::AgentId,
    to: vmad::types::MadAddr,
    class: u8,
    tid: u64,
) {
    request(
        client,
        agent,
        to,
        &mad(class, 0x01, tid, ECHO, 0, false, &[]),
        0,
        0,
    );
}

/// The server's caller blocks in a receive while both it and the port thread are
/// asleep (state `S`: nobody spins); the request then reaches the caller, which ran
/// the turn that read it (the port thread stays parked: with the ready descriptor
/// it leaves the transport to a caller that polls it).
#[test]
#[ignore = "needs the rxe VM: run by scripts/rxe-test"]
fn rxe_caller_driven_receive_with_the_port_thread_parked() {
    let _g = serial();
    let (client, _, _) = vmad_port(&env("RXE0_DEV"));
    let (server, qpn, gid) = vmad_port(&env("RXE1_DEV"));
    let c = client.register(spec(0x09, false, &[])).unwrap();
    let _s = server.register(spec(0x09, false, &[0x01])).unwrap();
    let server = Arc::new(server);
    for tid in 0x40..0x44u64 {
        let waiter = {
            let server = server.clone();
            std::thread::Builder::new()
                .name("rxe-caller".into())
                .spawn(move || server.recv(Some(Duration::from_secs(60))))
                .unwrap()
        };
        let port_thread = format!("vmad-port {}", env("RXE1_DEV"));
        while !(thread_states(&port_thread) == ['S'] && thread_states("rxe-caller") == ['S']) {
            assert!(
                !waiter.is_finished(),
                "the receive ended before anything was sent"
            );
            std::thread::yield_now();
        }
        post(&client, c, dest(gid, qpn), 0x09, tid);
        match waiter.join().unwrap().expect("the request") {
            Event::Recv { mad, .. } => assert_eq!(tid_of(&mad) & 0xffff_ffff, tid),
            other => panic!("expected the request, got {other:?}"),
        }
    }
}

/// What the receivers of one open got: (class, TID).
type Got = Arc<Mutex<Vec<(u8, u64)>>>;

/// Two opens of one verbs port, two threads receiving on each: every request reaches
/// the open whose agent it is for, exactly once, and no receiver is left hanging.
#[test]
#[ignore = "needs the rxe VM: run by scripts/rxe-test"]
fn rxe_two_threads_and_two_opens_receive_on_one_verbs_port() {
    let _g = serial();
    let (client, _, _) = vmad_port(&env("RXE0_DEV"));
    let (server, qpn, gid) = vmad_port(&env("RXE1_DEV"));
    let other = server.open_again().unwrap();
    let c9 = client.register(spec(0x09, false, &[])).unwrap();
    let ca = client.register(spec(0x0a, false, &[])).unwrap();
    let _s9 = server.register(spec(0x09, false, &[0x01])).unwrap();
    let _sa = other.register(spec(0x0a, false, &[0x01])).unwrap();
    const N: u64 = 64;
    let opens = [(Arc::new(server), 0x09u8), (Arc::new(other), 0x0a)];
    let mut threads = Vec::new();
    let got: Vec<Got> = (0..2).map(|_| Arc::default()).collect();
    for (i, (port, _)) in opens.iter().enumerate() {
        for _ in 0..2 {
            let (port, got) = (port.clone(), got[i].clone());
            threads.push(std::thread::spawn(move || {
                // Ends when its open has all N (the other thread may take the last one),
                // or fails when nothing at all came for 30 s.
                while got.lock().unwrap().len() < N as usize {
                    match port.recv(Some(Duration::from_millis(200))) {
                        Ok(Event::Recv { mad, .. }) => got
                            .lock()
                            .unwrap()
                            .push((mad[1], tid_of(&mad) & 0xffff_ffff)),
                        Ok(other) => panic!("expected a request, got {other:?}"),
                        Err(vmad::Error::TimedOut) => {}
                        Err(e) => panic!("receive: {e}"),
                    }
                }
            }));
        }
    }
    let to = dest(gid, qpn);
    for k in 0..N {
        post(&client, c9, to, 0x09, 0x1000 + k);
        post(&client, ca, to, 0x0a, 0x2000 + k);
    }
    let (stop, stopped) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for t in threads {
            t.join().unwrap();
        }
        let _ = stop.send(());
    });
    stopped
        .recv_timeout(Duration::from_secs(120))
        .expect("every receiver got its open's requests");
    for (i, (_, class)) in opens.iter().enumerate() {
        let all = got[i].lock().unwrap().clone();
        let base = if *class == 0x09 { 0x1000 } else { 0x2000 };
        let unique: BTreeSet<_> = all.iter().copied().collect();
        assert_eq!(
            all.len(),
            N as usize,
            "open {i}: each request once: {all:x?}"
        );
        assert_eq!(
            unique,
            (0..N).map(|k| (*class, base + k)).collect::<BTreeSet<_>>(),
            "open {i} got exactly its own class"
        );
    }
}

/// A program that polls the open's descriptor (`Port::fd`, what `umad_get_fd` gives)
/// instead of blocking in a receive: the port thread reads the transport for it, and
/// the descriptor turns readable when the MAD is queued.
#[test]
#[ignore = "needs the rxe VM: run by scripts/rxe-test"]
fn rxe_a_poller_of_the_open_descriptor_sees_its_mad() {
    let _g = serial();
    let (client, _, _) = vmad_port(&env("RXE0_DEV"));
    let (server, qpn, gid) = vmad_port(&env("RXE1_DEV"));
    let c = client.register(spec(0x09, false, &[])).unwrap();
    let _s = server.register(spec(0x09, false, &[0x01])).unwrap();
    let fd = server.fd();
    for tid in 0x60..0x64u64 {
        // SAFETY: `fd` stays open as long as `server` is.
        let bfd = unsafe { BorrowedFd::borrow_raw(fd) };
        let mut p = [PollFd::new(bfd, PollFlags::POLLIN)];
        assert_eq!(
            nix::poll::poll(&mut p, PollTimeout::ZERO).unwrap(),
            0,
            "nothing queued yet"
        );
        post(&client, c, dest(gid, qpn), 0x09, tid);
        let n = nix::poll::poll(&mut p, PollTimeout::from(60_000u16)).unwrap();
        assert_eq!(n, 1, "the descriptor turned readable");
        match server.recv(Some(Duration::ZERO)).expect("queued") {
            Event::Recv { mad, .. } => assert_eq!(tid_of(&mad) & 0xffff_ffff, tid),
            other => panic!("expected the request, got {other:?}"),
        }
    }
}
