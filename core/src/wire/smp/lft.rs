//! LinearForwardingTable (IBA 14.2.5.10): one block of a switch's LFT, the
//! egress port of 64 consecutive LIDs (block `n` holds LIDs `64n..64n+63`, the
//! attribute modifier is `n`). Port 255 means "no route". The view wraps the data.

/// LIDs per block (and bytes of the attribute).
pub const LEN: usize = 64;
const _: () = assert!(LEN == super::DATA_LEN);
/// The port that means "drop": no route to this LID.
pub const NO_PORT: u8 = 0xff;

/// A view over one LinearForwardingTable block.
#[derive(Debug, Clone)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    crate::wire::view_constructors!(LEN, "a 64-entry LFT block");
    /// The egress port of the `i`th LID of the block (`i` < 64).
    pub fn port(&self, i: usize) -> u8 {
        self.buffer.as_ref()[i]
    }
    /// All 64 entries.
    pub fn ports(&self) -> &[u8] {
        &self.buffer.as_ref()[..LEN]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Set the egress port of the `i`th LID of the block (`i` < 64).
    pub fn set_port(&mut self, i: usize, port: u8) {
        self.buffer.as_mut()[i] = port;
    }
}

/// The block holding `lid`, and its index in it.
pub fn block_of(lid: u16) -> (u32, usize) {
    (u32::from(lid) / LEN as u32, usize::from(lid) % LEN)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn block_entries_are_ports_by_lid() {
        let mut bytes = [NO_PORT; LEN];
        bytes[1] = 0;
        bytes[5] = 17;
        let p = Packet::new_checked(&bytes[..]).unwrap();
        assert_eq!((p.port(0), p.port(1), p.port(5)), (NO_PORT, 0, 17));
        let mut out = [NO_PORT; LEN];
        let mut w = Packet::new_unchecked(&mut out[..]);
        w.set_port(1, 0);
        w.set_port(5, 17);
        assert_eq!(out, bytes);
        assert_eq!(block_of(5), (0, 5));
        assert_eq!(block_of(64 * 3 + 2), (3, 2));
        assert!(Packet::new_checked(&bytes[..63]).is_err());
    }
}
