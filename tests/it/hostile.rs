//! Hostile peers: a node that sends whatever bytes it likes, with whatever
//! addressing, straight onto the embedded fabric (`SimTransport::inject`).
//! Each attack must be rejected or bounded with the right RMPP/MAD status,
//! counted, leave the victim's memory under its configured limits, and let
//! legitimate traffic on the same port keep flowing.
//!
//! The network: victim `V` (LID 1), legitimate peer `L` (LID 2) and hostile `X`
//! (LID 3), all on one switch, in virtual time: the victim's and the peer's timers
//! run only as a test advances the fabric's clock.

use std::sync::Arc;
use std::thread;
use std::time::Duration;

use vmad::clock::{Clock, VirtualClock};
use vmad::engine::{AgentId, AgentSpec, EngineConfig, Event, RmppAbort, SendRequest};
use vmad::port::audit::PortAudit;
use vmad::port::{Port, PortConfig};
use vmad::subnet::{Fabric, FabricBuilder};
use vmad::transport::sim::{RawFrame, SimTransport};
use vmad::transport::Transport;
use vmad::types::{MadAddr, Qp, GSI_QKEY};
use vmad::umad::{self, PortId};
use vmad::wire::rmpp::{self, RmppStatus, RmppType};

use crate::util::*;

pub(crate) const V: u16 = 1;
pub(crate) const L: u16 = 2;
pub(crate) const X: u16 = 3;

const SA: u8 = 0x03;
const PERF: u8 = 0x04;
const GET: u8 = 0x01;
const SET: u8 = 0x02;
const GET_RESP: u8 = 0x81;
/// SA header: MAD 24 + RMPP 12 + SA 20 bytes; a segment carries 200 data bytes.
const SA_HDR: usize = vmad::wire::sa::DATA_OFFSET;
const PER_SEG: usize = vmad::wire::sa::DATA_LEN;

/// The victim's limits: small, so that the attacks reach them quickly.
pub(crate) fn victim_config() -> EngineConfig {
    let mut c = EngineConfig {
        max_events: 256,
        max_reassemblies_per_peer: 4,
        max_reassemblies: 8,
        ..EngineConfig::default()
    };
    c.rmpp.max_message = 64 << 10;
    c
}

pub(crate) struct Net {
    pub(crate) fabric: Fabric,
    pub(crate) names: [String; 3],
    pub(crate) victim: Arc<Port>,
    pub(crate) legit: Arc<Port>,
    pub(crate) hostile: SimTransport,
    pub(crate) clock: VirtualClock,
    ids: [PortId; 2],
}

impl Drop for Net {
    fn drop(&mut self) {
        for id in self.ids {
            let _ = umad::close_port(id);
        }
        self.fabric.unregister();
    }
}

pub(crate) fn net(prefix: &str) -> Net {
    net_with(prefix, victim_config(), |b| b)
}

/// The network, with `customize` applied to the fabric description (names:
/// `{prefix}v`, `{prefix}l`, `{prefix}x`, switch `{prefix}s`, the SM's CA `{prefix}m`).
pub(crate) fn net_with(
    prefix: &str,
    victim: EngineConfig,
    customize: impl FnOnce(FabricBuilder) -> FabricBuilder,
) -> Net {
    let names = [
        format!("{prefix}v"),
        format!("{prefix}l"),
        format!("{prefix}x"),
    ];
    let sw = format!("{prefix}s");
    // The SM (and its SA) on a fourth CA, LID 5, so that the victim's SA-class agents,
    // not the fabric's SA, get what is sent to LID 1.
    let sm = format!("{prefix}m");
    let clock = VirtualClock::new();
    let builder = Fabric::builder()
        .clock(clock.clone())
        .ca(&names[0])
        .ca(&names[1])
        .ca(&names[2])
        .switch(&sw, 4)
        .ca(&sm)
        .link(&names[0], 1, &sw, 1)
        .link(&names[1], 1, &sw, 2)
        .link(&names[2], 1, &sw, 3)
        .link(&sm, 1, &sw, 4)
        .sm_lid(5);
    let fabric = customize(builder).build().unwrap();
    let config = PortConfig {
        engine: victim,
        ..PortConfig::default()
    };
    let (vid, victim) = umad::open_with(&names[0], 1, config).unwrap();
    let (lid, legit) = umad::open(&names[1], 1).unwrap();
    let hostile = fabric.open(&names[2], 1).unwrap();
    Net {
        fabric,
        names,
        victim,
        legit,
        hostile,
        clock,
        ids: [vid, lid],
    }
}

