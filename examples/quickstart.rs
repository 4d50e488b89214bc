//! vmad in a few seconds, no hardware needed:
//!
//! 1. build a small InfiniBand fabric inside this process (3 CAs, 3 switches);
//! 2. discover it with directed-route SMPs, hop by hop, like `ibnetdiscover`, but
//!    with many SMPs in flight at once (`vmad::discover`);
//! 3. read a CA's PortCounters 5,000 times, one after another (p50/p99 round
//!    trip), then 5,000 at once under the client's windows;
//! 4. run an SA-like GetTable responder that returns 1,000 NodeRecords over RMPP,
//!    query it, and report the throughput — once over a clean link, once over a
//!    link that loses 2% of its frames.
//!
//! The asking side is `vmad::client`, typed requests answered to the request that
//! asked; the responder of part 4 is written against `vmad::umad`, the libibumad API.
//!
//! Run: `cargo run --release --example quickstart`

use std::thread;
use std::time::{Duration, Instant};

use vmad::client::{Client, ClientConfig, Pending, SaRecord};
use vmad::discover::{Config, Node, Topology};
use vmad::port::PortConfig;
use vmad::subnet::{Fabric, FaultConfig};
use vmad::umad::{self, AgentId, PortId};
use vmad::wire::mad::{self, Method, MgmtClass};
use vmad::wire::sa::{self, node_record};
use vmad::wire::{rmpp, MAD_SIZE};

type Res<T> = Result<T, Box<dyn std::error::Error>>;

const RECORDS: usize = 1000;

fn main() -> Res<()> {
    let started = Instant::now();
    println!("== 1. A fabric in this process ==");
    //   qs-sm -- qs-sw1 -- qs-sw2 -- qs-sw3 -- qs-sa
    //               |
    //             qs-host
    let fabric = Fabric::builder()
        .ca("qs-sm")
        .ca("qs-sa")
        .ca("qs-host")
        .switch("qs-sw1", 8)
        .switch("qs-sw2", 8)
        .switch("qs-sw3", 8)
        .link("qs-sm", 1, "qs-sw1", 1)
        .link("qs-sw1", 2, "qs-sw2", 5)
        .link("qs-sw2", 6, "qs-sw3", 3)
        .link("qs-sw3", 4, "qs-sa", 1)
        .link("qs-host", 1, "qs-sw1", 7)
        .build()?;
    for ca in fabric.ca_names() {
        println!(
            "  CA {ca:<8} port 1 has LID {}",
            fabric.lid(&ca, 1).unwrap_or(0)
        );
    }
    println!("  three switches join them; qs-sm and qs-sa are four links apart.");
    let sa_lid = fabric.lid("qs-sa", 1).unwrap_or(0);

    // The kernel waits 2 s before resending an unacknowledged RMPP window; on a
    // fabric whose round trip is microseconds, 20 ms is plenty.
    let mut port_config = PortConfig::default();
    port_config.engine.rmpp.ack_timeout = Duration::from_millis(20);
    // Part 4 asks the SA-like responder on qs-sa, not the fabric's own SA.
    let config = ClientConfig {
        sa_lid: Some(sa_lid),
        timeout_ms: 2000,
        retries: 3,
        ..ClientConfig::default()
    };
    let client = Client::open_with("qs-sm", 1, port_config.clone(), config)?;

    println!("\n== 2. Discovering it with directed-route SMPs ==");
    discover(&client)?;

    println!("\n== 3. PortCounters of qs-sa, answered by its PMA (4 links away) ==");
    counters(&client, sa_lid)?;

    println!("\n== 4. An SA-like GetTable returning {RECORDS} NodeRecords over RMPP ==");
    let (sa, _) = umad::open_with("qs-sa", 1, port_config)?;
    // Register the responder before the first query can arrive: an unclaimed
    // GetTable is dropped (only Get/Set get an automatic "unsupported" answer).
    let sa_agent = umad::register(
        sa,
        MgmtClass::SubnAdm.raw(),
        sa::CLASS_VERSION,
        rmpp::VERSION,
        Some(&[1 << Method::GetTable.raw(), 0]),
    )?;
    let server = thread::spawn(move || sa_server(sa, sa_agent));
    gettable_runs(&client, "clean links", 20)?;
    let lossy = FaultConfig {
        loss: 0.02,
        seed: 2024,
        ..FaultConfig::default()
    };
    fabric.set_faults("qs-sw3", 4, lossy)?;
    let before = fabric.link_stats("qs-sw3", 4).unwrap_or_default();
    gettable_runs(&client, "2% loss on the last link", 5)?;
    let after = fabric.link_stats("qs-sw3", 4).unwrap_or_default();
    println!(
        "  that link carried {} frames and dropped {} of them; RMPP resent what was lost,\n  \
         each time after its resend timer (20 ms here; the kernel's is 2 s) ran out.",
        after.frames - before.frames,
        after.lost - before.lost
    );

    drop(client);
    umad::close_port(sa)?;
    server.join().map_err(|_| "server thread panicked")??;
    fabric.unregister();
    println!("\nDone in {:.2} s.", started.elapsed().as_secs_f64());
    Ok(())
}

