//! SA queries to a running OpenSM through vmad: NodeRecord and PathRecord,
//! by Get (one record) or GetTable (all that match).
//!
//! ```sh
//! eval "$(scripts/ibsim-start tests/topo/small.net H2)"
//! scripts/opensm-start "$VMAD_IBSIM_RUN"
//! cargo run --example sa_query -- node 3          # Get NodeRecord of LID 3
//! cargo run --example sa_query -- nodes           # GetTable NodeRecord
//! cargo run --example sa_query -- path 2 5        # Get PathRecord LID 2 -> 5
//! cargo run --example sa_query -- paths 2         # GetTable PathRecord from LID 2
//! scripts/ibsim-stop "$VMAD_IBSIM_RUN"
//! ```
//!
//! **A GetTable from this OpenSM is cut short.** `scripts/opensm-start` runs
//! OpenSM under umad2sim, which leaves RMPP to a kernel that is not there: it
//! answers a GetTable with its first MAD only, flagged RMPP-active but without
//! segment numbers. (ibsim itself is not the limit: vmad's ibsim transport does
//! RMPP, and OpenSM on vmad's drop-in, `scripts/with-vmad --ibsim opensm`,
//! sends whole tables to an RMPP agent.) This example prints the records that
//! first MAD holds. The agent is registered without RMPP so that MAD reaches
//! it as it is.

use std::net::Ipv6Addr;
use std::time::Duration;

use vmad::engine::{AgentId, AgentSpec, Event, SendRequest};
use vmad::port::{Port, PortConfig};
use vmad::transport::ibsim::IbsimTransport;
use vmad::types::{MadAddr, Qp, GSI_QKEY};

const ATTR_NODE_RECORD: u16 = 0x0011;
const ATTR_PATH_RECORD: u16 = 0x0035;
const METHOD_GET: u8 = 0x01;
const METHOD_GET_TABLE: u8 = 0x12;
/// SA MADs: header 0..24, RMPP 24..36, SM_Key 36..44, AttributeOffset 44..46, CompMask 48..56.
const SA_DATA: usize = 56;

fn sa_mad(tid: u32, method: u8, attr: u16, comp_mask: u64, record: &[u8]) -> [u8; 256] {
    let mut m = [0u8; 256];
    m[0] = 1;
    m[1] = 0x03; // SubnAdm
    m[2] = 2;
    m[3] = method;
    m[12..16].copy_from_slice(&tid.to_be_bytes());
    m[16..18].copy_from_slice(&attr.to_be_bytes());
    m[48..56].copy_from_slice(&comp_mask.to_be_bytes());
    m[SA_DATA..SA_DATA + record.len()].copy_from_slice(record);
    m
}

/// Send one SA request and wait for its answer: the response MAD.
fn query(port: &Port, agent: AgentId, sm_lid: u16, mad: &[u8; 256]) -> Result<Vec<u8>, String> {
    let addr = MadAddr {
        lid: sm_lid,
        qpn: 1,
        qkey: GSI_QKEY,
        ..MadAddr::default()
    };
    let req = SendRequest {
        addr,
        mad,
        timeout_ms: 500,
        retries: 3,
    };
    port.send(agent, req).map_err(|e| e.to_string())?;
    loop {
        match port
            .recv(Some(Duration::from_secs(10)))
            .map_err(|e| e.to_string())?
        {
            Event::Recv { mad: rsp, .. } if rsp[12..16] == mad[12..16] => {
                let status = u16::from_be_bytes([rsp[4], rsp[5]]);
                if status != 0 {
                    return Err(format!("SA status {status:#06x}"));
                }
                return Ok(rsp);
            }
            Event::SendTimedOut { header, .. } if header[12..16] == mad[12..16] => {
                return Err("no answer from the SA".into());
            }
            _ => {}
        }
    }
}

/// The records a response holds: AttributeOffset is in 8-byte words.
fn records(rsp: &[u8]) -> Vec<&[u8]> {
    let step = usize::from(u16::from_be_bytes([rsp[44], rsp[45]])) * 8;
    if step == 0 {
        return Vec::new();
    }
    // Without a payload length (see the module docs), an all-zero record is padding.
    rsp[SA_DATA..]
        .chunks_exact(step)
        .filter(|r| r.iter().any(|&b| b != 0))
        .collect()
}

fn print_node(r: &[u8]) {
    let ni = &r[4..44];
    let guid = u64::from_be_bytes(ni[12..20].try_into().unwrap());
    let port_guid = u64::from_be_bytes(ni[20..28].try_into().unwrap());
    let kind = match ni[2] {
        1 => "CA",
        2 => "Switch",
        3 => "Router",
        _ => "?",
    };
    let desc = String::from_utf8_lossy(&r[44..108]);
    println!(
        "NodeRecord lid {:<5} {kind:<6} ports {:<3} node {guid:#018x} port {port_guid:#018x} \"{}\"",
        u16::from_be_bytes([r[0], r[1]]),
        ni[3],
        desc.trim_end_matches('\0')
    );
}

