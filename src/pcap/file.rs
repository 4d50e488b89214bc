//! The classic pcap file format (not pcapng): a 24-byte file header, then
//! records of 16-byte header + packet bytes. Writing rotates files by size;
//! reading accepts both byte orders and micro/nanosecond timestamps.

use std::fs::{self, File};
use std::io::{self, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Magic of a microsecond-resolution pcap file.
const MAGIC_MICROS: u32 = 0xa1b2_c3d4;
/// Magic of a nanosecond-resolution pcap file.
const MAGIC_NANOS: u32 = 0xa1b2_3c4d;
/// Length of the file header.
pub const FILE_HEADER_LEN: usize = 24;
/// Length of a record header.
pub const RECORD_HEADER_LEN: usize = 16;
/// Snap length written in the header: no packet of ours comes near it.
const SNAPLEN: u32 = 65535;

/// The pcap link types vmad writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkType {
    /// 1: Ethernet frames carrying RoCE v2 (what a capture on an rxe netdev
    /// shows; every Wireshark since 1.8 dissects it).
    Ethernet,
    /// 247: native InfiniBand packets starting with the LRH (needs a
    /// Wireshark that reads this link type; Debian's 4.0 does not).
    InfiniBand,
}

impl LinkType {
    /// The LINKTYPE_ number.
    pub const fn number(self) -> u32 {
        match self {
            LinkType::Ethernet => 1,
            LinkType::InfiniBand => 247,
        }
    }
    /// The link type of a LINKTYPE_ number, if vmad knows it.
    pub const fn from_number(n: u32) -> Option<LinkType> {
        match n {
            1 => Some(LinkType::Ethernet),
            247 => Some(LinkType::InfiniBand),
            _ => None,
        }
    }
}

fn file_header(link: LinkType) -> [u8; FILE_HEADER_LEN] {
    let mut h = [0u8; FILE_HEADER_LEN];
    h[0..4].copy_from_slice(&MAGIC_MICROS.to_le_bytes());
    h[4..6].copy_from_slice(&2u16.to_le_bytes());
    h[6..8].copy_from_slice(&4u16.to_le_bytes());
    h[16..20].copy_from_slice(&SNAPLEN.to_le_bytes());
    h[20..24].copy_from_slice(&link.number().to_le_bytes());
    h
}

/// The path of rotated file `n` (`file.pcap.1`, `file.pcap.2`, ...); 0 is the live file.
pub fn rotated_path(path: &Path, n: u32) -> PathBuf {
    if n == 0 {
        return path.to_path_buf();
    }
    let mut s = path.as_os_str().to_owned();
    s.push(format!(".{n}"));
    PathBuf::from(s)
}

/// A pcap file writer that rotates: when a record would take the live
/// file past `max_bytes`, `file.pcap` becomes `file.pcap.1` (`.1` becomes
/// `.2`, ...; the oldest beyond `keep` is deleted) and a fresh file starts.
#[derive(Debug)]
pub struct Writer {
    path: PathBuf,
    link: LinkType,
    max_bytes: u64,
    keep: u32,
    out: BufWriter<File>,
    size: u64,
    rotations: u64,
}

impl Writer {
    /// Create (truncate) `path` and write the file header.
    ///
    /// # Errors
    ///
    /// The OS error of creating or writing the file.
    pub fn create(path: &Path, link: LinkType, max_bytes: u64, keep: u32) -> io::Result<Writer> {
        let out = Self::start(path, link)?;
        Ok(Writer {
            path: path.to_path_buf(),
            link,
            max_bytes: max_bytes.max((FILE_HEADER_LEN + RECORD_HEADER_LEN) as u64),
            keep,
            out,
            size: FILE_HEADER_LEN as u64,
            rotations: 0,
        })
    }

    fn start(path: &Path, link: LinkType) -> io::Result<BufWriter<File>> {
        let mut out = BufWriter::new(File::create(path)?);
        out.write_all(&file_header(link))?;
        out.flush()?;
        Ok(out)
    }

