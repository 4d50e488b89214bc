//! `vmad fabric`: the embedded managed subnet served to other processes over ibsim's
//! socket protocol. Every server here is a real child process (the `vmad` binary), in
//! a private runtime directory, under a name no other test uses; clients are child
//! processes too (`vmad sa-query`), or vmad's ibsim transport in this process.
//!
//! Nothing sleeps: a test waits for the server's "up" line, for a child to exit, or
//! asks the server to answer once something happened (`ctl wait-clients`, `wait-delivered`).

use std::io::{BufRead, BufReader};
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixDatagram};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use serde_json::Value;
use vmad::engine::Transmit;
use vmad::transport::ibsim::proto::{ClientInfo, CtlRepr, CtlType, CTL_LEN, REQUEST_LEN};
use vmad::transport::ibsim::{DropPolicy, Endpoint, IbsimConfig, IbsimTransport};
use vmad::transport::Transport;
use vmad::types::{MadAddr, Qp};

mod ci;

const VMAD: &str = env!("CARGO_BIN_EXE_vmad");
const UP_LINE: &str = "# vmad fabric: up";

fn topo(name: &str) -> String {
    format!("{}/tests/topo/{name}", env!("CARGO_MANIFEST_DIR"))
}

/// A fresh runtime directory (as `$XDG_RUNTIME_DIR`) and server name for one test.
fn fresh() -> (PathBuf, String) {
    static N: AtomicU32 = AtomicU32::new(0);
    let n = N.fetch_add(1, Ordering::Relaxed);
    let name = format!("it{}x{n}", std::process::id());
    let dir = std::env::temp_dir().join(format!("vmad-fabric-{name}"));
    std::fs::create_dir_all(&dir).unwrap();
    (dir, name)
}

/// `NAME='value'; export NAME;` lines into (name, value).
fn parse_env(text: &str) -> Vec<(String, String)> {
    text.lines()
        .filter_map(|l| {
            let (k, rest) = l.split_once('=')?;
            let v = rest.strip_prefix('\'')?.split_once('\'')?.0;
            Some((k.to_string(), v.to_string()))
        })
        .collect()
}

/// A server: started by `fabric serve` (a child of this test) or `fabric up`.
struct Served {
    child: Option<Child>,
    dir: PathBuf,
    env: Vec<(String, String)>,
}

impl Served {
    /// `vmad fabric serve FILE` in the foreground, once its "up" line is out.
    fn serve(file: &str) -> Served {
        let (dir, name) = fresh();
        let mut child = Command::new(VMAD)
            .args(["fabric", "serve", "--name", &name, file])
            .env("XDG_RUNTIME_DIR", &dir)
            .stdout(Stdio::piped())
            .spawn()
            .expect("start vmad fabric serve");
        let mut text = String::new();
        let out = BufReader::new(child.stdout.take().unwrap());
        for line in out.lines() {
            let line = line.unwrap();
            if line == UP_LINE {
                break;
            }
            text.push_str(&line);
            text.push('\n');
        }
        assert!(text.contains("VMAD_FABRIC="), "no environment: {text:?}");
        Served {
            child: Some(child),
            dir,
            env: parse_env(&text),
        }
    }

    /// `eval "$(vmad fabric up FILE)"` in a fresh runtime directory: back once the
    /// subnet is up (the built-in SM swept); the server lives on until `down` or drop.
    fn up(file: &str) -> Served {
        let (dir, name) = fresh();
        Served::up_in(dir, &name, file).0
    }

    /// `vmad fabric up --name NAME FILE` in runtime directory `dir`: the server, and
    /// the sh text `up` printed.
    fn up_in(dir: PathBuf, name: &str, file: &str) -> (Served, String) {
        Served::up_with(dir, name, &[], file)
    }

    /// `vmad fabric up --name NAME EXTRA... FILE` in runtime directory `dir`.
    fn up_with(dir: PathBuf, name: &str, extra: &[&str], file: &str) -> (Served, String) {
        let out = Command::new(VMAD)
            .args(["fabric", "up", "--name", name])
            .args(extra)
            .arg(file)
            .env("XDG_RUNTIME_DIR", &dir)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8(out.stdout).unwrap();
        let s = Served {
            child: None,
            dir,
            env: parse_env(&text),
        };
        (s, text)
    }

    fn var(&self, k: &str) -> String {
        let v = self.env.iter().find(|(n, _)| n == k);
        v.map(|(_, v)| v.clone()).unwrap_or_default()
    }

