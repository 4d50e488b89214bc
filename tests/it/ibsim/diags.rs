//! Reading infiniband-diags output, and printing vmad's answers the same way,
//! so the two can be compared field by field.

use std::collections::BTreeMap;
use std::net::Ipv6Addr;

pub(crate) type Fields = BTreeMap<String, String>;

/// `Key:.......value` lines (smpquery, perfquery) or `\t\tkey....value` (saquery).
/// Continuation lines (the CapMask flag names) are skipped.
pub(crate) fn parse_fields(text: &str) -> Fields {
    let mut out = Fields::new();
    for line in text.lines() {
        let l = line.trim();
        if l.starts_with('#') || l.is_empty() {
            continue;
        }
        let key_end = l.find([':', '.']).unwrap_or(l.len());
        if key_end == 0 || key_end == l.len() {
            continue;
        }
        let value = l[key_end..].trim_start_matches([':', '.']).trim();
        out.insert(l[..key_end].to_string(), value.to_string());
    }
    out
}

fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes(b[at..at + 4].try_into().unwrap())
}

fn be64(b: &[u8], at: usize) -> u64 {
    u64::from_be_bytes(b[at..at + 8].try_into().unwrap())
}

fn put(f: &mut Fields, k: &str, v: String) {
    f.insert(k.to_string(), v);
}

/// NodeInfo (64 bytes) as `smpquery nodeinfo` prints it.
pub(crate) fn node_info(d: &[u8]) -> Fields {
    let mut f = Fields::new();
    put(&mut f, "BaseVers", d[0].to_string());
    put(&mut f, "ClassVers", d[1].to_string());
    let t = match d[2] {
        1 => "Channel Adapter".to_string(),
        2 => "Switch".to_string(),
        3 => "Router".to_string(),
        x => x.to_string(),
    };
    put(&mut f, "NodeType", t);
    put(&mut f, "NumPorts", d[3].to_string());
    put(&mut f, "SystemGuid", format!("{:#018x}", be64(d, 4)));
    put(&mut f, "Guid", format!("{:#018x}", be64(d, 12)));
    put(&mut f, "PortGuid", format!("{:#018x}", be64(d, 20)));
    put(&mut f, "PartCap", be16(d, 28).to_string());
    put(&mut f, "DevId", format!("{:#06x}", be16(d, 30)));
    put(&mut f, "Revision", format!("{:#010x}", be32(d, 32)));
    put(&mut f, "LocalPort", d[36].to_string());
    put(
        &mut f,
        "VendorId",
        format!("{:#08x}", be32(d, 36) & 0xff_ffff),
    );
    f
}

fn width(w: u8) -> String {
    match w {
        1 => "1X",
        2 => "4X",
        4 => "8X",
        8 => "12X",
        16 => "2X",
        _ => "?",
    }
    .into()
}

/// The PortInfo fields `smpquery portinfo` prints as plain values, printed that way.
pub(crate) fn port_info(d: &[u8]) -> Fields {
    let mut f = Fields::new();
    put(&mut f, "GidPrefix", format!("{:#018x}", be64(d, 8)));
    put(&mut f, "Lid", be16(d, 16).to_string());
    put(&mut f, "SMLid", be16(d, 18).to_string());
    put(&mut f, "CapMask", format!("{:#x}", be32(d, 20)));
    put(&mut f, "DiagCode", format!("{:#06x}", be16(d, 24)));
    put(&mut f, "MkeyLeasePeriod", be16(d, 26).to_string());
    put(&mut f, "LocalPort", d[28].to_string());
    put(&mut f, "LinkWidthActive", width(d[31]));
    let state = ["NoChange", "Down", "Initialize", "Armed", "Active"];
    put(
        &mut f,
        "LinkState",
        state
            .get(usize::from(d[32] & 0xf))
            .unwrap_or(&"?")
            .to_string(),
    );
    let phys = [
        "NoChange",
        "Sleep",
        "Polling",
        "Disabled",
        "PortConfigurationTraining",
        "LinkUp",
    ];
    put(
        &mut f,
        "PhysLinkState",
        phys.get(usize::from(d[33] >> 4))
            .unwrap_or(&"?")
            .to_string(),
    );
    put(&mut f, "ProtectBits", (d[34] >> 6).to_string());
    put(&mut f, "LMC", (d[34] & 7).to_string());
    let speed = match d[35] >> 4 {
        1 => "2.5 Gbps",
        2 => "5.0 Gbps",
        4 => "10.0 Gbps",
        _ => "?",
    };
    put(&mut f, "LinkSpeedActive", speed.into());
    let mtu = |m: u8| {
        if (1..=5).contains(&m) {
            (128u32 << m).to_string()
        } else {
            "?".into()
        }
    };
    put(&mut f, "NeighborMTU", mtu(d[36] >> 4));
    put(&mut f, "SMSL", (d[36] & 0xf).to_string());
    put(&mut f, "VLHighLimit", d[38].to_string());
    put(&mut f, "VLArbHighCap", d[39].to_string());
    put(&mut f, "VLArbLowCap", d[40].to_string());
    put(&mut f, "MtuCap", mtu(d[41] & 0xf));
    put(&mut f, "VLStallCount", (d[42] >> 5).to_string());
    put(&mut f, "HoqLife", (d[42] & 0x1f).to_string());
    put(&mut f, "MkeyViolations", be16(d, 44).to_string());
    put(&mut f, "PkeyViolations", be16(d, 46).to_string());
    put(&mut f, "QkeyViolations", be16(d, 48).to_string());
    put(&mut f, "GuidCap", d[50].to_string());
    put(&mut f, "SubnetTimeout", (d[51] & 0x1f).to_string());
    put(&mut f, "RespTimeVal", (d[52] & 0x1f).to_string());
    f
}

