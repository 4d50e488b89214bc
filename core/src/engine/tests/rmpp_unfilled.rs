//! RMPP headers never filled in: OpenSM's SA sets only RMPPFlags.Active on a
//! GetTableResp and leaves version, type and segmentation to the kernel's RMPP.
//! Where nothing segments it (umad2sim on ibsim) the MAD arrives as written.

use core::time::Duration;

use super::harness::*;
use crate::engine::Event;
use crate::types::Qp;
use crate::wire::MAD_SIZE;

/// OpenSM 3.3's GetTableResp of NodeRecords as it came to vmad through ibsim
/// (OpenSM under umad2sim; captured with `vmad --pcap`): RMPP version 0, type
/// 0, flags Active, PayloadLength 0; AttributeOffset 14 (112-byte records),
/// LID 1 (H1) whole, then the start of LID 2 (S1), cut at 256 bytes.
const OPENSM_GETTABLE_RESP: [u8; MAD_SIZE] = [
    0x01, 0x03, 0x02, 0x92, 0x00, 0x00, 0x00, 0x00, 0x00, 0xd5, 0x1a, 0xd2, 0x5a, 0x00, 0x00, 0x01,
    0x00, 0x11, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x0e, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x01, 0x01, 0x01, 0x01,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x10, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x10, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x10, 0x00, 0x01, 0x00, 0x40, 0x00, 0x00, 0x00, 0x00, 0x00, 0xa1,
    0x01, 0x00, 0x00, 0x00, 0x48, 0x31, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x01, 0x01, 0x02, 0x08,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x20, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x20, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x20, 0x00, 0x00, 0x00, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0xa1,
    0x00, 0x00, 0x00, 0x00, 0x53, 0x31, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
];

/// The fixture with `tid` in place of the TID OpenSM echoed.
fn fixture(tid: u64) -> [u8; MAD_SIZE] {
    let mut m = OPENSM_GETTABLE_RESP;
    m[8..16].copy_from_slice(&tid.to_be_bytes());
    m
}

/// A NodeRecord GetTable from an RMPP client on node 0 to node 1; the TID as sent.
fn get_table(f: &mut Fabric) -> (crate::engine::AgentId, u64) {
    let client = f.register(0, gsi_agent(0x03, 1, &[]));
    let mut req = mad(0x03, 0x12, 0x5a00_0001);
    req[16..18].copy_from_slice(&0x0011u16.to_be_bytes());
    f.send(0, client, 1, &req, 1000, 2).unwrap();
    f.flush();
    let sent = f.trace.iter().find(|w| w.from == 0).expect("request sent");
    (client, tid_of(&sent.mad[..]))
}

#[test]
fn rmpp_unfilled_header_response_completes_its_request_as_one_mad() {
    let mut f = Fabric::new(2, LinkModel::perfect(), 90);
    let (client, tid) = get_table(&mut f);
    assert_eq!(tid & 0xffff_ffff, 0x5a00_0001);
    let resp = fixture(tid);
    f.inject(1, 0, Qp::Gsi, &resp);
    let got = recvs(&f.take_events(0));
    assert_eq!(
        got,
        vec![(client, resp.to_vec())],
        "delivered whole, as sent"
    );
    // Past every attempt: nothing times out, nothing more goes out (no ACK, no ABORT).
    f.advance(Duration::from_secs(60));
    assert!(
        !f.take_events(0)
            .iter()
            .any(|e| matches!(e, Event::SendTimedOut { .. })),
        "the request was answered"
    );
    let s = f.nodes[0].engine.stats();
    assert_eq!(
        (
            s.outstanding,
            s.timeouts,
            s.dropped_rmpp_unknown,
            s.rmpp_aborts
        ),
        (0, 0, 0, 0)
    );
    assert_eq!(f.trace.iter().filter(|w| w.from == 0).count(), 1);
}

#[test]
fn rmpp_unfilled_header_response_without_request_is_unmatched() {
    let mut f = Fabric::new(2, LinkModel::perfect(), 91);
    let (_, tid) = get_table(&mut f);
    // The agent's TID high word (so it is routed to the agent), another request's low word.
    f.inject(1, 0, Qp::Gsi, &fixture(tid + 1));
    assert_eq!(f.take_events(0), []);
    let s = f.nodes[0].engine.stats();
    assert_eq!((s.unmatched_responses, s.dropped_rmpp_unknown), (1, 0));
}

#[test]
fn rmpp_unfilled_header_request_reaches_an_rmpp_server_whole() {
    let mut f = Fabric::new(2, LinkModel::perfect(), 92);
    let server = f.register(1, gsi_agent(0x03, 1, &[0x12]));
    let mut req = mad(0x03, 0x12, 7);
    req[26] = 0x01; // RRespTime 0, flags Active; version and type left 0
    f.inject(0, 1, Qp::Gsi, &req);
    assert_eq!(recvs(&f.take_events(1)), vec![(server, req.to_vec())]);
    // A whole MAD, so the duplicate filter applies to its retry.
    f.inject(0, 1, Qp::Gsi, &req);
    assert_eq!(f.take_events(1), []);
    assert_eq!(f.nodes[1].engine.stats().dropped_duplicates, 1);
}

#[test]
fn rmpp_other_unsupported_version_still_aborted() {
    let mut f = Fabric::new(2, LinkModel::perfect(), 93);
    let (_, tid) = get_table(&mut f);
    let mut resp = fixture(tid);
    resp[24] = 2; // RMPPVersion 2
    resp[25] = 1; // DATA
    resp[26] = 0x07; // Active, First, Last
    resp[28..32].copy_from_slice(&1u32.to_be_bytes());
    f.inject(1, 0, Qp::Gsi, &resp);
    assert_eq!(recvs(&f.take_events(0)), vec![]);
    let abort = f.trace.iter().rev().find(|w| w.from == 0).expect("a reply");
    assert_eq!(
        (abort.mad[25], abort.mad[27]),
        (4, 125),
        "ABORT UnsupportedVersion"
    );
}
