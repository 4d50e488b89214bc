//! Helpers over raw `ib_user_mad` buffers: the 64-byte header, then the MAD.
//!
//! These are libibumad's buffer accessors (`umad_size`, `umad_get_mad`,
//! `umad_set_addr`, …), on byte slices, with the same effects byte for byte:
//! a setter writes only its fields' bytes and a getter reads only its field's.
//! The C library lends them the caller's header as is, which may be read-only
//! or have its other fields written by another thread meanwhile.

use crate::types::{GrhAddr, MadAddr};
use crate::wire::umad::{Packet, HEADER_LEN};
use crate::{Error, Result};

/// The header size, `umad_size()`: 64 (vmad always uses the P_Key-index header).
pub const fn size() -> usize {
    HEADER_LEN
}

fn header(umad: &[u8]) -> Result<Packet<&[u8]>> {
    Packet::new_checked(umad)
        .map_err(|_| Error::InvalidArgument("buffer shorter than the 64-byte header"))
}

fn header_mut(umad: &mut [u8]) -> Result<Packet<&mut [u8]>> {
    Packet::new_checked(umad)
        .map_err(|_| Error::InvalidArgument("buffer shorter than the 64-byte header"))
}

/// The header's status, `umad_status()`: 0, or ETIMEDOUT (110) for a send-timeout report.
///
/// # Errors
/// EINVAL if `umad` is shorter than the header.
pub fn status(umad: &[u8]) -> Result<i32> {
    Ok(header(umad)?.status() as i32)
}

/// The MAD part of the buffer, `umad_get_mad()`.
///
/// # Errors
/// EINVAL if `umad` is shorter than the header.
pub fn get_mad(umad: &[u8]) -> Result<&[u8]> {
    header(umad)?;
    Ok(&umad[HEADER_LEN..])
}

/// The MAD part of the buffer, mutably.
///
/// # Errors
/// EINVAL if `umad` is shorter than the header.
pub fn get_mad_mut(umad: &mut [u8]) -> Result<&mut [u8]> {
    header(umad)?;
    Ok(&mut umad[HEADER_LEN..])
}

/// The header's address, `umad_get_mad_addr()`, in host values.
///
/// # Errors
/// EINVAL if `umad` is shorter than the header.
pub fn get_mad_addr(umad: &[u8]) -> Result<MadAddr> {
    Ok(header(umad)?.addr())
}

/// `umad_set_addr()`: destination LID, QPN, SL and Q_Key (host values; stored big-endian).
/// Path bits and the GRH are left alone.
///
/// # Errors
/// EINVAL if `umad` is shorter than the header.
pub fn set_addr(umad: &mut [u8], dlid: u16, dqp: u32, sl: u8, qkey: u32) -> Result<()> {
    let mut h = header_mut(umad)?;
    h.set_lid(dlid);
    h.set_qpn(dqp);
    h.set_sl(sl);
    h.set_qkey(qkey);
    Ok(())
}

/// `umad_set_grh()`: `Some` sets `grh_present` and copies GID, hop limit, traffic class
/// and flow label (not the GID index, as libibumad); `None` clears `grh_present`.
///
/// # Errors
/// EINVAL if `umad` is shorter than the header.
pub fn set_grh(umad: &mut [u8], grh: Option<&GrhAddr>) -> Result<()> {
    let mut h = header_mut(umad)?;
    match grh {
        None => h.set_grh_present(0),
        Some(g) => {
            h.set_grh_present(1);
            h.set_gid(&g.gid);
            h.set_hop_limit(g.hop_limit);
            h.set_traffic_class(g.traffic_class);
            h.set_flow_label(g.flow_label);
        }
    }
    Ok(())
}

/// `umad_set_pkey()`: the P_Key index to send with.
///
/// # Errors
/// EINVAL if `umad` is shorter than the header.
pub fn set_pkey(umad: &mut [u8], pkey_index: u16) -> Result<()> {
    header_mut(umad)?.set_pkey_index(pkey_index);
    Ok(())
}

/// `umad_get_pkey()`: the header's P_Key index.
///
/// # Errors
/// EINVAL if `umad` is shorter than the header.
pub fn get_pkey(umad: &[u8]) -> Result<u16> {
    Ok(header(umad)?.pkey_index())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each setter writes the bytes of its own fields and no other: the rest of the
    /// caller's buffer (path bits, GID index, the reserved bytes, the MAD) is left as
    /// it was, as libibumad leaves it.
    #[test]
    fn setters_write_only_their_fields() {
        let grh = GrhAddr {
            gid: [1; 16],
            gid_index: 9,
            hop_limit: 2,
            traffic_class: 3,
            flow_label: 4,
        };
        // A setter, and the byte offsets its fields own.
        type Case<'a> = (
            &'a str,
            &'a dyn Fn(&mut [u8]) -> Result<()>,
            fn(usize) -> bool,
        );
        let cases: [Case<'_>; 4] = [
            ("set_addr", &|b| set_addr(b, 1, 2, 3, 4), |i| {
                (20..31).contains(&i)
            }),
            ("set_grh", &|b| set_grh(b, Some(&grh)), |i| {
                i == 32 || (34..56).contains(&i)
            }),
            ("set_grh(None)", &|b| set_grh(b, None), |i| i == 32),
            ("set_pkey", &|b| set_pkey(b, 5), |i| (56..58).contains(&i)),
        ];
        for (name, set, owned) in cases {
            let mut buf = [0xaa; HEADER_LEN + 8];
            set(&mut buf).unwrap();
            for (i, &b) in buf.iter().enumerate() {
                if !owned(i) {
                    assert_eq!(b, 0xaa, "{name} wrote byte {i}");
                }
            }
        }
    }

    /// The getters take a shared slice: they cannot write to the caller's buffer, which
    /// may be read-only or read by another thread at the same time.
    #[test]
    fn getters_only_read() {
        static HEADER: [u8; HEADER_LEN] = {
            let mut h = [0u8; HEADER_LEN];
            let status = 110u32.to_ne_bytes(); // ETIMEDOUT, host order
            let pkey = 3u16.to_ne_bytes();
            (h[4], h[5], h[6], h[7]) = (status[0], status[1], status[2], status[3]);
            h[29] = 2; // LID 2, big-endian
            (h[56], h[57]) = (pkey[0], pkey[1]);
            h
        };
        let get_status: fn(&[u8]) -> Result<i32> = status;
        let get_pkey_index: fn(&[u8]) -> Result<u16> = get_pkey;
        let get_addr: fn(&[u8]) -> Result<MadAddr> = get_mad_addr;
        let ro: &'static [u8] = &HEADER;
        assert_eq!(get_status(ro).unwrap(), 110);
        assert_eq!(get_pkey_index(ro).unwrap(), 3);
        assert_eq!(get_addr(ro).unwrap().lid, 2);
    }
}
