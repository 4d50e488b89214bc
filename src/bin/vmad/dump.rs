//! `dump`: decode a pcap capture of MADs with vmad's pretty-printer.

use std::fmt::Write as _;
use std::path::PathBuf;

use clap::Args;
use serde_json::{json, Value};

use vmad::pcap::{decode, LinkType, Reader};
use vmad::wire::pretty;

use crate::exit::Exit;
use crate::{CmdResult, Failure, Output};

#[derive(Debug, Args)]
pub(crate) struct DumpArgs {
    /// The capture (classic pcap, link type 1 with RoCE v2 or 247).
    file: PathBuf,
}

pub(crate) fn run(a: &DumpArgs) -> CmdResult {
    let f = std::fs::File::open(&a.file).map_err(|e| {
        let exit = match e.kind() {
            std::io::ErrorKind::PermissionDenied => Exit::Permission,
            _ => Exit::NoInput,
        };
        Failure::new(exit, format!("{}: {e}", a.file.display()))
    })?;
    let mut r = Reader::new(std::io::BufReader::new(f))?;
    let link = LinkType::from_number(r.link_number()).ok_or_else(|| {
        Failure::new(
            Exit::Data,
            format!(
                "link type {} is neither 1 (Ethernet) nor 247 (InfiniBand)",
                r.link_number()
            ),
        )
    })?;
    let mut text = String::new();
    let mut list = Vec::new();
    let mut first = None;
    let mut n = 0u64;
    while let Some(rec) = r.next_record()? {
        n += 1;
        let t0 = *first.get_or_insert(rec.ts);
        let rel = rec.ts.saturating_sub(t0).as_secs_f64();
        match decode(link, &rec.data) {
            Some(d) => {
                let line = pretty(d.mad).to_string();
                let bad = if d.icrc_ok { "" } else { " [bad ICRC]" };
                let _ = writeln!(
                    text,
                    "{n:>5} {rel:>10.6} {} > {} qp {}>{} {line}{bad}",
                    d.src, d.dst, d.src_qp, d.dest_qp
                );
                let m = d.mad;
                let field = |i: usize| m.get(i).copied();
                list.push(json!({
                    "n": n, "time": rel, "src": d.src, "dst": d.dst,
                    "src_qp": d.src_qp, "dest_qp": d.dest_qp, "icrc_ok": d.icrc_ok,
                    "mgmt_class": field(1), "method": field(3),
                    "attr_id": (m.len() >= 18).then(|| u16::from_be_bytes([m[16], m[17]])),
                    "rmpp_type": (m.len() >= 26 && m[24] != 0).then(|| m[25]),
                    "text": line,
                }));
            }
            None => {
                let _ = writeln!(
                    text,
                    "{n:>5} {rel:>10.6} <not a MAD datagram, {} bytes>",
                    rec.data.len()
                );
                list.push(json!({ "n": n, "time": rel, "undecoded_bytes": rec.data.len() }));
            }
        }
    }
    Ok(Output {
        text,
        json: json!({ "link_type": link.number(), "packets": list as Vec<Value> }),
        exit: None,
    })
}
