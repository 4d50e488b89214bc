//! The performance management agent every simulated node runs (IBA 16.1), on
//! QP1 of each CA port and of a switch's port 0, answered in the fabric as an
//! HCA's firmware or driver answers it: ClassPortInfo, PortCounters and
//! PortCountersExtended, Get and Set (a Set clears the counters its
//! CounterSelect names).
//!
//! Unlike a real PMA, it leaves every other PerfMgt MAD (other methods and
//! attributes) to the port's owner, so programs and tests may still serve
//! class 0x04 themselves.
//!
//! The counters are the fabric's real traffic: every frame that crosses a link
//! counts as sent on one port and received on the other ([`Traffic`]); a frame
//! the link's fault injector loses counts as a receive error at the far port;
//! a frame a switch cannot forward (no LFT entry, or a port not yet Active)
//! counts as a transmit discard.

use std::sync::atomic::{AtomicU64, Ordering};

use super::sma::respond;
use super::FabricInner;
use crate::transport::sim::Pkt;
use crate::wire::class_port_info;
use crate::wire::mad::{MadStatus, Method};
use crate::wire::perf::{self, port_counters as pc, port_counters_ext as pce};
use crate::wire::smp::DATA_LEN;

/// Unsupported method/attribute (status code 3).
const STATUS_UNSUPPORTED: u16 = MadStatus::UNSUPPORTED_METHOD_ATTR.0;
/// Invalid attribute value or modifier (status code 7).
const STATUS_INVALID_VALUE: u16 = MadStatus::INVALID_ATTR_VALUE.0;
/// ClassPortInfo:CapabilityMask: IsAllPortSelectSupported, IsExtendedWidthSupported.
const CAPMASK: u16 = 0x0300;
/// Bytes a frame adds to its MAD on the wire: LRH 8, BTH 12, DETH 8, ICRC 4, VCRC 2.
const FRAME_OVERHEAD: usize = 34;

/// One port's counters; updated lock-free by every thread that walks a frame.
#[derive(Debug, Default)]
pub(crate) struct Traffic {
    xmit_data: AtomicU64,
    rcv_data: AtomicU64,
    xmit_pkts: AtomicU64,
    rcv_pkts: AtomicU64,
    rcv_errors: AtomicU64,
    xmit_discards: AtomicU64,
}

/// A frame's length in 32-bit words, as PortXmitData/PortRcvData count it.
fn words(len: usize) -> u64 {
    (len + FRAME_OVERHEAD).div_ceil(4) as u64
}

/// Counter values, summed over ports where PortSelect asks for all.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Snapshot {
    xmit_data: u64,
    rcv_data: u64,
    xmit_pkts: u64,
    rcv_pkts: u64,
    rcv_errors: u64,
    xmit_discards: u64,
}

