//! The control channel: attaching, detaching, and what ibsim says about the port.

use std::io;
use std::time::Duration;

use super::proto::{self, ClientInfo, CtlRepr, CtlType, NodeInfoLite, PortInfoLite, CTL_LEN};
use super::sock::Sock;
use crate::transport::{LinkLayer, PortAttrs};

/// The control channel and the slot it holds. Dropping it frees the slot,
/// so no error path after CONNECT can leak one of ibsim's ten slots.
#[derive(Debug)]
pub(crate) struct Control {
    pub(crate) sock: Sock,
    pub(crate) slot: Option<u32>,
    pub(crate) timeout: Duration,
}

impl Control {
    pub(crate) fn call(&self, ctl_type: CtlType, payload: &[u8]) -> io::Result<CtlRepr> {
        let req = CtlRepr::request(self.slot.unwrap_or(0), ctl_type, payload);
        self.sock.set_read_timeout(Some(self.timeout))?;
        self.sock.send(&req.emit())?;
        let mut buf = [0u8; CTL_LEN + 1];
        loop {
            let n = match self.sock.recv(&mut buf) {
                Ok(n) => n,
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) =>
                {
                    return Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        format!("ibsim did not answer control request {ctl_type:?}"),
                    ))
                }
                Err(e) => return Err(e),
            };
            // Only ibsim writes to this socket; anything malformed is not our answer.
            let Some(rep) = CtlRepr::parse(&buf[..n]) else {
                continue;
            };
            // A late answer to an earlier call that timed out: not ours.
            if rep.ctl_type != ctl_type && rep.ctl_type != CtlType::Error {
                continue;
            }
            if rep.ctl_type == CtlType::Error {
                return Err(io::Error::other(format!(
                    "ibsim refused control request {ctl_type:?}"
                )));
            }
            return Ok(rep);
        }
    }

    pub(crate) fn connect(
        &mut self,
        id: u32,
        qp: u32,
        issm: bool,
        node: &str,
    ) -> io::Result<ClientInfo> {
        let info = ClientInfo {
            id,
            qp,
            issm,
            node_id: node.into(),
        };
        let rep = self.call(CtlType::Connect, &info.emit())?;
        let got = ClientInfo::parse(&rep.data).ok_or_else(|| io::Error::other("short CONNECT"))?;
        // The slot travels in TID bits 63..48: ibsim gives 0..10, vmad's fabric server
        // (`vmad::fabric`) any 16-bit slot.
        if got.id > 0xffff {
            return Err(io::Error::other("ibsim gave a slot out of range"));
        }
        self.slot = Some(got.id);
        Ok(got)
    }
}

impl Drop for Control {
    fn drop(&mut self) {
        if self.slot.is_some() {
            // Best effort: if ibsim is gone there is no slot left to free.
            let _ = self.call(CtlType::Disconnect, &[]);
            self.slot = None;
        }
    }
}

/// The node names to try for a `node` setting.
pub(crate) fn node_candidates(node: Option<&str>) -> Vec<String> {
    let Some(node) = node else {
        return vec![String::new()];
    };
    let mut out = vec![node.to_string()];
    let hex = node.strip_prefix("0x").or_else(|| node.strip_prefix("0X"));
    if let Some(guid) = hex.and_then(|h| u64::from_str_radix(h, 16).ok()) {
        for kind in ["H", "S", "R"] {
            out.push(format!("{kind}-{guid:016x}"));
        }
    }
    out
}

pub(crate) fn query_attrs(ctl: &Control) -> io::Result<PortAttrs> {
    let ni = NodeInfoLite::parse(&ctl.call(CtlType::GetNodeInfo, &[])?.data);
    let pi = PortInfoLite::parse(&ctl.call(CtlType::GetPortInfo, &[0])?.data);
    let pkeys = proto::parse_pkeys(&ctl.call(CtlType::GetPkeys, &[])?.data);
    Ok(PortAttrs {
        ca_name: "ibsim0".into(),
        port_num: pi.local_port,
        node_type: ni.node_type,
        node_guid: ni.node_guid,
        // ibsim's NodeInfo carries the node GUID as PortGUID; ports are numbered from it.
        port_guid: ni.node_guid.wrapping_add(u64::from(pi.local_port)),
        gid_prefix: pi.gid_prefix,
        lid: pi.lid,
        lmc: pi.lmc,
        sm_lid: pi.sm_lid,
        sm_sl: pi.sm_sl,
        state: pi.state,
        phys_state: pi.phys_state,
        rate: pi.rate_gbps(),
        capmask: pi.capmask,
        pkeys,
        link_layer: LinkLayer::InfiniBand,
    })
}
