//! OpenSM's SA and the built-in SA asked the same queries on the same
//! topology (tests/topo/small.net and ft234.net), record type by record type and method
//! by method, and their answers compared: MAD status, response method and
//! attribute, and the records, normalised as `fields` says (LIDs, which two
//! SMs assign differently, compared as the port GUIDs they stand for).
//!
//! OpenSM runs on vmad's drop-in (`scripts/with-vmad --ibsim`) over ibsim,
//! so its GetTable answers come over RMPP whole; the client is a
//! `vmad::Port` on H2 on each side. The departures kept on purpose are the
//! ones `docs/sa.md` lists; [`DEPARTURES`] names each query they excuse,
//! and the test fails on any other difference, with a diff of both answers.

mod fields;
mod queries;

use std::collections::HashMap;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use vmad::engine::{AgentId, AgentSpec, Event, SendRequest};
use vmad::pcap::PcapConfig;
use vmad::port::{Port, PortConfig};
use vmad::subnet::FabricBuilder;
use vmad::transport::ibsim::IbsimTransport;
use vmad::types::{MadAddr, Qp, GSI_QKEY};

use crate::ibsim::fabric::{topo, Fabric};
use crate::util::wait_for_text;
use queries::Query;

/// Queries whose answers still differ, each explained in docs/sa.md
/// ("What the parity test finds"), by name. Any other difference fails.
const DEPARTURES: &[&str] = &[
    // Methods OpenSM leaves unanswered; the built-in SA answers 0x000c.
    "NodeRecord Delete",
    "PathRecord Set",
    "Unknown attribute",
    // Record types the built-in SA does not serve yet (0x000c).
    // The built-in SM reads no P_Key table of a switch's external port
    // (OpenSM does, for partition enforcement), and blocks follow the
    // SMAs' PartitionCap (OpenSM also writes BlockNum in host order).
    "P_KeyTableRecord GetTable, trusted",
];

/// One SA's answer to one query.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Answer {
    status: u16,
    method: u8,
    attr: u16,
    /// Each record, normalised to `field=value` lines.
    records: Vec<String>,
}

/// One SA and a client of it.
struct Side {
    name: &'static str,
    port: Port,
    agent: AgentId,
    sa_lid: u16,
    tid: u32,
    /// Port GUID by LID (from the SA's own NodeRecords).
    guid_of_lid: HashMap<u16, u64>,
    /// The switches' LIDs.
    switch_lids: Vec<u16>,
}

impl Side {
    fn new(name: &'static str, port: Port) -> Side {
        let sa_lid = port.attrs().sm_lid;
        assert_ne!(sa_lid, 0, "{name}: no SM LID");
        let agent = port
            .register(AgentSpec {
                qp: Qp::Gsi,
                mgmt_class: 0x03.into(),
                class_version: 2,
                rmpp_version: 1,
                method_mask: [0; 2],
                oui: 0,
                user_rmpp: false,
            })
            .unwrap();
        let mut s = Side {
            name,
            port,
            agent,
            sa_lid,
            tid: 0x5a00,
            guid_of_lid: HashMap::new(),
            switch_lids: Vec::new(),
        };
        let nodes = s.raw(0x12, 0x0011, 0, &[]);
        for r in nodes.2 {
            let lid = u16::from_be_bytes([r[0], r[1]]);
            let guid = u64::from_be_bytes(r[24..32].try_into().unwrap());
            s.guid_of_lid.insert(lid, guid);
            if r[6] == 2 {
                s.switch_lids.push(lid);
            }
        }
        assert!(!s.guid_of_lid.is_empty(), "{name}: no NodeRecords");
        s
    }

    /// The LID of the end port with this port GUID.
    fn lid(&self, guid: u64) -> u16 {
        *self
            .guid_of_lid
            .iter()
            .find(|(_, g)| **g == guid)
            .unwrap_or_else(|| panic!("{}: no LID for {guid:#x}", self.name))
            .0
    }

    /// Send one SA request; (status, method, raw records, attr, sent ok).
    fn raw(
        &mut self,
        method: u8,
        attr: u16,
        mask: u64,
        rec: &[u8],
    ) -> (u16, u8, Vec<Vec<u8>>, u16) {
        self.raw_with(method, attr, mask, rec, (0, 0))
    }

