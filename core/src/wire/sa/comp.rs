//! ComponentMask layouts: which bytes (and bits) of a record each mask bit
//! names, so one matcher serves every record (IBA 15.2.1.1: a query's
//! record matches where every field whose mask bit is set is equal).
//!
//! Each record view exports its table as `COMPONENTS`, indexed by mask bit.
//! A reserved bit has an empty component and matches anything.

/// The bytes one ComponentMask bit covers in a record: `len` bytes from
/// `at`, the first byte masked by `first`, the last by `last` (a field of
/// one byte uses `first & last`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Component {
    /// Offset of the first byte in the record.
    pub at: u8,
    /// Bytes covered (0: a reserved bit).
    pub len: u8,
    /// Bits of the first byte that belong to the field.
    pub first: u8,
    /// Bits of the last byte that belong to the field.
    pub last: u8,
}

impl Component {
    /// A reserved bit: matches anything.
    pub const NONE: Component = Component {
        at: 0,
        len: 0,
        first: 0,
        last: 0,
    };

    /// Whole bytes `at..at + len`.
    pub const fn bytes(at: u8, len: u8) -> Component {
        Component {
            at,
            len,
            first: 0xff,
            last: 0xff,
        }
    }

    /// The bits `mask` of byte `at`.
    pub const fn bits(at: u8, mask: u8) -> Component {
        Component {
            at,
            len: 1,
            first: mask,
            last: mask,
        }
    }

    /// `len` bytes from `at`, with partial first and last bytes.
    pub const fn span(at: u8, len: u8, first: u8, last: u8) -> Component {
        Component {
            at,
            len,
            first,
            last,
        }
    }

    /// Whether `a` and `b` agree on this component. Records shorter than
    /// the component disagree.
    pub fn agrees(&self, a: &[u8], b: &[u8]) -> bool {
        let (at, len) = (usize::from(self.at), usize::from(self.len));
        if len == 0 {
            return true;
        }
        let (Some(a), Some(b)) = (a.get(at..at + len), b.get(at..at + len)) else {
            return false;
        };
        a.iter().zip(b).enumerate().all(|(i, (x, y))| {
            let mut m = 0xff;
            if i == 0 {
                m &= self.first;
            }
            if i == len - 1 {
                m &= self.last;
            }
            (x ^ y) & m == 0
        })
    }
}

/// Whether `record` matches `query` on every component set in `mask`;
/// mask bits beyond the table are ignored, as OpenSM ignores bits it does
/// not know.
pub fn matches(table: &[Component], mask: u64, query: &[u8], record: &[u8]) -> bool {
    table
        .iter()
        .enumerate()
        .filter(|(bit, _)| *bit < 64 && mask & (1u64 << bit) != 0)
        .all(|(_, c)| c.agrees(query, record))
}

#[cfg(test)]
mod tests {
    use super::*;

    const TABLE: [Component; 4] = [
        Component::bytes(0, 2),
        Component::NONE,
        Component::bits(2, 0x0f),
        Component::span(3, 3, 0x0f, 0xf0),
    ];

    #[test]
    fn only_masked_components_count() {
        let q = [0x00, 0x12, 0xa3, 0xf1, 0x22, 0x3f];
        let r = [0x00, 0x12, 0x53, 0x01, 0x22, 0x30];
        assert!(
            matches(&TABLE, 0b1111, &q, &r),
            "differences hide outside the bits"
        );
        let mut r2 = r;
        r2[1] = 0x13;
        assert!(!matches(&TABLE, 0b0001, &q, &r2));
        assert!(matches(&TABLE, 0b1110, &q, &r2));
        r2[2] = 0x54;
        assert!(!matches(&TABLE, 0b0100, &q, &r2));
        r2[4] = 0x23;
        assert!(!matches(&TABLE, 0b1000, &q, &r2));
        assert!(
            matches(&TABLE, 1 << 40, &q, &r2),
            "unknown bits are ignored"
        );
    }

    #[test]
    fn short_records_disagree() {
        assert!(!Component::bytes(4, 4).agrees(&[0; 8], &[0; 6]));
        assert!(Component::NONE.agrees(&[], &[]));
    }
}
