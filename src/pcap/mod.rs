//! Packet captures of a port's MADs, for Wireshark and `tshark`.
//!
//! A [`Capture`] records every MAD a port sends and receives (each RMPP
//! segment and ACK, each retry) as one packet of a classic pcap file:
//!
//! - [`LinkType::Ethernet`] (default): Ethernet + IPv4/IPv6 + UDP 4791 +
//!   BTH (UD SEND Only) + DETH + MAD + ICRC, exactly the RoCE v2 packet rxe
//!   would put on its netdev. Every Wireshark dissects it, including
//!   Debian 12's tshark 4.0, which cannot read native InfiniBand captures.
//!   Addresses are the GIDs when the MAD has a GRH (IPv4 for IPv4-mapped
//!   GIDs), otherwise 10.0.x.y standing for LID 0xxxyy.
//! - [`LinkType::InfiniBand`] (247): LRH (VL15 on QP0) + GRH if any + BTH +
//!   DETH + MAD + ICRC + VCRC, for newer Wireshark.
//!
//! Files are bounded: when the live file would pass
//! [`PcapConfig::max_bytes`] it is renamed `file.pcap.1` (older ones shift
//! to `.2`, ...; at most [`PcapConfig::keep`] are kept) and a new one starts.
//!
//! Enable it with `PortConfig`'s capture setting (Rust), `vmad --pcap FILE`,
//! or `VMAD_PCAP=FILE` through [`from_env`] (the C library reads it).

mod file;
mod frame;

use std::io;
use std::path::PathBuf;
use std::time::SystemTime;

pub use file::{
    rotated_path, LinkType, Reader, Record, Writer, FILE_HEADER_LEN, RECORD_HEADER_LEN,
};
pub use frame::{lid_ipv4, Direction};

use crate::transport::PortAttrs;
use crate::types::{MadAddr, Qp, DEFAULT_PKEY};
use crate::wire::roce::{self, bth, deth, lrh};
use crate::wire::{grh, MAD_SIZE};

/// Default size bound of one capture file: 64 MiB.
pub const DEFAULT_MAX_BYTES: u64 = 64 << 20;
/// Default number of rotated files kept besides the live one.
pub const DEFAULT_KEEP: u32 = 4;

/// Where and how to capture.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PcapConfig {
    /// The live file; rotated files get `.1`, `.2`, ... appended.
    pub path: PathBuf,
    /// Packet framing.
    pub link: LinkType,
    /// Size bound of each file, headers included.
    pub max_bytes: u64,
    /// Rotated files kept (0: the live file is restarted when full).
    pub keep: u32,
}

impl PcapConfig {
    /// Capture to `path` as RoCE v2 over Ethernet, 64 MiB per file, 4 rotated files kept.
    pub fn new(path: impl Into<PathBuf>) -> PcapConfig {
        PcapConfig {
            path: path.into(),
            link: LinkType::Ethernet,
            max_bytes: DEFAULT_MAX_BYTES,
            keep: DEFAULT_KEEP,
        }
    }
}

/// The capture settings from the environment, for programs that cannot be
/// given a config (the C library):
///
/// | variable | meaning |
/// |---|---|
/// | `VMAD_PCAP` | the file; capture is off when unset or empty |
/// | `VMAD_PCAP_LINKTYPE` | `roce` / `ethernet` / `1` (default) or `ib` / `infiniband` / `247` |
/// | `VMAD_PCAP_MAX_BYTES` | per-file bound, bytes (`k`, `M`, `G` suffixes accepted) |
/// | `VMAD_PCAP_KEEP` | rotated files kept |
///
/// Unparsable values of the optional variables leave their defaults.
/// Several ports in one process each need their own file: the C library
/// should append the CA name and port (see [`PcapConfig::for_port`]).
pub fn from_env() -> Option<PcapConfig> {
    let path = std::env::var_os("VMAD_PCAP").filter(|p| !p.is_empty())?;
    let mut c = PcapConfig::new(path);
    if let Ok(v) = std::env::var("VMAD_PCAP_LINKTYPE") {
        if let Some(l) = parse_link(&v) {
            c.link = l;
        }
    }
    if let Some(n) = std::env::var("VMAD_PCAP_MAX_BYTES")
        .ok()
        .and_then(|v| parse_size(&v))
    {
        c.max_bytes = n;
    }
    if let Some(n) = std::env::var("VMAD_PCAP_KEEP")
        .ok()
        .and_then(|v| v.trim().parse().ok())
    {
        c.keep = n;
    }
    Some(c)
}

