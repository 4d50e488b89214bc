//! The CI scenario of issue #33's acceptance, as one test: `vmad fabric up` on
//! ft1612, then, each in its own process, OpenSM (unmodified, on the drop-in found
//! through LD_LIBRARY_PATH) taking over as SM, `saquery -N`, `ibnetdiscover`,
//! `perfquery` and a Rust client (`vmad sa-query`); then the same diags preloaded
//! with umad2sim, as on an ibsim rig. Event-driven: OpenSM's "SUBNET UP" line and the
//! server's `ctl wait-up`/`wait-clients` answers, never a sleep.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::thread::JoinHandle;

use super::{dropin_dir, run_tool, topo, Served};

const UMAD2SIM: &str = "/usr/lib/x86_64-linux-gnu/umad2sim/libumad2sim.so";

/// One end of a link: a node's description and a port number.
type End = (String, u8);

/// The node set (descriptions) and link set (unordered, by description) of an ibsim
/// topology file or of `ibnetdiscover`'s default output: both name a node on its
/// header line (`Switch 64 "L0"`, `Switch 64 "S-…" # "L0" …`) and list its links as
/// `[port] … "PEER"[peer port]`; ibnetdiscover's names are GUIDs, its descriptions
/// follow `# "`.
fn node_and_link_sets(text: &str) -> (BTreeSet<String>, BTreeSet<(End, End)>) {
    let first_quoted = |s: &str| -> Option<(String, usize)> {
        let a = s.find('"')? + 1;
        let b = a + s[a..].find('"')?;
        Some((s[a..b].to_string(), b + 1))
    };
    let mut desc: BTreeMap<String, String> = BTreeMap::new();
    let mut raw: Vec<((String, u8), (String, u8))> = Vec::new();
    let mut current: Option<String> = None;
    for line in text.lines() {
        let header = ["Switch\t", "Ca\t", "Hca\t", "Rt\t"]
            .iter()
            .any(|p| line.starts_with(p));
        if header {
            let (key, _) = first_quoted(line).expect("a node's name");
            let d = line
                .find("# \"")
                .and_then(|i| first_quoted(&line[i..]))
                .map_or(key.clone(), |(d, _)| d);
            desc.insert(key.clone(), d);
            current = Some(key);
        } else if let (Some(me), Some(rest)) = (&current, line.strip_prefix('[')) {
            let close = rest.find(']').unwrap();
            let port: u8 = rest[..close].parse().unwrap();
            let (peer, at) = first_quoted(&rest[close..]).expect("a peer");
            let after = &rest[close + at..];
            let pp = after.strip_prefix('[').expect("a peer port");
            let pp: u8 = pp[..pp.find(']').unwrap()].parse().unwrap();
            raw.push(((me.clone(), port), (peer, pp)));
        } else if line.trim().is_empty() {
            current = None;
        }
    }
    let name = |k: &String| desc.get(k).cloned().unwrap_or_else(|| k.clone());
    let links = raw
        .into_iter()
        .map(|((a, p), (b, q))| {
            let (x, y) = ((name(&a), p), (name(&b), q));
            if x <= y {
                (x, y)
            } else {
                (y, x)
            }
        })
        .collect();
    (desc.into_values().collect(), links)
}

/// `perfquery`'s counter NAME (its `Name:....value` line).
fn counter(perfquery: &str, name: &str) -> u64 {
    let line = perfquery
        .lines()
        .find(|l| l.starts_with(&format!("{name}:")))
        .unwrap_or_else(|| panic!("no {name} in {perfquery}"));
    line.trim_start_matches(|c: char| c != '.')
        .trim_start_matches('.')
        .parse()
        .unwrap()
}

/// Kills OpenSM however the test ends.
pub(super) struct OpenSm {
    child: Child,
    drain: Option<JoinHandle<usize>>,
}

