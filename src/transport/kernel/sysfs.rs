//! The host's CAs as sysfs shows them, read the way libibumad reads them
//! (`umad_get_cas_names`, `umad_get_ca`, `umad_get_port`, `umad_open_port`'s
//! umad device lookup), so that vmad reports what real libibumad reports.
//!
//! - `class/infiniband/<ca>/{node_type,fw_ver,hw_rev,hca_type,node_guid,sys_image_guid}`
//! - `class/infiniband/<ca>/ports/<n>/{lid,lid_mask_count,sm_lid,sm_sl,state,phys_state,
//!   rate,cap_mask,link_layer,gids/0,pkeys/*}`
//! - `class/infiniband_mad/{abi_version,umad<i>/{ibdev,port}}`
//!
//! Numbers are read as C's `strtoul(s, NULL, 0)` reads them, as libibumad does:
//! the leading number only (`"4: ACTIVE"` is 4, `"10 Gb/sec (1X QDR)"` is 10,
//! `"2.5 Gb/sec"` is 2), `0x` for hex, a leading `0` for octal.

use std::fs;
use std::path::{Path, PathBuf};

use crate::transport::registry::CaInfo;
use crate::transport::{LinkLayer, PortAttrs};
use crate::{Error, Result};

/// libibumad's `UMAD_CA_NAME_LEN`: names this long or longer are not listed.
const CA_NAME_LEN: usize = 20;
/// libibumad's `UMAD_MAX_PORTS`: umad device numbers scanned.
const MAX_UMAD: u32 = 192;

/// A sysfs tree: the host's (`/sys`), or a copy laid out the same way (tests).
#[derive(Debug, Clone)]
pub struct Sysfs {
    root: PathBuf,
}

impl Sysfs {
    /// The host's sysfs.
    pub fn host() -> Sysfs {
        Sysfs::at("/sys")
    }

    /// A tree rooted at `root` (holding `class/infiniband`, `class/infiniband_mad`).
    pub fn at(root: impl Into<PathBuf>) -> Sysfs {
        Sysfs { root: root.into() }
    }

    fn cas_dir(&self) -> PathBuf {
        self.root.join("class/infiniband")
    }

    fn mad_dir(&self) -> PathBuf {
        self.root.join("class/infiniband_mad")
    }

    /// The CA names libibumad lists: sorted, shorter than 20 bytes, node type 1–3.
    pub fn ca_names(&self) -> Vec<String> {
        let Ok(dir) = fs::read_dir(self.cas_dir()) else {
            return Vec::new();
        };
        let mut names: Vec<String> = dir
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .filter(|n| n.len() < CA_NAME_LEN)
            .filter(|n| {
                read_uint(&self.cas_dir().join(n), "node_type").is_ok_and(|t| (1..=3).contains(&t))
            })
            .collect();
        names.sort();
        names
    }

    /// `umad_get_ca`: the CA and every port under `ports/`.
    ///
    /// # Errors
    /// ENODEV if the CA does not exist; EIO if a file libibumad needs cannot be read.
    pub fn ca_info(&self, name: &str) -> Result<CaInfo> {
        let dir = self.cas_dir().join(name);
        if name.is_empty() || name.contains('/') || !dir.is_dir() {
            return Err(Error::NoDevice(format!(
                "no CA {name:?} in {}",
                dir.display()
            )));
        }
        let node_type = u8::try_from(read_uint(&dir, "node_type")?).unwrap_or(0);
        let node_guid = read_guid(&dir, "node_guid")?;
        let mut ports = Vec::new();
        for entry in fs::read_dir(dir.join("ports"))? {
            let name_os = entry?.file_name();
            let n = name_os.to_string_lossy();
            let port: u8 = n
                .parse()
                .ok()
                .filter(|&p: &u8| usize::from(p) < 10)
                .ok_or_else(|| bad(&dir, &format!("ports/{n}")))?;
            ports.push(self.port(name, &dir, port, node_type, node_guid)?);
        }
        ports.sort_by_key(|p| p.port_num);
        Ok(CaInfo {
            name: name.to_owned(),
            node_type,
            node_guid,
            system_guid: read_guid(&dir, "sys_image_guid")?,
            fw_ver: read_string(&dir, "fw_ver").unwrap_or_default(),
            ca_type: read_string(&dir, "hca_type").unwrap_or_default(),
            hw_ver: read_string(&dir, "hw_rev").unwrap_or_default(),
            ports,
        })
    }