/// A link type by name: `roce`, `ethernet`, `eth`, `1`, `ib`, `infiniband`, `247`.
pub fn parse_link(s: &str) -> Option<LinkType> {
    match s.trim().to_ascii_lowercase().as_str() {
        "roce" | "rocev2" | "ethernet" | "eth" | "1" => Some(LinkType::Ethernet),
        "ib" | "infiniband" | "247" => Some(LinkType::InfiniBand),
        _ => None,
    }
}

/// A byte count with an optional `k`/`M`/`G` (binary) suffix.
pub fn parse_size(s: &str) -> Option<u64> {
    let s = s.trim();
    let (num, shift) = match s.char_indices().last()? {
        (i, 'k' | 'K') => (&s[..i], 10),
        (i, 'm' | 'M') => (&s[..i], 20),
        (i, 'g' | 'G') => (&s[..i], 30),
        _ => (s, 0),
    };
    num.trim().parse::<u64>().ok()?.checked_mul(1 << shift)
}

impl PcapConfig {
    /// This config with the file name made unique to one port:
    /// `cap.pcap` becomes `cap.<ca>-<port>.pcap` (for processes that open several ports).
    pub fn for_port(&self, ca: &str, port: u8) -> PcapConfig {
        let mut c = self.clone();
        let stem = self
            .path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let name = match self.path.extension() {
            Some(ext) => format!("{stem}.{ca}-{port}.{}", ext.to_string_lossy()),
            None => format!("{stem}.{ca}-{port}"),
        };
        c.path = self.path.with_file_name(name);
        c
    }
}

/// Counters of a capture.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CaptureStats {
    /// Packets written.
    pub packets: u64,
    /// Packets lost to write errors (the capture never fails the port).
    pub errors: u64,
    /// File rotations.
    pub rotations: u64,
}

/// A capture attached to one port: frames each MAD and appends it to the file.
#[derive(Debug)]
pub struct Capture {
    writer: Writer,
    local: frame::Local,
    pkeys: Vec<u16>,
    psn: [u32; 2],
    buf: Vec<u8>,
    stats: CaptureStats,
}

impl Capture {
    /// Start capturing for the port `attrs` describes (its LID and GID are
    /// the local addresses of every packet).
    ///
    /// # Errors
    ///
    /// The OS error of creating the file.
    pub fn open(config: &PcapConfig, attrs: &PortAttrs) -> io::Result<Capture> {
        Ok(Capture {
            writer: Writer::create(&config.path, config.link, config.max_bytes, config.keep)?,
            local: frame::Local::of(attrs),
            pkeys: attrs.pkeys.clone(),
            psn: [0; 2],
            buf: Vec::with_capacity(512),
            stats: CaptureStats::default(),
        })
    }

    /// Record one MAD (one datagram: a whole MAD, an RMPP segment or ACK).
    /// `peer` is the destination of a sent MAD or the source of a received
    /// one, as the engine and transport give it. Write errors are counted,
    /// not returned: a full disk must not stop the port.
    pub fn record(&mut self, ts: SystemTime, dir: Direction, qp: Qp, peer: &MadAddr, mad: &[u8]) {
        self.record_via(ts, dir, qp, None, peer, mad);
    }

    /// As [`Capture::record`], for a MAD that went through local QP number
    /// `local_qpn` rather than `qp`'s own (vmad's UD QP standing in for QP1: the
    /// verbs transport, the hybrid transport's client path), so that the capture
    /// shows which QP, and so which path, it took.
    pub fn record_via(
        &mut self,
        ts: SystemTime,
        dir: Direction,
        qp: Qp,
        local_qpn: Option<u32>,
        peer: &MadAddr,
        mad: &[u8],
    ) {
        let slot = usize::from(dir == Direction::Received);
        let psn = self.psn[slot];
        self.psn[slot] = (psn + 1) & 0x00ff_ffff;
        let m = frame::Mad {
            dir,
            qp,
            local_qpn: local_qpn.unwrap_or_else(|| qp.qpn()),
            peer,
            pkey: self
                .pkeys
                .get(usize::from(peer.pkey_index))
                .copied()
                .unwrap_or(DEFAULT_PKEY),
            psn,
            bytes: &mad[..mad.len().min(MAD_SIZE)],
        };
        self.buf.clear();
        match self.writer.link() {
            LinkType::Ethernet => frame::roce_frame(&self.local, &m, &mut self.buf),
            LinkType::InfiniBand => frame::ib_packet(&self.local, &m, &mut self.buf),
        }
        match self.writer.write(ts, &self.buf) {
            Ok(()) => self.stats.packets += 1,
            Err(_) => self.stats.errors += 1,
        }
        self.stats.rotations = self.writer.rotations();
    }

    /// The counters.
    pub fn stats(&self) -> CaptureStats {
        self.stats
    }
}