impl OpenSm {
    /// OpenSM, unmodified, on the drop-in in `lib`, a client of `s`; returns once it
    /// logged "SUBNET UP" (it opened issm, the built-in SM stepped aside, it swept).
    pub(super) fn start(s: &Served, lib: &str, cwd: &Path) -> OpenSm {
        let cache = cwd.join("osm");
        std::fs::create_dir_all(&cache).unwrap();
        let mut osm = Command::new("opensm");
        // The log on stdout: its "SUBNET UP" is the event to wait for.
        osm.args(["-s", "0", "-f", "stdout"])
            .env_remove("VMAD_TRANSPORT")
            .env("LD_LIBRARY_PATH", lib)
            .env("OSM_CACHE_DIR", &cache)
            .env("OSM_TMP_DIR", &cache)
            .current_dir(cwd)
            .stdout(Stdio::piped());
        for (k, v) in &s.env {
            osm.env(k, v);
        }
        let mut child = osm.spawn().expect("start opensm");
        // Its stdout stays open to the end (a closed pipe would kill it on its next line).
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let mut me = OpenSm { child, drain: None };
        let mut seen = String::new();
        for line in lines.by_ref() {
            let line = line.unwrap();
            seen.push_str(&line);
            seen.push('\n');
            if line.contains("SUBNET UP") {
                break;
            }
        }
        assert!(seen.contains("SUBNET UP"), "{seen}");
        // Read the rest as it comes, so that a full pipe never stops OpenSM.
        me.drain = Some(std::thread::spawn(move || lines.count()));
        me
    }
}

impl Drop for OpenSm {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if let Some(d) = self.drain.take() {
            let _ = d.join();
        }
    }
}

#[test]
#[ignore = "needs OpenSM, infiniband-diags and libumad2sim (ibsim-utils): run by ./scripts/test (ibsim suite)"]
fn fabric_ibsim_ci_scenario_on_ft1612_opensm_diags_rust_client_and_umad2sim() {
    let file = topo("ft1612.net");
    let (want_nodes, want_links) = node_and_link_sets(&std::fs::read_to_string(&file).unwrap());
    assert_eq!((want_nodes.len(), want_links.len()), (1612, 1536 + 768));
    // `eval "$(vmad fabric up FILE)"`: back once the built-in SM swept.
    let s = Served::up(&file);
    assert_eq!(s.ctl(&["wait-up"]).trim(), "up");
    let lib = dropin_dir();
    let lib = lib.to_string_lossy();
    let cwd = s.dir.clone();

    let osm = OpenSm::start(&s, &lib, &cwd);
    assert!(s.ctl(&["status"]).contains(" sm=client "));

    // The diags on the drop-in (VMAD_TRANSPORT unset: VMAD_FABRIC selects the server).
    let dropin = [("LD_LIBRARY_PATH", &*lib)];
    let sa = run_tool(&s, &dropin, &cwd, &["saquery", "-N"]);
    assert_eq!(sa.matches("NodeRecord dump").count(), 1612);
    // perfquery's counters move with traffic: ibnetdiscover's SMPs (one NodeInfo per
    // node at least) cross this CA's link between two reads. (An SA query does not:
    // OpenSM and saquery share this CA's port, so their MADs never leave it.)
    let before = run_tool(&s, &dropin, &cwd, &["perfquery"]);
    let net = run_tool(&s, &dropin, &cwd, &["ibnetdiscover"]);
    let after = run_tool(&s, &dropin, &cwd, &["perfquery"]);
    assert_eq!(
        node_and_link_sets(&net),
        (want_nodes.clone(), want_links.clone())
    );
    let moved =
        |before: &str, after: &str, name: &str| counter(after, name) - counter(before, name);
    for c in ["PortXmitPkts", "PortRcvPkts"] {
        let n = moved(&before, &after, c);
        assert!(n >= 1612, "{c} +{n}");
    }

    // A Rust client (the vmad binary on the Rust API) in its own process.
    assert_eq!(s.node_records(&[]), 1612);

    // The same diags, unmodified, preloaded with umad2sim as on an ibsim rig.
    let preload = [("LD_PRELOAD", UMAD2SIM)];
    let before = run_tool(&s, &preload, &cwd, &["perfquery"]);
    let net2 = run_tool(&s, &preload, &cwd, &["ibnetdiscover"]);
    let after = run_tool(&s, &preload, &cwd, &["perfquery"]);
    assert_eq!(node_and_link_sets(&net2), (want_nodes, want_links));
    for c in ["PortXmitPkts", "PortRcvPkts"] {
        let n = moved(&before, &after, c);
        assert!(n >= 1612, "umad2sim: {c} +{n}");
    }
    // umad2sim cuts every MAD to 256 bytes: a GetTable's RMPP is lost on its side,
    // and saquery prints the first segment's records only (docs/fabric.md).
    let sa2 = run_tool(&s, &preload, &cwd, &["saquery", "-N"]);
    assert!(sa2.matches("NodeRecord dump").count() >= 1);

    drop(osm);
    assert_eq!(s.ctl(&["wait-clients", "0"]).trim(), "0");
}