pub(crate) fn agent(port: &Port, class: u8, version: u8, rmpp: u8, methods: &[u8]) -> AgentId {
    let mut mask = [0u64; 2];
    for &m in methods {
        mask[usize::from(m / 64)] |= 1 << (m % 64);
    }
    port.register(AgentSpec {
        qp: Qp::for_class(class),
        mgmt_class: class.into(),
        class_version: version,
        rmpp_version: rmpp,
        method_mask: mask,
        oui: 0,
        user_rmpp: false,
    })
    .unwrap()
}

/// The legitimate peer's PerfMgt server agent; [`legit_round_trip`] runs it.
pub(crate) fn serve_perf(net: &Net) -> AgentId {
    agent(&net.legit, PERF, 1, 0, &[GET])
}

/// The legitimate peer answers every PerfMgt Get queued for `server` now, without
/// waiting; how many it answered.
fn answer_gets(net: &Net, server: AgentId) -> u64 {
    let mut answered = 0;
    loop {
        let event = match net.legit.recv(Some(Duration::ZERO)) {
            Ok(event) => event,
            Err(e) if e.errno() == vmad::error::errno::EWOULDBLOCK => return answered,
            Err(e) => panic!("the legitimate peer: {e}"),
        };
        let Event::Recv { addr, mut mad, .. } = event else {
            continue;
        };
        mad[3] = GET_RESP;
        mad[64] = 0x5a;
        net.legit
            .send(
                server,
                SendRequest {
                    addr: MadAddr {
                        qkey: GSI_QKEY,
                        ..addr
                    },
                    mad: &mad,
                    timeout_ms: 0,
                    retries: 0,
                },
            )
            .unwrap();
        answered += 1;
    }
}

/// One Get from the victim to the legitimate peer (whose `server` answers it, on this
/// thread), answered despite whatever else is queued on the victim (other events are
/// consumed and ignored); how many Gets the peer answered meanwhile. Each time the
/// victim has nothing queued, a token goes to `pace`, if given (a flooder waits for
/// them).
pub(crate) fn legit_round_trip(
    net: &Net,
    client: AgentId,
    server: AgentId,
    tid: u32,
    pace: Option<&std::sync::mpsc::SyncSender<()>>,
) -> u64 {
    let mad = gmp_mad(PERF, 1, GET, u64::from(tid), 0x10);
    net.victim
        .send(
            client,
            SendRequest {
                addr: gsi(L),
                mad: &mad,
                timeout_ms: 100,
                retries: 50,
            },
        )
        .unwrap();
    // The peer answers on this thread, and the clock moves on (100 us) only when
    // neither the victim nor the peer has anything to do: a Get is resent only when
    // its answer was really lost (a flood filled the victim's queue when it came),
    // never because a thread ran slowly. The attempts (5.1 s in all) end in an answer
    // or a timeout report, either way well within 10 s.
    let give_up = net.clock.now() + Duration::from_secs(10);
    let mut answered = 0;
    loop {
        let event = match net.victim.recv(Some(Duration::ZERO)) {
            Ok(event) => event,
            Err(e) if e.errno() == vmad::error::errno::EWOULDBLOCK => {
                if let Some(pace) = pace {
                    // The flooder may be done: then nobody takes the token.
                    let _ = pace.send(());
                }
                let now = answer_gets(net, server);
                answered += now;
                if now == 0 {
                    assert!(
                        net.clock.now() < give_up,
                        "Get {tid:#x}: no answer; victim {:?} {:?}; legit {:?}",
                        net.victim.stats(),
                        net.victim.footprint(),
                        net.legit.stats()
                    );
                    net.clock.advance(Duration::from_micros(100));
                }
                continue;
            }
            Err(e) => panic!("Get {tid:#x}: {e}"),
        };
        match event {
            Event::Recv { agent, addr, mad } if agent == client => {
                assert_eq!(addr.lid, L, "a response to {client:?} from a stranger");
                assert_eq!(be64(&mad, 8) as u32, tid);
                assert_eq!((mad[3], be16(&mad, 4), mad[64]), (GET_RESP, 0, 0x5a));
                return answered;
            }
            Event::SendTimedOut { agent, .. } if agent == client => {
                panic!("Get {tid:#x} timed out")
            }
            _ => {}
        }
    }
}

