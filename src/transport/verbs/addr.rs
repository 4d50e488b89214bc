//! Addresses: the address handle a send needs, and where a receive came from.

use std::io;

use ibverbs_sys as sys;

use super::ffi::Ah;
use super::{AhKey, VerbsTransport};
use crate::engine::RecvMeta;
use crate::transport::LinkLayer;
use crate::types::{GrhAddr, MadAddr, Qp};
use crate::wire::grh;

impl VerbsTransport {
    pub(super) fn meta(&self, wc: &sys::ibv_wc, slot: &[u8]) -> RecvMeta {
        let grh = if wc.wc_flags.0 & sys::ibv_wc_flags::IBV_WC_GRH.0 != 0 {
            grh::Packet::new_checked(&slot[..grh::LEN])
                .ok()
                .and_then(|p| {
                    let gid = p.source_gid()?;
                    let (hop_limit, traffic_class, flow_label) = match p.ip_version() {
                        grh::IpVersion::V4 => (p.ipv4_ttl(), p.ipv4_tos(), 0),
                        _ => (p.hop_limit(), p.tclass(), p.flow_label()),
                    };
                    Some(GrhAddr {
                        gid,
                        gid_index: self.sgid_index,
                        hop_limit,
                        traffic_class,
                        flow_label,
                    })
                })
        } else {
            None
        };
        RecvMeta {
            qp: Qp::Gsi,
            src: MadAddr {
                qpn: wc.src_qp & 0x00ff_ffff,
                qkey: 0,
                lid: wc.slid,
                sl: wc.sl,
                path_bits: wc.dlid_path_bits,
                grh,
                // A UD QP's completions carry no valid P_Key index: it is the QP's.
                pkey_index: self.config.pkey_index,
            },
            local_qpn: Some(self.qpn()),
        }
    }

    /// The AH key of a destination: the GRH always uses this port's source GID.
    /// `None`: this transport cannot address it (see the module docs).
    pub(super) fn ah_key(&self, dest: &MadAddr) -> Option<AhKey> {
        if dest.pkey_index != self.config.pkey_index {
            return None;
        }
        let grh = match (dest.grh, self.attrs.link_layer) {
            (Some(g), _) => Some(GrhAddr {
                gid_index: self.sgid_index,
                hop_limit: if g.hop_limit == 0 {
                    self.config.hop_limit
                } else {
                    g.hop_limit
                },
                ..g
            }),
            // RoCE, or a port flagged GRH_REQUIRED: no GID, no way there.
            (None, LinkLayer::Ethernet) => return None,
            (None, LinkLayer::InfiniBand) if self.grh_required => return None,
            (None, LinkLayer::InfiniBand) => None,
        };
        Some(AhKey {
            lid: dest.lid,
            sl: dest.sl,
            path_bits: dest.path_bits,
            grh,
        })
    }

    /// Make sure the cache holds an AH for `key`.
    pub(super) fn cache_ah(&mut self, key: AhKey) -> io::Result<()> {
        if self.ahs.get(&key).is_some() {
            return Ok(());
        }
        if self.ahs.full() {
            // Queued sends name their AH by key: post them before one is evicted
            // (it then lives on until those sends complete).
            self.flush_sends()?;
        }
        let mut attr = sys::ibv_ah_attr {
            dlid: key.lid,
            sl: key.sl,
            src_path_bits: key.path_bits,
            port_num: self.attrs.port_num,
            ..Default::default()
        };
        if let Some(g) = key.grh {
            attr.is_global = 1;
            attr.grh.dgid.raw = g.gid;
            attr.grh.sgid_index = g.gid_index;
            attr.grh.hop_limit = g.hop_limit;
            attr.grh.traffic_class = g.traffic_class;
            attr.grh.flow_label = g.flow_label;
        }
        let ah = Ah::new(&self.pd, &mut attr)?;
        self.stats.ah_created += 1;
        if self.ahs.insert(key, ah, self.posted_sends) {
            self.stats.ah_evicted += 1;
        }
        Ok(())
    }
}
