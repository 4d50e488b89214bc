//! NodeDescription (IBA 14.2.5.2): 64 bytes of UTF-8 text, NUL-padded, not
//! necessarily NUL-terminated. The view wraps the attribute data.

use crate::wire::Result;

/// Length of NodeDescription.
pub const LEN: usize = 64;
const _: () = assert!(LEN == super::DATA_LEN);

/// A view over NodeDescription attribute data.
#[derive(Debug, Clone)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    crate::wire::view_constructors!(LEN, "the 64 bytes of NodeDescription");
    /// All 64 bytes.
    pub fn raw(&self) -> &[u8] {
        &self.buffer.as_ref()[..LEN]
    }
    /// The text: the bytes before the first NUL (all 64 if there is none).
    pub fn text(&self) -> &[u8] {
        let raw = self.raw();
        let end = raw.iter().position(|&c| c == 0).unwrap_or(LEN);
        &raw[..end]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Write `text` NUL-padded; text beyond 64 bytes is cut.
    pub fn set_text(&mut self, text: &[u8]) {
        let b = &mut self.buffer.as_mut()[..LEN];
        let n = text.len().min(LEN);
        b[..n].copy_from_slice(&text[..n]);
        b[n..].fill(0);
    }
}

/// NodeDescription as a value: the raw 64 bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// The 64 bytes, NUL-padded.
    pub raw: [u8; LEN],
}

impl Repr {
    /// A description from text, NUL-padded; text beyond 64 bytes is cut.
    pub fn from_text(text: &[u8]) -> Repr {
        let mut raw = [0u8; LEN];
        Packet::new_unchecked(&mut raw[..]).set_text(text);
        Repr { raw }
    }
    /// The text before the first NUL.
    pub fn text(&self) -> &[u8] {
        let end = self.raw.iter().position(|&c| c == 0).unwrap_or(LEN);
        &self.raw[..end]
    }
    /// Parse checked NodeDescription.
    ///
    /// # Errors
    ///
    /// [`Error::Truncated`](crate::wire::Error::Truncated) if the buffer is shorter than 64 bytes.
    pub fn parse<T: AsRef<[u8]>>(p: &Packet<T>) -> Result<Repr> {
        p.check_len()?;
        let mut raw = [0u8; LEN];
        raw.copy_from_slice(p.raw());
        Ok(Repr { raw })
    }
    /// Bytes `emit` writes.
    pub const fn buffer_len(&self) -> usize {
        LEN
    }
    /// Write the 64 bytes.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut Packet<T>) {
        p.buffer.as_mut()[..LEN].copy_from_slice(&self.raw);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::Error;
    use proptest::prelude::*;

    #[test]
    fn text_is_nul_padded_and_cut() {
        let mut b = [0xa5u8; 64];
        Repr::from_text(b"node1 HCA-1").emit(&mut Packet::new_unchecked(&mut b[..]));
        assert_eq!(&b[..11], b"node1 HCA-1");
        assert_eq!(&b[11..], &[0u8; 53]);
        let p = Packet::new_checked(&b[..]).unwrap();
        assert_eq!(p.text(), b"node1 HCA-1");
        assert_eq!(Repr::parse(&p).unwrap().text(), b"node1 HCA-1");

        let long = [b'x'; 70];
        let r = Repr::from_text(&long);
        assert_eq!(r.text(), &long[..64], "no NUL: all 64 bytes are text");
    }

    #[test]
    fn test_truncated() {
        let b = [0u8; 63];
        assert_eq!(Packet::new_checked(&b[..]).unwrap_err(), Error::Truncated);
        assert_eq!(
            Repr::parse(&Packet::new_unchecked(&b[..])).unwrap_err(),
            Error::Truncated
        );
    }

    proptest! {
        #[test]
        fn roundtrip(bytes in proptest::collection::vec(any::<u8>(), 64)) {
            let r = Repr::parse(&Packet::new_checked(&bytes[..]).unwrap()).unwrap();
            let mut out = [0x5au8; 64];
            r.emit(&mut Packet::new_unchecked(&mut out[..]));
            prop_assert_eq!(&out[..], &bytes[..]);
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..80)) {
            if let Ok(p) = Packet::new_checked(&bytes[..]) {
                let _ = (Repr::parse(&p), p.text());
            }
        }
    }
}
