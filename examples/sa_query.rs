//! SA queries through `vmad::client`: NodeRecord and PathRecord, by Get (one
//! record) or GetTable (every record that matches, over RMPP, however many).
//!
//! Without ibsim in the environment it asks the embedded subnet's SA (the
//! default fabric: `vmadsim0`, `vmadsim1`, switch `vmadsw0`):
//!
//! ```sh
//! cargo run --example sa_query -- nodes           # GetTable NodeRecord
//! cargo run --example sa_query -- node 2          # Get NodeRecord of LID 2
//! cargo run --example sa_query -- path 1 2        # Get PathRecord LID 1 -> 2
//! cargo run --example sa_query -- paths 1         # GetTable PathRecord from LID 1
//! ```
//!
//! With an ibsim fabric and an SM on it, it asks that SM's SA:
//!
//! ```sh
//! eval "$(scripts/ibsim-start tests/topo/small.net H2)"
//! scripts/with-vmad --ibsim opensm &              # OpenSM on vmad's drop-in: whole tables
//! cargo run --example sa_query -- nodes
//! scripts/ibsim-stop "$VMAD_IBSIM_RUN"
//! ```
//!
//! (OpenSM under umad2sim, `scripts/opensm-start`, leaves RMPP to a kernel that is
//! not there and sends a table's first MAD only; the client's RMPP agent then
//! times out rather than show a cut table.)

use std::net::Ipv6Addr;

use vmad::client::{Client, ClientConfig, SaRecord};
use vmad::port::{Port, PortConfig};
use vmad::transport::ibsim::IbsimTransport;
use vmad::wire::sa::{node_record, path_record};

fn print_node(r: &node_record::Repr) {
    println!(
        "NodeRecord lid {:<5} {:<6} ports {:<3} node {:#018x} port {:#018x} \"{}\"",
        r.lid,
        format!("{:?}", r.node_info.node_type),
        r.node_info.num_ports,
        r.node_info.node_guid,
        r.node_info.port_guid,
        String::from_utf8_lossy(r.node_desc.text())
    );
}

fn print_path(r: &path_record::Repr) {
    println!(
        "PathRecord {} -> {}  slid {} dlid {}  pkey {:#06x} sl {} mtu {:#04x} rate {:#04x} pkt_life {:#04x}",
        Ipv6Addr::from(r.sgid),
        Ipv6Addr::from(r.dgid),
        r.slid,
        r.dlid,
        r.pkey,
        r.sl,
        r.mtu,
        r.rate,
        r.pkt_life,
    );
}

fn lid_arg(v: Option<&String>) -> u16 {
    v.and_then(|s| s.parse().ok()).unwrap_or_else(|| usage())
}

fn usage() -> ! {
    eprintln!("usage: sa_query node <lid> | nodes | path <slid> <dlid> | paths <slid>");
    std::process::exit(2)
}

/// The client: on ibsim's fabric when the environment names one, else the default one.
fn client() -> vmad::Result<Client> {
    let ibsim = ["IBSIM_SOCKNAME", "IBSIM_SERVER_NAME"];
    if ibsim.iter().all(|v| std::env::var_os(v).is_none()) {
        return Client::open("vmadsim0", 1);
    }
    let transport = IbsimTransport::from_env()?;
    let port = Port::open(Box::new(transport), PortConfig::default())?;
    Client::new(&port, ClientConfig::default())
}

fn run(args: &[String]) -> vmad::Result<()> {
    let client = client()?;
    match args.first().map(String::as_str) {
        Some("node") => {
            let mut t = node_record::Repr::template();
            t.lid = lid_arg(args.get(1));
            print_node(&client.sa_get(&t, node_record::COMP_LID)?);
        }
        Some("nodes") => {
            let table = client.sa_get_table(&node_record::Repr::template(), 0)?;
            table.iter().for_each(|r| print_node(&r));
            eprintln!("sa_query: {} NodeRecords", table.len());
        }
        Some(kind @ ("path" | "paths")) => {
            use path_record::comp;
            let mut t = path_record::Repr {
                slid: lid_arg(args.get(1)),
                ..Default::default()
            };
            if kind == "path" {
                t.dlid = lid_arg(args.get(2));
                print_path(&client.sa_get(&t, comp::SLID | comp::DLID)?);
            } else {
                let table = client.sa_get_table(&t, comp::SLID)?;
                table.iter().for_each(|r| print_path(&r));
                eprintln!("sa_query: {} PathRecords", table.len());
            }
        }
        _ => usage(),
    }
    Ok(())
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let Err(e) = run(&args) {
        eprintln!("sa_query: {e}");
        std::process::exit(1);
    }
}
