//! vmad in a few seconds, no hardware needed:
//!
//! 1. build a small InfiniBand fabric inside this process (3 CAs, 3 switches);
//! 2. discover it with directed-route SMPs, hop by hop, like `ibnetdiscover`;
//! 3. run a ping-pong between two CAs and report p50/p99 round-trip times;
//! 4. run an SA-like GetTable responder that returns 1,000 records over RMPP,
//!    query it, and report the throughput — once over a clean link, once over
//!    a link that loses 2% of its frames.
//!
//! Everything goes through `vmad::umad`, the libibumad API in Rust.
//!
//! Run: `cargo run --release --example quickstart`

use std::collections::{BTreeMap, VecDeque};
use std::thread;
use std::time::{Duration, Instant};

use vmad::subnet::{Fabric, FaultConfig};
use vmad::types::GSI_QKEY;
use vmad::umad::{self, AgentId, PortConfig, PortId};
use vmad::wire::mad::{self, MadStatus, Method, MgmtClass};
use vmad::wire::smp::node_info::{self, NodeType};
use vmad::wire::smp::port_info::{self, PortState};
use vmad::wire::smp::{self, node_desc};

type Res<T> = Result<T, Box<dyn std::error::Error>>;

const SA_CLASS: u8 = 0x03;
const SA_VERSION: u8 = 2;
const GET_TABLE: u8 = 0x12;
const GET_TABLE_RESP: u8 = 0x92;
const PERF_CLASS: u8 = 0x04;
const RECORDS: usize = 1000;
const RECORD_LEN: usize = 64;
const SA_HEADER: usize = 56;

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

    println!("\n== 2. Discovering it with directed-route SMPs ==");
    // The kernel waits 2 s before resending an unacknowledged RMPP window; on a
    // fabric whose round trip is microseconds, 20 ms is plenty.
    let config = || {
        let mut c = PortConfig::default();
        c.engine.rmpp.ack_timeout = Duration::from_millis(20);
        c
    };
    let (sm, _) = umad::open_with("qs-sm", 1, config())?;
    discover(sm)?;

    println!("\n== 3. Ping-pong between qs-sm and qs-sa (through 3 switches) ==");
    let (sa, _) = umad::open_with("qs-sa", 1, config())?;
    ping_pong(sm, sa, fabric.lid("qs-sa", 1).unwrap_or(0))?;

    println!("\n== 4. An SA-like GetTable returning {RECORDS} records over RMPP ==");
    // Register the SA's agent before the first query can arrive: an unclaimed
    // GetTable is dropped (only Get/Set get an automatic "unsupported" answer).
    let sa_agent = umad::register(sa, SA_CLASS, SA_VERSION, 1, Some(&[1 << GET_TABLE, 0]))?;
    let server = thread::spawn(move || sa_server(sa, sa_agent));
    let sa_lid = fabric.lid("qs-sa", 1).unwrap_or(0);
    let client = umad::register(sm, SA_CLASS, SA_VERSION, 1, None)?;
    gettable_runs(sm, client, sa_lid, "clean links", 20, 1000)?;
    let lossy = FaultConfig {
        loss: 0.02,
        seed: 2024,
        ..FaultConfig::default()
    };
    fabric.set_faults("qs-sw3", 4, lossy)?;
    let before = fabric.link_stats("qs-sw3", 4).unwrap_or_default();
    gettable_runs(sm, client, sa_lid, "2% loss on the last link", 5, 2000)?;
    let after = fabric.link_stats("qs-sw3", 4).unwrap_or_default();
    println!(
        "  that link carried {} frames and dropped {} of them; RMPP resent what was lost,\n  \
         each time after its resend timer (20 ms here; the kernel's is 2 s) ran out.",
        after.frames - before.frames,
        after.lost - before.lost
    );

    umad::close_port(sm)?;
    umad::close_port(sa)?;
    server.join().map_err(|_| "server thread panicked")??;
    fabric.unregister();
    println!("\nDone in {:.2} s.", started.elapsed().as_secs_f64());
    Ok(())
}

/// One DR SMP SubnGet(attr) along `path` from the SM port; returns the 64-byte SMP data.
fn dr_get(sm: PortId, agent: AgentId, tid: u64, attr: u16, amod: u32, path: &[u8]) -> Res<Vec<u8>> {
    let mut buf = vec![0u8; umad::size() + 256];
    let mad = umad::get_mad_mut(&mut buf)?;
    mad::Repr {
        base_version: 1,
        mgmt_class: MgmtClass::SubnDirectedRoute,
        class_version: 1,
        method: Method::Get,
        status: MadStatus::OK,
        class_specific: 0,
        tid,
        attr_id: attr,
        attr_mod: amod,
    }
    .emit(&mut mad::Packet::new_unchecked(&mut mad[..]));
    let mut route = smp::DirectedRoute {
        hop_count: path.len() as u8,
        ..smp::DirectedRoute::default() // hop pointer 0, DrSLID = DrDLID = permissive
    };
    route.initial_path[1..=path.len()].copy_from_slice(path);
    smp::Repr {
        m_key: 0,
        data: [0; smp::DATA_LEN],
        dr: Some(route),
    }
    .emit(&mut smp::Packet::new_unchecked(&mut mad[..]));
    umad::set_addr(&mut buf, 0xffff, 0, 0, 0)?; // DR SMPs go to the permissive LID, QP0
    umad::send(sm, agent, &mut buf, 256, 200, 3)?;
    let mut len = 256;
    umad::recv(sm, &mut buf, &mut len, -1)?;
    if umad::status(&buf)? != 0 {
        return Err(format!("SMP along {path:?} timed out").into());
    }
    Ok(smp::Packet::new_checked(umad::get_mad(&buf)?)?
        .data()
        .to_vec())
}

