//! Each record type's fields as the comparison sees them, and the
//! normalisations: a LID becomes the port GUID it stands for (`G<guid>`,
//! two SMs number ports differently); fields listed as `Skip` are left out,
//! each with the reason in its comment.

use std::collections::HashMap;

use super::Answer;

/// How a field is compared.
#[derive(Clone, Copy)]
enum Kind {
    /// Bytes, in hex.
    Hex,
    /// A 16-bit LID, as the GUID of its port.
    Lid,
    /// Not compared (why: at the table entry).
    Skip,
    /// The low 5, 4 or 3 bits, the high 4 bits of a byte.
    Low5,
    Low4,
    Low3,
    High4,
    /// A LID, but not compared for a switch's external port.
    SwitchPortLid,
    /// Bytes, but not compared for a switch's external port.
    SwitchPortSkip,
    /// The high 4 bits, but not compared for a switch's external port.
    SwitchPortHigh4,
    /// Bytes, but not compared for any port of a switch, port 0 included.
    SwitchSkip,
    /// 64 LFT entries of the block in the record's bytes 2..4.
    LftBlock,
}
use Kind::*;

/// (name, offset, length, kind) of each field compared, by attribute.
fn layout(attr: u16) -> &'static [(&'static str, usize, usize, Kind)] {
    match attr {
        // ClassPortInfo: BaseVersion, ClassVersion, CapabilityMask,
        // CapabilityMask2/RespTimeValue; redirection fields.
        // CapabilityMask2 is left out: OpenSM advertises features the
        // built-in SA does not serve (QoS, alias GUIDs, ...), so it says 0.
        0x0001 => &[
            ("versions", 0, 2, Hex),
            ("cap", 2, 2, Hex),
            ("resp_time", 7, 1, Low5),
            ("redirect", 8, 64, Hex),
        ],
        // NodeRecord. PartitionCap, DeviceID, Revision and VendorID are the
        // SMA's (ibsim's and the embedded fabric's differ): left out.
        0x0011 => &[
            ("lid", 0, 2, Lid),
            ("base_class_type_ports", 4, 4, Hex),
            ("sys_guid", 8, 8, Hex),
            ("node_guid", 16, 8, Hex),
            ("port_guid", 24, 8, Hex),
            ("pkey_cap", 32, 2, Skip),
            ("device_revision", 34, 6, Skip),
            ("local_port", 40, 1, Hex),
            ("vendor", 41, 3, Skip),
            ("desc", 44, 64, Hex),
        ],
        // PortInfoRecord: the LIDs, the port, then PortInfo (at 4). What
        // the SMA models its own way is left out: CapabilityMask, widths
        // and speeds supported/enabled, MTUs, VLCap; and a switch's
        // external ports' LID, SM LID and GID prefix (IBA: unused there;
        // ibsim says 0, the embedded SMA the switch's), and their
        // LocalPortNum and active width/speed (ibsim: 0 on a port that is down).
        0x0012 => &[
            ("endport_lid", 0, 2, Lid),
            ("port", 2, 1, Hex),
            ("mkey", 4, 8, Hex),
            ("gid_prefix", 12, 8, SwitchPortSkip),
            ("lid", 20, 2, SwitchPortLid),
            ("sm_lid", 22, 2, SwitchPortLid),
            // A switch's port 0 says which port the SM's query came in by. On a
            // fabric with equal-cost paths (ft234) OpenSM's sweep reaches each
            // switch by whichever path answered first, so its value changes from
            // run to run (a flake hunt saw 14 against the built-in SM's 13).
            ("local_port", 32, 1, SwitchSkip),
            ("width_active", 35, 1, SwitchPortSkip),
            ("port_state", 36, 1, Low4),
            ("phys_state", 37, 1, High4),
            ("lmc", 38, 1, Low3),
            ("speed_active", 39, 1, SwitchPortHigh4),
        ],
        // LinkRecord.
        0x0020 => &[
            ("from_lid", 0, 2, Lid),
            ("from_port", 2, 1, Hex),
            ("to_port", 3, 1, Hex),
            ("to_lid", 4, 2, Lid),
        ],
        // SwitchInfoRecord: the LID, then SwitchInfo (at 4): what the SM
        // set (LinearFDBTop, default ports); the capabilities and the rest
        // are the SMA's.
        0x0014 => &[("lid", 0, 2, Lid), ("lft_top_defaults", 10, 5, Hex)],
        // GUIDInfoRecord.
        0x0030 => &[
            ("lid", 0, 2, Lid),
            ("block", 2, 1, Hex),
            ("guids", 8, 64, Hex),
        ],
        // PathRecord (and GetMulti's answers).
        0x0035 => &[
            ("service_id", 0, 8, Hex),
            ("dgid", 8, 16, Hex),
            ("sgid", 24, 16, Hex),
            ("dlid", 40, 2, Lid),
            ("slid", 42, 2, Lid),
            ("raw_flow_hop", 44, 4, Hex),
            ("tclass", 48, 1, Hex),
            ("reversible_numb", 49, 1, Hex),
            ("pkey", 50, 2, Hex),
            ("qos_sl", 52, 2, Hex),
            // The smallest MTUCap on the way: the SMAs' (ibsim 2048, its
            // switch port 0 1024; the embedded fabric 4096). The unit tests
            // check the built-in SA's MTU against its fabric.
            ("mtu", 54, 1, Skip),
            ("rate", 55, 1, Hex),
            ("pkt_life", 56, 1, Hex),
            ("preference", 57, 1, Hex),
        ],
        // MCMemberRecord: MGID, PortGID, Q_Key, (MLID: the SM's to assign),
        // MTU, TClass, P_Key, rate, life, SL/flow/hop, scope/join, proxy.
        0x0038 => &[
            ("mgid", 0, 16, Hex),
            ("port_gid", 16, 16, Hex),
            ("qkey", 32, 4, Hex),
            ("mlid", 36, 2, Skip),
            ("mtu_tclass_pkey_rate_life", 38, 6, Hex),
            ("sl_flow_hop", 44, 4, Hex),
            ("scope_join_proxy", 48, 2, Hex),
        ],
        // ServiceRecord.
        0x0031 => &[
            ("id", 0, 8, Hex),
            ("gid", 8, 16, Hex),
            ("pkey", 24, 2, Hex),
            ("lease", 28, 4, Hex),
            ("key", 32, 16, Hex),
            ("name", 48, 64, Hex),
            ("data", 112, 64, Hex),
        ],
        // InformInfoRecord: subscriber GID, enum, then the InformInfo (at 24).
        0x00f3 => &[
            ("gid", 0, 16, Hex),
            ("enum", 16, 2, Hex),
            ("inform", 24, 36, Hex),
        ],
        // InformInfo (a Set's answer).
        0x0003 => &[("inform", 0, 36, Hex)],
        // SMInfoRecord: ActCount is left out (OpenSM counts its SMPs sent).
        0x0018 => &[
            ("lid", 0, 2, Lid),
            ("guid", 4, 8, Hex),
            ("sm_key", 12, 8, Hex),
            ("act_count", 20, 4, Skip),
            ("priority_state", 24, 1, Hex),
        ],
        // LinearForwardingTableRecord: the table is indexed by LID, so it
        // is compared as the ports it routes to (LIDs as GUIDs); which of
        // two parallel links a route takes is the routing engine's choice,
        // so an egress port is compared as "self" (0) or "out".
        0x0015 => &[
            ("lid", 0, 2, Lid),
            ("block", 2, 2, Hex),
            ("routes", 8, 64, LftBlock),
        ],
        // P_KeyTableRecord.
        0x0033 => &[
            ("lid", 0, 2, Lid),
            ("block", 2, 2, Hex),
            ("port", 4, 1, Hex),
            ("pkeys", 8, 64, Hex),
        ],
        // The records only OpenSM serves: compared whole, LIDs first.
        0x0013 | 0x0036 => &[("lid", 0, 2, Lid), ("rest", 2, usize::MAX, Hex)],
        _ => &[("record", 0, usize::MAX, Hex)],
    }
}