/// Breadth-first discovery, the way an SM finds a subnet it knows nothing about:
/// NodeInfo over ever longer directed routes, then each node's NodeDescription and
/// PortInfo, and one hop further behind every switch port that is up. This is the
/// library's one directed-route walk (`vmad discover` and the embedded SM use it
/// too), with many SMPs in flight, each answer matched to its request.
fn discover(client: &Client) -> Res<()> {
    let config = Config {
        // Directed route throughout, as ibnetdiscover goes, although this
        // fabric's SM has given every port a LID already.
        lid_routing: false,
        ..Config::default()
    };
    let topo = vmad::discover::discover(client.port(), &config)?;
    for node in &topo.nodes {
        println!(
            "  {} hop(s) away: {:<7} {:<6} GUID {:#018x}, entered on port {}",
            node.route.len(),
            node.desc,
            if node.is_switch() { "switch" } else { "CA" },
            node.guid,
            entered_on(&topo, node)
        );
    }
    println!(
        "  found {} nodes and {} links with {} SMPs, each answered by the node's own SMA.",
        topo.nodes.len(),
        topo.links().len(),
        topo.smps
    );
    if !topo.is_complete() {
        return Err(format!("{} requests went unanswered", topo.failures.len()).into());
    }
    Ok(())
}

/// The port a node was first reached by: the end of the link from the node one
/// hop back along its route (our own node: the port we asked from, 1 here).
fn entered_on(topo: &Topology, node: &Node) -> u8 {
    let Some((&out, back)) = node.route.split_last() else {
        return 1;
    };
    let Some(prev) = topo.nodes.iter().find(|n| n.route == back) else {
        return 0;
    };
    node.ports
        .iter()
        .find(|(_, p)| p.remote == Some((prev.guid, out)))
        .map_or(0, |(&port, _)| port)
}

/// PortCounters round trips one at a time, then all at once.
fn counters(client: &Client, lid: u16) -> Res<()> {
    const ROUNDS: usize = 5000;
    let mut rtts = Vec::with_capacity(ROUNDS);
    for _ in 0..ROUNDS {
        let t = Instant::now();
        client.port_counters(lid, 1)?;
        rtts.push(t.elapsed());
    }
    rtts.sort();
    let pct = |p: usize| rtts[(rtts.len() * p / 100).min(rtts.len() - 1)];
    println!(
        "  {ROUNDS} round trips one at a time: p50 {:.1} µs, p99 {:.1} µs (4 links out, 4 back).",
        pct(50).as_secs_f64() * 1e6,
        pct(99).as_secs_f64() * 1e6
    );
    let t = Instant::now();
    let handles: Vec<Pending<_>> = (0..ROUNDS)
        .map(|_| client.port_counters_async(lid, 1))
        .collect::<vmad::Result<_>>()?;
    let mut last = 0;
    for h in handles {
        last = h.wait()?.view().rcv_pkts();
    }
    let secs = t.elapsed().as_secs_f64();
    let stats = client.stats();
    println!(
        "  {ROUNDS} at once: {:.0} requests/s, at most {} on the wire to that port (the\n  \
         client's per-destination cap); the port has now received {last} packets.",
        ROUNDS as f64 / secs,
        stats.max_to_one_destination
    );
    Ok(())
}

