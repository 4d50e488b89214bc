//! `vmad perf` on ibsim (whose PMAs are ibsim's own), against perfquery's view
//! of the same counters and the fabric `vmad discover` finds.

use std::path::Path;
use std::process::Command;

use serde_json::Value;

use crate::ibsim::fabric::Fabric as Ibsim;

/// ibsim on a topology with OpenSM's LIDs in place (`opensm -o`); stopped when dropped.
struct Fabric(Ibsim);

impl Fabric {
    fn start(topo: &str) -> Fabric {
        let f = Ibsim::start_file(&Path::new(env!("CARGO_MANIFEST_DIR")).join(topo), &[]);
        f.opensm(&["--once"]);
        Fabric(f)
    }

    fn vmad_json(&self, args: &[&str]) -> Value {
        let out = Command::new(env!("CARGO_BIN_EXE_vmad"))
            .args(["--transport", "ibsim", "--json"])
            .args(args)
            .envs(self.0.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let j: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(j["schema"], 1);
        j
    }

    /// perfquery's counters of one port, by name (PortXmitData, SymbolErrorCounter, ...).
    fn perfquery(&self, lid: u64, port: u64) -> Vec<(String, u64)> {
        self.0
            .exec(None, &["perfquery", &lid.to_string(), &port.to_string()])
            .lines()
            .filter_map(|l| {
                let (k, v) = l.split_once(':')?;
                Some((k.to_owned(), v.trim_start_matches('.').parse().ok()?))
            })
            .collect()
    }
}

fn counter(p: &Value, name: &str) -> u64 {
    p["counters"][name]
        .as_u64()
        .unwrap_or_else(|| panic!("no {name} in {p}"))
}

#[test]
#[ignore = "needs ibsim: run by ./scripts/test"]
fn perf_on_ibsim_reads_every_linked_port_as_perfquery_does() {
    let f = Fabric::start("tests/topo/small.net");
    let topo = f.vmad_json(&["discover"]);
    let mut linked: Vec<(String, u64)> = topo["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|n| {
            n["links"].as_array().unwrap().iter().map(move |l| {
                (
                    n["guid"].as_str().unwrap().to_owned(),
                    l["port"].as_u64().unwrap(),
                )
            })
        })
        .collect();
    linked.sort();

    let dir = crate::pcap::scratch("cli-perf");
    let prom = dir.join("fabric.prom");
    let before = f.vmad_json(&["perf", "--prometheus", prom.to_str().unwrap()]);
    let ports = before["ports"].as_array().unwrap();
    let mut read: Vec<(String, u64)> = ports
        .iter()
        .map(|p| {
            (
                p["guid"].as_str().unwrap().to_owned(),
                p["port"].as_u64().unwrap(),
            )
        })
        .collect();
    read.sort();
    assert_eq!(
        read, linked,
        "one row per linked port of the discovered fabric"
    );
    assert!(ports
        .iter()
        .all(|p| p["error"].is_null() && p["extended"].is_object()));

    // The switch port facing our own CA (the sweep's first node), read by perfquery
    // between two vmad reads: error counters equal, traffic counters in between (each
    // read of the switch's PMA crosses that port both ways).
    let nodes = topo["nodes"].as_array().unwrap();
    let link = &nodes[0]["links"][0];
    let switch = nodes.iter().find(|n| n["name"] == link["remote"]).unwrap();
    let sw = ports
        .iter()
        .find(|p| p["guid"] == switch["guid"] && p["port"] == link["remote_port"])
        .unwrap();
    let (lid, port) = (sw["lid"].as_u64().unwrap(), sw["port"].as_u64().unwrap());
    let arg = (lid.to_string(), port.to_string());
    let first = &f.vmad_json(&["perf", &arg.0, &arg.1])["ports"][0];
    let theirs = f.perfquery(lid, port);
    let second = &f.vmad_json(&["perf", &arg.0, &arg.1])["ports"][0];
    let their = |n: &str| {
        theirs
            .iter()
            .find(|(k, _)| k == n)
            .map(|(_, v)| *v)
            .unwrap()
    };
    for (ours, name) in [
        ("symbol_errors", "SymbolErrorCounter"),
        ("link_downed", "LinkDownedCounter"),
        ("rcv_errors", "PortRcvErrors"),
        ("xmit_discards", "PortXmitDiscards"),
        ("vl15_dropped", "VL15Dropped"),
    ] {
        assert_eq!(counter(first, ours), their(name), "{ours}");
    }
    for (ours, name) in [
        ("xmit_pkts", "PortXmitPkts"),
        ("rcv_pkts", "PortRcvPkts"),
        ("xmit_data", "PortXmitData"),
    ] {
        let (a, b, t) = (counter(first, ours), counter(second, ours), their(name));
        assert!(a < t && t < b, "{ours}: vmad {a}, perfquery {t}, vmad {b}");
    }

    // The Prometheus file holds the same numbers as the JSON of the same run.
    let text = std::fs::read_to_string(&prom).unwrap();
    assert!(text.contains("# TYPE vmad_perf_xmit_pkts_total counter"));
    for p in ports {
        let labels = format!(
            "{{guid=\"{}\",node=\"{}\",lid=\"{}\",port=\"{}\"}}",
            p["guid"].as_str().unwrap(),
            p["node"].as_str().unwrap(),
            p["lid"],
            p["port"]
        );
        for name in ["xmit_pkts", "symbol_errors"] {
            let line = format!("vmad_perf_{name}_total{labels} {}", counter(p, name));
            assert!(text.lines().any(|l| l == line), "missing: {line}");
        }
        let ext = format!(
            "vmad_perf_ext_rcv_data_total{labels} {}",
            p["extended"]["rcv_data"].as_u64().unwrap()
        );
        assert!(text.lines().any(|l| l == ext), "missing: {ext}");
    }
}
