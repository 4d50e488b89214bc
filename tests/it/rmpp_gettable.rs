//! SA-like GetTable round trips over RMPP, through the umad API, with and without loss.
//! The lossy runs are in virtual time: RMPP's resends happen as the test advances the
//! fabric's clock, never by waiting.

use std::thread;
use std::time::Duration;

use vmad::clock::{Clock, VirtualClock};
use vmad::error::errno::{EINVAL, ENOSPC, EWOULDBLOCK};
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

/// The RMPP GetTableResp to `req` (a umad buffer), carrying `data`.
fn response(req: &[u8], data: &[u8]) -> Vec<u8> {
    let mut resp = req[..64 + 56].to_vec();
    resp[64 + 3] = 0x92;
    resp[64 + 24..64 + 36].fill(0);
    resp[64 + 24] = 1;
    resp[64 + 26] = 1; // RMPP active
    resp[64 + 44..64 + 46].copy_from_slice(&((RECORD / 8) as u16).to_be_bytes());
    resp.extend_from_slice(data);
    resp
}

/// Send the response to `req` from `agent` on `port`.
fn answer(port: PortId, agent: umad::AgentId, req: &[u8], data: &[u8], retries: i32) {
    let mut resp = response(req, data);
    match umad::send(port, agent, &mut resp, 56 + data.len(), 0, retries) {
        Ok(()) => {}
        // The client resent its request (its timer ran out) while our first response is
        // still in flight: as on the kernel, the second response with the same TID is
        // refused; the first one answers.
        Err(vmad::Error::DuplicateRequest(_)) => {}
        Err(e) => panic!("{e}"),
    }
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
            answer(port, agent, &req, &data, retries);
        }
    })
}

/// Answer every GetTable queued on `port` now, without waiting; how many there were.
fn answer_get_tables(port: PortId, agent: umad::AgentId, data: &[u8], retries: i32) -> usize {
    let mut req = vec![0u8; 64 + 256];
    let mut n = 0;
    loop {
        let mut len = 256;
        match umad::recv(port, &mut req, &mut len, 0) {
            Ok(_) => answer(port, agent, &req, data, retries),
            Err(e) if e.errno() == EWOULDBLOCK => return n,
            Err(e) => panic!("{e}"),
        }
        n += 1;
    }
}

/// Send one GetTable from `agent` on `port`.
fn send_get_table(port: PortId, agent: umad::AgentId, tid: u64) {
    let mut mad = gmp_mad(SA, 2, GET_TABLE, tid, 0x11);
    mad[24] = 1;
    let mut req = umad_with(&mad, 2, 1);
    // A lost request is resent after 10 s; the RMPP response itself takes far less.
    umad::send(port, agent, &mut req, 256, 10_000, 5).unwrap();
}

/// Receive the response to GetTable `tid` on `port` (`timeout_ms` as `umad_recv`'s;
/// `None` when 0 and nothing is queued); the data after the 56-byte SA header.
fn take_table(port: PortId, tid: u64, timeout_ms: i32) -> Option<Vec<u8>> {
    let mut buf = vec![0u8; 64 + 256];
    let mut len = 256;
    let err = umad::recv(port, &mut buf, &mut len, timeout_ms).unwrap_err();
    if timeout_ms == 0 && err.errno() == EWOULDBLOCK {
        return None;
    }
    assert_eq!(err.errno(), ENOSPC);
    buf.resize(64 + len, 0);
    let mut len2 = len;
    // Still queued: ENOSPC left it at the head.
    umad::recv(port, &mut buf, &mut len2, 0).unwrap();
    assert_eq!(len2, len);
    assert_eq!(umad::status(&buf).unwrap(), 0);
    assert_eq!(be64(&buf[64..], 8) & 0xffff_ffff, tid);
    Some(buf[64 + 56..64 + len].to_vec())
}

/// The response to GetTable `tid` on `port`, if one is queued now.
fn try_take_table(port: PortId, tid: u64) -> Option<Vec<u8>> {
    take_table(port, tid, 0)
}

/// One GetTable from `client`; returns the data after the 56-byte SA header.
fn get_table(port: PortId, agent: umad::AgentId, tid: u64) -> Vec<u8> {
    send_get_table(port, agent, tid);
    take_table(port, tid, -1).expect("a blocking receive returns a message")
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

/// [`round_trips`] in virtual time, on this one thread: the server answers and the
/// client reads whatever the ports have for them, and only when neither has anything
/// does the clock move on (1 ms), so that RMPP's resends and the request's timeout
/// come exactly when the fabric's losses call for them, however slowly the machine
/// runs the test: no thread races the clock.
fn round_trips_in_virtual_time(p: &Pair, clock: &VirtualClock, records: usize, runs: u64) {
    const GIVE_UP: Duration = Duration::from_secs(3600);
    let server = umad::register(p.b, SA, 2, 1, Some(&[1 << GET_TABLE, 0])).unwrap();
    let client = umad::register(p.a, SA, 2, 1, None).unwrap();
    let data = table(records);
    for tid in 1..=runs {
        send_get_table(p.a, client, tid);
        let got = loop {
            let answered = answer_get_tables(p.b, server, &data, 10);
            if let Some(got) = try_take_table(p.a, tid) {
                break got;
            }
            if answered == 0 {
                assert!(
                    clock
                        .now()
                        .saturating_duration_since(vmad::time::Instant::ZERO)
                        < GIVE_UP,
                    "GetTable {tid} not done in an hour of virtual time"
                );
                clock.advance(Duration::from_millis(1));
            }
        };
        assert_eq!(got, data, "GetTable {tid}");
    }
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
