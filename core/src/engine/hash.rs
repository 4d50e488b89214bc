//! The engine's two hashers.
//!
//! Maps keyed by values the engine makes itself (its own ids, and TIDs it
//! stamped) use [`IdHasher`], a multiply-rotate mix in the style of FxHash.
//!
//! Maps keyed by what peers send (request dedup, RMPP receive sessions) use
//! SipHash-1-3, std's `HashMap` hasher, keyed from the engine's seed
//! ([`SipKeys`]), so a peer cannot aim collisions at them. std's `RandomState`
//! would read the OS for its keys, and std's hasher is not in `core`: the
//! engine is `no_std`, with only its seed, which a port draws from the OS.

use core::hash::{BuildHasher, BuildHasherDefault, Hasher};

use hashbrown::HashMap;

use super::config::SplitMix;

const K: u64 = 0x51_7c_c1_b7_27_22_0a_95;

#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct IdHasher(u64);

impl IdHasher {
    fn mix(&mut self, x: u64) {
        self.0 = (self.0.rotate_left(5) ^ x).wrapping_mul(K);
    }
}

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut b = [0u8; 8];
            b[..chunk.len()].copy_from_slice(chunk);
            self.mix(u64::from_le_bytes(b));
        }
    }
    fn write_u8(&mut self, x: u8) {
        self.mix(u64::from(x));
    }
    fn write_u32(&mut self, x: u32) {
        self.mix(u64::from(x));
    }
    fn write_u64(&mut self, x: u64) {
        self.mix(x);
    }
    fn write_usize(&mut self, x: usize) {
        self.mix(x as u64);
    }
}

/// A `HashMap` with [`IdHasher`].
pub(crate) type IdMap<K, V> = HashMap<K, V, BuildHasherDefault<IdHasher>>;

/// A `HashMap` keyed by what peers send: SipHash with [`SipKeys`].
pub(crate) type PeerMap<K, V> = HashMap<K, V, SipKeys>;

/// SipHash's two keys, drawn from the engine's seed.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SipKeys(u64, u64);

impl SipKeys {
    pub(crate) fn draw(rng: &mut SplitMix) -> SipKeys {
        SipKeys(rng.next_u64(), rng.next_u64())
    }
}

impl BuildHasher for SipKeys {
    type Hasher = SipHasher13;

    fn build_hasher(&self) -> SipHasher13 {
        let SipKeys(k0, k1) = *self;
        SipHasher13 {
            v: [
                k0 ^ 0x736f_6d65_7073_6575,
                k1 ^ 0x646f_7261_6e64_6f6d,
                k0 ^ 0x6c79_6765_6e65_7261,
                k1 ^ 0x7465_6462_7974_6573,
            ],
            tail: 0,
            ntail: 0,
            length: 0,
        }
    }
}

/// SipHash-1-3 (one compression round per word, three to finish) over the
/// bytes written, as std's `DefaultHasher` computes it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SipHasher13 {
    v: [u64; 4],
    /// The bytes of an unfinished word, little-endian, and how many there are (0..8).
    tail: u64,
    ntail: usize,
    /// All bytes written (only its low byte counts).
    length: usize,
}

impl SipHasher13 {
    #[inline]
    fn round(&mut self) {
        let [v0, v1, v2, v3] = &mut self.v;
        *v0 = v0.wrapping_add(*v1);
        *v1 = v1.rotate_left(13) ^ *v0;
        *v0 = v0.rotate_left(32);
        *v2 = v2.wrapping_add(*v3);
        *v3 = v3.rotate_left(16) ^ *v2;
        *v0 = v0.wrapping_add(*v3);
        *v3 = v3.rotate_left(21) ^ *v0;
        *v2 = v2.wrapping_add(*v1);
        *v1 = v1.rotate_left(17) ^ *v2;
        *v2 = v2.rotate_left(32);
    }

    /// Hash the `size` low bytes of `x`, as `write(&x.to_le_bytes()[..size])` would.
    #[inline]
    fn short_write(&mut self, x: u64, size: usize) {
        self.length = self.length.wrapping_add(size);
        let needed = 8 - self.ntail;
        self.tail |= x << (8 * self.ntail);
        if size < needed {
            self.ntail += size;
            return;
        }
        self.compress(self.tail);
        self.ntail = size - needed;
        self.tail = if needed < 8 { x >> (8 * needed) } else { 0 };
    }

    #[inline]
    fn compress(&mut self, word: u64) {
        self.v[3] ^= word;
        self.round();
        self.v[0] ^= word;
    }
}