/// An SA RMPP DATA segment from the hostile node.
pub(crate) fn segment(tid: u64, seg: u32, flags: u8, paylen: u32) -> [u8; 256] {
    let mut m = gmp_mad(SA, 2, SET, tid, 0x11);
    {
        let mut p = rmpp::Packet::new_unchecked(&mut m[..]);
        p.set_rmpp_version(rmpp::VERSION);
        p.set_rmpp_type(RmppType::Data);
        p.set_resp_time_flags(rmpp::RESP_TIME_NONE, rmpp::FLAG_ACTIVE | flags);
        p.set_seg_num(seg);
        p.set_paylen_newwin(paylen);
    }
    for (i, b) in m[SA_HDR..].iter_mut().enumerate() {
        *b = (seg as usize + i) as u8;
    }
    m
}

pub(crate) fn inject(net: &mut Net, mad: [u8; 256]) {
    net.hostile.inject(&RawFrame::gsi(mad, V));
}

/// Wait on the hostile node for an RMPP MAD of `kind` (other MADs are skipped).
fn expect_rmpp(net: &mut Net, kind: RmppType) -> RmppStatus {
    loop {
        let (_, mad) = recv(&mut net.hostile);
        let p = rmpp::Packet::new_unchecked(&mad[..]);
        if p.is_active() && p.rmpp_type() == kind {
            return p.rmpp_status();
        }
    }
}

/// Run the ports until the victim's engine has taken `n` datagrams (each run takes at
/// least one of those waiting, if any are).
pub(crate) fn settle(net: &Net, n: u64) {
    let mut runs = 0;
    while net.victim.stats().received < n {
        runs += 1;
        assert!(runs <= n + 1, "victim stuck: {:?}", net.victim.stats());
        net.clock.advance(Duration::ZERO);
    }
}

/// The victim's engine is consistent and inside its limits.
pub(crate) fn healthy(net: &Net) {
    net.victim.check_invariants().unwrap();
    let f = net.victim.footprint();
    let c = victim_config();
    // The open's queue keeps at most max_events; the engine may hold one receive
    // burst more that a turn running beside us has not yet moved there (the port's
    // lock is taken per MAD, the queue settled once per turn).
    let burst = PortConfig::default().burst;
    assert!(f.events <= c.max_events + burst, "{f:?}");
    assert!(f.dedup <= c.max_events, "{f:?}");
    assert!(f.recv_sessions <= c.max_reassemblies + 64, "{f:?}");
    assert!(
        f.reassembly_bytes <= c.max_reassemblies * 2 * c.rmpp.max_message,
        "{f:?}"
    );
}

#[test]
fn rmpp_payload_length_of_gigabytes_is_aborted_bad_length() {
    let mut net = net("hgb");
    let server = serve_perf(&net);
    let sa = agent(&net.victim, SA, 2, 1, &[SET]);
    let client = agent(&net.victim, PERF, 1, 0, &[]);
    inject(&mut net, segment(0xb16, 1, rmpp::FLAG_FIRST, 0xffff_fff0));
    assert_eq!(
        expect_rmpp(&mut net, RmppType::Abort),
        RmppStatus::BadLength
    );
    let stats = net.victim.stats();
    assert_eq!((stats.rmpp_aborts, stats.rmpp_reassembled), (1, 0));
    // The port reports the abort (the kernel tells nobody), without queueing an event.
    assert_eq!(net.victim.rmpp_aborts(), 1);
    assert_eq!(
        net.victim.last_rmpp_abort(),
        Some(RmppAbort {
            agent: sa,
            tid: 0xb16,
            status: RmppStatus::BadLength,
            sending: false,
        })
    );
    let f = net.victim.footprint();
    assert_eq!((f.recv_sessions, f.reassembly_bytes), (0, 0), "{f:?}");
    healthy(&net);
    assert_eq!(legit_round_trip(&net, client, server, 1, None), 1);
}