    fn rotate(&mut self) -> io::Result<()> {
        self.out.flush()?;
        if self.keep == 0 {
            fs::remove_file(&self.path)?;
        } else {
            let _ = fs::remove_file(rotated_path(&self.path, self.keep));
            for n in (0..self.keep).rev() {
                let from = rotated_path(&self.path, n);
                if from.exists() {
                    fs::rename(&from, rotated_path(&self.path, n + 1))?;
                }
            }
        }
        self.out = Self::start(&self.path, self.link)?;
        self.size = FILE_HEADER_LEN as u64;
        self.rotations += 1;
        Ok(())
    }

    /// Append one packet, rotating first if it would not fit, and flush it
    /// (a capture is readable while it grows, and survives a crash).
    ///
    /// # Errors
    ///
    /// The OS error of writing, renaming or creating a file.
    pub fn write(&mut self, ts: SystemTime, packet: &[u8]) -> io::Result<()> {
        let len = (RECORD_HEADER_LEN + packet.len()) as u64;
        if self.size + len > self.max_bytes && self.size > FILE_HEADER_LEN as u64 {
            self.rotate()?;
        }
        let t = ts.duration_since(UNIX_EPOCH).unwrap_or_default();
        let n = u32::try_from(packet.len()).unwrap_or(u32::MAX);
        let mut h = [0u8; RECORD_HEADER_LEN];
        h[0..4].copy_from_slice(&u32::try_from(t.as_secs()).unwrap_or(u32::MAX).to_le_bytes());
        h[4..8].copy_from_slice(&t.subsec_micros().to_le_bytes());
        h[8..12].copy_from_slice(&n.to_le_bytes());
        h[12..16].copy_from_slice(&n.to_le_bytes());
        self.out.write_all(&h)?;
        self.out.write_all(packet)?;
        self.out.flush()?;
        self.size += len;
        Ok(())
    }

    /// Times the file was rotated.
    pub fn rotations(&self) -> u64 {
        self.rotations
    }

    /// The link type written.
    pub fn link(&self) -> LinkType {
        self.link
    }
}

/// One record read back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// Capture time since the Unix epoch.
    pub ts: Duration,
    /// Length on the wire (may exceed `data.len()` if the capture was snapped).
    pub orig_len: u32,
    /// The captured bytes.
    pub data: Vec<u8>,
}

/// A pcap file reader (either byte order, µs or ns timestamps).
#[derive(Debug)]
pub struct Reader<R: Read> {
    input: R,
    swapped: bool,
    nanos: bool,
    link: u32,
}

fn bad(msg: &'static str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg)
}

impl<R: Read> Reader<R> {
    /// Read the file header.
    ///
    /// # Errors
    ///
    /// `InvalidData` if it is not a pcap file (pcapng is not read); the OS error of reading.
    pub fn new(mut input: R) -> io::Result<Reader<R>> {
        let mut h = [0u8; FILE_HEADER_LEN];
        input.read_exact(&mut h)?;
        let magic = u32::from_le_bytes([h[0], h[1], h[2], h[3]]);
        let (swapped, nanos) = match magic {
            MAGIC_MICROS => (false, false),
            MAGIC_NANOS => (false, true),
            m if m.swap_bytes() == MAGIC_MICROS => (true, false),
            m if m.swap_bytes() == MAGIC_NANOS => (true, true),
            0x0a0d_0d0a => {
                return Err(bad(
                    "pcapng files are not supported; convert with editcap -F pcap",
                ))
            }
            _ => return Err(bad("not a pcap file")),
        };
        let mut r = Reader {
            input,
            swapped,
            nanos,
            link: 0,
        };
        r.link = r.u32(&h[20..24]);
        Ok(r)
    }

    fn u32(&self, b: &[u8]) -> u32 {
        let v = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
        if self.swapped {
            v.swap_bytes()
        } else {
            v
        }
    }

    /// The file's LINKTYPE_ number.
    pub fn link_number(&self) -> u32 {
        self.link
    }