/// Up to 8 bytes as a little-endian word.
fn le_word(bytes: &[u8]) -> u64 {
    let mut b = [0u8; 8];
    b[..bytes.len()].copy_from_slice(bytes);
    u64::from_le_bytes(b)
}

impl Hasher for SipHasher13 {
    fn write(&mut self, mut bytes: &[u8]) {
        self.length = self.length.wrapping_add(bytes.len());
        if self.ntail > 0 {
            let fill = bytes.len().min(8 - self.ntail);
            self.tail |= le_word(&bytes[..fill]) << (8 * self.ntail);
            self.ntail += fill;
            if self.ntail < 8 {
                return;
            }
            self.compress(self.tail);
            bytes = &bytes[fill..];
        }
        let mut words = bytes.chunks_exact(8);
        for word in &mut words {
            self.compress(le_word(word));
        }
        self.tail = le_word(words.remainder());
        self.ntail = words.remainder().len();
    }

    // The keys hashed here are a few integers each: feed them as words, not through
    // `write`'s byte slices (what std's SipHasher does too; the same hashes).
    #[inline]
    fn write_u8(&mut self, x: u8) {
        self.short_write(u64::from(x), 1);
    }

    #[inline]
    fn write_u16(&mut self, x: u16) {
        self.short_write(u64::from(x), 2);
    }

    #[inline]
    fn write_u32(&mut self, x: u32) {
        self.short_write(u64::from(x), 4);
    }

    #[inline]
    fn write_u64(&mut self, x: u64) {
        self.short_write(x, 8);
    }

    #[inline]
    fn write_usize(&mut self, x: usize) {
        self.short_write(x as u64, core::mem::size_of::<usize>());
    }

    fn finish(&self) -> u64 {
        let mut s = *self;
        s.compress(((self.length as u64 & 0xff) << 56) | self.tail);
        s.v[2] ^= 0xff;
        s.round();
        s.round();
        s.round();
        s.v[0] ^ s.v[1] ^ s.v[2] ^ s.v[3]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::{DefaultHasher, Hash};

    /// Keys (0, 0): `DefaultHasher::new()` is SipHash-1-3 with those keys.
    fn both<T: Hash + ?Sized>(value: &T) -> (u64, u64) {
        let std = BuildHasherDefault::<DefaultHasher>::default();
        (SipKeys(0, 0).hash_one(value), std.hash_one(value))
    }

    #[test]
    fn sip13_matches_std_on_every_length_and_split() {
        let bytes: Vec<u8> = (0..40u8).map(|i| i.wrapping_mul(37)).collect();
        for len in 0..bytes.len() {
            let (ours, std) = both(&bytes[..len]);
            assert_eq!(ours, std, "{len} bytes");
            // The same bytes in two writes, split anywhere: the same hash.
            for split in 0..=len {
                let mut h = SipKeys(0, 0).build_hasher();
                h.write(&bytes[..split]);
                h.write(&bytes[split..len]);
                let mut whole = SipKeys(0, 0).build_hasher();
                whole.write(&bytes[..len]);
                assert_eq!(h.finish(), whole.finish(), "{len} split at {split}");
            }
        }
        let key = (7u8, 0x1234u16, 0xdead_beefu32, u64::MAX, [1u8, 2, 3], "str");
        let (ours, std) = both(&key);
        assert_eq!(ours, std);
    }

    #[test]
    fn sip13_integer_writes_match_std_in_any_mix() {
        // Keys as the engine hashes them: integers of every width, after any number of
        // bytes already written (every fill of the tail word).
        for lead in 0..16usize {
            let prefix: Vec<u8> = (0..lead as u8).collect();
            let key = (
                &prefix[..],
                0xabu8,
                0xbeefu16,
                0xdead_beefu32,
                0x0123_4567_89ab_cdefu64,
                7usize,
            );
            let (ours, std) = both(&key);
            assert_eq!(ours, std, "after {lead} bytes");
            let tuple = (lead as u8, (lead as u16, Some(lead as u64)), lead as u32);
            let (ours, std) = both(&tuple);
            assert_eq!(ours, std, "tuple after {lead}");
        }
    }

    #[test]
    fn sip13_keys_change_the_hash() {
        let hash = |keys: SipKeys| keys.hash_one(0x1234_5678u32);
        assert_ne!(hash(SipKeys(0, 0)), hash(SipKeys(1, 0)));
        assert_ne!(hash(SipKeys(0, 0)), hash(SipKeys(0, 1)));
        assert_eq!(hash(SipKeys(3, 4)), hash(SipKeys(3, 4)));
    }
}