    fn socket(&self) -> PathBuf {
        PathBuf::from(self.var("VMAD_FABRIC"))
    }

    /// `vmad ARGS` as a client of this server: its environment, VMAD_TRANSPORT unset.
    fn client(&self, args: &[&str]) -> Command {
        let mut c = Command::new(VMAD);
        c.args(args)
            .env_remove("VMAD_TRANSPORT")
            .env_remove("SIM_HOST");
        for (k, v) in &self.env {
            c.env(k, v);
        }
        c
    }

    /// `vmad fabric ctl WORDS`: its answer; panics if the server refuses.
    fn ctl(&self, words: &[&str]) -> String {
        let out = self
            .client(&["fabric", "ctl"])
            .args(words)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "ctl {words:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    /// The number of NodeRecords `vmad sa-query` gets (a GetTable over RMPP).
    fn node_records(&self, extra: &[&str]) -> usize {
        let out = self
            .client(&["--json"])
            .args(extra)
            .arg("sa-query")
            .output()
            .unwrap();
        records(&out)
    }

    fn ibsim_config(&self, node: &str) -> IbsimConfig {
        IbsimConfig {
            endpoint: Endpoint::Local {
                sockname: self.var("IBSIM_SOCKNAME"),
            },
            node: Some(node.into()),
            drops: DropPolicy::Report,
            ..IbsimConfig::default()
        }
    }

    fn down(&mut self) {
        let out = self.client(&["fabric", "down"]).output().unwrap();
        assert!(
            out.status.success(),
            "fabric down: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(String::from_utf8_lossy(&out.stdout).contains("unset VMAD_FABRIC"));
        if let Some(mut c) = self.child.take() {
            assert!(c.wait().unwrap().success(), "the server failed");
        }
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        if self.socket().exists() {
            let _ = self.client(&["fabric", "down"]).output();
        }
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        // Keep a failing test's runtime directory (`fabric up` logs to vmad/NAME.log).
        if std::thread::panicking() {
            eprintln!("fabric runtime directory kept: {}", self.dir.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

fn records(out: &Output) -> usize {
    assert!(
        out.status.success(),
        "sa-query failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let j: Value = serde_json::from_slice(&out.stdout).unwrap();
    j["records"].as_array().map_or(0, Vec::len)
}

/// `--spin-us` changes only how the loop waits: two clients' RMPP tables, SMPs and
/// `down` work as on a server that sleeps, and the server stops while spinning.
#[test]
fn fabric_spinning_server_serves_as_a_sleeping_one() {
    let (dir, name) = fresh();
    let (mut s, _) = Served::up_with(dir, &name, &["--spin-us", "2000"], &topo("ft234.net"));
    let a = s.client(&["--json", "sa-query"]).output().unwrap();
    let b = s.client(&["--json", "sa-query"]).output().unwrap();
    assert_eq!((records(&a), records(&b)), (234, 234));
    let d = s.client(&["--json", "discover"]).output().unwrap();
    assert!(d.status.success(), "{}", String::from_utf8_lossy(&d.stderr));
    let j: Value = serde_json::from_slice(&d.stdout).unwrap();
    assert_eq!(j["complete"], true, "{j}");
    assert_eq!(
        j["cas"].as_u64().unwrap() + j["switches"].as_u64().unwrap(),
        234
    );
    s.down();
}

#[test]
fn fabric_up_serves_two_client_processes_rmpp_tables_then_down() {
    let (dir, name) = fresh();
    // The runtime directory as vmad's issm files leave it (0755): narrowed to 0700.
    std::fs::create_dir(dir.join("vmad")).unwrap();
    let wide = std::os::unix::fs::PermissionsExt::from_mode(0o755);
    std::fs::set_permissions(dir.join("vmad"), wide).unwrap();
    let (mut s, text) = Served::up_in(dir, &name, &topo("ft234.net"));
    assert!(text.contains("export IBSIM_SOCKNAME"), "{text}");
    let sock = s.socket();
    assert!(sock.starts_with(s.dir.join("vmad")), "{}", sock.display());
    let mode = std::os::unix::fs::PermissionsExt::mode(
        &std::fs::metadata(s.dir.join("vmad")).unwrap().permissions(),
    );
    assert_eq!(mode & 0o777, 0o700);
    assert!(s.ctl(&["status"]).starts_with("up "));
    // Two client processes at once, each a GetTable of 234 NodeRecords: ~120 RMPP
    // segments each way through the server.
    let a = s
        .client(&["--json", "sa-query"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let b = s
        .client(&["--json", "sa-query"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    assert_eq!(records(&a.wait_with_output().unwrap()), 234);
    assert_eq!(records(&b.wait_with_output().unwrap()), 234);
    // They said DISCONNECT on the way out: nothing left.
    assert_eq!(s.ctl(&["wait-clients", "0"]).trim(), "0");
    s.down();
    assert!(!sock.exists(), "the control socket outlived the server");
    let after = s.client(&["fabric", "ctl", "status"]).output().unwrap();
    assert!(!after.status.success());
}

/// A directed-route NodeInfo Get along `path`, as libibmad builds it.
fn dr_node_info(tid: u64, path: &[u8]) -> [u8; 256] {
    let mut m = [0u8; 256];
    m[0] = 1;
    m[1] = 0x81;
    m[2] = 1;
    m[3] = 0x01;
    m[7] = (path.len() - 1) as u8;
    m[8..16].copy_from_slice(&tid.to_be_bytes());
    m[16..18].copy_from_slice(&0x0011u16.to_be_bytes());
    m[32..36].copy_from_slice(&[0xff; 4]);
    m[128..128 + path.len()].copy_from_slice(path);
    m
}

/// Send `mad` (a directed-route Get from the attached port).
fn send_smp(t: &mut IbsimTransport, mad: &[u8; 256]) {
    let dest = MadAddr {
        lid: 0xffff,
        ..MadAddr::default()
    };
    let sent = t
        .transmit(&mut |slot| {
            slot.copy_from_slice(mad);
            Some(Transmit {
                qp: Qp::Smi,
                dest,
                len: 256,
                timeout_ms: 0,
            })
        })
        .unwrap();
    assert!(sent);
}

/// Wait for the next MAD handed to `t`, however long it takes (the test waits for the
/// event; a hang is the harness's to report): (TID low 32 bits, method, NodeGUID).
fn next_mad(t: &mut IbsimTransport) -> (u64, u8, u64) {
    loop {
        let mut got = None;
        t.recv_burst(1, &mut |_, m| {
            got = Some((
                u64::from_be_bytes(m[8..16].try_into().unwrap()) & 0xffff_ffff,
                m[3],
                u64::from_be_bytes(m[64 + 12..64 + 20].try_into().unwrap()),
            ));
        })
        .unwrap();
        if let Some(g) = got {
            return g;
        }
        t.wait(None).unwrap();
    }
}

#[test]
fn fabric_link_down_under_traffic_is_silence_then_answers_again() {
    let s = Served::serve(&topo("small.net"));
    let mut t = IbsimTransport::connect(s.ibsim_config("H1")).unwrap();
    let drops = t.drop_monitor();
    // H1 -> S1 (port 1) -> S2 (S1 port 7) -> H3 (S2 port 1).
    let path = [0u8, 1, 7, 1];
    let h3 = 0x10_0000 + 2 * 2; // ibsim's GUIDs: CAs from 0x100000, one per port + one.
    let mut received = 0u64;
    let mut answer = |t: &mut IbsimTransport| {
        received += 1;
        let (tid, method, guid) = next_mad(t);
        assert_eq!(method, 0x81, "only answers come to this client");
        (tid, guid)
    };
    // Up: every request is answered.
    for tid in 1..=20 {
        send_smp(&mut t, &dr_node_info(tid, &path));
        assert_eq!(answer(&mut t), (tid, h3));
    }
    // Ten requests in flight as the link goes down, ten more once it is down.
    for tid in 21..=30 {
        send_smp(&mut t, &dr_node_info(tid, &path));
    }
    s.ctl(&["link", "H3", "1", "down"]);
    for tid in 31..=40 {
        send_smp(&mut t, &dr_node_info(tid, &path));
    }
    let down = s.ctl(&["counters", "H3", "1"]);
    assert!(down.contains("state=1"), "{down}");
    // `wait-up all` (every CA port with a link Active) does not hold now: asked to wait
    // 0 ms, it looks once and says so.
    let not_all = s
        .client(&["fabric", "ctl", "wait-up", "all", "0"])
        .output()
        .unwrap();
    assert!(!not_all.status.success());
    s.ctl(&["link", "H3", "1", "up"]);
    // small.net: four CAs, one linked port each; the SM's sweep brings H3 back.
    assert_eq!(s.ctl(&["wait-up", "all"]).trim(), "up 4 ports");
    // The server's loop walks its requests through the fabric in order, and answers
    // leave in that order: once request 41's answer is in, every earlier request was
    // answered or dropped. Only some of those in flight at `link down` may be answered.
    send_smp(&mut t, &dr_node_info(41, &path));
    let mut early = Vec::new();
    loop {
        let (tid, guid) = answer(&mut t);
        assert_eq!(guid, h3);
        if tid == 41 {
            break;
        }
        early.push(tid);
    }
    assert!(early.iter().all(|tid| (21..=30).contains(tid)), "{early:?}");
    assert!(early.windows(2).all(|w| w[0] < w[1]), "{early:?}");
    // Up again: every request is answered.
    for tid in 42..=61 {
        send_smp(&mut t, &dr_node_info(tid, &path));
        assert_eq!(answer(&mut t), (tid, h3));
    }
    // The server's counts agree: all 61 requests reached it, and it handed this client
    // exactly the answers that came; a drop is silence (no ibsim status-110 echo).
    let clients = s.ctl(&["clients"]);
    let line: Vec<&str> = clients.lines().nth(1).unwrap().split_whitespace().collect();
    assert_eq!(
        line[5..],
        ["61".to_string(), received.to_string()],
        "{clients}"
    );
    assert!(received < 61, "no request was dropped: {clients}");
    assert_eq!(drops.count(), 0);
    drop(t);
    assert_eq!(s.ctl(&["wait-clients", "0"]).trim(), "0");
}

#[test]
fn fabric_answers_a_link_delay_holds_back_still_reach_the_client_in_order() {
    let s = Served::serve(&topo("small.net"));
    let mut t = IbsimTransport::connect(s.ibsim_config("H1")).unwrap();
    // H1's own link holds every frame for H1 back 2 ms in its port: the server's loop,
    // which drives the port, must come back for them without a client's MAD to wake it.
    s.ctl(&["faults", "H1", "1", "delay_us=2000"]);
    let path = [0u8, 1, 7, 1];
    let h3 = 0x10_0000 + 2 * 2;
    for tid in 1..=5 {
        send_smp(&mut t, &dr_node_info(tid, &path));
    }
    for tid in 1..=5 {
        let (got, method, guid) = next_mad(&mut t);
        assert_eq!((got, method, guid), (tid, 0x81, h3));
    }
}

#[test]
fn fabric_client_killed_mid_rmpp_leaves_the_server_and_others_fine() {
    let s = Served::serve(&topo("ft234.net"));
    // Every client is handed 3 MADs, then nothing: the victim's ~120-segment table
    // stops after its third segment, and stays there (its own timeout is far off).
    s.ctl(&["hold", "3"]);
    let mut victim = s
        .client(&["-C", "H5", "-t", "600000", "sa-query"])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    s.ctl(&["wait-delivered", "3"]);
    victim.kill().unwrap();
    // Killed, not done: its table was still on the way.
    let st = victim.wait().unwrap();
    assert_eq!(std::os::unix::process::ExitStatusExt::signal(&st), Some(9));
    // The server notices by itself (no DISCONNECT came) and frees the slot and port.
    assert_eq!(s.ctl(&["wait-clients", "0"]).trim(), "0");
    s.ctl(&["hold", "none"]);
    // Everyone else is served as before: the same table, whole, twice over.
    assert_eq!(s.node_records(&[]), 234);
    assert_eq!(s.node_records(&["-C", "H5"]), 234);
    assert!(s.ctl(&["status"]).starts_with("up "));
}

fn abstract_addr(name: &str) -> SocketAddr {
    let mut b = name.as_bytes().to_vec();
    b.push(0);
    SocketAddr::from_abstract_name(&b).unwrap()
}

#[test]
fn fabric_hostile_datagrams_get_nothing_and_break_nothing() {
    let s = Served::serve(&topo("small.net"));
    let base = s.var("IBSIM_SOCKNAME");
    let id = 0x5000_0000 + std::process::id();
    let ctl = UnixDatagram::bind_addr(&abstract_addr(&format!("{base}:ctl{id}"))).unwrap();
    ctl.connect_addr(&abstract_addr(&format!("{base}:ctl")))
        .unwrap();
    ctl.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let data = UnixDatagram::bind_addr(&abstract_addr(&format!("{base}:in{id}"))).unwrap();
    let call = |req: &CtlRepr| {
        ctl.send(&req.emit()).unwrap();
        let mut b = [0u8; CTL_LEN + 1];
        let n = ctl.recv(&mut b).unwrap();
        CtlRepr::parse(&b[..n]).unwrap()
    };
    // Wrong sizes and a bad magic: no answer at all (the next call gets its own).
    ctl.send(&[0u8; 7]).unwrap();
    let mut bad = CtlRepr::request(0, CtlType::GetPort, &[]).emit();
    bad[0] ^= 0xff;
    ctl.send(&bad).unwrap();
    ctl.send(&[0xa5; CTL_LEN + 40]).unwrap();
    // A slot that is not ours, an unknown node, a switch: refused.
    let stranger = call(&CtlRepr::request(3, CtlType::GetNodeInfo, &[]));
    assert_eq!(stranger.ctl_type, CtlType::Error);
    let info = |node: &str| ClientInfo {
        id,
        qp: 0,
        issm: false,
        node_id: node.into(),
    };
    for node in ["nosuchnode", "S1"] {
        let r = call(&CtlRepr::request(0, CtlType::Connect, &info(node).emit()));
        assert_eq!(r.ctl_type, CtlType::Error, "{node}");
    }
    // Attached, then garbage on the data channel: sizes, bad versions, random bytes.
    let r = call(&CtlRepr::request(0, CtlType::Connect, &info("H2").emit()));
    assert_eq!(r.ctl_type, CtlType::Connect);
    let slot = ClientInfo::parse(&r.data).unwrap().id;
    data.connect_addr(&abstract_addr(&format!("{base}:out{slot}")))
        .unwrap();
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    for i in 0..300 {
        let mut pkt = vec![0u8; if i % 10 == 0 { i } else { REQUEST_LEN }];
        for b in &mut pkt {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            *b = x as u8;
        }
        if pkt.len() > 40 && i % 3 == 0 {
            pkt[32] = 1; // BaseVersion 1: it reaches the fabric's parsers
        }
        let _ = data.send(&pkt);
    }
    let port = call(&CtlRepr::request(slot, CtlType::GetPort, &[]));
    assert_eq!(port.ctl_type, CtlType::GetPort);
    // PortInfo of ports H2 does not have: refused.
    for which in [2u8, 200] {
        let pi = call(&CtlRepr::request(slot, CtlType::GetPortInfo, &[which]));
        assert_eq!(pi.ctl_type, CtlType::Error, "port {which}");
    }
    // Another client is served whole.
    assert_eq!(s.node_records(&[]), 6);
    // Leave without DISCONNECT (this process lives on): the next MAD for H2, a ping
    // its port's sole client would get, finds the socket gone, and the slot is freed.
    drop(data);
    drop(ctl);
    let ping = ["-G", "-C", "H1", "ping", "-c", "1", "-t", "200", "0x100003"];
    let _ = s.client(&ping).output().unwrap();
    assert_eq!(s.ctl(&["wait-clients", "0"]).trim(), "0");
    assert!(s.ctl(&["status"]).starts_with("up "));
}

#[test]
fn fabric_servers_side_by_side_are_separate() {
    let small = Served::serve(&topo("small.net"));
    let big = Served::serve(&topo("ft234.net"));
    assert_ne!(small.var("IBSIM_SOCKNAME"), big.var("IBSIM_SOCKNAME"));
    assert_eq!(small.node_records(&[]), 6);
    assert_eq!(big.node_records(&[]), 234);
    // A second server under a name in use fails, and leaves the first one serving.
    let name = small.var("IBSIM_SOCKNAME");
    let name = name.rsplit('.').next().unwrap();
    let out = Command::new(VMAD)
        .args(["fabric", "serve", "--name", name, &topo("small.net")])
        .env("XDG_RUNTIME_DIR", &small.dir)
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert_eq!(small.node_records(&[]), 6);
}

/// The drop-in `libibumad.so.3` (built by `scripts/with-vmad`), as a directory for
/// LD_LIBRARY_PATH.
fn dropin_dir() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let st = Command::new(root.join("scripts/with-vmad"))
        .arg("true")
        .status()
        .unwrap();
    assert!(
        st.success(),
        "scripts/with-vmad could not build the drop-in"
    );
    Path::new(VMAD).parent().unwrap().join("vmad-lib")
}

fn run_tool(s: &Served, env: &[(&str, &str)], cwd: &Path, args: &[&str]) -> String {
    let mut c = Command::new(args[0]);
    c.args(&args[1..])
        .current_dir(cwd)
        .env_remove("VMAD_TRANSPORT")
        .env_remove("SIM_HOST");
    for (k, v) in &s.env {
        c.env(k, v);
    }
    for (k, v) in env {
        c.env(k, v);
    }
    let out = c.output().unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
#[ignore = "needs OpenSM and infiniband-diags: run by ./scripts/test (ibsim suite)"]
fn fabric_ibsim_opensm_on_the_dropin_takes_over_and_gives_back() {
    let s = Served::serve(&topo("ft234.net"));
    let lib = dropin_dir();
    let lib = lib.to_string_lossy();
    let cwd = s.dir.clone();
    let osm = ci::OpenSm::start(&s, &lib, &cwd);
    assert!(
        s.ctl(&["status"]).contains(" sm=client "),
        "{}",
        s.ctl(&["status"])
    );
    // OpenSM's SA, in the other process, answers a GetTable over RMPP.
    let dropin = [("LD_LIBRARY_PATH", &*lib)];
    let sa = run_tool(&s, &dropin, &cwd, &["saquery", "-N"]);
    assert_eq!(sa.matches("NodeRecord dump").count(), 234);
    // OpenSM gone: its slot is freed, the built-in SM takes the role back and sweeps.
    drop(osm);
    assert_eq!(s.ctl(&["wait-clients", "0"]).trim(), "0");
    assert!(s.ctl(&["status"]).contains(" sm=built-in "));
    assert_eq!(s.node_records(&[]), 234);
}

#[test]
fn fabric_two_vmad_clients_talk_through_the_server_rmpp_included() {
    let s = Served::serve(&topo("small.net"));
    // A responder on H2 (its port's only client, so it gets the port's requests)...
    let mut responder = s
        .client(&["-C", "H2", "serve"])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    s.ctl(&["wait-clients", "1"]);
    // ...and a requester on H1: pings, a burst, and 10 RMPP transfers (their segments
    // and ACKs are ordinary MADs to the server).
    let out = s
        .client(&["--json", "-C", "H1", "bench", "-G", "0x100003"])
        .output()
        .unwrap();
    let _ = responder.kill();
    let _ = responder.wait();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let j: Value = serde_json::from_slice(&out.stdout).unwrap();
    let runs = j["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 3, "{j}");
    for r in runs {
        assert_eq!(r["failed"], 0, "{r}");
        assert!(r["ok"].as_u64().unwrap() > 0, "{r}");
    }
    assert_eq!(j["counters"]["rmpp_reassembled"], 10);
    assert_eq!(j["counters"]["timeouts"], 0);
}

/// The node descriptions `vmad sa-query` (NodeRecords, the built-in SA) and `vmad
/// discover` (a directed-route walk) find, each in its own client process.
fn listed(s: &Served) -> (Vec<String>, Vec<String>) {
    let descs = |args: &[&str], list: &str, field: &str| -> Vec<String> {
        let out = s.client(args).output().unwrap();
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let j: Value = serde_json::from_slice(&out.stdout).unwrap();
        let items = j[list].as_array().unwrap().iter();
        let mut v: Vec<String> = items.map(|r| r[field].as_str().unwrap().into()).collect();
        v.sort();
        v
    };
    (
        descs(&["--json", "sa-query"], "records", "node_desc"),
        descs(&["--json", "discover"], "nodes", "desc"),
    )
}

#[test]
fn fabric_ctl_node_remove_and_add_a_spine_the_sm_resweeps_clients_see_it() {
    let s = Served::serve(&topo("ft234.net"));
    let (sa, walk) = listed(&s);
    assert_eq!((sa.len(), walk.len()), (234, 234));
    assert!(sa.binary_search(&"S5".to_string()).is_ok());
    // A spine unplugged: its 12 links (one per leaf) down, the SM sweeps once.
    assert_eq!(s.ctl(&["node", "remove", "S5"]).trim(), "12 links down");
    let (sa2, walk2) = listed(&s);
    let gone: Vec<String> = sa.iter().filter(|d| *d != "S5").cloned().collect();
    assert_eq!(sa2, gone);
    assert_eq!(walk2, gone);
    // Removing it again changes nothing; an unknown node is refused.
    assert_eq!(s.ctl(&["node", "remove", "S5"]).trim(), "0 links down");
    let bad = s
        .client(&["fabric", "ctl", "node", "remove", "S9"])
        .output();
    assert!(!bad.unwrap().status.success());
    // Plugged back: found again, every port brought up by the SM's sweep.
    assert_eq!(s.ctl(&["node", "add", "S5"]).trim(), "12 links up");
    assert_eq!(listed(&s), (sa.clone(), sa));
    assert!(s.ctl(&["wait-up", "all"]).starts_with("up 216 ports"));
}
