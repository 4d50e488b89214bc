//! SA-like GetTable round trips over RMPP, through the umad API, with and without loss.
//! The lossy runs are in virtual time: RMPP's resends happen as the test advances the
//! fabric's clock, never by waiting.

use std::thread;
use std::time::Duration;

use vmad::clock::{Clock, VirtualClock};
use vmad::error::errno::{EINVAL, ENOSPC};
use vmad::subnet::FaultConfig;
use vmad::umad::{self, PortConfig, PortId};

use crate::util::*;

const SA: u8 = 0x03;
const GET_TABLE: u8 = 0x12;
const RECORD: usize = 64;

fn table(records: usize) -> Vec<u8> {
    let mut t = vec![0u8; records * RECORD];
    for (i, r) in t.chunks_mut(RECORD).enumerate() {
        r[..4].copy_from_slice(&(i as u32).to_be_bytes());
        r[RECORD - 1] = (i % 251) as u8;
    }
    t
}

/// Serve GetTable with `records` records until the port closes.
fn serve(port: PortId, records: usize, retries: i32) -> thread::JoinHandle<()> {
    let agent = umad::register(port, SA, 2, 1, Some(&[1 << GET_TABLE, 0])).unwrap();
    thread::spawn(move || {
        let data = table(records);
        let mut req = vec![0u8; 64 + 256];
        loop {
            let mut len = 256;
            match umad::recv(port, &mut req, &mut len, -1) {
                Ok(_) => {}
                Err(e) if e.errno() == EINVAL => return,
                Err(e) => panic!("{e}"),
            }
            let mut resp = req[..64 + 56].to_vec();
            resp[64 + 3] = 0x92;
            resp[64 + 24..64 + 36].fill(0);
            resp[64 + 24] = 1;
            resp[64 + 26] = 1; // RMPP active
            resp[64 + 44..64 + 46].copy_from_slice(&((RECORD / 8) as u16).to_be_bytes());
            resp.extend_from_slice(&data);
            match umad::send(port, agent, &mut resp, 56 + data.len(), 0, retries) {
                Ok(()) => {}
                // The client resent its request (its timer ran out on a loaded machine)
                // while our first response is still in flight: as on the kernel, the
                // second response with the same TID is refused; the first one answers.
                Err(vmad::Error::DuplicateRequest(_)) => {}
                Err(e) => panic!("{e}"),
            }
        }
    })
}

/// One GetTable from `client`; returns the data after the 56-byte SA header.
fn get_table(port: PortId, agent: umad::AgentId, tid: u64) -> Vec<u8> {
    let mut mad = gmp_mad(SA, 2, GET_TABLE, tid, 0x11);
    mad[24] = 1;
    let mut req = umad_with(&mad, 2, 1);
    // A lost request is resent after 10 s; the RMPP response itself takes far less. (In
    // virtual time that is long enough for the server thread to answer, however slowly
    // the machine runs it, before the test's clock gets there.)
    umad::send(port, agent, &mut req, 256, 10_000, 5).unwrap();
    let mut buf = vec![0u8; 64 + 256];
    let mut len = 256;
    let err = umad::recv(port, &mut buf, &mut len, -1).unwrap_err();
    assert_eq!(err.errno(), ENOSPC);
    buf.resize(64 + len, 0);
    let mut len2 = len;
    umad::recv(port, &mut buf, &mut len2, -1).unwrap();
    assert_eq!(len2, len);
    assert_eq!(umad::status(&buf).unwrap(), 0);
    assert_eq!(be64(&buf[64..], 8) & 0xffff_ffff, tid);
    buf[64 + 56..64 + len].to_vec()
}

fn round_trips(p: &Pair, records: usize, runs: u64) {
    let server = serve(p.b, records, 10);
    let client = umad::register(p.a, SA, 2, 1, None).unwrap();
    for tid in 1..=runs {
        assert_eq!(
            get_table(p.a, client, tid),
            table(records),
            "GetTable {tid}"
        );
    }
    umad::close_port(p.b).unwrap();
    server.join().unwrap();
}

/// [`round_trips`] on a client thread while this one moves `clock` on in 1 ms steps.
fn round_trips_in_virtual_time(p: &Pair, clock: &VirtualClock, records: usize, runs: u64) {
    const GIVE_UP: Duration = Duration::from_secs(3600);
    thread::scope(|s| {
        let client = s.spawn(|| round_trips(p, records, runs));
        while !client.is_finished() {
            assert!(
                clock
                    .now()
                    .saturating_duration_since(vmad::time::Instant::ZERO)
                    < GIVE_UP,
                "{runs} GetTables not done in an hour of virtual time"
            );
            clock.advance(Duration::from_millis(1));
            thread::yield_now();
        }
    });
}

#[test]
fn gettable_1000_records_clean() {
    let p = pair("rgc");
    round_trips(&p, 1000, 3);
}

#[test]
fn gettable_under_loss() {
    let lossy = FaultConfig {
        loss: 0.03,
        seed: 5,
        ..FaultConfig::default()
    };
    let (p, clock) = pair_fast("rgl", lossy);
    round_trips_in_virtual_time(&p, &clock, 1000, 5);
    let stats = p.fabric.link_stats("rgl0", 1).unwrap();
    assert!(stats.lost > 0, "{stats:?}");
}

#[test]
fn gettable_under_reorder_and_dup() {
    let messy = FaultConfig {
        dup: 0.03,
        reorder: 0.03,
        hold: Duration::from_millis(1),
        seed: 6,
        ..FaultConfig::default()
    };
    let (p, clock) = pair_fast("rgr", messy);
    round_trips_in_virtual_time(&p, &clock, 600, 3);
    let stats = p.fabric.link_stats("rgr0", 1).unwrap();
    assert!(stats.duplicated > 0 && stats.reordered > 0, "{stats:?}");
}

/// A pair in virtual time whose ports resend an unacknowledged RMPP window after 20 ms,
/// not 2 s.
fn pair_fast(prefix: &str, faults: FaultConfig) -> (Pair, VirtualClock) {
    let mut config = PortConfig::default();
    config.engine.rmpp.ack_timeout = Duration::from_millis(20);
    pair_in_virtual_time(prefix, faults, config)
}