/// One captured packet taken apart: where the MAD went and its bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decoded<'a> {
    /// Source, as text (IP address or `lid N`).
    pub src: String,
    /// Destination, as text.
    pub dst: String,
    /// BTH destination QP.
    pub dest_qp: u32,
    /// DETH source QP.
    pub src_qp: u32,
    /// Whether the ICRC is right.
    pub icrc_ok: bool,
    /// The MAD.
    pub mad: &'a [u8],
}

fn ip_text(a: &roce::IpAddrs) -> (String, String) {
    match a {
        roce::IpAddrs::V4 { src, dst } => (
            std::net::Ipv4Addr::from(*src).to_string(),
            std::net::Ipv4Addr::from(*dst).to_string(),
        ),
        roce::IpAddrs::V6 { src, dst } => (
            std::net::Ipv6Addr::from(*src).to_string(),
            std::net::Ipv6Addr::from(*dst).to_string(),
        ),
    }
}

/// Take apart one packet of a capture with link type `link` (1 or 247).
/// `None` if it is not a UD datagram vmad understands.
pub fn decode(link: LinkType, data: &[u8]) -> Option<Decoded<'_>> {
    match link {
        LinkType::Ethernet => {
            let ethertype = u16::from_be_bytes([*data.get(12)?, *data.get(13)?]);
            if ethertype != frame::ETHERTYPE_IPV4 && ethertype != frame::ETHERTYPE_IPV6 {
                return None;
            }
            let ip = data.get(frame::ETH_LEN..)?;
            let f = roce::Frame::new_checked(ip).ok()?;
            if f.bth().opcode() != bth::Opcode::UdSendOnly {
                return None;
            }
            let (src, dst) = ip_text(&f.addrs());
            Some(Decoded {
                src,
                dst,
                dest_qp: f.bth().dest_qp(),
                src_qp: f.deth().src_qp(),
                icrc_ok: f.icrc_ok(),
                mad: &ip[f.payload_range()],
            })
        }
        LinkType::InfiniBand => {
            let l = lrh::Packet::new_checked(data).ok()?;
            let words = usize::from(l.pkt_len()) * 4;
            let (o, src, dst) = if l.lnh() == lrh::LNH_IBA_GLOBAL {
                let g = grh::Packet::new_checked(data.get(lrh::LEN..)?).ok()?;
                (
                    lrh::LEN + grh::LEN,
                    std::net::Ipv6Addr::from(g.sgid()).to_string(),
                    std::net::Ipv6Addr::from(g.dgid()).to_string(),
                )
            } else if l.lnh() == lrh::LNH_IBA_LOCAL {
                (
                    lrh::LEN,
                    format!("lid {}", l.slid()),
                    format!("lid {}", l.dlid()),
                )
            } else {
                return None;
            };
            if words > data.len() || words < o + bth::LEN + deth::LEN + roce::ICRC_LEN {
                return None;
            }
            let b = bth::Packet::new_checked(&data[o..]).ok()?;
            if b.opcode() != bth::Opcode::UdSendOnly {
                return None;
            }
            let d = deth::Packet::new_checked(&data[o + bth::LEN..]).ok()?;
            let end = words - roce::ICRC_LEN;
            let pad = usize::from(b.pad_count());
            let start = o + bth::LEN + deth::LEN;
            if end < start + pad {
                return None;
            }
            let icrc = u32::from_le_bytes(data[end..end + 4].try_into().ok()?);
            Some(Decoded {
                src,
                dst,
                dest_qp: b.dest_qp(),
                src_qp: d.src_qp(),
                icrc_ok: roce::icrc_ib(&data[..o], &data[o..end]).ok() == Some(icrc),
                mad: &data[start..end - pad],
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_links_and_per_port_names() {
        assert_eq!(parse_size("4096"), Some(4096));
        assert_eq!(parse_size(" 4k"), Some(4096));
        assert_eq!(parse_size("64M"), Some(64 << 20));
        assert_eq!(parse_size("1G"), Some(1 << 30));
        assert_eq!(parse_size("x"), None);
        assert_eq!(parse_size(""), None);
        assert_eq!(parse_link("RoCE"), Some(LinkType::Ethernet));
        assert_eq!(parse_link("247"), Some(LinkType::InfiniBand));
        assert_eq!(parse_link("ppp"), None);
        let c = PcapConfig::new("/tmp/cap.pcap").for_port("mlx5_0", 1);
        assert_eq!(c.path, PathBuf::from("/tmp/cap.mlx5_0-1.pcap"));
        let c = PcapConfig::new("cap").for_port("vmadsim0", 2);
        assert_eq!(c.path, PathBuf::from("cap.vmadsim0-2"));
    }
}
