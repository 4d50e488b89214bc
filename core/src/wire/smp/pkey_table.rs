//! P_KeyTable (IBA 14.2.5.7): one block of 32 P_Keys of a port's partition
//! table (the attribute modifier's low 16 bits are the block; on a switch, bits
//! 16..24 the port). The view wraps the data.

use crate::wire::be;

/// P_Keys per block.
pub const ENTRIES: usize = 32;
/// Length of a block.
pub const LEN: usize = ENTRIES * 2;

/// A view over one P_KeyTable block.
#[derive(Debug, Clone)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    crate::wire::view_constructors!(LEN, "a 32-entry P_Key block");
    /// The `i`th P_Key of the block (`i` < 32).
    pub fn pkey(&self, i: usize) -> u16 {
        be::u16(self.buffer.as_ref(), 2 * i..2 * i + 2)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Set the `i`th P_Key of the block (`i` < 32).
    pub fn set_pkey(&mut self, i: usize, v: u16) {
        be::set_u16(self.buffer.as_mut(), 2 * i..2 * i + 2, v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_are_big_endian_pairs() {
        let mut bytes = [0u8; LEN];
        bytes[..4].copy_from_slice(&[0xff, 0xff, 0x80, 0x05]);
        bytes[62..].copy_from_slice(&[0x7f, 0xff]);
        let p = Packet::new_checked(&bytes[..]).unwrap();
        assert_eq!((p.pkey(0), p.pkey(1), p.pkey(31)), (0xffff, 0x8005, 0x7fff));
        let mut out = [0u8; LEN];
        let mut w = Packet::new_unchecked(&mut out[..]);
        w.set_pkey(0, 0xffff);
        w.set_pkey(1, 0x8005);
        w.set_pkey(31, 0x7fff);
        assert_eq!(out, bytes);
    }
}
