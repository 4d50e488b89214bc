//! ibsim's topology files (the `ibnetdiscover` text format) loaded into a
//! [`FabricBuilder`], so the embedded fabric and ibsim can run the same subnet.
//!
//! ```text
//! # comment
//! Hca    1 "H1"                 node: type, port count, name (also "Ca", "Switch")
//! [1]    "S1"[1]                its port 1 is linked to port 1 of S1
//! switchguid=0x200001(200001)   the next node's GUID (also caguid=)
//! Switch 8 "S1"                 trailing text after the name is ignored
//! [1]    "H1"[1](100001)  # "H1" lid 0 4xSDR
//! ```
//!
//! Links may be listed from either end or both. GUIDs not given are assigned as
//! ibsim does, so `ibnetdiscover` finds the same GUIDs on either simulator: CAs
//! from 0x100000, each taking one GUID per port plus one for the node (port
//! GUID = node GUID + port), switches from 0x200000, one each.

use std::collections::HashMap;

use super::{FabricBuilder, NodeKind};
use crate::{Error, Result};

/// The first GUID ibsim gives a CA.
const CA_GUID_BASE: u64 = 0x10_0000;
/// The first GUID ibsim gives a switch.
const SWITCH_GUID_BASE: u64 = 0x20_0000;

/// One node as the file describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TopoNode {
    pub(crate) name: String,
    pub(crate) kind: NodeKind,
    pub(crate) ports: u8,
    pub(crate) guid: u64,
}

/// A parsed topology: nodes in file order, each link once.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Topology {
    pub(crate) nodes: Vec<TopoNode>,
    pub(crate) links: Vec<((usize, u8), (usize, u8))>,
}

/// Why a line was refused, with its number (EIO: the file, not an argument, is wrong).
fn bad(line: usize, what: &str) -> Error {
    let msg = format!("topology line {line}: {what}");
    Error::Io(std::io::Error::new(std::io::ErrorKind::InvalidData, msg))
}

/// The text before a `#` that is not inside quotes.
fn strip_comment(line: &str) -> &str {
    let mut quoted = false;
    for (i, c) in line.char_indices() {
        match c {
            '"' => quoted = !quoted,
            '#' if !quoted => return &line[..i],
            _ => {}
        }
    }
    line
}

/// `"name"` at the start of `s` (after blanks): the name and the rest.
fn quoted(s: &str) -> Option<(&str, &str)> {
    let s = s.trim_start().strip_prefix('"')?;
    let end = s.find('"')?;
    Some((&s[..end], &s[end + 1..]))
}

/// `[n]` at the start of `s`: the number and the rest (an optional `(guid)` skipped).
fn bracketed(s: &str) -> Option<(u8, &str)> {
    let s = s.trim_start().strip_prefix('[')?;
    let end = s.find(']')?;
    let n = s[..end].trim().parse().ok()?;
    let rest = &s[end + 1..];
    let rest = match rest.strip_prefix('(') {
        Some(r) => &r[r.find(')')? + 1..],
        None => rest,
    };
    Some((n, rest))
}

/// `0x1234(1234)` or `0x1234`.
fn guid_value(s: &str) -> Option<u64> {
    let s = s.trim();
    let s = s.split('(').next()?.trim();
    let hex = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X"))?;
    u64::from_str_radix(hex, 16).ok()
}

