//! Port counters under injected loss: retries and timeouts are counted exactly. The
//! fabric runs in virtual time: each request's 20 ms timeouts pass when the test
//! advances the clock.

use std::time::Duration;

use vmad::clock::VirtualClock;
use vmad::engine::{Event, SendRequest};
use vmad::port::{Port, PortConfig};
use vmad::subnet::{Fabric, FaultConfig};
use vmad::types::{MadAddr, GSI_QKEY};

fn get(tid: u32) -> [u8; 256] {
    let mut m = [0u8; 256];
    m[..4].copy_from_slice(&[1, 0x04, 1, 0x01]); // PerfMgt Get
    m[12..16].copy_from_slice(&tid.to_be_bytes());
    m[16..18].copy_from_slice(&0x0012u16.to_be_bytes()); // PortCounters
    m
}

/// Sends `n` Gets from a client on `ca0` to LID 2 over a link with `loss`; returns the
/// port, how many were answered and how many timed out.
fn run(name: &str, loss: f64, n: u32, retries: u32) -> (Port, u32, u32) {
    let (ca0, ca1) = (format!("{name}0"), format!("{name}1"));
    let clock = VirtualClock::new();
    let f = Fabric::builder()
        .clock(clock.clone())
        .ca(&ca0)
        .ca(&ca1)
        .link(&ca0, 1, &ca1, 1)
        .faults(
            &ca0,
            1,
            FaultConfig {
                loss,
                seed: 11,
                ..FaultConfig::default()
            },
        )
        .build_private()
        .unwrap();
    let port = Port::open(Box::new(f.open(&ca0, 1).unwrap()), PortConfig::default()).unwrap();
    // ca1's PMA answers every PortCounters Get in the fabric, whoever has the port open,
    // so only the injected loss decides the outcome.
    let agent = port.register(crate::util::client_spec(0x04, 1)).unwrap();
    let addr = MadAddr {
        lid: 2,
        qpn: 1,
        qkey: GSI_QKEY,
        ..MadAddr::default()
    };
    for tid in 0..n {
        let mad = get(tid);
        let req = SendRequest {
            addr,
            mad: &mad,
            timeout_ms: 20,
            retries,
        };
        port.send(agent, req).unwrap();
    }
    let (mut answered, mut timed_out) = (0, 0);
    // Every request ends within its attempts' timeouts: one advance per attempt, and
    // one for the answers still on their way.
    for _ in 0..=retries + 1 {
        clock.advance(Duration::from_millis(20));
        while let Ok(event) = port.recv(Some(Duration::ZERO)) {
            match event {
                Event::Recv { .. } => answered += 1,
                Event::SendTimedOut { .. } => timed_out += 1,
            }
        }
    }
    assert_eq!(answered + timed_out, n, "every request ends in time");
    (port, answered, timed_out)
}

#[test]
fn counters_total_loss_counts_every_retry_and_timeout() {
    let (port, answered, timed_out) = run("cnta", 1.0, 5, 3);
    assert_eq!((answered, timed_out), (0, 5));
    let s = port.stats();
    assert_eq!(s.sent, 5 * 4, "each request sent once and retried 3 times");
    assert_eq!(s.retries, 5 * 3);
    assert_eq!(s.timeouts, 5);
    assert_eq!(s.outstanding, 0);
}

#[test]
fn counters_partial_loss_add_up_per_request() {
    let (n, retries) = (200, 2);
    let (port, answered, timed_out) = run("cntb", 0.3, n, retries);
    assert_eq!(answered + timed_out, n, "every request ends exactly once");
    let s = port.stats();
    // Every send beyond each request's first is a retry; each timeout used all its attempts.
    assert_eq!(s.retries, s.sent - u64::from(n));
    assert_eq!(s.timeouts, u64::from(timed_out));
    assert!(s.retries >= s.timeouts * u64::from(retries));
    assert!(
        timed_out > 0 && answered > 0,
        "30% loss both answers and times out: {s:?}"
    );
    assert_eq!(s.outstanding, 0);
}

/// A clock given in the port's configuration is the one its timers run on, whatever
/// the fabric keeps: on a fabric in real time, a request to a LID nobody has times
/// out when that clock says so.
#[test]
fn the_port_configs_clock_runs_the_ports_timers() {
    let f = Fabric::builder()
        .ca("cntc0")
        .ca("cntc1")
        .link("cntc0", 1, "cntc1", 1)
        .build_private()
        .unwrap();
    let clock = VirtualClock::new();
    let config = PortConfig {
        clock: Some(std::sync::Arc::new(clock.clone())),
        ..PortConfig::default()
    };
    let port = Port::open(Box::new(f.open("cntc0", 1).unwrap()), config).unwrap();
    let agent = port.register(crate::util::client_spec(0x04, 1)).unwrap();
    let mad = get(1);
    let req = SendRequest {
        addr: MadAddr {
            lid: 9,
            qpn: 1,
            qkey: GSI_QKEY,
            ..MadAddr::default()
        },
        mad: &mad,
        timeout_ms: 3_600_000,
        retries: 0,
    };
    port.send(agent, req).unwrap();
    clock.advance(Duration::from_secs(3599));
    assert!(port.recv(Some(Duration::ZERO)).is_err(), "not an hour yet");
    clock.advance(Duration::from_secs(1));
    assert!(matches!(
        port.recv(Some(Duration::ZERO)),
        Ok(Event::SendTimedOut { .. })
    ));
}

#[test]
fn a_callers_receive_timeout_runs_on_the_ports_clock() {
    let f = Fabric::builder().ca("cntd0").build_private().unwrap();
    let clock = VirtualClock::new();
    let config = PortConfig {
        clock: Some(std::sync::Arc::new(clock.clone())),
        ..PortConfig::default()
    };
    let port =
        std::sync::Arc::new(Port::open(Box::new(f.open("cntd0", 1).unwrap()), config).unwrap());
    // An hour's receive timeout: it ends when the port's clock says so, not the wall's.
    let waiter = {
        let port = port.clone();
        std::thread::spawn(move || port.recv(Some(Duration::from_secs(3600))))
    };
    // The waiter may start late and count its hour from there: keep the clock moving
    // a second at a time until it is done. The port's clock needs an hour, however
    // slowly the waiter runs; had its timeout run on real time, it would still be
    // waiting when the generous guard below fails the test.
    let give_up = std::time::Instant::now() + 6 * crate::util::PATIENCE;
    let mut moved = 0u64;
    while !waiter.is_finished() {
        assert!(
            std::time::Instant::now() < give_up,
            "the receive did not time out on the port's clock ({moved} s moved)"
        );
        clock.advance(Duration::from_secs(1));
        moved += 1;
        std::thread::yield_now();
    }
    assert!(
        moved >= 3600,
        "timed out after {moved} s of the port's clock"
    );
    let got = waiter.join().unwrap();
    assert!(matches!(got, Err(vmad::Error::TimedOut)), "{got:?}");
}