/// Whether a record is a GUIDInfo block without a GUID: how many blocks a
/// port has is its GUIDCap, the SMA's (ibsim 32: four blocks; the embedded
/// SMA fewer), so blocks holding no GUID are not compared.
pub(super) fn empty_block(attr: u16, rec: &[u8]) -> bool {
    attr == 0x0030 && rec.get(8..72).is_some_and(|g| g.iter().all(|b| *b == 0))
}

/// `field=value` lines of one record; `switch_lids`: the switches' LIDs.
pub(super) fn normalise(
    attr: u16,
    rec: &[u8],
    guid_of_lid: &HashMap<u16, u64>,
    switch_lids: &[u16],
) -> String {
    let mut out = String::new();
    // A PortInfoRecord of a switch's external port.
    let switch_port = attr == 0x0012
        && rec.len() > 2
        && rec[2] != 0
        && switch_lids.contains(&u16::from_be_bytes([rec[0], rec[1]]));
    // A PortInfoRecord of any port of a switch.
    let switch_any = attr == 0x0012
        && rec.len() > 2
        && switch_lids.contains(&u16::from_be_bytes([rec[0], rec[1]]));
    for &(name, at, len, kind) in layout(attr) {
        let Some(b) = rec.get(at..at.saturating_add(len).min(rec.len())) else {
            continue;
        };
        let kind = match kind {
            SwitchPortLid | SwitchPortSkip | SwitchPortHigh4 if switch_port => Skip,
            SwitchSkip if switch_any => Skip,
            SwitchSkip => Hex,
            SwitchPortHigh4 => High4,
            LftBlock => LftBlock,
            SwitchPortLid => Lid,
            SwitchPortSkip => Hex,
            k => k,
        };
        let v = match kind {
            Skip | SwitchPortLid | SwitchPortSkip | SwitchPortHigh4 | SwitchSkip => continue,
            Hex => b.iter().map(|x| format!("{x:02x}")).collect::<String>(),
            Low5 => format!("{:02x}", b[0] & 0x1f),
            Low4 => format!("{:02x}", b[0] & 0x0f),
            Low3 => format!("{:02x}", b[0] & 0x07),
            High4 => format!("{:02x}", b[0] >> 4),
            LftBlock => {
                let block = usize::from(u16::from_be_bytes([rec[2], rec[3]]));
                let mut routes: Vec<String> = b
                    .iter()
                    .enumerate()
                    .filter(|(_, port)| **port != 0xff)
                    .map(|(i, port)| {
                        let lid = (block * 64 + i) as u16;
                        let to = guid_of_lid
                            .get(&lid)
                            .map_or(format!("lid{lid}?"), |g| format!("G{g:x}"));
                        format!("{to}:{}", if *port == 0 { "self" } else { "out" })
                    })
                    .collect();
                routes.sort();
                routes.join(",")
            }
            Lid => {
                let lid = u16::from_be_bytes([b[0], b[1]]);
                match guid_of_lid.get(&lid) {
                    Some(g) => format!("G{g:x}"),
                    None if lid == 0 => "0".into(),
                    None => format!("lid{lid}?"),
                }
            }
        };
        out += &format!("{name}={v} ");
    }
    out
}

/// A readable diff of two answers: header fields, then records only one has.
pub(super) fn diff(theirs: &Answer, mine: &Answer) -> String {
    let mut s = String::new();
    for (what, a, b) in [
        ("status", theirs.status, mine.status),
        ("method", theirs.method.into(), mine.method.into()),
        ("attr", theirs.attr, mine.attr),
    ] {
        if a != b {
            s += &format!("  {what}: -{a:#06x} +{b:#06x}\n");
        }
    }
    let mut a = theirs.records.clone();
    let mut b = mine.records.clone();
    a.sort();
    b.sort();
    s += &format!("  records: -{} +{}\n", a.len(), b.len());
    for r in a.iter().filter(|r| !b.contains(r)).take(6) {
        s += &format!("  - {r}\n");
    }
    for r in b.iter().filter(|r| !a.contains(r)).take(6) {
        s += &format!("  + {r}\n");
    }
    s
}
