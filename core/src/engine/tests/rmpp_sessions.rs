//! RMPP sessions keyed and answered as the kernel's RMPP keys and
//! answers them: send sessions found by TID and peer, repeated final ACKs.

use core::time::Duration;

use super::harness::*;
use crate::engine::{AgentId, Event};
use crate::types::{MadAddr, GSI_QKEY};
use crate::wire::MAD_SIZE;

const SA_HDR: usize = 56;

/// An SA message with RMPP Active: the 56 header bytes of [`mad`], then `data_len` bytes.
fn sa_message(method: u8, tid: u64, data_len: usize) -> Vec<u8> {
    let mut m = vec![0u8; SA_HDR + data_len];
    m[..SA_HDR].copy_from_slice(&mad(0x03, method, tid)[..SA_HDR]);
    (m[24], m[25], m[26]) = (1, 1, 1);
    for (i, b) in m[SA_HDR..].iter_mut().enumerate() {
        *b = (i * 7 % 251) as u8;
    }
    m
}

/// Whether `w` is an RMPP ACK (class SA) sent by node `from` with segment `seg`.
fn is_ack(w: &Wire, from: usize, seg: u32) -> bool {
    w.from == from && w.mad[1] == 0x03 && w.mad[25] == 2 && w.mad[28..32] == seg.to_be_bytes()
}

#[test]
fn rmpp_responses_with_one_tid_to_two_requesters_both_complete() {
    // Nodes 0 and 2 are requesters whose engines share a seed, so their
    // requests carry the same TID; node 1 answers both at once.
    let mut f = Fabric::with_config(3, LinkModel::perfect(), 60, |i, c| match i {
        2 => crate::engine::EngineConfig {
            rng_seed: Some(60),
            ..c
        },
        _ => c,
    });
    let clients = [f.register(0, gsi_agent(0x03, 1, &[])), AgentId(0)];
    assert_eq!(f.register(2, gsi_agent(0x03, 1, &[])), clients[1]);
    let server = f.register(1, gsi_agent(0x03, 1, &[0x12]));
    let mut req = mad(0x03, 0x12, 5).to_vec();
    req[24] = 1;
    f.send(0, clients[0], 1, &req, 5000, 0).unwrap();
    f.send(2, clients[1], 1, &req, 5000, 0).unwrap();
    f.advance(Duration::from_millis(1));
    let requests: Vec<(MadAddr, Vec<u8>)> = f
        .take_events(1)
        .into_iter()
        .filter_map(|e| match e {
            Event::Recv { addr, mad, .. } => Some((addr, mad)),
            _ => None,
        })
        .collect();
    assert_eq!(requests.len(), 2);
    assert_eq!(tid_of(&requests[0].1), tid_of(&requests[1].1), "one TID");
    for (addr, m) in &requests {
        let resp = sa_message(0x92, tid_of(m), 20_000);
        let to = MadAddr {
            qkey: GSI_QKEY,
            ..*addr
        };
        f.send_to(1, server, to, &resp, 0, 3)
            .expect("a response with the same TID to another requester is a second session");
    }
    f.drive_bounded(100_000);
    for node in [0, 2] {
        let got = recvs(&f.take_events(node));
        assert_eq!(got.len(), 1, "node {node} got its response");
        assert_eq!(got[0].1.len(), SA_HDR + 20_000);
        assert_eq!(f.nodes[node].engine.stats().timeouts, 0);
    }
    assert!(f.nodes.iter().all(|n| n.engine.stats().rmpp_aborts == 0));
}

#[test]
fn repeated_final_ack_gets_its_ds_ack_again() {
    let mut f = Fabric::new(2, LinkModel::perfect(), 61);
    let client = f.register(0, gsi_agent(0x03, 1, &[]));
    let _server = f.register(1, gsi_agent(0x03, 1, &[0x14]));
    // A GetMulti request in 3 segments; the server never answers it.
    f.send(0, client, 1, &sa_message(0x14, 9, 500), 5000, 0)
        .unwrap();
    f.advance(Duration::from_millis(10));
    let final_ack = f
        .trace
        .iter()
        .rev()
        .find(|w| is_ack(w, 1, 3))
        .map(|w| w.mad.clone())
        .expect("the responder ACKed the last segment");
    let ds_acks = |f: &Fabric| f.trace.iter().filter(|w| is_ack(w, 0, 0)).count();
    assert_eq!(ds_acks(&f), 1, "the dual-sided ACK after the final ACK");
    // The DS-ACK was lost, so the responder repeats its final ACK.
    f.inject(1, 0, crate::types::Qp::Gsi, &final_ack[..MAD_SIZE]);
    f.flush();
    assert_eq!(
        ds_acks(&f),
        2,
        "a repeated final ACK is answered with the DS-ACK again"
    );
}

#[test]
fn interleaved_transfers_with_one_tid_reassemble_apart_and_again_after_linger() {
    // Nodes 0 and 2 share a seed, so their messages carry the same TID: the
    // receive sessions at node 1 differ only by peer, and their segments
    // alternate window by window (the engine remembers the last segment's
    // session; a session of the other peer, or a new one with the same key
    // after the first went, must not be taken for it).
    let mut f = Fabric::with_config(3, LinkModel::perfect(), 62, |i, c| match i {
        2 => crate::engine::EngineConfig {
            rng_seed: Some(62),
            ..c
        },
        _ => c,
    });
    let clients = [f.register(0, gsi_agent(0x03, 1, &[])), AgentId(0)];
    assert_eq!(f.register(2, gsi_agent(0x03, 1, &[])), clients[1]);
    f.register(1, gsi_agent(0x03, 1, &[0x14]));
    for round in 0..2 {
        let msgs = [sa_message(0x14, 9, 30_000), sa_message(0x14, 9, 31_000)];
        for (node, (client, msg)) in [0, 2].into_iter().zip(clients.iter().zip(&msgs)) {
            f.send(node, *client, 1, msg, 0, 3).unwrap();
        }
        // Until idle: both transfers, then the sessions' 10 s linger.
        let mut steps = 0;
        while f.step() {
            f.nodes[1].engine.check_invariants().unwrap();
            steps += 1;
            assert!(steps < 100_000, "round {round}: livelock");
        }
        let got = recvs(&f.take_events(1));
        assert_eq!(got.len(), 2, "round {round}: both reassembled");
        for (_, m) in &got {
            let want = msgs
                .iter()
                .find(|w| w.len() == m.len())
                .expect("a sent length");
            assert_eq!(m[SA_HDR..], want[SA_HDR..], "round {round}: data intact");
        }
        // The lingering sessions went; the next round's keys are the same.
        assert_eq!(f.nodes[1].engine.footprint().recv_sessions, 0);
    }
    assert!(f.nodes.iter().all(|n| n.engine.stats().rmpp_aborts == 0));
}