fn print_path(r: &[u8]) {
    let gid = |at: usize| Ipv6Addr::from(<[u8; 16]>::try_from(&r[at..at + 16]).unwrap());
    println!(
        "PathRecord {} -> {}  slid {} dlid {}  pkey {:#06x} sl {} mtu {:#04x} rate {:#04x} pkt_life {:#04x}",
        gid(24),
        gid(8),
        u16::from_be_bytes([r[42], r[43]]),
        u16::from_be_bytes([r[40], r[41]]),
        u16::from_be_bytes([r[50], r[51]]),
        u16::from_be_bytes([r[52], r[53]]) & 0xf,
        r[54],
        r[55],
        r[56],
    );
}

/// One SA request to make, and how to print its records.
struct Query {
    method: u8,
    attr: u16,
    comp_mask: u64,
    record: Vec<u8>,
    print: fn(&[u8]),
}

fn lid_arg(v: Option<&String>) -> u16 {
    v.and_then(|s| s.parse().ok()).unwrap_or_else(|| usage())
}

fn usage() -> ! {
    eprintln!("usage: sa_query node <lid> | nodes | path <slid> <dlid> | paths <slid>");
    std::process::exit(2)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut transport = IbsimTransport::from_env().unwrap_or_else(|e| {
        eprintln!("sa_query: cannot attach to ibsim ({e}); start one with scripts/ibsim-start");
        std::process::exit(1);
    });
    // The SM assigned LIDs after this client may have been described: ask again.
    let sm_lid = transport.refresh_attrs().expect("port attributes").sm_lid;
    if sm_lid == 0 {
        eprintln!("sa_query: the port has no SM LID yet; start OpenSM with scripts/opensm-start");
        std::process::exit(1);
    }
    let port = Port::open(Box::new(transport), PortConfig::default()).expect("open port");
    let agent = port
        .register(AgentSpec {
            qp: Qp::Gsi,
            mgmt_class: 0x03.into(),
            class_version: 2,
            rmpp_version: 0,
            method_mask: [0; 2],
            oui: 0,
            user_rmpp: false,
        })
        .expect("register SA agent");
    let q = match args.first().map(String::as_str) {
        // NodeRecord CompMask bit 0: LID (record bytes 0..2).
        Some("node") => Query {
            method: METHOD_GET,
            attr: ATTR_NODE_RECORD,
            comp_mask: 1,
            record: lid_arg(args.get(1)).to_be_bytes().to_vec(),
            print: print_node,
        },
        Some("nodes") => Query {
            method: METHOD_GET_TABLE,
            attr: ATTR_NODE_RECORD,
            comp_mask: 0,
            record: Vec::new(),
            print: print_node,
        },
        // PathRecord CompMask bit 4 DLID (bytes 40..42), bit 5 SLID (42..44).
        Some(kind @ ("path" | "paths")) => {
            let mut record = vec![0u8; 64];
            record[42..44].copy_from_slice(&lid_arg(args.get(1)).to_be_bytes());
            let (method, comp_mask) = if kind == "path" {
                record[40..42].copy_from_slice(&lid_arg(args.get(2)).to_be_bytes());
                (METHOD_GET, 0x30)
            } else {
                (METHOD_GET_TABLE, 0x20)
            };
            Query {
                method,
                attr: ATTR_PATH_RECORD,
                comp_mask,
                record,
                print: print_path,
            }
        }
        _ => usage(),
    };
    let method = q.method;
    let print = q.print;
    let mad = sa_mad(1, q.method, q.attr, q.comp_mask, &q.record);
    match query(&port, agent, sm_lid, &mad) {
        Ok(rsp) => {
            let recs = records(&rsp);
            // A Get answer holds one record; the rest of the MAD is padding.
            let shown = if method == METHOD_GET {
                &recs[..recs.len().min(1)]
            } else {
                &recs[..]
            };
            for r in shown {
                print(r);
            }
            if method == METHOD_GET_TABLE {
                // Byte 26 of an RMPP MAD: RMPPFlags (bit 0 Active, 1 First, 2 Last).
                eprintln!(
                    "sa_query: {} records in the one MAD received (RMPP flags {:#x}; OpenSM under umad2sim sends a table's first MAD only)",
                    shown.len(),
                    rsp[26] & 0x7
                );
            }
        }
        Err(e) => {
            eprintln!("sa_query: {e}");
            std::process::exit(1);
        }
    }
}