/// PortCounters (PMA attribute 0x12, 64 bytes of data) as `perfquery` prints it.
pub(crate) fn port_counters(d: &[u8]) -> Fields {
    let mut f = Fields::new();
    put(&mut f, "PortSelect", d[1].to_string());
    put(&mut f, "CounterSelect", format!("{:#06x}", be16(d, 2)));
    put(&mut f, "SymbolErrorCounter", be16(d, 4).to_string());
    put(&mut f, "LinkErrorRecoveryCounter", d[6].to_string());
    put(&mut f, "LinkDownedCounter", d[7].to_string());
    put(&mut f, "PortRcvErrors", be16(d, 8).to_string());
    put(
        &mut f,
        "PortRcvRemotePhysicalErrors",
        be16(d, 10).to_string(),
    );
    put(&mut f, "PortRcvSwitchRelayErrors", be16(d, 12).to_string());
    put(&mut f, "PortXmitDiscards", be16(d, 14).to_string());
    put(&mut f, "PortXmitConstraintErrors", d[16].to_string());
    put(&mut f, "PortRcvConstraintErrors", d[17].to_string());
    put(&mut f, "CounterSelect2", format!("{:#04x}", d[18]));
    put(&mut f, "LocalLinkIntegrityErrors", (d[19] >> 4).to_string());
    put(
        &mut f,
        "ExcessiveBufferOverrunErrors",
        (d[19] & 0xf).to_string(),
    );
    put(&mut f, "QP1Dropped", be16(d, 20).to_string());
    put(&mut f, "VL15Dropped", be16(d, 22).to_string());
    put(&mut f, "PortXmitData", be32(d, 24).to_string());
    put(&mut f, "PortRcvData", be32(d, 28).to_string());
    put(&mut f, "PortXmitPkts", be32(d, 32).to_string());
    put(&mut f, "PortRcvPkts", be32(d, 36).to_string());
    put(&mut f, "PortXmitWait", be32(d, 40).to_string());
    f
}

/// A PathRecord (64 bytes) as `saquery -p` prints it.
pub(crate) fn path_record(d: &[u8]) -> Fields {
    let gid = |at: usize| {
        let b: [u8; 16] = d[at..at + 16].try_into().unwrap();
        Ipv6Addr::from(b).to_string()
    };
    let mut f = Fields::new();
    put(&mut f, "service_id", format!("{:#018x}", be64(d, 0)));
    put(&mut f, "dgid", gid(8));
    put(&mut f, "sgid", gid(24));
    put(&mut f, "dlid", be16(d, 40).to_string());
    put(&mut f, "slid", be16(d, 42).to_string());
    put(&mut f, "hop_flow_raw", format!("{:#x}", be32(d, 44)));
    put(&mut f, "tclass", format!("{:#x}", d[48]));
    put(&mut f, "num_path_revers", format!("{:#x}", d[49]));
    put(&mut f, "pkey", format!("0x{:04X}", be16(d, 50)));
    put(&mut f, "qos_class", format!("{:#x}", be16(d, 52) >> 4));
    put(&mut f, "sl", format!("{:#x}", be16(d, 52) & 0xf));
    put(&mut f, "mtu", format!("{:#x}", d[54]));
    put(&mut f, "rate", format!("{:#x}", d[55]));
    put(&mut f, "pkt_life", format!("{:#x}", d[56]));
    put(&mut f, "preference", format!("{:#x}", d[57]));
    f
}

/// Keep only the keys of `mine` in `theirs` (vmad prints a subset of some tools' fields).
pub(crate) fn restrict(theirs: &Fields, mine: &Fields) -> Fields {
    theirs
        .iter()
        .filter(|(k, _)| mine.contains_key(*k))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}