impl Traffic {
    pub(crate) fn sent(&self, len: usize) {
        self.xmit_data.fetch_add(words(len), Ordering::Relaxed);
        self.xmit_pkts.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn received(&self, len: usize) {
        self.rcv_data.fetch_add(words(len), Ordering::Relaxed);
        self.rcv_pkts.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn rcv_error(&self) {
        self.rcv_errors.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn discard(&self) {
        self.xmit_discards.fetch_add(1, Ordering::Relaxed);
    }

    /// Every counter, for tests that compare two fabrics' traffic.
    #[cfg(test)]
    pub(super) fn totals(&self) -> [u64; 6] {
        let s = self.snapshot();
        [
            s.xmit_data,
            s.rcv_data,
            s.xmit_pkts,
            s.rcv_pkts,
            s.rcv_errors,
            s.xmit_discards,
        ]
    }

    fn snapshot(&self) -> Snapshot {
        Snapshot {
            xmit_data: self.xmit_data.load(Ordering::Relaxed),
            rcv_data: self.rcv_data.load(Ordering::Relaxed),
            xmit_pkts: self.xmit_pkts.load(Ordering::Relaxed),
            rcv_pkts: self.rcv_pkts.load(Ordering::Relaxed),
            rcv_errors: self.rcv_errors.load(Ordering::Relaxed),
            xmit_discards: self.xmit_discards.load(Ordering::Relaxed),
        }
    }

    /// Clear the counters whose PortCounters CounterSelect bits are in `select`.
    fn clear(&self, select: u16) {
        let pairs = [
            (pc::select::XMIT_DATA, &self.xmit_data),
            (pc::select::RCV_DATA, &self.rcv_data),
            (pc::select::XMIT_PKTS, &self.xmit_pkts),
            (pc::select::RCV_PKTS, &self.rcv_pkts),
            (pc::select::RCV_ERRORS, &self.rcv_errors),
            (pc::select::XMIT_DISCARDS, &self.xmit_discards),
        ];
        for (bit, counter) in pairs {
            if select & bit != 0 {
                counter.store(0, Ordering::Relaxed);
            }
        }
    }
}

impl Snapshot {
    fn add(self, o: Snapshot) -> Snapshot {
        Snapshot {
            xmit_data: self.xmit_data + o.xmit_data,
            rcv_data: self.rcv_data + o.rcv_data,
            xmit_pkts: self.xmit_pkts + o.xmit_pkts,
            rcv_pkts: self.rcv_pkts + o.rcv_pkts,
            rcv_errors: self.rcv_errors + o.rcv_errors,
            xmit_discards: self.xmit_discards + o.xmit_discards,
        }
    }
}

/// PortCountersExtended CounterSelect bits, as the PortCounters bits [`Traffic::clear`] takes.
fn ext_select(select: u16) -> u16 {
    let map = [
        (pce::select::XMIT_DATA, pc::select::XMIT_DATA),
        (pce::select::RCV_DATA, pc::select::RCV_DATA),
        (pce::select::XMIT_PKTS, pc::select::XMIT_PKTS),
        (pce::select::RCV_PKTS, pc::select::RCV_PKTS),
    ];
    map.iter()
        .filter(|(ext, _)| select & ext != 0)
        .fold(0, |acc, (_, bit)| acc | bit)
}

/// The PMA's response to `req`, a class-0x04 request on QP1 of `(node, port)`; None
/// when it is not one the PMA answers.
pub(crate) fn answer(fabric: &FabricInner, node: usize, port: u8, req: &Pkt) -> Option<Pkt> {
    let n = &fabric.nodes[node];
    let header = req.header();
    let (method, attr) = (header.method(), header.attr_id());
    let known = matches!(
        attr,
        class_port_info::ATTR_ID | perf::ATTR_PORT_COUNTERS | perf::ATTR_PORT_COUNTERS_EXT
    );
    if !matches!(method, Method::Get | Method::Set) || !known || header.class_version() != 1 {
        return None; // Not the PMA's: the port's owner gets it.
    }
    let mut data = [0u8; 256 - perf::DATA_OFFSET];
    data.copy_from_slice(&req.mad[perf::DATA_OFFSET..]);
    let select = data[1];
    let ports: Vec<u8> = match select {
        perf::ALL_PORTS if n.is_switch() => (0..=n.num_ports).collect(),
        perf::ALL_PORTS => (1..=n.num_ports).collect(),
        p if p <= n.num_ports && (n.is_switch() || p >= 1) => vec![p],
        // A CA's PMA answers PortSelect 0 for the port the request came in on.
        0 => vec![port],
        _ => Vec::new(),
    };
    let status = match (method, attr) {
        (Method::Get, class_port_info::ATTR_ID) => {
            data.fill(0);
            let mut c = class_port_info::Packet::new_unchecked(&mut data[..]);
            c.set_base_version(1);
            c.set_class_version(1);
            c.set_capability_mask(CAPMASK);
            c.set_capability_mask2_resp_time(0, 18);
            0
        }
        (_, perf::ATTR_PORT_COUNTERS | perf::ATTR_PORT_COUNTERS_EXT) if ports.is_empty() => {
            STATUS_INVALID_VALUE
        }
        (_, perf::ATTR_PORT_COUNTERS) => {
            let mask = pc::Packet::new_unchecked(&data[..]).counter_select();
            let total = counters(n, &ports, (method == Method::Set).then_some(mask));
            let sat16 = |v: u64| u16::try_from(v).unwrap_or(u16::MAX);
            let sat32 = |v: u64| u32::try_from(v).unwrap_or(u32::MAX);
            data[..pc::LEN].fill(0);
            let mut p = pc::Packet::new_unchecked(&mut data[..]);
            p.set_port_select(select);
            p.set_counter_select(mask);
            p.set_rcv_errors(sat16(total.rcv_errors));
            p.set_xmit_discards(sat16(total.xmit_discards));
            p.set_xmit_data(sat32(total.xmit_data));
            p.set_rcv_data(sat32(total.rcv_data));
            p.set_xmit_pkts(sat32(total.xmit_pkts));
            p.set_rcv_pkts(sat32(total.rcv_pkts));
            0
        }
        (_, perf::ATTR_PORT_COUNTERS_EXT) => {
            let mask = pce::Packet::new_unchecked(&data[..]).counter_select();
            let clear = (method == Method::Set).then(|| ext_select(mask));
            let total = counters(n, &ports, clear);
            data[..pce::LEN].fill(0);
            let mut p = pce::Packet::new_unchecked(&mut data[..]);
            p.set_port_select(select);
            p.set_counter_select(mask);
            p.set_xmit_data(total.xmit_data);
            p.set_rcv_data(total.rcv_data);
            p.set_xmit_pkts(total.xmit_pkts);
            p.set_rcv_pkts(total.rcv_pkts);
            // Every frame in the fabric is unicast.
            p.set_unicast_xmit_pkts(total.xmit_pkts);
            p.set_unicast_rcv_pkts(total.rcv_pkts);
            0
        }
        _ => STATUS_UNSUPPORTED, // a Set of ClassPortInfo
    };
    let mut resp = respond(fabric, node, port, req, status, &[0; DATA_LEN]);
    resp.mad[perf::DATA_OFFSET..].copy_from_slice(&data);
    Some(resp)
}

/// The counters of `ports` summed; cleared by `clear` (PortCounters bits) after reading.
fn counters(n: &super::Node, ports: &[u8], clear: Option<u16>) -> Snapshot {
    let mut total = Snapshot::default();
    for &p in ports {
        let t = &n.traffic[usize::from(p)];
        if let Some(mask) = clear {
            t.clear(mask);
        }
        total = total.add(t.snapshot());
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_count_the_whole_frame() {
        assert_eq!(words(256), 73); // (256 + 34) / 4, rounded up
        let t = Traffic::default();
        t.sent(256);
        t.received(256);
        t.rcv_error();
        t.clear(pc::select::XMIT_DATA | pc::select::RCV_ERRORS);
        let s = t.snapshot();
        assert_eq!((s.xmit_data, s.xmit_pkts, s.rcv_data), (0, 1, 73));
        assert_eq!(s.rcv_errors, 0);
        assert_eq!(ext_select(0x0f), 0xf000);
    }
}