    /// The next record, `None` at the end of the file.
    ///
    /// # Errors
    ///
    /// `InvalidData` for a record longer than 16 MiB; `UnexpectedEof` for a
    /// truncated record; the OS error of reading.
    pub fn next_record(&mut self) -> io::Result<Option<Record>> {
        let mut h = [0u8; RECORD_HEADER_LEN];
        match self.input.read(&mut h[..1])? {
            0 => return Ok(None),
            _ => self.input.read_exact(&mut h[1..])?,
        }
        let secs = self.u32(&h[0..4]);
        let frac = self.u32(&h[4..8]);
        let incl = self.u32(&h[8..12]);
        let orig_len = self.u32(&h[12..16]);
        if incl > 16 << 20 {
            return Err(bad("record longer than 16 MiB"));
        }
        let mut data = vec![0u8; incl as usize];
        self.input.read_exact(&mut data)?;
        let sub = if self.nanos {
            Duration::from_nanos(u64::from(frac))
        } else {
            Duration::from_micros(u64::from(frac))
        };
        Ok(Some(Record {
            ts: Duration::from_secs(u64::from(secs)) + sub,
            orig_len,
            data,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmp(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("vmad-pcap-{}-{name}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).unwrap();
        d.join("cap.pcap")
    }

    fn ts(s: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(s) + Duration::from_micros(123_456)
    }

    #[test]
    fn header_and_record_bytes() {
        let p = tmp("bytes");
        let mut w = Writer::create(&p, LinkType::Ethernet, 1 << 20, 2).unwrap();
        w.write(ts(1_700_000_000), &[1, 2, 3]).unwrap();
        let b = fs::read(&p).unwrap();
        assert_eq!(
            &b[..24],
            &[
                0xd4, 0xc3, 0xb2, 0xa1, 2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0, 0, 1, 0,
                0, 0
            ]
        );
        assert_eq!(
            &b[24..32],
            &[0x00, 0xf1, 0x53, 0x65, 0x40, 0xe2, 0x01, 0x00]
        );
        assert_eq!(&b[32..], &[3, 0, 0, 0, 3, 0, 0, 0, 1, 2, 3]);
        let mut r = Reader::new(&b[..]).unwrap();
        assert_eq!(r.link_number(), 1);
        let rec = r.next_record().unwrap().unwrap();
        assert_eq!(rec.data, vec![1, 2, 3]);
        assert_eq!(rec.ts, Duration::from_micros(1_700_000_000_123_456));
        assert_eq!(r.next_record().unwrap(), None);
    }

    #[test]
    fn rotation_bounds_every_file_and_keeps_the_newest() {
        let p = tmp("rotate");
        // Header 24 + 3 records of 16 + 84 = 100 bytes: 324 <= 330 < 424.
        let mut w = Writer::create(&p, LinkType::InfiniBand, 330, 2).unwrap();
        for i in 0..10u8 {
            w.write(ts(1), &[i; 84]).unwrap();
        }
        assert_eq!(w.rotations(), 3);
        let firsts: Vec<u8> = (0..3)
            .map(|n| {
                let b = fs::read(rotated_path(&p, n)).unwrap();
                assert!(b.len() <= 330);
                let mut r = Reader::new(&b[..]).unwrap();
                assert_eq!(r.link_number(), 247);
                r.next_record().unwrap().unwrap().data[0]
            })
            .collect();
        assert_eq!(firsts, vec![9, 6, 3], "live, .1, .2");
        assert!(!rotated_path(&p, 3).exists(), "the oldest was deleted");
    }

    #[test]
    fn reader_handles_swapped_nanos_and_rejects_junk() {
        let mut b = vec![0xa1, 0xb2, 0x3c, 0x4d, 0, 2, 0, 4];
        b.extend_from_slice(&[0; 8]);
        b.extend_from_slice(&[0, 0, 0xff, 0xff, 0, 0, 0, 1]);
        b.extend_from_slice(&[0, 0, 0, 5, 0, 0, 0, 7, 0, 0, 0, 1, 0, 0, 0, 1, 0xaa]);
        let mut r = Reader::new(&b[..]).unwrap();
        assert_eq!(r.link_number(), 1);
        let rec = r.next_record().unwrap().unwrap();
        assert_eq!((rec.ts, rec.data), (Duration::new(5, 7), vec![0xaa]));
        assert!(Reader::new(&[0u8; 24][..]).is_err());
        assert!(Reader::new(&[0u8; 3][..]).is_err());
        let mut t = b.clone();
        t.pop();
        let mut r = Reader::new(&t[..]).unwrap();
        assert!(r.next_record().is_err(), "truncated record");
    }
}
