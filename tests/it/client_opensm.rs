//! #30's acceptance tests of the client against OpenSM on ibsim: OpenSM runs on vmad's
//! drop-in (`scripts/with-vmad --ibsim`), whose RMPP segments its SA's tables (under
//! umad2sim only a table's first MAD would come), and the infiniband-diags tools run
//! beside it on the drop-in too, as `capi/tests/ibsim-diags.sh` runs them.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use vmad::client::{Attribute, Client, ClientConfig, SaRecord};
use vmad::port::{Port, PortConfig};
use vmad::transport::ibsim::IbsimTransport;
use vmad::wire::sa::{mcmember_record, node_record, SaStatus};

use crate::ibsim::fabric::Fabric as Ibsim;
use crate::util::wait_for_text;

const WITH_VMAD: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/with-vmad");

/// OpenSM on the drop-in, SUBNET UP when this returns; killed when the guard drops.
pub(crate) struct OpenSm(Child);

impl Drop for OpenSm {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Start OpenSM on vmad's drop-in on `f`, its files under `f.run/<dir>`, and wait for
/// SUBNET UP (bounded by `patience`, only so that a broken run does not hang).
pub(crate) fn opensm_on_dropin(f: &Ibsim, dir: &str, patience: Duration) -> OpenSm {
    let work = f.run.join(dir);
    std::fs::create_dir_all(&work).unwrap();
    std::fs::write(work.join("opensm.conf"), "force_log_flush TRUE\n").unwrap();
    let log = work.join("opensm.log");
    let mut sm = OpenSm(
        Command::new(WITH_VMAD)
            .args(["--ibsim", "opensm", "-s", "0", "-F"])
            .arg(work.join("opensm.conf"))
            .arg("-f")
            .arg(&log)
            .envs(f.env.iter().cloned())
            .env_remove("SIM_HOST")
            .env_remove("SIM_SET_ISSM")
            .env("OSM_CACHE_DIR", &work)
            .env("OSM_TMP_DIR", &work)
            .current_dir(&work)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    wait_for_text(&log, "SUBNET UP", patience, || {
        assert!(sm.0.try_wait().unwrap().is_none(), "OpenSM exited");
    });
    sm
}

/// An infiniband-diags tool on the drop-in at `node`: its standard output.
fn diag(f: &Ibsim, node: &str, args: &[&str]) -> String {
    let out = Command::new(WITH_VMAD)
        .arg("--ibsim")
        .args(args)
        .envs(f.env.iter().cloned())
        .env("SIM_HOST", node)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A client on ibsim's `node`, its SM LID known.
fn client_at(f: &Ibsim, node: &str) -> Client {
    client_with(f.config(Some(node)))
}

/// A client on ibsim as `config` attaches, its SM LID known.
fn client_with(config: vmad::transport::ibsim::IbsimConfig) -> Client {
    let t = IbsimTransport::connect(config).unwrap();
    let port = Port::open(Box::new(t), PortConfig::default()).unwrap();
    assert_ne!(port.refresh_attrs().unwrap().sm_lid, 0);
    Client::new(&port, ClientConfig::default()).unwrap()
}

/// "key......value" lines as (key, value), value as text.
fn fields(block: &str) -> Vec<(String, String)> {
    block
        .lines()
        .map(str::trim)
        .filter_map(|l| {
            let key = l.split('.').next()?;
            let value = l[key.len()..].trim_start_matches('.');
            (!key.is_empty() && key.len() < l.len()).then(|| (key.to_owned(), value.to_owned()))
        })
        .collect()
}

/// A number as saquery prints it (hex with 0x, else decimal), in decimal.
fn number(v: &str) -> String {
    match v.strip_prefix("0x").or_else(|| v.strip_prefix("0X")) {
        Some(h) => u64::from_str_radix(h, 16).unwrap().to_string(),
        None => v.parse::<u64>().map_or(v.to_owned(), |n| n.to_string()),
    }
}

/// Every field `saquery -N` prints of a NodeRecord, from the record's bytes, numbers in
/// decimal: the whole record but its NodeDescription's bytes after the first NUL.
fn node_record_fields(raw: &[u8]) -> Vec<(String, String)> {
    let r = node_record::Repr::decode(raw).unwrap();
    let ni = r.node_info;
    let node_type = match u8::from(ni.node_type) {
        1 => "Channel Adapter",
        2 => "Switch",
        3 => "Router",
        _ => "Unknown",
    };
    let reserved = u16::from_be_bytes([raw[2], raw[3]]);
    [
        ("lid", u64::from(r.lid).to_string()),
        ("reserved", reserved.to_string()),
        ("base_version", ni.base_version.to_string()),
        ("class_version", ni.class_version.to_string()),
        ("node_type", node_type.to_owned()),
        ("num_ports", ni.num_ports.to_string()),
        ("sys_guid", ni.sys_image_guid.to_string()),
        ("node_guid", ni.node_guid.to_string()),
        ("port_guid", ni.port_guid.to_string()),
        ("partition_cap", ni.partition_cap.to_string()),
        ("device_id", ni.device_id.to_string()),
        ("revision", ni.revision.to_string()),
        ("port_num", ni.local_port_num.to_string()),
        ("vendor_id", ni.vendor_id.to_string()),
        (
            "NodeDescription",
            String::from_utf8_lossy(r.node_desc.text()).into_owned(),
        ),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect()
}

/// All 3,992 NodeRecords of `ibsim-gen-fattree 128 30 24 128`'s fabric by one client
/// GetTable over RMPP, each equal in every field `saquery -N` prints (saquery does not
/// print a record's bytes; its fields are the whole record, reserved included, but the
/// NodeDescription's bytes after its first NUL).
#[test]
#[ignore = "needs ibsim and opensm, builds vmad-capi, a 3,992-node fabric: run by ./scripts/test"]
fn ibsim_opensm_gettable_of_all_3992_node_records_equals_saquery() {
    let topo = tempfile_path("ft3992.net");
    let out = Command::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/scripts/ibsim-gen-fattree"
    ))
    .args(["128", "30", "24", "128"])
    .output()
    .unwrap();
    assert!(out.status.success());
    std::fs::write(&topo, &out.stdout).unwrap();
    let f = Ibsim::start_file(&topo, &[]);
    let _sm = opensm_on_dropin(&f, "sm-ft3992", Duration::from_secs(900));
    let c = client_at(&f, "H0");
    let table = c.sa_get_table(&node_record::Repr::template(), 0).unwrap();
    assert!(!table.unsegmented());
    let mut mine: Vec<_> = (0..table.len())
        .map(|i| node_record_fields(table.raw(i).unwrap()))
        .collect();
    mine.sort();

    let text = diag(&f, "H0", &["saquery", "-N"]);
    let numeric = |k: &str| !matches!(k, "node_type" | "NodeDescription");
    let mut theirs: Vec<_> = text
        .split("NodeRecord dump:")
        .skip(1)
        .map(|block| {
            fields(block)
                .into_iter()
                .map(|(k, v)| {
                    let v = if numeric(&k) { number(&v) } else { v };
                    (k, v)
                })
                .collect::<Vec<_>>()
        })
        .collect();
    theirs.sort();
    assert_eq!(mine.len(), 128 * 30 + 128 + 24, "one NodeRecord per node");
    assert_eq!(mine.len(), theirs.len());
    for (m, t) in mine.iter().zip(&theirs) {
        assert_eq!(m, t);
    }
    std::fs::remove_file(&topo).ok();
}

fn tempfile_path(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("vmad-client-opensm-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

/// The MCMemberRecords OpenSM's SA has for `mgid` (none: an empty table or NO_RECORDS).
fn groups(c: &Client, mgid: [u8; 16]) -> Vec<mcmember_record::Repr> {
    let mut t = mcmember_record::Repr::template();
    t.mgid = mgid;
    match c.sa_get_table(&t, mcmember_record::comp::MGID) {
        Ok(table) => table.iter().collect(),
        Err(vmad::Error::MadStatus { status, .. })
            if SaStatus::of(vmad::wire::mad::MadStatus(status)) == SaStatus::NoRecords =>
        {
            Vec::new()
        }
        Err(e) => panic!("GetTable(MCMemberRecord): {e}"),
    }
}

/// A port joins a new multicast group through OpenSM's SA and leaves it: the SA's
/// MCMemberRecords, asked by the client and by `saquery -m`, have the group after the
/// join and not after the leave.
#[test]
#[ignore = "needs ibsim and opensm, and builds vmad-capi: run by ./scripts/test"]
fn ibsim_opensm_mcmember_join_and_leave_seen_by_its_sa() {
    let f = Ibsim::start("small.net", &[]);
    let _sm = opensm_on_dropin(&f, "sm-mc", Duration::from_secs(300));
    let c = client_at(&f, "H2");
    let me = c.local_node_info().unwrap();
    let mut port_gid = [0u8; 16];
    port_gid[..8].copy_from_slice(&0xfe80_0000_0000_0000u64.to_be_bytes());
    port_gid[8..].copy_from_slice(&me.port_guid.to_be_bytes());
    // Not IPoIB's signature (0x601b/0xa01b after the scope): OpenSM would give such a
    // group its partition's IPoIB Q_Key and refuse another.
    let mgid = [
        0xff, 0x12, 0xe0, 0x01, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0x76, 0x6d, 0x61, 0x64,
    ];
    let mgid_text = std::net::Ipv6Addr::from(mgid).to_string();
    assert!(groups(&c, mgid).is_empty(), "the group exists already");
    let m = mcmember_record::Repr {
        mgid,
        port_gid,
        qkey: 0x1234,
        pkey: 0xffff,
        join_state: mcmember_record::JOIN_FULL,
        ..Default::default()
    };
    use mcmember_record::comp as mc;
    let create = mc::MGID
        | mc::PORT_GID
        | mc::QKEY
        | mc::TCLASS
        | mc::PKEY
        | mc::SL
        | mc::FLOW_LABEL
        | mc::JOIN_STATE;
    let joined = c.mc_join(&m, create).unwrap();
    assert_eq!(joined.mgid, mgid);
    assert_ne!(joined.mlid, 0, "OpenSM gave the group an MLID");
    let seen = groups(&c, mgid);
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert_eq!((seen[0].mlid, seen[0].qkey), (joined.mlid, 0x1234));
    let theirs = diag(&f, "H1", &["saquery", "-m"]);
    assert!(theirs.contains(&mgid_text), "{mgid_text} not in {theirs}");

    c.mc_leave(&m, mc::MGID | mc::PORT_GID | mc::JOIN_STATE)
        .unwrap();
    assert!(
        groups(&c, mgid).is_empty(),
        "the group outlived its only member"
    );
    let theirs = diag(&f, "H1", &["saquery", "-m"]);
    assert!(
        !theirs.contains(&mgid_text),
        "{mgid_text} still in {theirs}"
    );
}

/// Every PortCounters field `perfquery` prints, read by the client before and after
/// perfquery: all three equal (the port, S1's link to S2, carries none of the queries).
#[test]
#[ignore = "needs ibsim and opensm, and builds vmad-capi: run by ./scripts/test"]
fn ibsim_opensm_port_counters_equal_perfquery() {
    let f = Ibsim::start("small.net", &[]);
    let _sm = opensm_on_dropin(&f, "sm-pma", Duration::from_secs(300));
    let c = client_at(&f, "H2");
    let s1 = c
        .sa_get_table(&node_record::Repr::template(), 0)
        .unwrap()
        .iter()
        .find(|r| r.node_desc.text() == b"S1")
        .expect("S1")
        .lid;
    let read = || {
        let pc = c.port_counters(s1, 7).unwrap();
        let v = pc.view();
        [
            ("SymbolErrorCounter", u64::from(v.symbol_errors())),
            ("LinkErrorRecoveryCounter", v.link_error_recovery().into()),
            ("LinkDownedCounter", v.link_downed().into()),
            ("PortRcvErrors", v.rcv_errors().into()),
            (
                "PortRcvRemotePhysicalErrors",
                v.rcv_remote_physical_errors().into(),
            ),
            (
                "PortRcvSwitchRelayErrors",
                v.rcv_switch_relay_errors().into(),
            ),
            ("PortXmitDiscards", v.xmit_discards().into()),
            (
                "PortXmitConstraintErrors",
                v.xmit_constraint_errors().into(),
            ),
            ("PortRcvConstraintErrors", v.rcv_constraint_errors().into()),
            (
                "LocalLinkIntegrityErrors",
                v.local_link_integrity_errors().into(),
            ),
            (
                "ExcessiveBufferOverrunErrors",
                v.excessive_buffer_overrun_errors().into(),
            ),
            ("VL15Dropped", v.vl15_dropped().into()),
            ("PortXmitData", v.xmit_data().into()),
            ("PortRcvData", v.rcv_data().into()),
            ("PortXmitPkts", v.xmit_pkts().into()),
            ("PortRcvPkts", v.rcv_pkts().into()),
            ("PortXmitWait", v.xmit_wait().into()),
        ]
    };
    let before = read();
    let text = diag(&f, "H2", &["perfquery", &s1.to_string(), "7"]);
    let after = read();
    assert_eq!(before, after, "the port carried traffic meanwhile");
    let theirs = fields(&text);
    for (name, mine) in before {
        let (_, v) = theirs
            .iter()
            .find(|(k, _)| k.trim_end_matches(':') == name)
            .unwrap_or_else(|| panic!("no {name} in {text}"));
        assert_eq!(number(v), mine.to_string(), "{name}: {text}");
    }
}

/// InformInfo with OpenSM: subscribed to every trap, the client gets OpenSM's Reports
/// when the link to H4 goes down (ibsim's console `Unlink`): the switch's trap 128
/// that OpenSM forwards, and OpenSM's own trap 65 (H4's GID out of service) after the
/// sweep that trap starts.
#[test]
#[ignore = "needs ibsim and opensm, and builds vmad-capi: run by ./scripts/test"]
fn ibsim_opensm_reports_a_link_change_to_a_subscriber() {
    use vmad::wire::sa::inform_info;
    let f = Ibsim::start("small.net", &[]);
    let _sm = opensm_on_dropin(&f, "sm-inform", Duration::from_secs(300));
    // ibsim hands a request that comes to QP1 (the SA's Report) only to a client
    // attached as an SM (`find_client`: "zero qp - only issm clients may get requests").
    let c = client_with(vmad::transport::ibsim::IbsimConfig {
        issm: true,
        ..f.config(Some("H2"))
    });
    let h4 = c
        .sa_get_table(&node_record::Repr::template(), 0)
        .unwrap()
        .iter()
        .find(|r| r.node_desc.text() == b"H4")
        .expect("H4")
        .node_info
        .port_guid;
    let info = c.subscribe(inform_info::ANY).unwrap();
    assert!(info.subscribe);
    f.command("Unlink \"S2\"[2]");
    let mut seen = Vec::new();
    let give_up = Instant::now() + crate::util::PATIENCE;
    // Until the Report of H4's GID: the wait is bounded only so that a broken run ends.
    while !seen.iter().any(|&(n, _)| n == 65) {
        let left = give_up.saturating_duration_since(Instant::now());
        let Some(notice) = c.next_report(left) else {
            panic!("no trap 65 Report; got {seen:?}; {:?}", c.port().stats());
        };
        // Traps 64/65 carry the GID at DataDetails bytes 6..22.
        let gid_guid = u64::from_be_bytes(notice.details[14..22].try_into().unwrap());
        seen.push((notice.trap_number, gid_guid));
    }
    assert!(seen.iter().any(|&(n, _)| n == 128), "no trap 128: {seen:?}");
    assert!(
        seen.contains(&(65, h4)),
        "H4's GID not out of service: {seen:?}"
    );
    c.unsubscribe(inform_info::ANY).unwrap();
}
