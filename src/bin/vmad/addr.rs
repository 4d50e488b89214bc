//! Addresses on the command line, read the same way by every subcommand:
//! LIDs and GUIDs in hex (`0x1f`) or decimal (`31`), and with `-G` a port
//! GUID where a LID would go, as infiniband-diags take them.

use crate::exit::Failure;
use crate::Session;

fn number(s: &str, what: &str, max: u64) -> Result<u64, String> {
    let t = s.trim();
    let r = match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        Some(h) => u64::from_str_radix(h, 16),
        None => t.parse(),
    };
    match r {
        Ok(v) if v <= max => Ok(v),
        _ => Err(format!(
            "bad {what} {s:?} (hex 0x… or decimal, at most {max:#x})"
        )),
    }
}

/// A LID, for clap's `value_parser` (`0x1f` or `31`).
pub(crate) fn lid(s: &str) -> Result<u16, String> {
    number(s, "LID", u64::from(u16::MAX)).map(|v| v as u16)
}

/// A GUID, for clap's `value_parser` (`0x0002c90300000001` or decimal).
pub(crate) fn guid(s: &str) -> Result<u64, String> {
    number(s, "GUID", u64::MAX)
}

/// The LID a destination argument names: the number itself, or with
/// `-G` the LID of the port with that GUID, found by a directed-route sweep
/// (what ibaddr does through the SA; the sweep needs no SA).
pub(crate) fn resolve_lid(s: &Session, arg: &str) -> Result<u16, Failure> {
    if !s.by_guid {
        return lid(arg).map_err(Failure::usage);
    }
    let want = guid(arg).map_err(Failure::usage)?;
    let topo = vmad::discover::discover(&s.port, &crate::discover::config(s))?;
    topo.nodes
        .iter()
        .flat_map(|n| n.ports.values().map(move |p| (n, p)))
        .find(|(n, p)| p.guid == want || n.guid == want)
        .map(|(n, p)| if n.is_switch() { n.lid() } else { p.lid })
        .ok_or_else(|| {
            Failure::new(
                crate::exit::Exit::NoDevice,
                format!("no port with GUID {want:#018x} in the fabric"),
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lids_and_guids_in_hex_or_decimal() {
        assert_eq!(lid("31"), Ok(31));
        assert_eq!(lid("0x1f"), Ok(31));
        assert_eq!(lid("0X1F"), Ok(31));
        assert_eq!(lid("0xffff"), Ok(0xffff));
        assert!(lid("0x10000").is_err());
        assert!(lid("65536").is_err());
        assert!(lid("1f").is_err());
        assert!(lid("").is_err());
        assert_eq!(guid("0x766d616400000100"), Ok(0x766d_6164_0000_0100));
        assert_eq!(guid("18446744073709551615"), Ok(u64::MAX));
        assert!(guid("0x1_0000_0000_0000_0000").is_err());
    }
}
