//! The `tracing` feature: the engine reports sends, receives, drops with
//! their reason, retries, timeouts and RMPP sessions as `vmad::engine` events.
//! A hand-written subscriber (scoped to the test thread) records them.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, Mutex};

use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event as TraceEvent, Level, Metadata, Subscriber};

use super::harness::*;
use crate::types::Qp;

/// (target, level, message) -> count; plus every `reason` field seen.
#[derive(Default)]
struct Seen {
    events: BTreeMap<(String, Level, String), usize>,
    reasons: Vec<String>,
}

#[derive(Clone, Default)]
struct Counting(Arc<Mutex<Seen>>);

impl Counting {
    fn count(&self, level: Level, message: &str) -> usize {
        let seen = self.0.lock().unwrap();
        let key = ("vmad::engine".to_string(), level, message.to_string());
        seen.events.get(&key).copied().unwrap_or(0)
    }

    fn reasons(&self) -> Vec<String> {
        self.0.lock().unwrap().reasons.clone()
    }
}

#[derive(Default)]
struct Fields {
    message: String,
    reason: Option<String>,
}

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        match field.name() {
            "message" => self.message = format!("{value:?}"),
            "reason" => self.reason = Some(format!("{value:?}").trim_matches('"').to_string()),
            _ => {}
        }
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        match field.name() {
            "message" => self.message = value.to_string(),
            "reason" => self.reason = Some(value.to_string()),
            _ => {}
        }
    }
}

impl Subscriber for Counting {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &Attributes<'_>) -> Id {
        Id::from_u64(1)
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, event: &TraceEvent<'_>) {
        let mut fields = Fields::default();
        event.record(&mut fields);
        let meta = event.metadata();
        let mut seen = self.0.lock().unwrap();
        let key = (meta.target().to_string(), *meta.level(), fields.message);
        *seen.events.entry(key).or_default() += 1;
        seen.reasons.extend(fields.reason);
    }
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}

const SA_HDR: usize = 56;

/// An SA GetTableResp of `data_len` bytes, RMPP Active (the engine segments it).
fn sa_response(tid: u64, data_len: usize) -> Vec<u8> {
    let mut m = vec![0u8; SA_HDR + data_len];
    m[..SA_HDR].copy_from_slice(&mad(0x03, 0x92, tid)[..SA_HDR]);
    m[24] = 1;
    m[25] = 1;
    m[26] = 1;
    m
}

#[test]
fn trace_events_for_request_response_timeout_and_rmpp() {
    let sub = Counting::default();
    tracing::subscriber::with_default(sub.clone(), || {
        let mut f = Fabric::new(2, LinkModel::perfect(), 7);
        let client = f.register(0, gsi_agent(0x03, 1, &[]));
        // Request/response: nobody serves SA Get on node 1, so its engine answers it.
        f.send(0, client, 1, &mad(0x03, 0x01, 1), 1000, 0).unwrap();
        f.drive_bounded(1000);
        assert_eq!(recvs(&f.take_events(0)).len(), 1);
        // A timeout: GetTable is neither served nor a Get/Set: dropped, retried, ETIMEDOUT.
        f.send(0, client, 1, &mad(0x03, 0x12, 2), 100, 1).unwrap();
        f.drive_bounded(1000);
        assert!(f
            .take_events(0)
            .iter()
            .any(|e| matches!(e, crate::engine::Event::SendTimedOut { .. })));
        // An RMPP transfer: node 1 now serves GetTable with a 10 000-byte answer.
        let server = f.register(1, gsi_agent(0x03, 1, &[0x12]));
        f.send(0, client, 1, &mad(0x03, 0x12, 3), 1000, 1).unwrap();
        for _ in 0..10_000 {
            let busy = f.step();
            for (_, m) in recvs(&f.take_events(1)) {
                let dest = f.addr(0, Qp::Gsi);
                f.send_to(1, server, dest, &sa_response(tid_of(&m), 10_000), 0, 3)
                    .unwrap();
            }
            if !busy {
                break;
            }
        }
        let got = recvs(&f.take_events(0));
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].1.len(), SA_HDR + 10_000);
        // An RMPP abort: a first segment announcing gigabytes is answered ABORT BadLength.
        let mut seg = mad(0x03, 0x12, 4);
        seg[24..28].copy_from_slice(&[1, 1, 1 | 2, 0]); // version 1, DATA, Active | First
        seg[28..32].copy_from_slice(&1u32.to_be_bytes());
        seg[32..36].copy_from_slice(&0xffff_fff0u32.to_be_bytes());
        f.inject(0, 1, Qp::Gsi, &seg);
        assert_eq!(f.take_aborts(1).len(), 1);
    });

    // The engine's public boundaries, at TRACE.
    assert!(sub.count(Level::TRACE, "send") >= 4, "send events");
    assert!(sub.count(Level::TRACE, "recv") >= 3, "recv events");
    assert!(sub.count(Level::TRACE, "deliver") >= 3, "deliver events");
    // What went wrong or ended, at DEBUG.
    assert_eq!(
        sub.count(
            Level::DEBUG,
            "unclaimed Get/Set: engine answers UNSUPPORTED_METHOD_ATTR"
        ),
        1
    );
    assert_eq!(sub.count(Level::DEBUG, "request expired: retry"), 1);
    assert_eq!(sub.count(Level::DEBUG, "send timed out (ETIMEDOUT)"), 1);
    assert!(sub.count(Level::DEBUG, "drop") >= 2);
    assert!(
        sub.reasons().iter().any(|r| r == "unclaimed"),
        "{:?}",
        sub.reasons()
    );
    assert_eq!(sub.count(Level::DEBUG, "RMPP send start"), 1);
    assert_eq!(sub.count(Level::DEBUG, "RMPP receive start"), 1);
    assert_eq!(sub.count(Level::DEBUG, "RMPP receive complete"), 1);
    assert_eq!(sub.count(Level::DEBUG, "RMPP send complete"), 1);
    assert_eq!(sub.count(Level::DEBUG, "RMPP abort"), 1);
}
