//! Reading `ibnetdiscover`'s topology output into the walk's [`Topology`].

use super::smp_walk::{Node, Topology};

/// Parse `ibnetdiscover` output (default format) into a topology: node GUIDs
/// from the `S-`/`H-` names, descriptions from the comments, links from the
/// port lines, CA port GUIDs from the `[p](guid)` form.
pub(crate) fn parse_ibnetdiscover(text: &str) -> Topology {
    let mut topo = Topology::default();
    let name_guid = |s: &str| -> Option<u64> {
        let start = s.find('"')? + 1;
        let name = &s[start..start + s[start..].find('"')?];
        u64::from_str_radix(name.get(2..)?, 16).ok()
    };
    let mut current: Option<u64> = None;
    for line in text.lines() {
        let (node_type, rest) = if let Some(r) = line.strip_prefix("Switch\t") {
            (2, r)
        } else if let Some(r) = line.strip_prefix("Ca\t") {
            (1, r)
        } else if let Some(r) = line.strip_prefix("Rt\t") {
            (3, r)
        } else if line.starts_with('[') {
            let Some(me) = current else { continue };
            let close = line.find(']').unwrap();
            let port: u8 = line[1..close].parse().unwrap();
            let after = &line[close + 1..];
            // CA lines carry their own port GUID: `[1](100003)`.
            if let Some(g) = after.strip_prefix('(') {
                let g = &g[..g.find(')').unwrap()];
                let pg = u64::from_str_radix(g, 16).unwrap();
                topo.nodes.get_mut(&me).unwrap().port_guids.insert(port, pg);
            }
            let remote = name_guid(after).unwrap();
            let q = after.rfind("\"[").unwrap() + 2;
            let rport: u8 = after[q..q + after[q..].find(']').unwrap()].parse().unwrap();
            topo.add_link((me, port), (remote, rport));
            continue;
        } else {
            continue;
        };
        let num_ports: u8 = rest.split_whitespace().next().unwrap().parse().unwrap();
        let guid = name_guid(rest).unwrap();
        let desc = rest
            .find("# \"")
            .map(|i| {
                let d = &rest[i + 3..];
                d[..d.find('"').unwrap_or(d.len())].to_string()
            })
            .unwrap_or_default();
        let mut port_guids = std::collections::BTreeMap::new();
        if node_type == 2 {
            port_guids.insert(0, guid);
        }
        topo.nodes.insert(
            guid,
            Node {
                guid,
                node_type,
                num_ports,
                desc,
                port_guids,
            },
        );
        current = Some(guid);
    }
    topo
}