impl Topology {
    /// Parse ibsim's topology text.
    ///
    /// # Errors
    /// [`Error::Io`] (invalid data) naming the line: an unknown node type (routers are not
    /// simulated), a malformed node or port line, a port line before any node, a
    /// link to a node the file never defines, or a port linked to two places.
    pub(crate) fn parse(text: &str) -> Result<Topology> {
        let mut topo = Topology::default();
        // Port lines, resolved once every node is known: (line, node, port, peer, peer port).
        let mut port_lines: Vec<(usize, usize, u8, String, u8)> = Vec::new();
        let mut next_guid: Option<u64> = None;
        let (mut ca_guid, mut switch_guid) = (CA_GUID_BASE, SWITCH_GUID_BASE);
        for (i, raw) in text.lines().enumerate() {
            let line_no = i + 1;
            let line = strip_comment(raw).trim();
            if line.is_empty() {
                continue;
            }
            if let Some((key, value)) = line.split_once('=') {
                match key.trim() {
                    "switchguid" | "caguid" => {
                        next_guid =
                            Some(guid_value(value).ok_or_else(|| bad(line_no, "bad GUID"))?);
                    }
                    // ibnetdiscover writes these; ibsim ignores them too.
                    _ => {}
                }
                continue;
            }
            if line.starts_with('[') {
                let node = topo
                    .nodes
                    .len()
                    .checked_sub(1)
                    .ok_or_else(|| bad(line_no, "a port line before any node"))?;
                let (port, rest) = bracketed(line).ok_or_else(|| bad(line_no, "bad [port]"))?;
                let (peer, rest) = quoted(rest).ok_or_else(|| bad(line_no, "no \"peer\""))?;
                let (peer_port, _) =
                    bracketed(rest).ok_or_else(|| bad(line_no, "no [peer port]"))?;
                port_lines.push((line_no, node, port, peer.to_owned(), peer_port));
                continue;
            }
            let (word, rest) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
            let kind = match word {
                "Hca" | "Ca" => NodeKind::Ca,
                "Switch" => NodeKind::Switch,
                _ => {
                    return Err(bad(
                        line_no,
                        "expected Hca, Ca, Switch, [port] or key=value",
                    ))
                }
            };
            let rest = rest.trim_start();
            let (count, rest) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
            let ports: u8 = count.parse().map_err(|_| bad(line_no, "bad port count"))?;
            let (name, _) = quoted(rest).ok_or_else(|| bad(line_no, "no \"name\""))?;
            let counter = match kind {
                NodeKind::Ca => &mut ca_guid,
                NodeKind::Switch => &mut switch_guid,
            };
            let guid = next_guid.take().unwrap_or(*counter);
            *counter += match kind {
                NodeKind::Ca => u64::from(ports) + 1,
                NodeKind::Switch => 1,
            };
            topo.nodes.push(TopoNode {
                name: name.to_owned(),
                kind,
                ports,
                guid,
            });
        }
        let index: HashMap<&str, usize> = topo
            .nodes
            .iter()
            .enumerate()
            .map(|(i, n)| (n.name.as_str(), i))
            .collect();
        let mut peer_of: HashMap<(usize, u8), (usize, u8)> = HashMap::new();
        for (line_no, node, port, peer, peer_port) in port_lines {
            let &peer = index
                .get(peer.as_str())
                .ok_or_else(|| bad(line_no, "links to a node the file does not define"))?;
            let (a, b) = ((node, port), (peer, peer_port));
            match (peer_of.get(&a), peer_of.get(&b)) {
                (None, None) => {
                    peer_of.insert(a, b);
                    peer_of.insert(b, a);
                    topo.links.push((a, b));
                }
                // The same link seen from its other end.
                (Some(&pb), Some(&pa)) if pb == b && pa == a => {}
                _ => return Err(bad(line_no, "a port linked to two places")),
            }
        }
        Ok(topo)
    }

    /// A builder for this topology (GUIDs as given or as ibsim assigns them).
    pub(crate) fn builder(&self) -> FabricBuilder {
        let mut b = FabricBuilder::default();
        for n in &self.nodes {
            b = match n.kind {
                NodeKind::Ca => b.ca_ports(&n.name, n.ports),
                NodeKind::Switch => b.switch(&n.name, n.ports),
            }
            .guid(&n.name, n.guid);
        }
        for &((a, pa), (z, pz)) in &self.links {
            b = b.link(&self.nodes[a].name, pa, &self.nodes[z].name, pz);
        }
        b
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMALL: &str = include_str!("../../tests/topo/small.net");

    #[test]
    fn small_net_has_ibsims_guids_and_each_link_once() {
        let t = Topology::parse(SMALL).unwrap();
        let names: Vec<_> = t.nodes.iter().map(|n| n.name.as_str()).collect();
        assert_eq!(names, ["H1", "H2", "H3", "H4", "S1", "S2"]);
        // What ibnetdiscover reports on ibsim for this file.
        let guids: Vec<_> = t.nodes.iter().map(|n| n.guid).collect();
        assert_eq!(
            guids,
            [0x100000, 0x100002, 0x100004, 0x100006, 0x200000, 0x200001]
        );
        assert_eq!(t.links.len(), 6);
        assert!(t.links.contains(&((4, 7), (5, 7))));
        assert!(t.links.contains(&((0, 1), (4, 1))));
    }

    #[test]
    fn ibnetdiscover_output_parses_with_given_guids() {
        let text = "vendid=0x0\nswitchguid=0x200001(200001)\n\
            Switch\t8 \"S-0000000000200001\"\t\t# \"S2\" base port 0 lid 0 lmc 0\n\
            [1]\t\"H-0000000000100004\"[1](100005) \t\t# \"H3\" lid 0 4xSDR\n\
            caguid=0x100004\nCa\t1 \"H-0000000000100004\"\t\t# \"H3\"\n\
            [1](100005) \t\"S-0000000000200001\"[1]\t\t# lid 0 lmc 0 \"S2\" lid 0 4xSDR\n";
        let t = Topology::parse(text).unwrap();
        assert_eq!(t.nodes[0].guid, 0x200001);
        assert_eq!(t.nodes[1].guid, 0x100004);
        assert_eq!(t.nodes[1].kind, NodeKind::Ca);
        assert_eq!(t.links, [((0, 1), (1, 1))]);
    }

    #[test]
    fn bad_files_name_the_line() {
        let cases = [
            ("[1] \"S\"[1]\n", "line 1"),
            ("Hca 1 \"A\"\n[1] \"B\"[1]\n", "line 2"),
            ("Hca 1 \"A\"\nRt 2 \"R\"\n", "line 2"),
            (
                "Hca 1 \"A\"\nHca 1 \"B\"\nHca 1 \"C\"\n[1] \"A\"[1]\n[1] \"B\"[1]\n",
                "line 5",
            ),
            ("Hca x \"A\"\n", "line 1"),
        ];
        for (text, want) in cases {
            let err = Topology::parse(text).unwrap_err().to_string();
            assert!(err.contains(want), "{text:?}: {err}");
        }
    }
}