#[test]
fn endless_segments_are_stopped_at_the_size_limit() {
    let mut net = net("hen");
    agent(&net.victim, SA, 2, 1, &[SET]);
    let client = agent(&net.victim, PERF, 1, 0, &[]);
    let server = serve_perf(&net);
    // No PayloadLength announced: the message only ever grows, 200 bytes a segment.
    let limit_seg = (64 << 10) / PER_SEG as u32 + 1;
    for seg in 1..=limit_seg + 200 {
        let first = if seg == 1 { rmpp::FLAG_FIRST } else { 0 };
        inject(&mut net, segment(0xe0d, seg, first, 0));
    }
    assert_eq!(
        expect_rmpp(&mut net, RmppType::Stop),
        RmppStatus::ResourcesExhausted
    );
    settle(&net, u64::from(limit_seg + 200));
    let stats = net.victim.stats();
    assert_eq!(stats.rmpp_aborts, 1, "{stats:?}");
    // Segments after the STOP find no session and start none.
    assert!(stats.dropped_rmpp_unknown >= 190, "{stats:?}");
    assert_eq!(net.victim.footprint().recv_sessions, 0);
    healthy(&net);
    assert_eq!(legit_round_trip(&net, client, server, 2, None), 1);
}

#[test]
fn segments_out_of_window_are_dropped_and_the_transfer_still_completes() {
    let mut net = net("how");
    let sa = agent(&net.victim, SA, 2, 1, &[SET]);
    let segs = 100u32;
    let paylen = segs * rmpp::SEGMENT_PAYLOAD as u32;
    inject(&mut net, segment(0x0a1, 1, rmpp::FLAG_FIRST, paylen));
    // The first window ends at segment 65: these are beyond it.
    for seg in 70..=99 {
        inject(&mut net, segment(0x0a1, seg, 0, 0));
    }
    // A copy of the first segment, and of a segment beyond the window, again.
    inject(&mut net, segment(0x0a1, 80, 0, 0));
    settle(&net, 32);
    let stats = net.victim.stats();
    assert_eq!(stats.dropped_rmpp_segments, 31, "{stats:?}");
    let f = net.victim.footprint();
    assert_eq!(f.recv_sessions, 1);
    assert!(f.reassembly_bytes < 64 << 10, "{f:?}");
    healthy(&net);
    for seg in 2..=segs {
        let last = if seg == segs { rmpp::FLAG_LAST } else { 0 };
        let pl = if seg == segs {
            rmpp::SEGMENT_PAYLOAD as u32
        } else {
            0
        };
        inject(&mut net, segment(0x0a1, seg, last, pl));
    }
    match net.victim.recv(Some(PATIENCE)).unwrap() {
        Event::Recv { agent, addr, mad } => {
            assert_eq!((agent, addr.lid), (sa, X));
            assert_eq!(mad.len(), SA_HDR + segs as usize * PER_SEG);
            for seg in 1..=segs as usize {
                let data = &mad[SA_HDR + (seg - 1) * PER_SEG..][..PER_SEG];
                assert_eq!(
                    data,
                    &segment(0, seg as u32, 0, 0)[SA_HDR..],
                    "segment {seg}"
                );
            }
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(net.victim.stats().rmpp_aborts, 0);
    healthy(&net);
}

#[test]
fn abort_and_stop_for_transfers_that_are_not_theirs_change_nothing() {
    let mut net = net("hab");
    let sa = agent(&net.victim, SA, 2, 1, &[SET]);
    // X starts an honest transfer from LID 3.
    let paylen = 3 * rmpp::SEGMENT_PAYLOAD as u32;
    inject(&mut net, segment(0x7a7, 1, rmpp::FLAG_FIRST, paylen));
    // ABORT and STOP for it "from" LID 2, and for a TID nobody uses.
    let mut abort = segment(0x7a7, 0, 0, 0);
    abort[25] = u8::from(RmppType::Abort);
    abort[27] = u8::from(RmppStatus::Unspecified);
    let mut spoofed = RawFrame::gsi(abort, V);
    spoofed.src_lid = Some(L);
    net.hostile.inject(&spoofed);
    let mut stop = abort;
    stop[25] = u8::from(RmppType::Stop);
    stop[27] = u8::from(RmppStatus::ResourcesExhausted);
    spoofed.mad = stop;
    net.hostile.inject(&spoofed);
    let mut stranger = abort;
    stranger[8..16].copy_from_slice(&0x7a8u64.to_be_bytes());
    inject(&mut net, stranger);

    // The victim's own RMPP send to L, waiting for ACKs L never sends
    // (L has no SA agent, and drops an unclaimed Report).
    let mut message = gmp_mad(SA, 2, 0x06, 0x55, 0x11).to_vec();
    message[24] = 1;
    message[26] = rmpp::FLAG_ACTIVE;
    message.extend_from_slice(&[7u8; 4 * PER_SEG]);
    net.victim
        .send(
            sa,
            SendRequest {
                addr: gsi(L),
                mad: &message,
                timeout_ms: 0,
                retries: 0,
            },
        )
        .unwrap();
    let tid = (u64::from(net.victim.hi_tid(sa).unwrap()) << 32) | 0x55;
    let mut abort_ours = abort;
    abort_ours[3] = 0x86; // the receiver of our Report answers with the R bit set
    abort_ours[8..16].copy_from_slice(&tid.to_be_bytes());
    inject(&mut net, abort_ours);
    settle(&net, 5);

    let stats = net.victim.stats();
    assert_eq!(stats.dropped_rmpp_unknown, 4, "{stats:?}");
    assert_eq!(stats.rmpp_aborts, 0, "{stats:?}");
    let f = net.victim.footprint();
    assert_eq!((f.recv_sessions, f.txns), (1, 1), "{f:?}");
    // X's honest transfer still completes.
    inject(&mut net, segment(0x7a7, 2, 0, 0));
    let last = segment(0x7a7, 3, rmpp::FLAG_LAST, rmpp::SEGMENT_PAYLOAD as u32);
    inject(&mut net, last);
    match net.victim.recv(Some(PATIENCE)).unwrap() {
        Event::Recv { agent, mad, .. } => {
            assert_eq!(agent, sa);
            assert_eq!(mad.len(), SA_HDR + 3 * PER_SEG);
        }
        other => panic!("{other:?}"),
    }
    healthy(&net);
}

#[test]
fn a_flood_of_unsolicited_requests_stays_bounded_and_legit_traffic_flows() {
    let mut net = net("hfl");
    let server = serve_perf(&net);
    agent(&net.victim, PERF, 1, 0, &[GET]);
    // A flood nobody reads: only max_events are kept, the rest is counted.
    const FLOOD: u32 = 3000;
    for tid in 0..FLOOD {
        inject(&mut net, gmp_mad(PERF, 1, GET, u64::from(tid), 0x10));
    }
    // And as many Gets for a class nobody serves: answered 0x000c, not queued.
    for tid in 0..FLOOD {
        inject(&mut net, gmp_mad(0x05, 1, GET, u64::from(tid), 0x12));
    }
    settle(&net, u64::from(2 * FLOOD));
    let stats = net.victim.stats();
    let cap = victim_config().max_events as u64;
    assert_eq!(stats.delivered, cap, "{stats:?}");
    assert_eq!(stats.queue_drops, u64::from(FLOOD) - cap, "{stats:?}");
    assert_eq!(stats.auto_replies, u64::from(FLOOD), "{stats:?}");
    let f = net.victim.footprint();
    assert_eq!(f.events, cap as usize, "{f:?}");
    healthy(&net);
    // Every answer reaches X: the transmit queue does not keep them.
    for _ in 0..FLOOD {
        let (_, mad) = recv(&mut net.hostile);
        assert_eq!((mad[1], mad[3], be16(&mad, 4)), (0x05, GET_RESP, 0x000c));
    }
    assert_eq!(net.victim.footprint().tx_queue, 0);
    // While a second flood runs on another thread, the victim's application keeps
    // reading (and ignoring) the flood and its own Gets to L are answered. The flooder
    // injects 64 frames for each token, and the victim's reader hands out one each
    // time it has emptied its queue: the flood and the legitimate traffic interleave
    // however the threads are scheduled, and the victim's queue (256) never fills, so
    // no legitimate answer is lost to it (the first flood above showed the drops).
    let client = agent(&net.victim, PERF, 1, 0, &[]);
    // The flooder owns X's port meanwhile; a stand-in nobody uses takes its place.
    let mut hostile = std::mem::replace(&mut net.hostile, spare());
    const SECOND: u64 = 20_000;
    const BATCH: u64 = 64;
    let (pace, tokens) = std::sync::mpsc::sync_channel::<()>(0);
    let flooder = thread::spawn(move || {
        let mut sent = 0;
        while sent < SECOND && tokens.recv().is_ok() {
            for tid in sent..(sent + BATCH).min(SECOND) {
                hostile.inject(&RawFrame::gsi(
                    gmp_mad(PERF, 1, GET, 0x1_0000 + tid, 0x10),
                    V,
                ));
            }
            sent = (sent + BATCH).min(SECOND);
        }
        (hostile, sent)
    });
    let mut trips = 0u32;
    let mut answered = 0;
    // Round trips until the flooder has sent all of it (each one hands out tokens).
    while trips < 20 || !flooder.is_finished() {
        assert!(trips < 100_000, "the flooder never finished");
        answered += legit_round_trip(&net, client, server, 0x100 + trips, Some(&pace));
        trips += 1;
    }
    drop(pace);
    let (hostile, sent) = flooder.join().unwrap();
    net.hostile = hostile;
    assert_eq!(sent, SECOND);
    assert_eq!(
        answered,
        u64::from(trips),
        "one answer per Get, none resent"
    );
    let stats = net.victim.stats();
    assert_eq!(stats.queue_drops, u64::from(FLOOD) - cap, "{stats:?}");
    healthy(&net);
}

/// A transport on a fabric of its own: the flood test's placeholder.
fn spare() -> SimTransport {
    let f = Fabric::builder().ca("hspare").build_private().unwrap();
    f.open("hspare", 1).unwrap()
}

#[test]
fn a_stray_middle_segment_and_a_bad_type_start_nothing() {
    let mut net = net("hms");
    agent(&net.victim, SA, 2, 1, &[SET]);
    inject(&mut net, segment(0x31, 5, 0, 0));
    let mut bad = segment(0x32, 1, rmpp::FLAG_FIRST, 0);
    bad[25] = 9;
    inject(&mut net, bad);
    let mut short = segment(0x33, 1, rmpp::FLAG_FIRST, 0);
    short[0] = 2; // a base version the engine does not speak
    inject(&mut net, short);
    settle(&net, 3);
    let stats = net.victim.stats();
    assert_eq!(stats.dropped_rmpp_unknown, 2, "{stats:?}");
    assert_eq!(stats.dropped_invalid, 1, "{stats:?}");
    assert_eq!(net.victim.footprint().recv_sessions, 0);
    healthy(&net);
    let _ = net.hostile.recv_burst(64, &mut |_, _| {});
}

#[test]
fn reassemblies_are_capped_per_peer_and_in_total_even_from_spoofed_lids() {
    let mut net = net("hcap");
    agent(&net.victim, SA, 2, 1, &[SET]);
    let paylen = 10 * rmpp::SEGMENT_PAYLOAD as u32;
    // Six transfers from X's own LID: four open (per-peer limit), two dropped.
    for tid in 0..6u64 {
        inject(&mut net, segment(0x100 + tid, 1, rmpp::FLAG_FIRST, paylen));
    }
    // Twenty more from twenty spoofed LIDs: the total limit (8) holds.
    for lid in 0..20u16 {
        let mut f = RawFrame::gsi(segment(0x200, 1, rmpp::FLAG_FIRST, paylen), V);
        f.src_lid = Some(0x100 + lid);
        net.hostile.inject(&f);
    }
    settle(&net, 26);
    let stats = net.victim.stats();
    assert_eq!(stats.dropped_rmpp_limit, 18, "{stats:?}");
    assert_eq!(net.victim.footprint().recv_sessions, 8);
    healthy(&net);
}
