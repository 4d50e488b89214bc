//! End-to-end tests of the `vmad` command on its embedded demo fabric
//! (`--transport sim`), the library's default pair: vmadsim0 (LID 1, the built-in
//! SM and SA) — vmadsw0 (LID 3) — vmadsim1 (LID 2, ping and bulk responders).

use std::path::Path;
use std::process::Command;

use serde_json::Value;

/// Run `vmad args...`, assert success, return stdout.
pub(crate) fn vmad(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_vmad"))
        .args(args)
        .output()
        .expect("run vmad");
    assert!(
        out.status.success(),
        "vmad {args:?} failed: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Run `vmad --json args...` and parse its output.
pub(crate) fn vmad_json(args: &[&str]) -> Value {
    let mut a = vec!["--json"];
    a.extend_from_slice(args);
    let text = vmad(&a);
    let j: Value = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("vmad {args:?}: bad JSON ({e}): {text}"));
    assert_eq!(j["schema"], 1, "vmad {args:?}: no schema version: {text}");
    j
}

fn strs(v: &Value, key: &str) -> Vec<String> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|r| r[key].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn ping_text_and_json() {
    let t = vmad(&["ping", "-c", "4"]);
    assert_eq!(
        t.matches("Pong from vmadsim1 (Lid 2): time ").count(),
        4,
        "{t}"
    );
    assert!(
        t.contains("4 packets transmitted, 4 received, 0% packet loss"),
        "{t}"
    );
    assert!(t.contains("latency histogram:"), "{t}");
    let j = vmad_json(&["ping", "-c", "3", "2"]);
    assert_eq!(j["dest_lid"], 2);
    assert_eq!(j["responder"], "vmadsim1");
    assert_eq!(
        (j["transmitted"].as_u64(), j["received"].as_u64()),
        (Some(3), Some(3))
    );
    let hist: u64 = j["histogram"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["count"].as_u64().unwrap())
        .sum();
    assert_eq!(hist, 3);
    assert_eq!(j["samples_us"].as_array().unwrap().len(), 3);
    let rtt = &j["rtt_us"];
    assert!(
        rtt["min"].as_u64() <= rtt["avg"].as_u64() && rtt["avg"].as_u64() <= rtt["max"].as_u64()
    );
}

#[test]
fn ping_to_a_lid_without_responder_reports_loss() {
    // LID 9 does not exist: every ping times out; the statistics still come, with status 75.
    let out = Command::new(env!("CARGO_BIN_EXE_vmad"))
        .args([
            "--json",
            "-t",
            "50",
            "--retries",
            "0",
            "ping",
            "-c",
            "2",
            "9",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(75));
    let j: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (j["schema"].as_u64(), j["exit"].as_u64()),
        (Some(1), Some(75))
    );
    assert_eq!(
        (j["transmitted"].as_u64(), j["received"].as_u64()),
        (Some(2), Some(0))
    );
    assert_eq!(j["loss_pct"].as_f64(), Some(100.0));
}

#[test]
fn sa_query_node_records() {
    let t = vmad(&["sa-query"]);
    assert_eq!(t.matches("NodeRecord dump:").count(), 3, "{t}");
    assert!(t.contains("NodeDescription.........vmadsw0"), "{t}");
    let j = vmad_json(&["sa-query", "NodeRecord"]);
    // The built-in SA, where the built-in SM runs.
    assert_eq!(j["sa_lid"], 1);
    let recs = &j["records"];
    let mut descs = strs(recs, "node_desc");
    descs.sort();
    assert_eq!(descs, ["vmadsim0", "vmadsim1", "vmadsw0"]);
    for r in recs.as_array().unwrap() {
        let (lid, kind) = (r["lid"].as_u64().unwrap(), r["node_type"].as_u64().unwrap());
        match r["node_desc"].as_str().unwrap() {
            "vmadsim0" => assert_eq!((lid, kind), (1, 1)),
            "vmadsw0" => assert_eq!((lid, kind, r["num_ports"].as_u64().unwrap()), (3, 2, 8)),
            _ => assert_eq!((lid, kind), (2, 1)),
        }
    }
    let one = vmad_json(&["sa-query", "node", "--lid", "3"]);
    assert_eq!(strs(&one["records"], "node_desc"), ["vmadsw0"]);
}

#[test]
fn sa_query_path_records() {
    let j = vmad_json(&["sa-query", "PathRecord", "--slid", "1", "--dlid", "3"]);
    let recs = j["records"].as_array().unwrap();
    assert_eq!(recs.len(), 1, "{j}");
    let r = &recs[0];
    assert_eq!((r["slid"].as_u64(), r["dlid"].as_u64()), (Some(1), Some(3)));
    assert_eq!(r["pkey"], 0xffff);
    assert!(r["sgid"].as_str().unwrap().starts_with("fe80::"), "{r}");
    // All pairs of the 3 end ports.
    let all = vmad_json(&["sa-query", "path"]);
    assert_eq!(all["records"].as_array().unwrap().len(), 9);
    let t = vmad(&["sa-query", "path", "--slid", "3", "--dlid", "1"]);
    assert!(
        t.contains("dlid....................0x1") && t.contains("slid....................0x3"),
        "{t}"
    );
}

#[test]
fn smp_query_by_lid_and_direct_route() {
    let t = vmad(&["smp-query", "nodeinfo", "3"]);
    assert!(t.starts_with("# Node info: Lid 3"), "{t}");
    assert!(t.contains("NodeType:........................Switch"), "{t}");
    assert!(t.contains("NumPorts:........................8"), "{t}");
    let nd = vmad(&["smp-query", "-D", "nd", "0,1,2"]);
    assert!(nd.contains("vmadsim1"), "{nd}");
    let pi = vmad_json(&["smp-query", "portinfo", "1"]);
    assert_eq!(
        (pi["lid"].as_u64(), pi["sm_lid"].as_u64()),
        (Some(1), Some(1))
    );
    assert_eq!(pi["port_state_name"], "Active");
    assert_eq!(pi["phys_state_name"], "LinkUp");
    let sw_port = vmad_json(&["smp-query", "-D", "pi", "0,1", "2"]);
    assert_eq!(
        (sw_port["local_port_num"].as_u64(), sw_port["lid"].as_u64()),
        (Some(2), Some(3))
    );
    let ni = vmad_json(&["smp-query", "-D", "ni", "0"]);
    assert_eq!(ni["node_type_name"], "Channel Adapter");
}

#[test]
fn discover_finds_the_demo_fabric() {
    let t = vmad(&["discover"]);
    assert!(t.contains("Switch\t8 \"S-"), "{t}");
    assert!(t.contains("# \"vmadsw0\" base port 0 lid 3 lmc 0"), "{t}");
    assert!(t.contains("# 3 nodes (1 switches, 2 CAs)"), "{t}");
    let j = vmad_json(&["discover"]);
    assert_eq!(
        (j["switches"].as_u64(), j["cas"].as_u64()),
        (Some(1), Some(2))
    );
    let nodes = j["nodes"].as_array().unwrap();
    assert_eq!(
        nodes[0]["desc"], "vmadsim0",
        "the sweep starts at the local port"
    );
    let sw = nodes.iter().find(|n| n["type"] == "switch").unwrap();
    assert_eq!(sw["lid"], 3);
    assert_eq!(sw["route"], serde_json::json!([1]));
    let links: Vec<(u64, String)> = sw["links"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            let remote = l["remote"].as_str().unwrap();
            let desc = nodes.iter().find(|n| n["name"] == remote).unwrap()["desc"]
                .as_str()
                .unwrap();
            (l["port"].as_u64().unwrap(), desc.to_owned())
        })
        .collect();
    assert_eq!(
        links,
        [(1, "vmadsim0".to_owned()), (2, "vmadsim1".to_owned())]
    );
    // From the built-in SA's tables: the same nodes and links, no SMP sent.
    let sa = vmad_json(&["discover", "--sa"]);
    let key = |j: &Value| {
        let mut v: Vec<String> = j["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| format!("{} {} {}", n["name"], n["lid"], n["links"]))
            .collect();
        v.sort();
        v
    };
    assert_eq!(key(&sa), key(&j));
    assert_eq!(
        (sa["smps"].as_u64(), sa["links"].as_u64()),
        (Some(0), Some(2))
    );
    // The library's own forms.
    let lib: Value = serde_json::from_str(&vmad(&["discover", "--format", "json"])).unwrap();
    assert_eq!(
        (
            lib["nodes"].as_array().unwrap().len(),
            lib["links"].as_array().unwrap().len()
        ),
        (3, 2)
    );
    let dot = vmad(&["discover", "--dot", "--window", "1", "--per-node", "1"]);
    assert!(dot.starts_with("graph fabric {"), "{dot}");
    assert_eq!(dot.matches(" -- ").count(), 2, "{dot}");
}

#[test]
fn bench_table_and_counters() {
    let j = vmad_json(&[
        "-t",
        "3000",
        "bench",
        "-n",
        "40",
        "--window",
        "4",
        "--size",
        "4096",
        "--transfers",
        "3",
    ]);
    let runs = j["runs"].as_array().unwrap();
    let names: Vec<&str> = runs.iter().map(|r| r["run"].as_str().unwrap()).collect();
    assert_eq!(names, ["latency", "throughput", "rmpp"]);
    for r in runs {
        assert_eq!(r["failed"], 0, "{r}");
    }
    assert_eq!(runs[0]["ok"], 40);
    assert_eq!(runs[1]["ok"], 40);
    assert_eq!(runs[2]["ok"], 3);
    let c = &j["counters"];
    // 4096 bytes over 216-byte vendor segments: 19 per transfer, each ACKed at least once.
    assert_eq!(c["rmpp_reassembled"], 3);
    assert!(c["received"].as_u64().unwrap() >= 80 + 3 * 19, "{c}");
    assert!(c["sent"].as_u64().unwrap() >= 80 + 3 * 2, "{c}");
    assert_eq!(c["timeouts"], 0);
    assert_eq!(c["rmpp_aborts"], 0);
    assert_eq!(c["queue_depth_outstanding"], 0);
    let t = vmad(&[
        "bench",
        "--mode",
        "rmpp",
        "--size",
        "1000",
        "--transfers",
        "2",
    ]);
    assert!(
        t.contains("rmpp") && t.contains("MB/s") && t.contains("port counters"),
        "{t}"
    );
    assert!(t.contains("drop_rmpp_unknown"), "{t}");
}

pub(crate) fn capture(dir: &Path, name: &str, args: &[&str]) -> std::path::PathBuf {
    let path = dir.join(name);
    let mut a = vec!["--pcap", path.to_str().unwrap()];
    a.extend_from_slice(args);
    vmad(&a);
    path
}

#[test]
fn dump_decodes_an_sa_capture() {
    let dir = crate::pcap::scratch("cli-dump");
    let path = capture(&dir, "sa.pcap", &["sa-query"]);
    let t = vmad(&["dump", path.to_str().unwrap()]);
    let lines: Vec<&str> = t.lines().collect();
    assert_eq!(lines.len(), 5, "{t}");
    assert!(
        lines[0].contains("10.0.0.1 > 10.0.0.1 qp 1>1 SubnAdm v2 GetTable NodeRecord(0x0011)"),
        "{t}"
    );
    assert!(
        lines[1].contains("GetTableResp NodeRecord(0x0011)")
            && lines[1].contains("rmpp DATA seg 1 F"),
        "{t}"
    );
    assert!(lines[2].contains("rmpp ACK seg 1"), "{t}");
    assert!(lines[3].contains("rmpp DATA seg 2 L"), "{t}");
    assert!(lines[4].contains("rmpp ACK seg 2"), "{t}");
    assert!(!t.contains("bad ICRC"), "{t}");
    let j = vmad_json(&["dump", path.to_str().unwrap()]);
    let types: Vec<Value> = j["packets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["rmpp_type"].clone())
        .collect();
    // The request is a plain MAD (RMPP header all zero), then DATA/ACK pairs.
    assert_eq!(types, [Value::Null, 1.into(), 2.into(), 1.into(), 2.into()]);
    assert_eq!(j["link_type"], 1);
}

#[test]
fn pcap_files_rotate_at_the_size_bound() {
    let dir = crate::pcap::scratch("cli-rotate");
    let path = dir.join("r.pcap");
    vmad(&[
        "--pcap",
        path.to_str().unwrap(),
        "--pcap-max-bytes",
        "4k",
        "bench",
        "--mode",
        "rmpp",
        "--size",
        "8000",
        "--transfers",
        "1",
    ]);
    for n in 0..3 {
        let p = vmad::pcap::rotated_path(&path, n);
        let len = std::fs::metadata(&p)
            .unwrap_or_else(|_| panic!("{} exists", p.display()))
            .len();
        assert!(len <= 4096, "{} is {len} bytes", p.display());
    }
    let none = vmad::pcap::rotated_path(&path, vmad::pcap::DEFAULT_KEEP + 1);
    assert!(
        !none.exists(),
        "only {} rotated files are kept",
        vmad::pcap::DEFAULT_KEEP
    );
}

type Args<'a> = &'a [&'a str];
type Env<'a> = &'a [(&'a str, &'a str)];

/// Each documented exit status (docs/tools.md), from a situation that causes it.
#[test]
fn exit_statuses_tell_failures_apart() {
    let dir = crate::pcap::scratch("cli-exit");
    let not_pcap = dir.join("not.pcap");
    std::fs::write(&not_pcap, b"this is not a capture").unwrap();
    let missing_dir = dir.join("missing/x.pcap");
    let np = not_pcap.to_str().unwrap();
    let md = missing_dir.to_str().unwrap();
    let sock = dir.join("no-ibsim.sock");
    let no_ibsim = [
        ("VMAD_TRANSPORT", "ibsim"),
        ("IBSIM_SOCKNAME", sock.to_str().unwrap()),
    ];
    let verbs_missing = if cfg!(feature = "verbs") { 69 } else { 78 };
    #[rustfmt::skip]
    let table: &[(Args, Env, i32)] = &[
        (&["ping", "-c", "1"], &[], 0),
        (&["--bogus", "ping"], &[], 64),
        (&["ping", "0xzz"], &[], 64),
        (&["sa-query", "--lid", "70000"], &[], 64),
        (&["smp-query", "bogus", "1"], &[], 64),
        (&["dump", np], &[], 65),
        (&["dump", "/nonexistent/x.pcap"], &[], 66),
        (&["-C", "nosuch0", "ping", "-c", "1"], &[], 69),
        (&["ping", "-c", "1"], &no_ibsim, 69),
        (&["-G", "ping", "-c", "1", "0x1234"], &[], 69),
        (&["--pcap", md, "ping", "-c", "1"], &[], 74),
        (&["-t", "20", "--retries", "0", "sa-query", "--sa-lid", "9"], &[], 75),
        (&["-t", "20", "--retries", "0", "ping", "-c", "1", "9"], &[], 75),
        (&["--transport", "verbs", "-C", "nosuch0", "ping"], &[], verbs_missing),
        // sysfs refuses writes to a read-only attribute even to root (EACCES).
        (&["--pcap", "/sys/kernel/uevent_seqnum", "ping", "-c", "1"], &[], 77),
    ];
    for (args, env, want) in table {
        let out = Command::new(env!("CARGO_BIN_EXE_vmad"))
            .args(*args)
            .env_remove("VMAD_TRANSPORT")
            .envs(env.iter().copied())
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(*want),
            "vmad {args:?} (env {env:?}): {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    // The JSON error document carries the same status.
    let out = Command::new(env!("CARGO_BIN_EXE_vmad"))
        .args(["--json", "-C", "nosuch0", "ping"])
        .output()
        .unwrap();
    let j: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (j["exit"].as_i64(), j["schema"].as_i64()),
        (Some(69), Some(1))
    );
}

/// A LID reads the same in hex or decimal everywhere; -G takes a port GUID.
#[test]
fn lids_in_hex_or_decimal_and_guids_with_dash_g() {
    let by_dec = vmad_json(&["ping", "-c", "1", "2"]);
    let by_hex = vmad_json(&["ping", "-c", "1", "0x2"]);
    // vmadsim1's port GUID.
    let by_guid = vmad_json(&["-G", "ping", "-c", "1", "0x766d616400000201"]);
    for j in [&by_dec, &by_hex, &by_guid] {
        assert_eq!(
            (j["dest_lid"].as_u64(), j["received"].as_u64()),
            (Some(2), Some(1))
        );
    }
    let hex = vmad_json(&["sa-query", "PathRecord", "--slid", "0x1", "--dlid", "0x3"]);
    let dec = vmad_json(&["sa-query", "PathRecord", "--slid", "1", "--dlid", "3"]);
    assert_eq!(hex["records"], dec["records"]);
    assert!(!dec["records"].as_array().unwrap().is_empty());
    let by_s = vmad_json(&["sa-query", "-s", "0x1"]);
    assert_eq!(by_s["records"], vmad_json(&["sa-query"])["records"]);
    let smp = vmad_json(&["-G", "smp-query", "nodedesc", "0x766d616400000200"]);
    let by_lid = vmad_json(&["-L", "smp-query", "nodedesc", "2"]);
    assert_eq!(smp, by_lid);
}

/// VMAD_TRANSPORT is --transport's default; the flag still wins.
#[test]
fn transport_defaults_from_vmad_transport() {
    let run = |env: &str, args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_vmad"))
            .args(args)
            .env("VMAD_TRANSPORT", env)
            .output()
            .unwrap()
            .status
            .code()
    };
    assert_eq!(run("bogus", &["ping", "-c", "1"]), Some(64));
    assert_eq!(run("sim", &["ping", "-c", "1"]), Some(0));
    // -v names the transport it took from the variable.
    let out = Command::new(env!("CARGO_BIN_EXE_vmad"))
        .args(["-v", "ping", "-c", "1"])
        .env("VMAD_TRANSPORT", "sim")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("vmad: sim transport, CA vmadsim0 port 1, LID 1"),
        "{err}"
    );
    assert!(err.contains("vmad: sent "), "{err}");
    assert_eq!(
        run("bogus", &["--transport", "sim", "ping", "-c", "1"]),
        Some(0)
    );
}

/// `--transport kernel|hybrid` open the host's CAs; where that cannot be done the
/// status and the message say why.
#[test]
fn host_transports_name_what_is_missing() {
    let run = |env: Option<&str>, args: &[&str]| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_vmad"));
        c.args(args).env_remove("VMAD_TRANSPORT");
        if let Some(v) = env {
            c.env("VMAD_TRANSPORT", v);
        }
        let out = c.output().unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    // A CA no host has: ENODEV, named.
    let (code, err) = run(
        None,
        &["--transport", "kernel", "-C", "vmad-none0", "discover"],
    );
    assert_eq!(code, Some(69), "{err}");
    assert!(
        err.contains("--transport kernel: cannot open vmad-none0"),
        "{err}"
    );
    #[cfg(not(feature = "verbs"))]
    {
        let (code, err) = run(None, &["--transport", "hybrid", "discover"]);
        assert_eq!(code, Some(78), "{err}");
        assert!(err.contains("without the hybrid transport"), "{err}");
    }
    let host_has_cas =
        std::fs::read_dir("/sys/class/infiniband").is_ok_and(|mut d| d.next().is_some());
    if host_has_cas {
        return; // The rest is what a host without CAs says.
    }
    for (env, args) in [
        (None, &["--transport", "kernel", "discover"][..]),
        (Some("kernel"), &["discover"][..]),
    ] {
        let (code, err) = run(env, args);
        assert_eq!(code, Some(69), "{err}");
        assert!(
            err.contains("this host has no CA (/sys/class/infiniband lists none)"),
            "{err}"
        );
    }
    // Nothing said: what the drop-in picks on a host without CAs, the embedded fabric.
    let (code, err) = run(None, &["-v", "ping", "-c", "1"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains("vmad: sim transport"), "{err}");
}

#[test]
fn errors_are_reported() {
    let out = Command::new(env!("CARGO_BIN_EXE_vmad"))
        .args(["--json", "smp-query", "bogus", "1"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let j: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(j["error"]
        .as_str()
        .unwrap()
        .contains("unsupported attribute"));
    let out = Command::new(env!("CARGO_BIN_EXE_vmad"))
        .args(["dump", "/nonexistent.pcap"])
        .output()
        .unwrap();
    assert!(!out.status.success());
}

/// The `vmad --transport ibsim` view of tests/topo/small.net against ibnetdiscover's.
#[test]
#[ignore = "needs ibsim: run by ./scripts/test"]
fn cli_on_ibsim_discovers_what_ibnetdiscover_sees() {
    let f = crate::ibsim::fabric::Fabric::start("small.net", &[]);
    let env = &f.env;
    let vmad_ibsim = |args: &[&str]| -> String {
        let out = Command::new(env!("CARGO_BIN_EXE_vmad"))
            .args(["--transport", "ibsim"])
            .args(args)
            .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let j: Value = serde_json::from_str(&vmad_ibsim(&["--json", "discover"])).unwrap();
    assert_eq!(
        (j["switches"].as_u64(), j["cas"].as_u64()),
        (Some(2), Some(4)),
        "{j}"
    );
    let mut ours = strs(&j["nodes"], "name");
    ours.sort();
    let text = f.exec(None, &["ibnetdiscover"]);
    let mut names: Vec<String> = text
        .lines()
        .filter(|l| l.starts_with("Switch\t") || l.starts_with("Ca\t"))
        .map(|l| {
            let s = l.find('"').unwrap() + 1;
            l[s..s + l[s..].find('"').unwrap()].to_owned()
        })
        .collect();
    names.sort();
    assert_eq!(ours, names, "same node GUIDs as ibnetdiscover");
    // Two parallel links between the switches, both found.
    let s1 = j["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["desc"] == "S1")
        .unwrap();
    assert_eq!(s1["links"].as_array().unwrap().len(), 4, "{s1}");
    let nd = vmad_ibsim(&["smp-query", "-D", "nd", "0,1"]);
    assert!(nd.contains("S1"), "{nd}");
}

/// Two `vmad` processes over RoCE v2 on ::1: `serve` answers, `ping` and
/// `bench` ask; the client's capture is IPv6 RoCE that tshark dissects.
#[test]
fn roce_serve_ping_and_bench_over_loopback() {
    use std::io::{BufRead, BufReader};
    use std::process::Stdio;
    let base = 48200 + (std::process::id() % 400) as u16 * 2;
    let (srv, cli) = (base.to_string(), (base + 1).to_string());
    let roce = |me: &str, peer: &str| -> Vec<String> {
        [
            "--transport",
            "roce",
            "--roce-addr",
            "::1",
            "--roce-udp-port",
            me,
            "--roce-peer-port",
            peer,
        ]
        .map(str::to_owned)
        .to_vec()
    };
    let mut child = Command::new(env!("CARGO_BIN_EXE_vmad"))
        .args(roce(&srv, &cli))
        .args(["serve", "--for", "60"])
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    struct Kill(std::process::Child);
    impl Drop for Kill {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let mut line = String::new();
    BufReader::new(child.stderr.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let _server = Kill(child);
    assert!(line.starts_with("serving ping"), "{line}");
    let dir = crate::pcap::scratch("cli-roce");
    let pcap = dir.join("roce.pcap");
    let mut args = roce(&cli, &srv);
    args.extend(
        [
            "--pcap",
            pcap.to_str().unwrap(),
            "--json",
            "ping",
            "--gid",
            "::1",
            "-c",
            "3",
        ]
        .map(str::to_owned),
    );
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let j: Value = serde_json::from_str(&vmad(&args)).unwrap();
    assert_eq!(
        (j["received"].as_u64(), j["responder"].as_str()),
        (Some(3), Some("vmadroce0"))
    );
    assert_eq!(j["dest"], "Gid ::1");
    let rows = crate::pcap::tshark_fields(&pcap);
    if let Some(rows) = rows {
        assert_eq!(rows.len(), 6, "{rows:?}");
        for (i, r) in rows.iter().enumerate() {
            assert_eq!(r[6], "", "malformed: {r:?}");
            assert_eq!(
                (r[0].as_str(), r[1].as_str()),
                ("0x32", if i % 2 == 0 { "0x01" } else { "0x81" })
            );
        }
    }
    let mut args = roce(&cli, &srv);
    args.extend(
        [
            "--json",
            "bench",
            "--gid",
            "::1",
            "-n",
            "20",
            "--size",
            "5000",
            "--transfers",
            "2",
        ]
        .map(str::to_owned),
    );
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let b: Value = serde_json::from_str(&vmad(&args)).unwrap();
    let ok: Vec<u64> = b["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["ok"].as_u64().unwrap())
        .collect();
    assert_eq!(ok, [20, 20, 2]);
}

/// `bench --progress` reports each run on stderr as it goes; stdout keeps only the table.
#[test]
fn bench_progress_goes_to_stderr() {
    let out = Command::new(env!("CARGO_BIN_EXE_vmad"))
        .args(["bench", "--mode", "latency", "-n", "5", "--progress"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("\rbench: latency 1/5"), "{err:?}");
    assert!(
        err.contains("\rbench: latency 5/5"),
        "the final count is drawn: {err:?}"
    );
    assert!(!String::from_utf8_lossy(&out.stdout).contains("bench: latency"));
}

/// One man page per subcommand `vmad --help` lists, plus vmad.1; a completion
/// script that names them all.
#[test]
fn man_pages_and_completions_cover_every_subcommand() {
    let help = vmad(&["--help"]);
    let subs: Vec<&str> = help
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|&c| c != "help")
        .collect();
    assert!(subs.len() >= 8, "{help}");
    let dir = crate::pcap::scratch("cli-man");
    vmad(&["man", "--out", dir.to_str().unwrap()]);
    let mut pages: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    pages.sort();
    // A page per subcommand, and one per subcommand of its own (vmad-fabric-up.1).
    for s in &subs {
        assert!(
            pages.contains(&format!("vmad-{s}.1")),
            "no page for {s}: {pages:?}"
        );
    }
    for p in &pages {
        let ours = p == "vmad.1"
            || subs
                .iter()
                .any(|s| *p == format!("vmad-{s}.1") || p.starts_with(&format!("vmad-{s}-")));
        assert!(ours, "a page for no subcommand: {p}");
    }
    let page = std::fs::read_to_string(dir.join("vmad.1")).unwrap();
    assert!(
        page.starts_with(".ie") || page.contains(".TH vmad 1"),
        "{page}"
    );
    assert!(
        page.contains("75") && page.contains("timeout"),
        "exit status table in vmad.1"
    );
    let bash = vmad(&["completions", "bash"]);
    for s in &subs {
        assert!(bash.contains(s), "bash completion lacks {s}");
    }
}
