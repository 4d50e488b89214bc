//! The verbs transport's send slots under pressure: more MADs than slots in one burst,
//! and a QP reset with sends in flight.
//!
//! Waiting here is for conditions, never for time (as in `faults.rs`).

use std::time::{Duration, Instant};

use vmad::engine::Transmit;
use vmad::transport::verbs::{VerbsConfig, VerbsTransport};
use vmad::transport::Transport;
use vmad::types::{MadAddr, Qp};

use super::super::kernel_peer::*;

fn open(dev: &str, tune: impl FnOnce(&mut VerbsConfig)) -> VerbsTransport {
    let mut c = VerbsConfig {
        device: Some(dev.into()),
        ..Default::default()
    };
    tune(&mut c);
    VerbsTransport::open(c).expect("open the verbs transport")
}

/// Offer one MAD tagged `tag` to `t`: whether it took it (false: no free send slot).
fn offer(t: &mut VerbsTransport, to: MadAddr, tag: u64) -> bool {
    let m = mad(0x09, 0x01, tag, ECHO, 0, false, &[]);
    t.transmit(&mut |slot| {
        slot.copy_from_slice(&m[..256]);
        Some(Transmit {
            qp: Qp::Gsi,
            dest: to,
            len: 256,
            timeout_ms: 0,
        })
    })
    .expect("transmit")
}

/// Send `n` MADs through `t` as a port does: offer each; when no slot is free, wait
/// (a wait with no deadline, as a port thread's when no timer is due) and offer again.
/// Returns how many offers found no slot.
fn burst(t: &mut VerbsTransport, to: MadAddr, tags: std::ops::Range<u64>) -> u64 {
    let limit = Instant::now() + Duration::from_secs(120);
    let mut starved = 0;
    for tag in tags {
        while !offer(t, to, tag) {
            starved += 1;
            assert!(Instant::now() < limit, "sending {tag:#x}: not within 120 s");
            t.wait(None).expect("wait");
        }
    }
    // Post what is queued (a receive burst flushes).
    t.recv_burst(0, &mut |_, _| {}).expect("flush");
    starved
}

/// Running out of send slots used to wake nothing (the send CQ had no completion
/// channel): each time the slots ran out, the wait slept until the liveness check, a
/// second (this burst would have taken over two minutes). Now a send completion ends
/// it: 1,000 sends through 8 slots find the slots full many times, and no wait ends at
/// the liveness check. Both wait modes.
#[test]
#[ignore = "needs the rxe VM: run by scripts/rxe-test"]
fn rxe_a_burst_larger_than_the_send_slots_never_waits_for_the_liveness_check() {
    let _g = serial();
    let rx = open(&env("RXE1_DEV"), |_| {});
    let to = dest(rx.source_gid().0, rx.qpn());
    for channel in [false, true] {
        // rxe completes a send about as soon as it is posted, and a transmit reaps
        // before it gives up: posting only when the slots are full (a batch larger than
        // the ring) makes every ninth offer find none.
        let mut tx = open(&env("RXE0_DEV"), |c| {
            c.send_slots = 8;
            c.send_batch = 32;
            c.completion_channel = channel;
        });
        let starved = burst(&mut tx, to, 0..1000);
        let s = tx.stats();
        eprintln!("completion_channel {channel}: {starved} offers found no slot; {s:?}");
        assert!(starved >= 100, "the burst ran out of slots every 8 sends");
        assert_eq!(s.sent, 1000, "{s:?}");
        assert_eq!(s.send_errors, 0, "{s:?}");
        assert_eq!(
            s.starved_timeouts, 0,
            "a wait for a send slot ended only at the liveness check: {s:?}"
        );
    }
}

/// A QP reset with sends in flight: the flushed sends' completions may come out of the
/// CQ after the reset; none may free a slot a second time (two MADs would then share
/// one: a receiver would see a TID twice and another never). Every MAD sent after the
/// recovery arrives once.
#[test]
#[ignore = "needs the rxe VM: run by scripts/rxe-test"]
fn rxe_sends_in_flight_at_a_qp_reset_free_their_slots_once() {
    let _g = serial();
    let mut rx = open(&env("RXE1_DEV"), |_| {});
    let to = dest(rx.source_gid().0, rx.qpn());
    let mut tx = open(&env("RXE0_DEV"), |c| {
        c.send_slots = 4;
        c.send_batch = 4;
    });
    for round in 0..5u64 {
        for k in 0..4 {
            assert!(offer(&mut tx, to, 0xf00 + round * 16 + k));
        }
        tx.inject_qp_error().expect("QP to ERR");
        let limit = Instant::now() + Duration::from_secs(30);
        while tx.stats().qp_recoveries <= round {
            assert!(Instant::now() < limit, "recovery {round}: not within 30 s");
            tx.recv_burst(64, &mut |_, _| {}).expect("recv_burst");
            tx.wait(Some(Duration::from_millis(100))).expect("wait");
        }
        // Drain what the receiver got of the flushed round.
        let _ = rx.recv_burst(256, &mut |_, _| {});
    }
    // 64 MADs through 4 slots after the resets, each received exactly once.
    let starved = burst(&mut tx, to, 0x1000..0x1040);
    let mut got = Vec::new();
    let limit = Instant::now() + Duration::from_secs(30);
    while got.len() < 64 {
        assert!(
            Instant::now() < limit,
            "got only {} of 64: {got:x?}",
            got.len()
        );
        rx.recv_burst(64, &mut |_, m| {
            let t = tid_of(m) & 0xffff_ffff;
            if t >= 0x1000 {
                got.push(t);
            }
        })
        .expect("recv_burst");
        if got.len() < 64 {
            rx.wait(Some(Duration::from_millis(100))).expect("wait");
        }
    }
    got.sort_unstable();
    let s = tx.stats();
    eprintln!("after 5 resets: {starved} offers found no slot; {s:?}");
    assert_eq!(got, (0x1000..0x1040).collect::<Vec<u64>>(), "{s:?}");
}
