//! The rows of `cargo bench --bench port`, a fixed number of times, for an instruction
//! counter: `scripts/port-instructions` runs this under `valgrind --tool=callgrind` at
//! two counts and divides the difference, so that set-up drops out. Instruction counts
//! do not vary with the machine's load as the rows' times do (two runs differ by about
//! 0.1 %), which lets a change to the per-MAD path be weighed in a minute on a shared
//! machine; the rows' times (`scripts/bench-compare`) still decide.
//!
//! ```text
//! cargo run --release --example port_instructions -- one_way 20000
//! ```
//!
//! Rows: `one_way` (MADs sent from one port to another in batches of 1,000, then
//! received), `round_trip` (a Get and its answer from a responder thread), `rmpp`
//! (Gets answered with 1 MiB RMPP responses; the count is in transfers).

use vmad::engine::{AgentId, Event, SendRequest};
use vmad::port::Port;

#[path = "common/port_rows.rs"]
mod port_rows;
use port_rows::{gettable_resp, mad, ports, responder, spec, to, PERF, SA};

fn main() {
    let mut args = std::env::args().skip(1);
    let (Some(row), Some(Ok(n))) = (args.next(), args.next().map(|n| n.parse::<u64>())) else {
        eprintln!("usage: port_instructions one_way|round_trip|rmpp COUNT");
        std::process::exit(2);
    };
    match row.as_str() {
        "one_way" => one_way(n),
        "round_trip" => round_trip(n),
        "rmpp" => rmpp(n),
        other => {
            eprintln!("unknown row {other:?}: one_way, round_trip or rmpp");
            std::process::exit(2);
        }
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

fn one_way(n: u64) {
    let (a, b) = ports("pi");
    let client = a.register(spec(PERF, 1, 0, &[])).expect("agent");
    b.register(spec(PERF, 1, 0, &[0x03])).expect("agent");
    let mut tid = 0;
    let mut left = n;
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
}

fn round_trip(n: u64) {
    let (a, b) = ports("pi");
    let client = a.register(spec(PERF, 1, 0, &[])).expect("agent");
    let server = b.register(spec(PERF, 1, 0, &[0x01])).expect("agent");
    let echo = responder(b.clone(), server, |m| {
        let mut r = m.to_vec();
        r[3] = 0x81;
        r
    });
    for tid in 1..=n {
        send(&a, client, &mad(PERF, 1, 0x01, tid), 1000);
        a.recv(None).expect("the answer");
    }
    b.close();
    echo.join().expect("the responder");
}

fn rmpp(n: u64) {
    const DATA: usize = 1 << 20;
    let (a, b) = ports("pi");
    let client = a.register(spec(SA, 2, 1, &[])).expect("agent");
    let server = b.register(spec(SA, 2, 1, &[0x12])).expect("agent");
    let payload = vec![0x5au8; DATA];
    let serve = responder(b.clone(), server, move |m| gettable_resp(m, &payload));
    for tid in 1..=n {
        let mut m = mad(SA, 2, 0x12, tid);
        m[24] = 1;
        send(&a, client, &m, 5000);
        match a.recv(None).expect("the answer") {
            Event::Recv { mad, .. } => assert_eq!(mad.len(), 56 + DATA),
            other => panic!("not the answer: {other:?}"),
        }
    }
    b.close();
    serve.join().expect("the responder");
}
