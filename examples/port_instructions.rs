//! The rows of `cargo bench --bench port`, a fixed number of times, for an instruction
//! counter: `scripts/port-instructions` runs this under `valgrind --tool=callgrind` at
//! two counts and divides the difference, so that set-up drops out. Instruction counts
//! do not vary with the machine's load as the rows' times do (two runs differ by about
//! 0.1 %), which lets a change to the per-MAD path be weighed in a minute on a shared
//! machine; the rows' times (`scripts/bench-compare`) still decide.
//!
//! ```text
//! cargo run --release --example port_instructions -- one_way 20000
//! cargo run --release --example port_instructions -- round_trip 100000 time
//! ```
//!
//! Rows: `one_way` (MADs sent from one port to another in batches of 1,000, then
//! received), `round_trip` (a Get and its answer from a responder thread), `rmpp`
//! (Gets answered with 1 MiB RMPP responses; the count is in transfers), and
//! `floor_round_trip`, the bench's floor (the same MAD through a crossbeam channel to a
//! spinning thread and back). With `time` after the count, the row prints the
//! nanoseconds per MAD (per transfer for `rmpp`) its loop took, set-up left out:
//! `scripts/port-floor` sets a row beside its floor with it.

use std::time::{Duration, Instant};

use vmad::engine::{AgentId, Event, SendRequest};
use vmad::port::Port;

#[path = "common/port_rows.rs"]
mod port_rows;
use port_rows::{
    floor_echo, floor_round_trip, gettable_resp, mad, ports, responder, spec, to, PERF, SA,
};

fn main() {
    let mut args = std::env::args().skip(1);
    let usage = "usage: port_instructions one_way|round_trip|rmpp|floor_round_trip COUNT [time]";
    let (Some(row), Some(Ok(n))) = (args.next(), args.next().map(|n| n.parse::<u64>())) else {
        eprintln!("{usage}");
        std::process::exit(2);
    };
    let timed = match args.next().as_deref() {
        None => false,
        Some("time") => true,
        Some(_) => {
            eprintln!("{usage}");
            std::process::exit(2);
        }
    };
    let row: fn(u64, &mut Loop) = match row.as_str() {
        "one_way" => one_way,
        "round_trip" => round_trip,
        "rmpp" => rmpp,
        "floor_round_trip" => floor,
        other => {
            eprintln!("unknown row {other:?}: one_way, round_trip, rmpp or floor_round_trip");
            std::process::exit(2);
        }
    };
    let mut timing = Loop::default();
    row(n, &mut timing);
    if timed {
        let ns = timing.took.expect("the row's loop ran").as_nanos();
        println!("{:.1}", ns as f64 / n.max(1) as f64);
    }
}

/// How long the row's loop took, its set-up and tear-down left out.
#[derive(Default)]
struct Loop {
    started: Option<Instant>,
    took: Option<Duration>,
}

impl Loop {
    fn start(&mut self) {
        self.started = Some(Instant::now());
    }

    fn stop(&mut self) {
        self.took = self.started.map(|t| t.elapsed());
    }
}

fn send(port: &Port, agent: AgentId, m: &[u8], timeout_ms: u32) {
    let req = SendRequest {
        addr: to(2),
        mad: m,
        timeout_ms,
        retries: 2,
    };
    port.send(agent, req).expect("send");
}

fn one_way(n: u64, timing: &mut Loop) {
    let (a, b) = ports("pi");
    let client = a.register(spec(PERF, 1, 0, &[])).expect("agent");
    b.register(spec(PERF, 1, 0, &[0x03])).expect("agent");
    let mut tid = 0;
    let mut left = n;
    timing.start();
    while left > 0 {
        let batch = left.min(1000);
        for _ in 0..batch {
            tid += 1;
            send(&a, client, &mad(PERF, 1, 0x03, tid), 0);
        }
        for _ in 0..batch {
            b.recv(None).expect("a MAD");
        }
        left -= batch;
    }
    timing.stop();
}

fn round_trip(n: u64, timing: &mut Loop) {
    let (a, b) = ports("pi");
    let client = a.register(spec(PERF, 1, 0, &[])).expect("agent");
    let server = b.register(spec(PERF, 1, 0, &[0x01])).expect("agent");
    let echo = responder(b.clone(), server, |m| {
        let mut r = m.to_vec();
        r[3] = 0x81;
        r
    });
    timing.start();
    for tid in 1..=n {
        send(&a, client, &mad(PERF, 1, 0x01, tid), 1000);
        a.recv(None).expect("the answer");
    }
    timing.stop();
    b.close();
    echo.join().expect("the responder");
}

fn rmpp(n: u64, timing: &mut Loop) {
    const DATA: usize = 1 << 20;
    let (a, b) = ports("pi");
    let client = a.register(spec(SA, 2, 1, &[])).expect("agent");
    let server = b.register(spec(SA, 2, 1, &[0x12])).expect("agent");
    let payload = vec![0x5au8; DATA];
    let serve = responder(b.clone(), server, move |m| gettable_resp(m, &payload));
    timing.start();
    for tid in 1..=n {
        let mut m = mad(SA, 2, 0x12, tid);
        m[24] = 1;
        send(&a, client, &m, 5000);
        match a.recv(None).expect("the answer") {
            Event::Recv { mad, .. } => assert_eq!(mad.len(), 56 + DATA),
            other => panic!("not the answer: {other:?}"),
        }
    }
    timing.stop();
    b.close();
    serve.join().expect("the responder");
}

fn floor(n: u64, timing: &mut Loop) {
    let (link, echo) = floor_echo();
    timing.start();
    for tid in 1..=n {
        floor_round_trip(&link, mad(PERF, 1, 0x01, tid));
    }
    timing.stop();
    drop(link);
    echo.join().expect("the echo thread");
}