/// Breadth-first discovery, the way an SM finds a subnet it knows nothing about.
fn discover(sm: PortId) -> Res<()> {
    const NODE_DESC: u16 = 0x10;
    const NODE_INFO: u16 = 0x11;
    const PORT_INFO: u16 = 0x15;
    let agent = umad::register(sm, 0x81, 1, 0, None)?;
    let mut tid = 0u64;
    let mut next_tid = || {
        tid += 1;
        tid
    };
    let mut seen = BTreeMap::new();
    let mut queue = VecDeque::from([Vec::<u8>::new()]);
    let mut smps = 0;
    while let Some(path) = queue.pop_front() {
        let data = dr_get(sm, agent, next_tid(), NODE_INFO, 0, &path)?;
        let info = node_info::Repr::parse(&node_info::Packet::new_checked(&data[..])?)?;
        let data = dr_get(sm, agent, next_tid(), NODE_DESC, 0, &path)?;
        let desc = node_desc::Packet::new_checked(&data[..])?;
        smps += 2;
        if seen.contains_key(&info.node_guid) {
            continue;
        }
        let name = String::from_utf8_lossy(desc.text()).to_string();
        let is_switch = info.node_type == NodeType::Switch;
        println!(
            "  {} hop(s) away: {:<7} {:<6} GUID {:#018x}, entered on port {}",
            path.len(),
            name,
            if is_switch { "switch" } else { "CA" },
            info.node_guid,
            info.local_port_num
        );
        seen.insert(info.node_guid, name);
        // Follow every other active port of a switch (and, at the start, our own port).
        if is_switch || path.is_empty() {
            for port in 1..=info.num_ports {
                if is_switch && port == info.local_port_num {
                    continue;
                }
                let data = dr_get(sm, agent, next_tid(), PORT_INFO, u32::from(port), &path)?;
                smps += 1;
                if port_info::Packet::new_checked(&data[..])?.port_state() == PortState::Active {
                    let mut next = path.clone();
                    next.push(port);
                    queue.push_back(next);
                }
            }
        }
    }
    println!(
        "  found {} nodes with {smps} SMPs, each answered by the node's own SMA.",
        seen.len()
    );
    umad::unregister(sm, agent)?;
    Ok(())
}

/// `n` request/response round trips of a PerfMgt Get, answered by a thread on `sa`.
fn ping_pong(sm: PortId, sa: PortId, sa_lid: u16) -> Res<()> {
    const ROUNDS: usize = 5000;
    let client = umad::register(sm, PERF_CLASS, 1, 0, None)?;
    let server = umad::register(sa, PERF_CLASS, 1, 0, Some(&[1 << 1, 0]))?;
    let echo = thread::spawn(move || -> vmad::Result<()> {
        let mut buf = vec![0u8; umad::size() + 256];
        for _ in 0..ROUNDS {
            let mut len = 256;
            umad::recv(sa, &mut buf, &mut len, -1)?;
            buf[64 + 3] = 0x81; // GetResp, to the address the Get came from
            umad::send(sa, server, &mut buf, len, 0, 0)?;
        }
        Ok(())
    });
    let mut req = vec![0u8; umad::size() + 256];
    let mut resp = vec![0u8; umad::size() + 256];
    let mut rtts = Vec::with_capacity(ROUNDS);
    for i in 0..ROUNDS {
        req[64..68].copy_from_slice(&[1, PERF_CLASS, 1, 0x01]);
        req[64 + 8..64 + 16].copy_from_slice(&(i as u64).to_be_bytes());
        umad::set_addr(&mut req, sa_lid, 1, 0, GSI_QKEY)?;
        let t = Instant::now();
        umad::send(sm, client, &mut req, 256, 1000, 2)?;
        let mut len = 256;
        if let Err(e) = umad::recv(sm, &mut resp, &mut len, 3000) {
            eprintln!(
                "stuck at {i}: {e}\nsm {:?}\nsa {:?}",
                umad::port(sm)?.stats(),
                umad::port(sa)?.stats()
            );
            return Err(e.into());
        }
        rtts.push(t.elapsed());
        if std::env::var("QS_DEBUG").is_ok() {
            eprintln!("round {i}");
        }
        if umad::status(&resp)? != 0 {
            return Err("a ping timed out".into());
        }
    }
    echo.join().map_err(|_| "echo thread panicked")??;
    umad::unregister(sm, client)?;
    umad::unregister(sa, server)?;
    rtts.sort();
    let pct = |p: usize| rtts[(rtts.len() * p / 100).min(rtts.len() - 1)];
    println!(
        "  {ROUNDS} round trips: p50 {:.1} µs, p99 {:.1} µs (send, 4 links out, answer, 4 links back).",
        pct(50).as_secs_f64() * 1e6,
        pct(99).as_secs_f64() * 1e6
    );
    Ok(())
}

