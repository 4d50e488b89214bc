//! CRC-32 (IEEE 802.3, the zlib one) and the two InfiniBand CRCs built on it.
//!
//! The CRC-32 is `crc32fast`'s: `benches/icrc.rs` measured it against the
//! table-driven loop vmad had (18 ns against 570 ns for one 332-byte RoCE
//! frame's ICRC, where the CPU has carry-less multiply; it falls back to a
//! table itself elsewhere). The VCRC keeps a table: only captures use it.

/// The reflected VCRC polynomial (x^16 + x^12 + x^3 + x + 1, 0x100B).
const POLY16: u16 = 0xd008;

const fn table16() -> [u16; 256] {
    let mut t = [0u16; 256];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u16;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 {
                (c >> 1) ^ POLY16
            } else {
                c >> 1
            };
            k += 1;
        }
        t[i] = c;
        i += 1;
    }
    t
}

static TABLE16: [u16; 256] = table16();

/// An incremental CRC-32 (IEEE): `Crc32::new().update(a).update(b).finish()`
/// equals `zlib.crc32(a + b)`.
#[derive(Debug, Clone)]
pub struct Crc32(crc32fast::Hasher);

impl Default for Crc32 {
    fn default() -> Self {
        Crc32::new()
    }
}

impl Crc32 {
    /// A fresh CRC.
    pub fn new() -> Crc32 {
        Crc32(crc32fast::Hasher::new())
    }
    /// Feed bytes.
    pub fn update(mut self, bytes: &[u8]) -> Crc32 {
        self.0.update(bytes);
        self
    }
    /// The CRC of everything fed.
    pub fn finish(self) -> u32 {
        self.0.finalize()
    }
}

/// CRC-32 (IEEE, zlib) of `bytes`.
pub fn crc32(bytes: &[u8]) -> u32 {
    crc32fast::hash(bytes)
}

/// The InfiniBand VCRC: CRC-16 with polynomial 0x100B, all-ones seed and
/// final inversion, in the same reflected bit order as the ICRC.
///
/// vmad only writes it into link-type-247 captures (nothing checks it there);
/// it has not been compared against a hardware-generated packet.
pub fn vcrc(bytes: &[u8]) -> u16 {
    let mut c: u16 = !0;
    for &b in bytes {
        c = TABLE16[usize::from((c as u8) ^ b)] ^ (c >> 8);
    }
    !c
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc32_check_values() {
        // The catalogue check value of CRC-32/ISO-HDLC, and two zlib results.
        assert_eq!(crc32(b"123456789"), 0xcbf4_3926);
        assert_eq!(crc32(b""), 0);
        assert_eq!(
            crc32(b"The quick brown fox jumps over the lazy dog"),
            0x414f_a339
        );
    }

    #[test]
    fn crc32_incremental_equals_one_shot() {
        let data: Vec<u8> = (0..=255u8).collect();
        let split = Crc32::new()
            .update(&data[..100])
            .update(&data[100..])
            .finish();
        assert_eq!(split, crc32(&data));
    }

    #[test]
    fn kernel_seed_is_crc_of_eight_ff() {
        // roce-udp.md: rxe seeds crc32_le with 0xdebb20e3 = crc32_le(~0, 8 x 0xff),
        // i.e. the raw register after the masked LRH.
        assert_eq!(!crc32(&[0xff; 8]), 0xdebb_20e3);
    }

    #[test]
    fn vcrc_detects_single_bit_flips() {
        let data = [0x12u8; 40];
        let base = vcrc(&data);
        for bit in 0..data.len() * 8 {
            let mut d = data;
            d[bit / 8] ^= 1 << (bit % 8);
            assert_ne!(vcrc(&d), base, "bit {bit}");
        }
    }
}