    /// `keys`: the SM_Key and AttributeModifier. A GetMulti goes with
    /// RMPPFlags.Active, as OpenSM requires.
    fn raw_with(
        &mut self,
        method: u8,
        attr: u16,
        mask: u64,
        rec: &[u8],
        (sm_key, attr_mod): (u64, u32),
    ) -> (u16, u8, Vec<Vec<u8>>, u16) {
        let rmpp_active = method == 0x14;
        self.tid += 1;
        let mut m = [0u8; 256];
        m[0] = 1;
        m[1] = 0x03;
        m[2] = 2;
        m[3] = method;
        m[12..16].copy_from_slice(&self.tid.to_be_bytes());
        m[16..18].copy_from_slice(&attr.to_be_bytes());
        m[20..24].copy_from_slice(&attr_mod.to_be_bytes());
        m[24] = 1; // RMPP version
        if rmpp_active {
            m[26] = 0x01; // RMPPFlags.Active (the engine sets type and lengths)
        }
        m[36..44].copy_from_slice(&sm_key.to_be_bytes());
        m[44..46].copy_from_slice(&(rec.len().div_ceil(8) as u16).to_be_bytes());
        m[48..56].copy_from_slice(&mask.to_be_bytes());
        m[56..56 + rec.len()].copy_from_slice(rec);
        let addr = MadAddr {
            lid: self.sa_lid,
            qpn: 1,
            qkey: GSI_QKEY,
            ..MadAddr::default()
        };
        self.port
            .send(
                self.agent,
                SendRequest {
                    addr,
                    mad: &m,
                    timeout_ms: 1000,
                    retries: 3,
                },
            )
            .unwrap();
        loop {
            match self.port.recv(Some(Duration::from_secs(30))) {
                Ok(Event::Recv { mad, .. }) if mad[12..16] == m[12..16] => {
                    return parse(&mad);
                }
                Ok(Event::SendTimedOut { header, .. }) if header[12..16] == m[12..16] => {
                    // No answer at all (an SA ignores, e.g., a wrong SM_Key).
                    return (0xffff, 0, Vec::new(), 0);
                }
                Ok(_) => {}
                Err(e) => panic!("{}: no event: {e}", self.name),
            }
        }
    }

    fn ask(&mut self, q: &Query) -> Answer {
        let rec = (q.record)(self);
        let (status, method, raw, attr) =
            self.raw_with(q.method, q.attr, q.mask, &rec, (q.sm_key, q.attr_mod));
        // Sorted: the two SAs walk their tables in different orders, and
        // IBA sets no order on a table's records.
        let mut records: Vec<String> = raw
            .iter()
            .filter(|r| !fields::empty_block(attr, r))
            .map(|r| fields::normalise(attr, r, &self.guid_of_lid, &self.switch_lids))
            .collect();
        records.sort();
        Answer {
            status,
            method,
            attr,
            records,
        }
    }
}

/// (status, method, records, attribute) of an SA response.
fn parse(mad: &[u8]) -> (u16, u8, Vec<Vec<u8>>, u16) {
    let status = u16::from_be_bytes([mad[4], mad[5]]);
    let method = mad[3];
    let attr = u16::from_be_bytes([mad[16], mad[17]]);
    let stride = usize::from(u16::from_be_bytes([mad[44], mad[45]])) * 8;
    let mut records = Vec::new();
    if status == 0 && method != 0x92 && method != 0x94 {
        // One record in one MAD: all of the data, whatever AttributeOffset
        // says (OpenSM rounds a 36-byte InformInfo down to 4 words, and
        // leaves ClassPortInfo's at 0); the fields say which bytes count.
        records.push(mad[56..].to_vec());
    } else if status == 0 && stride > 0 {
        let data = &mad[56..];
        let n = if method == 0x92 || method == 0x94 {
            data.len() / stride
        } else {
            1
        };
        records = data
            .chunks_exact(stride)
            .take(n)
            .map(<[u8]>::to_vec)
            .collect();
        // An RMPP message ends on a segment boundary: drop its zero padding.
        while records.last().is_some_and(|r| r.iter().all(|b| *b == 0)) {
            records.pop();
        }
    }
    (status, method, records, attr)
}

/// OpenSM on vmad's drop-in over the fabric's ibsim, at H1; killed on drop.
struct OpenSm(Child);