/// The SA side: answer every GetTable with the same 1,000 records until the port closes.
fn sa_server(sa: PortId, agent: AgentId) -> vmad::Result<()> {
    let mut table = vec![0u8; RECORDS * RECORD_LEN];
    for (i, rec) in table.chunks_mut(RECORD_LEN).enumerate() {
        rec[..2].copy_from_slice(&(i as u16 + 1).to_be_bytes()); // a LID
        rec[8..16].copy_from_slice(&(0x0002_c903_0000_0000u64 + i as u64).to_be_bytes());
        let name = format!("node-{i:04}");
        rec[16..16 + name.len()].copy_from_slice(name.as_bytes());
    }
    let mut req = vec![0u8; umad::size() + 256];
    let mut resp = vec![0u8; umad::size() + SA_HEADER + table.len()];
    loop {
        let mut len = 256;
        match umad::recv(sa, &mut req, &mut len, -1) {
            Ok(_) => {}
            // The quickstart is over when main closes this port.
            Err(e) if e.errno() == vmad::error::errno::EINVAL => return Ok(()),
            Err(e) => return Err(e),
        }
        resp[..umad::size() + SA_HEADER].copy_from_slice(&req[..umad::size() + SA_HEADER]);
        let mad = umad::get_mad_mut(&mut resp)?;
        mad[3] = GET_TABLE_RESP;
        mad[24..36].fill(0);
        mad[24] = 1; // RMPP version
        mad[26] = 0x01; // RMPPFlags.Active: the engine segments the rest
        mad[44..46].copy_from_slice(&((RECORD_LEN / 8) as u16).to_be_bytes()); // AttributeOffset
        mad[SA_HEADER..].copy_from_slice(&table);
        // Up to 8 resends of each unacknowledged window, as OpenSM allows retries.
        umad::send(sa, agent, &mut resp, SA_HEADER + table.len(), 0, 8)?;
    }
}

/// Query the table `runs` times; print what came back and how fast.
fn gettable_runs(
    sm: PortId,
    agent: AgentId,
    sa_lid: u16,
    what: &str,
    runs: usize,
    first_tid: u64,
) -> Res<()> {
    let mut buf = vec![0u8; umad::size() + 256];
    let t = Instant::now();
    let mut bytes = 0usize;
    let mut grew = false;
    for run in 0..runs {
        let mut req = vec![0u8; umad::size() + 256];
        let mad = umad::get_mad_mut(&mut req)?;
        mad[..4].copy_from_slice(&[1, SA_CLASS, SA_VERSION, GET_TABLE]);
        // Every transfer needs its own TID: a finished one lingers to re-ACK retransmissions.
        mad[8..16].copy_from_slice(&(first_tid + run as u64).to_be_bytes());
        mad[16..18].copy_from_slice(&0x0011u16.to_be_bytes()); // NodeRecord
        mad[24] = 1; // RMPP version; the request itself is one segment
        umad::set_addr(&mut req, sa_lid, 1, 0, GSI_QKEY)?;
        umad::send(sm, agent, &mut req, 256, 2000, 3)?;
        // Ask with a 256-byte buffer first: ENOSPC says how much is needed, and the
        // message waits in the queue for the retry, as umad_recv(3) describes.
        let mut len = buf.len() - umad::size();
        let got = match umad::recv(sm, &mut buf, &mut len, -1) {
            Err(e) if e.errno() == vmad::error::errno::ENOSPC => {
                if !grew && first_tid == 1000 {
                    println!(
                        "  first recv: ENOSPC, {len} bytes of data needed; growing the buffer."
                    );
                    grew = true;
                }
                buf.resize(umad::size() + len, 0);
                umad::recv(sm, &mut buf, &mut len, -1)?
            }
            other => other?,
        };
        if got != agent || umad::status(&buf)? != 0 {
            return Err(format!("GetTable {run} failed (status {})", umad::status(&buf)?).into());
        }
        let data = &umad::get_mad(&buf)?[..len];
        let offset = usize::from(u16::from_be_bytes([data[44], data[45]])) * 8;
        let records = (len - SA_HEADER) / offset;
        let last = &data[SA_HEADER + (records - 1) * offset..][..offset];
        if records != RECORDS || !last[16..].starts_with(b"node-0999") {
            return Err(format!("GetTable {run}: {records} records, last one wrong").into());
        }
        bytes += len;
    }
    let secs = t.elapsed().as_secs_f64();
    println!(
        "  {what}: {runs} GetTables, each {RECORDS} records of {RECORD_LEN} bytes \
         ({} segments), in {:.1} ms: {:.1} MB/s of records.",
        (RECORDS * RECORD_LEN).div_ceil(200),
        secs * 1e3,
        bytes as f64 / secs / 1e6
    );
    Ok(())
}
