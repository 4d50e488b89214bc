//! Timeouts, retries and the deadline index.

use core::time::Duration;

use super::harness::*;
use crate::engine::{AgentId, Engine, EngineConfig, Event, SendRequest};
use crate::time::Instant;
use crate::types::{MadAddr, Qp};
use crate::wire::MAD_SIZE;

fn client() -> (Engine, AgentId) {
    let mut e = Engine::new(EngineConfig {
        rng_seed: Some(5),
        ..EngineConfig::default()
    });
    let a = e.register(gsi_agent(0x04, 0, &[])).unwrap();
    (e, a)
}

fn dest() -> MadAddr {
    MadAddr {
        qpn: 1,
        lid: 2,
        ..MadAddr::default()
    }
}

fn send(e: &mut Engine, now: Instant, a: AgentId, tid: u64, timeout_ms: u32, retries: u32) {
    let m = mad(0x04, 0x01, tid);
    e.send(
        now,
        a,
        SendRequest {
            addr: dest(),
            mad: &m,
            timeout_ms,
            retries,
        },
    )
    .unwrap();
}

fn drain(e: &mut Engine, now: Instant) -> usize {
    let mut buf = [0u8; MAD_SIZE];
    let mut n = 0;
    while e.poll_transmit(now, &mut buf).is_some() {
        n += 1;
    }
    n
}