/// The SA side: answer every GetTable with the same 1,000 NodeRecords until the port closes.
fn sa_server(sa: PortId, agent: AgentId) -> vmad::Result<()> {
    let mut table = vec![0u8; RECORDS * node_record::Repr::RECORD_LEN];
    for (i, rec) in table.chunks_mut(node_record::Repr::RECORD_LEN).enumerate() {
        let mut r = node_record::Repr::template();
        r.lid = i as u16 + 1;
        r.node_info.node_guid = 0x0002_c903_0000_0000 + i as u64;
        r.node_desc =
            vmad::wire::smp::node_desc::Repr::from_text(format!("node-{i:04}").as_bytes());
        r.emit(&mut node_record::Packet::new_unchecked(rec));
    }
    let mut req = vec![0u8; umad::size() + MAD_SIZE];
    let mut resp = vec![0u8; umad::size() + sa::DATA_OFFSET + table.len()];
    loop {
        let mut len = MAD_SIZE;
        match umad::recv(sa, &mut req, &mut len, -1) {
            Ok(_) => {}
            // The quickstart is over when main closes this port.
            Err(e) if e.errno() == vmad::error::errno::EINVAL => return Ok(()),
            Err(e) => return Err(e),
        }
        // The answer keeps the request's address, headers and TID.
        let header = umad::size() + sa::DATA_OFFSET;
        resp[..header].copy_from_slice(&req[..header]);
        let m = umad::get_mad_mut(&mut resp)?;
        mad::Packet::new_unchecked(&mut m[..]).set_method(Method::GetTableResp);
        rmpp::Repr {
            version: rmpp::VERSION,
            rmpp_type: rmpp::RmppType::Data,
            resp_time: rmpp::RESP_TIME_NONE,
            flags: rmpp::FLAG_ACTIVE, // the engine segments the rest
            status: rmpp::RmppStatus::Success,
            seg_num: 0,
            paylen_newwin: 0,
        }
        .emit(&mut rmpp::Packet::new_unchecked(&mut m[..]));
        let mut sa_header = sa::Packet::new_unchecked(&mut m[..]);
        sa_header.set_attr_offset(sa::Repr::attr_offset_for(node_record::LEN));
        sa_header.data_mut().copy_from_slice(&table);
        // Up to 8 resends of each unacknowledged window, as OpenSM allows retries.
        umad::send(sa, agent, &mut resp, sa::DATA_OFFSET + table.len(), 0, 8)?;
    }
}

/// Query the table `runs` times; print what came back and how fast.
fn gettable_runs(client: &Client, what: &str, runs: usize) -> Res<()> {
    let t = Instant::now();
    for run in 0..runs {
        let table = client.sa_get_table(&node_record::Repr::template(), 0)?;
        let last = table.iter().last().ok_or("an empty table")?;
        if table.len() != RECORDS || !last.node_desc.text().starts_with(b"node-0999") {
            return Err(format!("GetTable {run}: {} records, last one wrong", table.len()).into());
        }
    }
    let secs = t.elapsed().as_secs_f64();
    let bytes = runs * RECORDS * node_record::Repr::RECORD_LEN;
    println!(
        "  {what}: {runs} GetTables, each {RECORDS} records of {} bytes \
         ({} segments), in {:.1} ms: {:.1} MB/s of records.",
        node_record::Repr::RECORD_LEN,
        (RECORDS * node_record::Repr::RECORD_LEN).div_ceil(sa::DATA_LEN),
        secs * 1e3,
        bytes as f64 / secs / 1e6
    );
    Ok(())
}