impl OpenSm {
    fn start(f: &Fabric) -> OpenSm {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let dir = f.run.join("dropin-osm");
        std::fs::create_dir_all(&dir).unwrap();
        let conf = dir.join("opensm.conf");
        std::fs::write(&conf, "force_log_flush TRUE\n").unwrap();
        let log = dir.join("opensm.log");
        let mut cmd = Command::new(root.join("scripts/with-vmad"));
        cmd.arg("--ibsim")
            .arg("opensm")
            .arg("-F")
            .arg(&conf)
            .args(["-s", "0", "-f"])
            .arg(&log)
            .current_dir(&dir)
            .env("OSM_CACHE_DIR", &dir)
            .env("OSM_TMP_DIR", &dir)
            .env("SIM_HOST", "H1")
            // Evidence for a failure (the run directory is kept then): a GetMulti
            // OpenSM left unanswered once in 90 runs, and nothing told where it was lost.
            .env("VMAD_PCAP", dir.join("opensm.pcap"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        for (k, v) in &f.env {
            cmd.env(k, v);
        }
        let child = cmd.spawn().expect("start OpenSM on the drop-in");
        let mut osm = OpenSm(child);
        // OpenSM says SUBNET UP in its log.
        wait_for_text(&log, "SUBNET UP", Duration::from_secs(120), || {
            assert!(osm.0.try_wait().unwrap().is_none(), "OpenSM exited");
        });
        osm
    }
}

impl Drop for OpenSm {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
#[ignore = "needs ibsim/opensm: run by ./scripts/test"]
fn ibsim_opensm_sa_and_builtin_sa_answer_alike() {
    parity("small.net", &[]);
}

/// The same queries on a fat tree of 234 nodes (18 switches): the GUIDs the queries
/// name (H1..H4: the first four CAs' ports, S1: the first switch) exist there too.
#[test]
#[ignore = "needs ibsim/opensm: run by ./scripts/test"]
fn ibsim_opensm_sa_and_builtin_sa_answer_alike_ft234() {
    // The LIDs in an LFT block are numbers: OpenSM numbers ports in the order its
    // sweep found them, the built-in SM in the file's order (as a guid2lid file would
    // give them), so past the first few LIDs the blocks hold different ports (docs/sa.md).
    parity(
        "ft234.net",
        &["LFTRecord GetTable", "LFTRecord Get by LID and block"],
    );
}

/// The LID the built-in SM gives `name`'s port 1 (or a switch's port 0) on the
/// topology `text`: one LID per CA port, one per switch, in the file's order.
fn planned_lid(text: &str, name: &str) -> u16 {
    let mut lid = 1u16;
    for line in text.lines() {
        let Some((kind, rest)) = line.split_once('\t') else {
            continue;
        };
        let ports: u16 = match (kind, rest.split_whitespace().next()) {
            ("Hca" | "Ca", Some(n)) => n.parse().unwrap(),
            ("Switch", Some(_)) => 1,
            _ => continue,
        };
        if rest.contains(&format!("\"{name}\"")) {
            return lid;
        }
        lid += ports;
    }
    panic!("no node {name}");
}

/// The client of OpenSM's SA, on H2, capturing to the run directory (kept when the
/// test fails) beside OpenSM's own capture.
fn client_port(f: &Fabric) -> Port {
    let mut t = IbsimTransport::connect(f.config(Some("H2"))).unwrap();
    t.refresh_attrs().unwrap();
    let config = PortConfig {
        pcap: Some(PcapConfig::new(f.run.join("client.pcap"))),
        ..PortConfig::default()
    };
    Port::open(Box::new(t), config).unwrap()
}

fn parity(topology: &str, departures: &[&str]) {
    let f = Fabric::start(topology, &[]);
    let _osm = OpenSm::start(&f);
    let mut osm = Side::new("OpenSM", client_port(&f));

    let text = std::fs::read_to_string(topo(topology)).unwrap();
    // The built-in SM on H1's port, where OpenSM runs (SIM_HOST=H1): what depends on
    // the SM's place (SMInfo, MasterSMLID, a switch port 0's LocalPortNum) agrees.
    let fabric = FabricBuilder::from_topology(&text)
        .unwrap()
        .sm_lid(planned_lid(&text, "H1"))
        .build_private()
        .unwrap();
    let t = fabric.open("H2", 1).unwrap();
    let mut vmad = Side::new(
        "built-in",
        Port::open(Box::new(t), PortConfig::default()).unwrap(),
    );

    let mut report = String::new();
    let mut departed = Vec::new();
    for q in queries::all() {
        let theirs = osm.ask(&q);
        let mine = vmad.ask(&q);
        eprintln!(
            "{:<50} OpenSM {:#06x} x{:<3} built-in {:#06x} x{}",
            q.name,
            theirs.status,
            theirs.records.len(),
            mine.status,
            mine.records.len()
        );
        if std::env::var_os("SA_PARITY_SHOW").is_some() {
            eprintln!(
                "{}\n  OpenSM: {:#?}\n  built-in: {:#?}",
                q.name, theirs.records, mine.records
            );
        }
        if theirs == mine {
            continue;
        }
        if DEPARTURES.contains(&q.name) || departures.contains(&q.name) {
            departed.push(q.name);
            eprintln!(
                "departure (docs/sa.md): {}\n{}",
                q.name,
                fields::diff(&theirs, &mine)
            );
            continue;
        }
        report += &format!("\n== {}\n{}", q.name, fields::diff(&theirs, &mine));
    }
    eprintln!("documented departures seen: {departed:?}");
    assert!(
        report.is_empty(),
        "OpenSM (-) and the built-in SA (+) differ:{report}"
    );
}