#[test]
fn timeouts_report_original_header() {
    let (mut e, a) = client();
    let hi = u64::from(e.hi_tid(a).unwrap());
    send(&mut e, Instant::ZERO, a, 0xffff_ffff_0000_0042, 100, 0);
    let mut buf = [0u8; MAD_SIZE];
    e.poll_transmit(Instant::ZERO, &mut buf).unwrap();
    e.handle_timeout(Instant::from_millis(100));
    match e.poll_event() {
        Some(Event::SendTimedOut {
            agent,
            addr,
            header,
        }) => {
            assert_eq!(agent, a);
            assert_eq!(addr, dest());
            assert_eq!(header[..], buf[..24]);
            assert_eq!(tid_of(&header), hi << 32 | 0x42);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(e.stats().timeouts, 1);
}

#[test]
fn timeouts_after_every_retry() {
    let (mut e, a) = client();
    send(&mut e, Instant::ZERO, a, 1, 100, 2);
    let mut now = Instant::ZERO;
    let mut sends = drain(&mut e, now);
    while let Some(t) = e.poll_timeout() {
        now = t;
        e.handle_timeout(now);
        sends += drain(&mut e, now);
    }
    assert_eq!(sends, 3);
    assert_eq!(now, Instant::from_millis(300));
    assert!(matches!(e.poll_event(), Some(Event::SendTimedOut { .. })));
    assert_eq!((e.stats().retries, e.stats().timeouts), (2, 1));
}

#[test]
fn timers_start_at_send_completion() {
    let (mut e, a) = client();
    send(&mut e, Instant::ZERO, a, 1, 100, 0);
    assert_eq!(
        e.poll_timeout(),
        None,
        "no timer before the send is handed out"
    );
    drain(&mut e, Instant::from_millis(50));
    assert_eq!(e.poll_timeout(), Some(Instant::from_millis(150)));
}

#[test]
fn timers_early_handle_timeout_does_nothing() {
    let (mut e, a) = client();
    send(&mut e, Instant::ZERO, a, 1, 100, 0);
    drain(&mut e, Instant::ZERO);
    e.handle_timeout(Instant::from_millis(99));
    assert!(e.poll_event().is_none());
    assert_eq!(e.poll_timeout(), Some(Instant::from_millis(100)));
    assert_eq!(drain(&mut e, Instant::from_millis(99)), 0);
}

#[test]
fn timers_poll_timeout_is_earliest_deadline() {
    let (mut e, a) = client();
    for (i, ms) in [(1u64, 300u32), (2, 100), (3, 200)] {
        send(&mut e, Instant::ZERO, a, i, ms, 0);
    }
    drain(&mut e, Instant::ZERO);
    let mut order = Vec::new();
    while let Some(t) = e.poll_timeout() {
        e.handle_timeout(t);
        while let Some(Event::SendTimedOut { header, .. }) = e.poll_event() {
            order.push((t, tid_of(&header) & 0xffff_ffff));
        }
    }
    let ms = |x| Instant::from_millis(x);
    assert_eq!(order, vec![(ms(100), 2), (ms(200), 3), (ms(300), 1)]);
}

#[test]
fn timers_index_holds_one_entry_per_waiting_request() {
    let (mut e, a) = client();
    for i in 0..1000 {
        send(&mut e, Instant::ZERO, a, i, 1000, 0);
    }
    drain(&mut e, Instant::ZERO);
    assert_eq!(e.timers.len(), 1000);
    let hi = u64::from(e.hi_tid(a).unwrap());
    let meta = crate::engine::RecvMeta {
        qp: Qp::Gsi,
        src: dest(),
        local_qpn: None,
    };
    for i in 0..1000 {
        e.handle_datagram(
            Instant::from_millis(1),
            meta,
            &mad(0x04, 0x81, hi << 32 | i),
        );
    }
    assert_eq!(e.timers.len(), 0, "answered requests leave no timer behind");
    assert_eq!(e.stats().delivered, 1000);
    let _ = Duration::ZERO;
}

#[test]
fn timeouts_undelivered_attempts_end_at_once() {
    let (mut e, a) = client();
    // 10 minutes per attempt: only the transport's reports can end these attempts now.
    send(&mut e, Instant::ZERO, a, 7, 600_000, 1);
    let now = Instant::from_millis(1);
    let mut first = [0u8; MAD_SIZE];
    e.poll_transmit(now, &mut first).unwrap();

    // The first attempt is reported lost: the retry goes out at once, same TID.
    e.handle_undelivered(now, &first[..24]);
    let mut retry = [0u8; MAD_SIZE];
    e.poll_transmit(now, &mut retry).unwrap();
    assert_eq!(retry, first);
    assert_eq!(e.poll_event(), None);

    // The last attempt lost too: ETIMEDOUT now, with the original header.
    e.handle_undelivered(now, &retry[..24]);
    match e.poll_event() {
        Some(Event::SendTimedOut { header, .. }) => assert_eq!(header[..], first[..24]),
        other => panic!("{other:?}"),
    }
    assert_eq!(e.poll_timeout(), None, "no timer left behind");
    let s = e.stats();
    assert_eq!((s.undelivered, s.retries, s.timeouts), (2, 1, 1));

    // Reports that match nothing waiting are ignored and counted.
    e.handle_undelivered(now, &first[..24]);
    let mut response = first;
    response[3] |= 0x80;
    e.handle_undelivered(now, &response[..24]);
    e.handle_undelivered(now, &first[..10]);
    assert_eq!(e.stats().undelivered_ignored, 3);
    assert_eq!(e.poll_event(), None);
}

/// Behaviour 10: with 100,000 requests outstanding, what a MAD's send and
/// timeout touch is what it touches with 10: the deadline goes to the in-order
/// run (O(1), the B-tree stays empty), no table grows, no buffer is allocated.
/// The time per MAD is measured beside this in `benches/churn_ratio.rs`.
#[test]
fn timers_work_per_mad_does_not_grow_with_100k_outstanding() {
    let (mut e, a) = client();
    let n = 100_000u64;
    let step = |e: &mut Engine, t: u64| {
        let now = Instant::from_millis(t);
        send(e, now, a, t, n as u32, 0);
        assert_eq!(drain(e, now), 1);
        e.handle_timeout(now);
        while e.poll_event().is_some() {}
    };
    // n outstanding, then one step more: n + 1 live for a moment within a step.
    for t in 0..=n {
        step(&mut e, t);
    }
    let shape = |e: &Engine| {
        (
            e.txns.slots(),
            e.txns.index_bytes(),
            e.timers.shape(),
            e.mad_pool.len(),
        )
    };
    let before = shape(&e);
    assert_eq!(before.2 .1, 0, "in-order deadlines never reach the B-tree");
    for t in n + 1..n + 20_001 {
        step(&mut e, t);
    }
    let s = e.stats();
    assert_eq!((s.outstanding, s.timeouts), (n, 20_001));
    assert_eq!(
        shape(&e),
        before,
        "slots, index, deadlines and buffer pool all as they were"
    );
    assert!(before.0 <= n as usize + 1 && before.2 .0 <= n as usize + 1);
    assert!(before.1 <= 2 << 20, "index {} bytes", before.1);
    assert_eq!(e.txns.indexed() as u64, n);
}