    fn port(
        &self,
        ca: &str,
        ca_dir: &Path,
        port_num: u8,
        node_type: u8,
        node_guid: u64,
    ) -> Result<PortAttrs> {
        let dir = ca_dir.join("ports").join(port_num.to_string());
        let small = |file: &str| -> Result<u8> {
            u8::try_from(read_uint(&dir, file)?).map_err(|_| bad(&dir, file))
        };
        let gid = read_gid(&dir, "gids/0")?;
        let link_layer = match read_string(&dir, "link_layer").as_deref() {
            Ok("Ethernet") => LinkLayer::Ethernet,
            // libibumad: "assume IB by default".
            _ => LinkLayer::InfiniBand,
        };
        Ok(PortAttrs {
            ca_name: ca.to_owned(),
            port_num,
            node_type,
            node_guid,
            port_guid: u64::from_be_bytes(gid[8..].try_into().expect("8 bytes")),
            gid_prefix: u64::from_be_bytes(gid[..8].try_into().expect("8 bytes")),
            lid: u16::try_from(read_uint(&dir, "lid")?).map_err(|_| bad(&dir, "lid"))?,
            lmc: small("lid_mask_count")?,
            sm_lid: u16::try_from(read_uint(&dir, "sm_lid")?).map_err(|_| bad(&dir, "sm_lid"))?,
            sm_sl: small("sm_sl")?,
            state: small("state")?,
            phys_state: small("phys_state")?,
            rate: u32::try_from(read_uint(&dir, "rate")?).map_err(|_| bad(&dir, "rate"))?,
            capmask: u32::try_from(read_uint(&dir, "cap_mask")?)
                .map_err(|_| bad(&dir, "cap_mask"))?,
            pkeys: read_pkeys(&dir.join("pkeys"))?,
            link_layer,
        })
    }

    /// The umad device number of `port` of `ca` (`/sys/class/infiniband_mad/umadN`).
    ///
    /// # Errors
    /// ENODEV if no umad device serves that port (is `ib_umad` loaded?).
    pub fn umad_id(&self, ca: &str, port: u8) -> Result<u32> {
        (0..MAX_UMAD)
            .find(|id| {
                let dir = self.mad_dir().join(format!("umad{id}"));
                read_string(&dir, "ibdev").is_ok_and(|d| d == ca)
                    && read_uint(&dir, "port").is_ok_and(|p| p == u64::from(port))
            })
            .ok_or_else(|| {
                Error::NoDevice(format!(
                    "no umad device for {ca} port {port} under {} (is ib_umad loaded?)",
                    self.mad_dir().display()
                ))
            })
    }

    /// The umad ABI version (`class/infiniband_mad/abi_version`).
    ///
    /// # Errors
    /// ENODEV if the file is missing (no `ib_umad`); EIO if it is not a number.
    pub fn abi_version(&self) -> Result<u64> {
        let dir = self.mad_dir();
        if !dir.join("abi_version").exists() {
            return Err(Error::NoDevice(format!(
                "{}/abi_version is missing (is ib_umad loaded?)",
                dir.display()
            )));
        }
        read_uint(&dir, "abi_version")
    }
}

fn bad(dir: &Path, file: &str) -> Error {
    Error::Io(std::io::Error::new(
        std::io::ErrorKind::InvalidData,
        format!("unexpected contents in {}/{file}", dir.display()),
    ))
}

/// The file's text up to its last newline (libibumad's `sys_read_string`).
fn read_string(dir: &Path, file: &str) -> Result<String> {
    let mut s = fs::read_to_string(dir.join(file))?;
    if let Some(nl) = s.rfind('\n') {
        s.truncate(nl);
    }
    Ok(s)
}

fn read_uint(dir: &Path, file: &str) -> Result<u64> {
    Ok(strtoul(&read_string(dir, file)?))
}

/// C's `strtoul(s, NULL, 0)`: leading blanks, then the longest number; 0 if none.
fn strtoul(s: &str) -> u64 {
    let s = s.trim_start();
    let (digits, radix) = if let Some(hex) = s.strip_prefix("0x").or(s.strip_prefix("0X")) {
        (hex, 16)
    } else if s.len() > 1 && s.starts_with('0') {
        (&s[1..], 8)
    } else {
        (s, 10)
    };
    digits
        .chars()
        .map_while(|c| c.to_digit(radix))
        .fold(0u64, |n, d| {
            n.wrapping_mul(u64::from(radix)).wrapping_add(u64::from(d))
        })
}

/// `xxxx:xxxx:xxxx:xxxx` (node and system image GUIDs).
fn read_guid(dir: &Path, file: &str) -> Result<u64> {
    let s = read_string(dir, file)?;
    let words = parse_words(&s, 4).ok_or_else(|| bad(dir, file))?;
    Ok(words.iter().fold(0, |g, &w| (g << 16) | u64::from(w)))
}

/// Eight colon-separated 16-bit words (a GID), in wire order.
fn read_gid(dir: &Path, file: &str) -> Result<[u8; 16]> {
    let s = read_string(dir, file)?;
    let words = parse_words(&s, 8).ok_or_else(|| bad(dir, file))?;
    let mut gid = [0u8; 16];
    for (i, w) in words.iter().enumerate() {
        gid[2 * i..2 * i + 2].copy_from_slice(&w.to_be_bytes());
    }
    Ok(gid)
}

