//! Access rules: the GSI Q_Key, P_Keys against the port's table, responses only to
//! the agent (and peer) whose request they answer, vendor agents only for their
//! OUI, and the SMA's M_Key protection. Raw frames come from the hostile node of
//! the network in `hostile.rs` (victim LID 1, legitimate peer LID 2, hostile LID 3).

use vmad::engine::{AgentSpec, Event, SendRequest};
use vmad::port::audit::PortAudit;
use vmad::subnet::{MkeyConfig, PortCounters};
use vmad::transport::sim::RawFrame;
use vmad::transport::Transport;
use vmad::types::Qp;
use vmad::wire::smp::port_info;

use crate::hostile::*;
use crate::util::*;

const PERF: u8 = 0x04;
const GET: u8 = 0x01;
const PORT_INFO: u16 = vmad::wire::smp::AttrId::PortInfo.raw();

/// Whatever has reached the hostile node so far (every frame the fabric
/// carries is walked synchronously, so an SMA's answer is there at once).
fn drain(t: &mut dyn Transport) -> Vec<Vec<u8>> {
    let mut got = Vec::new();
    t.recv_burst(usize::MAX, &mut |_, mad| got.push(mad.to_vec()))
        .unwrap();
    got
}

#[test]
fn qp1_takes_only_the_gsi_qkey() {
    let mut net = net("aqk");
    agent(&net.victim, PERF, 1, 0, &[GET]);
    let mut wrong = RawFrame::gsi(gmp_mad(PERF, 1, GET, 1, 0x10), V);
    wrong.qkey = 0x8001_0001;
    net.hostile.inject(&wrong);
    wrong.qkey = 0;
    net.hostile.inject(&wrong);
    let counters = net.fabric.port_counters(&net.names[0], 1).unwrap();
    assert_eq!(
        counters,
        PortCounters {
            qkey_violations: 2,
            ..PortCounters::default()
        }
    );
    // The right Q_Key goes through to the agent.
    net.hostile
        .inject(&RawFrame::gsi(gmp_mad(PERF, 1, GET, 2, 0x10), V));
    match net.victim.recv(Some(PATIENCE)).unwrap() {
        Event::Recv { addr, mad, .. } => {
            assert_eq!((addr.lid, be64(&mad, 8)), (X, 2));
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(net.victim.stats().received, 1);
    healthy(&net);
}

#[test]
fn pkeys_are_checked_against_the_port_table_and_the_index_is_reported() {
    let mut net = net_with("apk", victim_config(), |b| {
        b.pkeys("apkv", 1, &[0xffff, 0x8005])
    });
    assert_eq!(net.victim.attrs().pkeys, vec![0xffff, 0x8005]);
    agent(&net.victim, PERF, 1, 0, &[GET]);
    let send = |net: &mut Net, tid: u64, pkey: u16| {
        let mut f = RawFrame::gsi(gmp_mad(PERF, 1, GET, tid, 0x10), V);
        f.pkey = pkey;
        net.hostile.inject(&f);
    };
    send(&mut net, 1, 0x8006); // another partition
    send(&mut net, 2, 0x0006);
    send(&mut net, 3, 0x8000); // the invalid P_Key
    send(&mut net, 4, 0x0000);
    let counters = net.fabric.port_counters("apkv", 1).unwrap();
    assert_eq!(counters.pkey_violations, 4, "{counters:?}");
    // A limited member of partition 5 talks to the full member at index 1;
    // a limited member of the default partition to 0xffff at index 0.
    send(&mut net, 5, 0x0005);
    send(&mut net, 6, 0x7fff);
    let mut seen = Vec::new();
    for _ in 0..2 {
        match net.victim.recv(Some(PATIENCE)).unwrap() {
            Event::Recv { addr, mad, .. } => seen.push((be64(&mad, 8), addr.pkey_index)),
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(seen, vec![(5, 1), (6, 0)]);
    assert_eq!(net.victim.stats().received, 2);
    // SMPs are exempt: QP0 takes any P_Key.
    let mut smp = RawFrame::gsi(lid_get(7, 0x0011, 0), V);
    (smp.src_qpn, smp.dest_qpn, smp.qkey, smp.pkey) = (0, 0, 0, 0x8006);
    net.hostile.inject(&smp);
    let answers = drain(&mut net.hostile);
    assert_eq!(answers.len(), 1);
    assert_eq!((answers[0][3], be64(&answers[0], 8)), (0x81, 7));
    assert_eq!(
        net.fabric.port_counters("apkv", 1).unwrap().pkey_violations,
        4
    );
}

#[test]
fn responses_reach_only_the_agent_and_peer_whose_request_they_answer() {
    let mut net = net("ars");
    let a = agent(&net.victim, PERF, 1, 0, &[]);
    let b = agent(&net.victim, PERF, 2, 0, &[]);
    // L serves Get but does not answer until told to.
    let server = agent(&net.legit, PERF, 1, 0, &[GET]);
    let req = gmp_mad(PERF, 1, GET, 0x77, 0x10);
    net.victim
        .send(
            a,
            SendRequest {
                addr: gsi(L),
                mad: &req,
                timeout_ms: 60_000,
                retries: 0,
            },
        )
        .unwrap();
    let (addr, request) = match net.legit.recv(Some(PATIENCE)).unwrap() {
        Event::Recv { addr, mad, .. } => (addr, mad),
        other => panic!("{other:?}"),
    };
    let tid_a = be64(&request, 8);
    assert_eq!(tid_a >> 32, u64::from(net.victim.hi_tid(a).unwrap()));
    let tid_b = (u64::from(net.victim.hi_tid(b).unwrap()) << 32) | 0x77;
    let mut resp = request.clone();
    resp[3] = 0x81;
    resp[64] = 0xee;
    let resp: [u8; 256] = resp.try_into().unwrap();
    // X answers first: with A's TID (wrong source), with B's TID (nothing
    // outstanding there), and with A's TID for another class version.
    net.hostile.inject(&RawFrame::gsi(resp, V));
    let mut to_b = resp;
    to_b[8..16].copy_from_slice(&tid_b.to_be_bytes());
    to_b[2] = 2;
    net.hostile.inject(&RawFrame::gsi(to_b, V));
    let mut other_class = resp;
    other_class[1] = 0x05;
    net.hostile.inject(&RawFrame::gsi(other_class, V));
    // And a request colliding with A's outstanding TID goes to request routing,
    // never to A: nobody serves PerfMgt Set, so it is answered 0x000c.
    let mut collide = resp;
    collide[3] = 0x02;
    net.hostile.inject(&RawFrame::gsi(collide, V));
    settle(&net, 4);
    let stats = net.victim.stats();
    assert_eq!(stats.unmatched_responses, 3, "{stats:?}");
    assert_eq!((stats.delivered, stats.auto_replies), (0, 1), "{stats:?}");
    assert_eq!(net.victim.footprint().txns, 1);
    // Now L answers: A gets exactly that, once.
    let mut answer = request;
    answer[3] = 0x81;
    answer[64] = 0x11;
    net.legit
        .send(
            server,
            SendRequest {
                addr: vmad::types::MadAddr {
                    qkey: vmad::types::GSI_QKEY,
                    ..addr
                },
                mad: &answer,
                timeout_ms: 0,
                retries: 0,
            },
        )
        .unwrap();
    match net.victim.recv(Some(PATIENCE)).unwrap() {
        Event::Recv { agent, addr, mad } => {
            assert_eq!((agent, addr.lid, mad[64]), (a, L, 0x11));
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(net.victim.stats().delivered, 1);
    assert!(net.victim.recv(Some(std::time::Duration::ZERO)).is_err());
    healthy(&net);
}

#[test]
fn vendor_agents_see_only_their_oui() {
    let mut net = net("aou");
    const VENDOR: u8 = 0x30;
    let spec = |oui: u32| AgentSpec {
        qp: Qp::Gsi,
        mgmt_class: VENDOR.into(),
        class_version: 1,
        rmpp_version: 0,
        method_mask: [1 << GET, 0],
        oui,
        user_rmpp: false,
    };
    let ours = net.victim.register(spec(0x00_1405)).unwrap();
    let theirs = net.victim.register(spec(0x00_2c9)).unwrap();
    let vendor_get = |tid: u64, oui: u32| {
        let mut m = gmp_mad(VENDOR, 1, GET, tid, 0x10);
        m[37..40].copy_from_slice(&oui.to_be_bytes()[1..]);
        RawFrame::gsi(m, V)
    };
    net.hostile.inject(&vendor_get(1, 0x00_2c9));
    net.hostile.inject(&vendor_get(2, 0x00_1405));
    net.hostile.inject(&vendor_get(3, 0x12_3456));
    let mut got = Vec::new();
    for _ in 0..2 {
        match net.victim.recv(Some(PATIENCE)).unwrap() {
            Event::Recv { agent, mad, .. } => got.push((agent, be64(&mad, 8))),
            other => panic!("{other:?}"),
        }
    }
    got.sort();
    let mut want = vec![(theirs, 1), (ours, 2)];
    want.sort();
    assert_eq!(got, want);
    // The OUI nobody registered is answered 0x000c by the engine, not delivered.
    let (_, answer) = recv(&mut net.hostile);
    assert_eq!(
        (answer[3], be16(&answer, 4), be64(&answer, 8)),
        (0x81, 0x000c, 3)
    );
    healthy(&net);
}

/// A LID-routed SubnGet(PortInfo) from X with `mkey`, and what came back.
fn port_info_with(net: &mut Net, dest: u16, tid: u64, mkey: u64) -> Option<Vec<u8>> {
    let mut m = lid_get(tid, PORT_INFO, 0);
    m[24..32].copy_from_slice(&mkey.to_be_bytes());
    let mut f = RawFrame::gsi(m, dest);
    (f.src_qpn, f.dest_qpn, f.qkey) = (0, 0, 0);
    net.hostile.inject(&f);
    let mut got = drain(&mut net.hostile);
    assert!(got.len() <= 1);
    got.pop()
}

fn shown_mkey(resp: &[u8]) -> u64 {
    port_info::Packet::new_unchecked(&resp[64..]).m_key()
}

#[test]
fn mkey_protection_levels_on_a_ca_port() {
    for bits in 0..4u8 {
        let prefix = format!("amk{bits}");
        let victim = format!("{prefix}v");
        let mkey = MkeyConfig {
            key: 0xfeed_f00d_0000_0001,
            protect_bits: bits,
        };
        let mut net = net_with(&prefix, victim_config(), |b| b.mkey(&victim, 1, mkey));
        // The right key always works and shows the key and protect bits.
        let resp = port_info_with(&mut net, V, 1, mkey.key).expect("answered");
        assert_eq!(be16(&resp, 4), 0);
        assert_eq!(shown_mkey(&resp), mkey.key);
        let p = port_info::Packet::new_unchecked(&resp[64..]);
        assert_eq!(p.m_key_protect_bits(), bits);
        // A wrong key: shown (0), hidden (1), refused (2, 3).
        let wrong = port_info_with(&mut net, V, 2, 0xbad);
        match bits {
            0 => assert_eq!(shown_mkey(&wrong.expect("answered")), mkey.key),
            1 => assert_eq!(shown_mkey(&wrong.expect("answered")), 0),
            _ => assert!(
                wrong.is_none(),
                "protect bits {bits}: a wrong key was answered"
            ),
        }
        let violations = net
            .fabric
            .port_counters(&victim, 1)
            .unwrap()
            .mkey_violations;
        assert_eq!(violations, u64::from(bits >= 2), "protect bits {bits}");
        // The counter shows in PortInfo.
        let resp = port_info_with(&mut net, V, 3, mkey.key).unwrap();
        let p = port_info::Packet::new_unchecked(&resp[64..]);
        assert_eq!(p.m_key_violations(), u16::from(bits >= 2));
        // The port's owner never saw any of it.
        assert_eq!(net.victim.stats().received, 0);
    }
}

#[test]
fn a_set_with_the_wrong_mkey_is_discarded_by_a_protected_switch() {
    let mkey = MkeyConfig {
        key: 0x5157,
        protect_bits: 1,
    };
    let mut net = net_with("amsw", victim_config(), |b| b.mkey("amsws", 0, mkey));
    let sw_lid = 4;
    let mut set = lid_get(9, PORT_INFO, 1);
    set[3] = 0x02;
    let send = |net: &mut Net, mad: [u8; 256]| {
        let mut f = RawFrame::gsi(mad, sw_lid);
        (f.src_qpn, f.dest_qpn, f.qkey) = (0, 0, 0);
        net.hostile.inject(&f);
        drain(&mut net.hostile)
    };
    assert!(send(&mut net, set).is_empty());
    assert_eq!(
        net.fabric
            .port_counters("amsws", 0)
            .unwrap()
            .mkey_violations,
        1
    );
    // With the key, the switch applies the Set (port 1, nothing changed) and answers it.
    set[24..32].copy_from_slice(&mkey.key.to_be_bytes());
    let answers = send(&mut net, set);
    assert_eq!(answers.len(), 1);
    assert_eq!(be16(&answers[0], 4), 0);
    // A Get with a wrong key passes at level 1, with the M_Key hidden.
    let resp = port_info_with(&mut net, sw_lid, 10, 1).unwrap();
    assert_eq!(shown_mkey(&resp), 0);
}