fn parse_words(s: &str, n: usize) -> Option<Vec<u16>> {
    let words: Vec<u16> = s
        .split([':', ' ', '\t'])
        .take(n)
        .map(|w| u16::from_str_radix(w, 16).ok())
        .collect::<Option<_>>()?;
    (words.len() == n).then_some(words)
}

/// `pkeys/<index>`: as many entries as files, each at its index.
fn read_pkeys(dir: &Path) -> Result<Vec<u16>> {
    let mut found = Vec::new();
    for entry in fs::read_dir(dir)? {
        let name = entry?.file_name();
        let Some(index) = name.to_str().and_then(|n| n.parse::<usize>().ok()) else {
            continue;
        };
        found.push((index, read_uint(dir, &name.to_string_lossy())?));
    }
    if found.is_empty() {
        return Err(bad(dir, "*: no P_Keys"));
    }
    let mut pkeys = vec![0u16; found.len()];
    for (index, value) in found {
        if let Some(slot) = pkeys.get_mut(index) {
            *slot = value as u16;
        }
    }
    Ok(pkeys)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strtoul_reads_the_leading_number_as_c_does() {
        assert_eq!(strtoul("4: ACTIVE"), 4);
        assert_eq!(strtoul("5: LinkUp"), 5);
        assert_eq!(strtoul("10 Gb/sec (1X QDR)"), 10);
        assert_eq!(strtoul("2.5 Gb/sec (1X SDR)"), 2);
        assert_eq!(strtoul("0x00010000"), 0x10000);
        assert_eq!(strtoul("0xffff"), 0xffff);
        assert_eq!(strtoul("010"), 8);
        assert_eq!(strtoul("0"), 0);
        assert_eq!(strtoul("none"), 0);
    }

    /// A CA laid out as the kernel shows an rxe port, read back field by field.
    #[test]
    fn reads_a_ca_and_its_port_as_libibumad_does() {
        let root = std::env::temp_dir().join(format!("vmad-sysfs-{}", std::process::id()));
        let ca = root.join("class/infiniband/rxe7");
        let port = ca.join("ports/1");
        fs::create_dir_all(port.join("gids")).unwrap();
        fs::create_dir_all(port.join("pkeys")).unwrap();
        let mad = root.join("class/infiniband_mad");
        fs::create_dir_all(mad.join("umad3")).unwrap();
        let files: &[(&Path, &str, &str)] = &[
            (&ca, "node_type", "1: CA\n"),
            (&ca, "node_guid", "0200:c0ff:fe00:0201\n"),
            (&ca, "sys_image_guid", "0200:c0ff:fe00:0201\n"),
            (&ca, "fw_ver", "0.0.0\n"),
            (&port, "lid", "0x0\n"),
            (&port, "lid_mask_count", "0\n"),
            (&port, "sm_lid", "0x0\n"),
            (&port, "sm_sl", "0\n"),
            (&port, "state", "4: ACTIVE\n"),
            (&port, "phys_state", "5: LinkUp\n"),
            (&port, "rate", "2.5 Gb/sec (1X SDR)\n"),
            (&port, "cap_mask", "0x00890000\n"),
            (&port, "link_layer", "Ethernet\n"),
            (&port, "gids/0", "fe80:0000:0000:0000:0000:c0ff:fe00:0201\n"),
            (&port, "pkeys/0", "0xffff\n"),
            (&port, "pkeys/1", "0x0000\n"),
            (&mad, "abi_version", "5\n"),
            (&mad, "umad3/ibdev", "rxe7\n"),
            (&mad, "umad3/port", "1\n"),
        ];
        for (dir, file, text) in files {
            fs::write(dir.join(file), text).unwrap();
        }
        fs::create_dir_all(root.join("class/infiniband/ignored-no-type")).unwrap();
        let sysfs = Sysfs::at(&root);
        assert_eq!(sysfs.ca_names(), ["rxe7"]);
        let info = sysfs.ca_info("rxe7").unwrap();
        assert_eq!(
            (
                info.node_type,
                info.node_guid,
                info.fw_ver.as_str(),
                info.hw_ver.as_str()
            ),
            (1, 0x0200_c0ff_fe00_0201, "0.0.0", "")
        );
        let p = &info.ports[0];
        assert_eq!(
            (p.port_num, p.state, p.phys_state, p.rate, p.capmask),
            (1, 4, 5, 2, 0x0089_0000)
        );
        assert_eq!(
            (p.gid_prefix, p.port_guid),
            (0xfe80 << 48, 0x0000_c0ff_fe00_0201)
        );
        assert_eq!(
            (p.pkeys.as_slice(), p.link_layer),
            (&[0xffff, 0][..], LinkLayer::Ethernet)
        );
        assert_eq!(sysfs.umad_id("rxe7", 1).unwrap(), 3);
        assert!(sysfs.umad_id("rxe7", 2).is_err());
        assert_eq!(sysfs.abi_version().unwrap(), 5);
        assert!(matches!(sysfs.ca_info("nope"), Err(Error::NoDevice(_))));
        fs::remove_dir_all(&root).unwrap();
    }
}
