//! The client's vendor calls and per-destination keys against the embedded subnet:
//! vendor range 1 and range 2 (OUI, RMPP both ways, answers far beyond one MAD)
//! answered by a Rust responder on another open of the same fabric; timeouts and
//! error statuses as `vmad::Error`; the M_Key the SMA checks, the SM_Key the SA reads.

use std::thread;
use std::time::Duration;

use vmad::client::{
    Attribute, ClassPortInfo, Client, ClientConfig, PortInfo, SaRecord, Target, Vendor,
};
use vmad::engine::{AgentId, AgentSpec, Event, SendRequest};
use vmad::error::errno::{ECONNABORTED, EINVAL, EMSGSIZE, EPROTO, ETIMEDOUT};
use vmad::port::{Port, PortConfig};
use vmad::subnet::{Fabric, MkeyConfig};
use vmad::types::{MadAddr, Qp, GSI_QKEY};
use vmad::umad;
use vmad::wire::mad::{self, MadStatus, Method, MgmtClass};
use vmad::wire::rmpp;

/// Two CAs on a switch; `tag` keeps names unique between tests that run at once.
fn fabric(tag: &str, mkey: Option<MkeyConfig>) -> (Fabric, String, String) {
    let (a, b, sw) = (
        format!("cv{tag}a"),
        format!("cv{tag}b"),
        format!("cv{tag}sw"),
    );
    let mut builder = Fabric::builder()
        .ca(&a)
        .ca(&b)
        .switch(&sw, 4)
        .link(&a, 1, &sw, 1)
        .link(&b, 1, &sw, 2);
    if let Some(m) = mkey {
        builder = builder.mkey(&b, 1, m);
    }
    (builder.build().unwrap(), a, b)
}

const OUI: u32 = 0x00_02_c9;
const BIG: u16 = 0x0042; // the responder answers this attribute with `BIG_LEN` bytes
const BIG_LEN: usize = 3_000;
const REFUSED: u16 = 0x0bad; // answered with status 0x000c
const SILENT: u16 = 0x0666; // never answered

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(7).wrapping_add(seed))
        .collect()
}

/// A vendor agent on `port` for `class` (with `oui` and RMPP for range 2) that
/// answers `n` requests: attribute `BIG` with `BIG_LEN` bytes of `pattern`, `REFUSED`
/// with status 0x000c, anything else by echoing the request's data (its whole
/// length, so a reassembled RMPP request comes back as it arrived). Returns the
/// length of each request's data.
fn responder(
    port: std::sync::Arc<Port>,
    class: u8,
    oui: u32,
    rmpp: bool,
    n: usize,
) -> thread::JoinHandle<Vec<usize>> {
    let agent = port
        .register(AgentSpec {
            qp: Qp::Gsi,
            mgmt_class: class.into(),
            class_version: 1,
            rmpp_version: u8::from(rmpp),
            method_mask: [
                (1 << Method::Get.raw()) | (1 << Method::Set.raw()) | (1 << 3),
                0,
            ],
            oui,
            user_rmpp: false,
        })
        .unwrap();
    let at = MgmtClass::from(class).data_offset();
    thread::spawn(move || {
        let mut lens = Vec::new();
        while lens.len() < n {
            let Event::Recv { addr, mad: req, .. } =
                port.recv(Some(Duration::from_secs(60))).unwrap()
            else {
                continue;
            };
            lens.push(req.len() - at);
            let h = mad::Packet::new_checked(&req[..]).unwrap();
            if h.method() == Method::Send || h.attr_id() == SILENT {
                continue;
            }
            let mut answer = match h.attr_id() {
                BIG => {
                    let mut m = req[..at].to_vec();
                    m.extend(pattern(BIG_LEN, 3));
                    m
                }
                _ => req.clone(),
            };
            answer.resize(answer.len().max(256), 0);
            let mut p = mad::Packet::new_unchecked(&mut answer[..]);
            p.set_method(Method::GetResp);
            if h.attr_id() == REFUSED {
                p.set_status(MadStatus::UNSUPPORTED_METHOD_ATTR);
            }
            if rmpp && answer.len() > 256 {
                let mut r = rmpp::Packet::new_unchecked(&mut answer[..]);
                r.set_rmpp_version(rmpp::VERSION);
                r.set_rmpp_type(rmpp::RmppType::Data);
                r.set_resp_time_flags(rmpp::RESP_TIME_NONE, rmpp::FLAG_ACTIVE);
            } else {
                answer.truncate(256);
            }
            let to = MadAddr {
                qkey: GSI_QKEY,
                ..addr
            };
            port.send(
                agent,
                SendRequest {
                    addr: to,
                    mad: &answer,
                    timeout_ms: 2_000,
                    retries: 3,
                },
            )
            .unwrap();
        }
        lens
    })
}

#[test]
fn vendor_range1_get_set_send_and_errors() {
    let (f, a, b) = fabric("1", None);
    let lid_b = f.lid(&b, 1).unwrap();
    let (id, port) = umad::open(&b, 1).unwrap();
    let server = responder(port, 0x0a, 0, false, 4);
    let c = Client::open(&a, 1).unwrap();
    let v = Vendor::range1(0x0a, 1).unwrap();

    let got = c.vendor_get(&v, lid_b, 0x10, 7, &[1, 2, 3]).unwrap();
    assert_eq!(
        (got.method, got.attr_id, got.attr_mod),
        (Method::GetResp, 0x10, 7)
    );
    assert_eq!(got.addr.lid, lid_b);
    // Range 1's data starts at byte 24: 232 bytes, the request's echoed.
    assert_eq!(got.data.len(), 232);
    assert_eq!(&got.data[..3], &[1, 2, 3]);
    let full = pattern(232, 9);
    let set = c.vendor_set(&v, lid_b, 0x11, 0, &full).unwrap();
    assert_eq!(set.data, full);

    // An error status is the one error type, named.
    let err = c.vendor_get(&v, lid_b, REFUSED, 0, &[]).unwrap_err();
    assert_eq!(err.errno(), EPROTO, "{err}");
    assert!(
        matches!(
            err,
            vmad::Error::MadStatus {
                class: 0x0a,
                attr: REFUSED,
                status: 0x000c,
                ..
            }
        ),
        "{err}"
    );
    // Send is not answered: handed over, and the responder sees it.
    c.vendor_send(&v, lid_b, Method::Send, 0x12, 0, &[5])
        .unwrap();
    assert_eq!(server.join().unwrap(), vec![232; 4]);

    // Refused before anything is sent.
    assert_eq!(
        c.vendor_get(&v, lid_b, 0x10, 0, &[0; 233])
            .unwrap_err()
            .errno(),
        EMSGSIZE
    );
    assert_eq!(v.with_rmpp().unwrap_err().errno(), EINVAL);
    assert_eq!(Vendor::range1(0x30, 1).unwrap_err().errno(), EINVAL);
    assert_eq!(
        c.vendor_call(&v, lid_b, Method::Send, 0x10, 0, &[])
            .unwrap_err()
            .errno(),
        EINVAL
    );
    assert_eq!(
        c.vendor_send(&v, lid_b, Method::GetResp, 0x10, 0, &[])
            .unwrap_err()
            .errno(),
        EINVAL
    );
    drop(c);
    umad::close_port(id).unwrap();
    f.unregister();
}

#[test]
fn vendor_range2_oui_and_rmpp_of_any_size() {
    let (f, a, b) = fabric("2", None);
    let lid_b = f.lid(&b, 1).unwrap();
    let (id, port) = umad::open(&b, 1).unwrap();
    let server = responder(port, 0x31, OUI, true, 5);
    let c = Client::open(&a, 1).unwrap();
    let v = Vendor::range2(0x31, 1, OUI).unwrap().with_rmpp().unwrap();
    assert_eq!(
        (v.oui(), v.data_offset(), v.max_data()),
        (Some(OUI), 40, None)
    );

    // A one-MAD request, an answer of 3,000 bytes in 14 RMPP segments: whole.
    let got = c.vendor_get(&v, lid_b, BIG, 0, &[]).unwrap();
    assert_eq!(got.oui, OUI);
    assert_eq!(got.data.len(), BIG_LEN);
    assert_eq!(got.data, pattern(BIG_LEN, 3));

    // A request of 1,000 bytes goes out in RMPP segments and comes back whole.
    let sent = pattern(1_000, 1);
    let echo = c.vendor_set(&v, lid_b, 0x20, 0, &sent).unwrap();
    assert_eq!(echo.data, sent);

    // Async, with a short request: the answer is one MAD (216 bytes of data).
    let small = c
        .vendor_call_async(&v, lid_b, Method::Get, 0x21, 0, &[9])
        .unwrap();
    let small = small.wait().unwrap();
    assert_eq!((small.data.len(), small.data[0]), (216, 9));
    // The answer's data parsed as an attribute (here ClassPortInfo, echoed back).
    let cpi: ClassPortInfo = c
        .vendor_get(&v, lid_b, ClassPortInfo::ID, 0, &[])
        .unwrap()
        .attr()
        .unwrap();
    assert_eq!(cpi, ClassPortInfo::decode(&[0; 216]).unwrap());

    // The OUI is on the wire: the same class with another OUI reaches no agent, and
    // the port answers it unsupported (as the kernel's MAD layer does).
    let other = Vendor::range2(0x31, 1, 0x00_14_05)
        .unwrap()
        .with_rmpp()
        .unwrap();
    let err = c.vendor_get(&other, lid_b, 0x10, 0, &[]).unwrap_err();
    assert!(
        matches!(
            err,
            vmad::Error::MadStatus {
                class: 0x31,
                status: 0x000c,
                ..
            }
        ),
        "{err}"
    );
    // An attribute the responder leaves unanswered: ETIMEDOUT after one attempt of
    // 50 ms (a client of its own: `c` waits as long as the defaults say).
    let config = ClientConfig {
        timeout_ms: 50,
        retries: 0,
        ..ClientConfig::default()
    };
    let quick = Client::open_with(&a, 1, PortConfig::default(), config).unwrap();
    let err = quick.vendor_get(&v, lid_b, SILENT, 0, &[]).unwrap_err();
    assert_eq!(err.errno(), ETIMEDOUT, "{err}");
    // Without RMPP, more than one MAD's data is refused.
    let plain = Vendor::range2(0x31, 1, OUI).unwrap();
    assert_eq!(
        c.vendor_get(&plain, lid_b, 0x10, 0, &[0; 217])
            .unwrap_err()
            .errno(),
        EMSGSIZE
    );
    assert_eq!(
        Vendor::range2(0x31, 1, 1 << 24).unwrap_err().errno(),
        EINVAL
    );
    // What the responder was sent: each request's data, the RMPP one whole.
    assert_eq!(server.join().unwrap(), vec![216, 1_000, 216, 216, 216]);
    drop((c, quick));
    umad::close_port(id).unwrap();
    f.unregister();
}

/// A raw agent for Get of vendor class 0x32 (no RMPP in the port: the test writes
/// the segments and the ABORT itself).
fn raw_get_agent(port: &Port) -> AgentId {
    port.register(AgentSpec {
        qp: Qp::Gsi,
        mgmt_class: 0x32.into(),
        class_version: 1,
        rmpp_version: 0,
        method_mask: [1 << Method::Get.raw(), 0],
        oui: OUI,
        user_rmpp: false,
    })
    .unwrap()
}

/// Runs `call` on `c` and asserts it fails with ECONNABORTED and the ABORT's status
/// (127) within a 2-minute guard, far beyond the ABORT's milliseconds and far short
/// of the request's 10-minute wait; gives the client back.
fn ends_at_the_abort(
    c: Client,
    call: impl FnOnce(&Client) -> vmad::Result<()> + Send + 'static,
) -> Client {
    let (tx, rx) = std::sync::mpsc::channel();
    let asker = thread::spawn(move || {
        tx.send(call(&c)).unwrap();
        c
    });
    let err = rx
        .recv_timeout(Duration::from_secs(120))
        .expect("the request did not end at the ABORT")
        .unwrap_err();
    let c = asker.join().unwrap();
    assert_eq!(err.errno(), ECONNABORTED, "{err}");
    assert!(
        matches!(err, vmad::Error::RmppAborted { status: 127 }),
        "{err}"
    );
    c
}

/// A responder that starts an RMPP answer and then ABORTs it (a raw agent: the port
/// runs no RMPP for it, so it writes the segments itself): the request fails with
/// ECONNABORTED and the ABORT's status at the ABORT, not at the end of its wait.
#[test]
fn an_aborted_rmpp_answer_is_econnaborted() {
    let (f, a, b) = fabric("r", None);
    let lid_b = f.lid(&b, 1).unwrap();
    let (id, port) = umad::open(&b, 1).unwrap();
    let agent = raw_get_agent(&port);
    let server = thread::spawn(move || {
        let Event::Recv { addr, mad: req, .. } = port.recv(Some(Duration::from_secs(60))).unwrap()
        else {
            panic!("not a request");
        };
        let to = MadAddr {
            qkey: GSI_QKEY,
            ..addr
        };
        let send = |m: &[u8]| {
            let req = SendRequest {
                addr: to,
                mad: m,
                timeout_ms: 0,
                retries: 0,
            };
            port.send(agent, req).unwrap();
        };
        // Segment 1 of 3 (PayloadLength: the whole message's data), then ABORT.
        let mut seg = req[..256].to_vec();
        mad::Packet::new_unchecked(&mut seg[..]).set_method(Method::GetResp);
        let mut r = rmpp::Packet::new_unchecked(&mut seg[..]);
        r.set_rmpp_version(rmpp::VERSION);
        r.set_rmpp_type(rmpp::RmppType::Data);
        r.set_resp_time_flags(rmpp::RESP_TIME_NONE, rmpp::FLAG_ACTIVE | rmpp::FLAG_FIRST);
        r.set_seg_num(1);
        r.set_paylen_newwin(3 * rmpp::SEGMENT_PAYLOAD as u32);
        send(&seg);
        let mut r = rmpp::Packet::new_unchecked(&mut seg[..]);
        r.set_rmpp_type(rmpp::RmppType::Abort);
        r.set_resp_time_flags(rmpp::RESP_TIME_NONE, rmpp::FLAG_ACTIVE);
        r.set_rmpp_status(rmpp::RmppStatus::Unspecified);
        r.set_seg_num(0);
        r.set_paylen_newwin(0);
        send(&seg);
        port
    });
    // One attempt of 10 minutes, which the ABORT ends. A request that ended only
    // with its wait would fail the guard below (2 minutes, far beyond the ABORT's
    // milliseconds and far short of the wait) instead of passing 10 minutes later.
    let config = ClientConfig {
        timeout_ms: 600_000,
        retries: 0,
        ..ClientConfig::default()
    };
    let c = Client::open_with(&a, 1, PortConfig::default(), config).unwrap();
    let v = Vendor::range2(0x32, 1, OUI).unwrap().with_rmpp().unwrap();
    let c = ends_at_the_abort(c, move |c| {
        c.vendor_get(&v, lid_b, 0x10, 0, &[]).map(|_| ())
    });
    let port = server.join().unwrap();
    drop((c, port));
    umad::close_port(id).unwrap();
    f.unregister();
}

/// A responder that ABORTs an RMPP *request* while it is still being sent (a raw
/// agent: it sees segment 1 and answers it with an ABORT, R bit flipped as the
/// kernel writes one): the request fails with ECONNABORTED at the ABORT. The
/// kernel would end that send unreported and the call would wait for ever.
#[test]
fn an_rmpp_request_aborted_mid_send_is_econnaborted() {
    let (f, a, b) = fabric("q", None);
    let lid_b = f.lid(&b, 1).unwrap();
    let (id, port) = umad::open(&b, 1).unwrap();
    let agent = raw_get_agent(&port);
    let server = thread::spawn(move || {
        let Event::Recv {
            addr, mad: seg1, ..
        } = port.recv(Some(Duration::from_secs(60))).unwrap()
        else {
            panic!("not a request");
        };
        let mut abort = seg1[..256].to_vec();
        assert_eq!(
            rmpp::Packet::new_unchecked(&abort[..]).seg_num(),
            1,
            "segment 1 of the request"
        );
        mad::Packet::new_unchecked(&mut abort[..]).set_method(Method::GetResp);
        let mut r = rmpp::Packet::new_unchecked(&mut abort[..]);
        r.set_rmpp_type(rmpp::RmppType::Abort);
        r.set_resp_time_flags(rmpp::RESP_TIME_NONE, rmpp::FLAG_ACTIVE);
        r.set_rmpp_status(rmpp::RmppStatus::Unspecified);
        r.set_seg_num(0);
        r.set_paylen_newwin(0);
        let req = SendRequest {
            addr: MadAddr {
                qkey: GSI_QKEY,
                ..addr
            },
            mad: &abort,
            timeout_ms: 0,
            retries: 0,
        };
        port.send(agent, req).unwrap();
        port
    });
    // One attempt of 10 minutes with retries left; the guard below (2 minutes)
    // fails a call that waits on instead of ending at the ABORT.
    let config = ClientConfig {
        timeout_ms: 600_000,
        retries: 2,
        ..ClientConfig::default()
    };
    let c = Client::open_with(&a, 1, PortConfig::default(), config).unwrap();
    let v = Vendor::range2(0x32, 1, OUI).unwrap().with_rmpp().unwrap();
    let data = vec![7u8; 2_000]; // 10 segments
    let c = ends_at_the_abort(c, move |c| {
        c.vendor_call(&v, lid_b, Method::Get, 0x10, 0, &data)
            .map(|_| ())
    });
    let port = server.join().unwrap();
    drop((c, port));
    umad::close_port(id).unwrap();
    f.unregister();
}

/// The SMA of a port protected by M_Key (protect bits 2: a Get without the key is
/// discarded and counted) answers only SMPs whose M_Key the client's table gives for
/// that target. `quick` (one attempt of 50 ms) sends what must go unanswered;
/// `c` (the defaults) what must be answered.
#[test]
fn m_key_per_target_reaches_the_sma() {
    const KEY: u64 = 0x1234_5678_9abc_def0;
    let mkey = MkeyConfig {
        key: KEY,
        protect_bits: 2,
    };
    let (f, a, b) = fabric("m", Some(mkey));
    let lid_b = f.lid(&b, 1).unwrap();
    let config = ClientConfig {
        timeout_ms: 50,
        retries: 0,
        ..ClientConfig::default()
    };
    let quick = Client::open_with(&a, 1, PortConfig::default(), config).unwrap();
    let c = Client::open(&a, 1).unwrap();
    let (to_b, by_route) = (Target::lid(lid_b), Target::dr(&[1, 2]));
    let violations = || f.port_counters(&b, 1).unwrap().mkey_violations;
    let before = violations();
    let err = quick.get::<PortInfo>(&to_b, 1).unwrap_err();
    assert_eq!(err.errno(), ETIMEDOUT, "{err}");
    assert_eq!(violations(), before + 1);

    c.set_m_key(&to_b, Some(KEY));
    assert_eq!(c.m_key(&to_b), KEY);
    let pi: PortInfo = c.get(&to_b, 1).unwrap();
    // Answered with the right key, PortInfo shows the M_Key.
    assert_eq!((pi.lid, pi.m_key), (lid_b, KEY));
    // The table is per target: the directed route to the same port has no key.
    assert_eq!(c.m_key(&by_route), 0);
    quick.set_m_key(&to_b, Some(KEY));
    let err = quick.get::<PortInfo>(&by_route, 1).unwrap_err();
    assert_eq!(err.errno(), ETIMEDOUT, "{err}");
    assert_eq!(violations(), before + 2);
    c.set_m_key(&by_route, Some(KEY));
    assert_eq!(c.get::<PortInfo>(&by_route, 1).unwrap().m_key, KEY);
    // Removed from the table: the default (0) again.
    quick.set_m_key(&to_b, None);
    assert_eq!(quick.m_key(&to_b), 0);
    let err = quick.get::<PortInfo>(&to_b, 1).unwrap_err();
    assert_eq!(err.errno(), ETIMEDOUT, "{err}");
    assert_eq!(violations(), before + 3);
    drop((c, quick));
    f.unregister();
}

/// The built-in SA (as OpenSM's) discards a request whose SM_Key is neither 0 nor its
/// own (OpenSM's default, 1), and shows a ServiceRecord's ServiceKey only to a
/// request carrying its SM_Key: the client's SM_Key for that SA is on the wire.
#[test]
fn sm_key_per_sa_reaches_the_sa() {
    use vmad::wire::sa::service_record;
    const SA_KEY: u64 = 1;
    let (f, a, _) = fabric("k", None);
    let config = ClientConfig {
        timeout_ms: 100,
        retries: 0,
        ..ClientConfig::default()
    };
    // `quick` sends the request that must go unanswered, `c` the others.
    let quick = Client::open_with(&a, 1, PortConfig::default(), config).unwrap();
    let c = Client::open(&a, 1).unwrap();
    let mut rec = service_record::Repr::template();
    rec.id = 0x1000_0000_0000_0001;
    rec.gid = [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x12, 0x34];
    rec.pkey = 0xffff;
    rec.lease = u32::MAX;
    rec.key = [0x5a; 16];
    let mask = service_record::comp::ID | service_record::comp::GID | service_record::comp::PKEY;
    c.sa_set(&rec, mask).unwrap();

    let mut q = service_record::Repr::template();
    q.id = rec.id;
    let sa_lid = c.port().attrs().sm_lid;
    let seen = |c: &Client| {
        c.sa_get_table(&q, service_record::comp::ID).map(|t| {
            assert_eq!(t.len(), 1);
            t.into_iter().next().unwrap().key
        })
    };
    assert_eq!(c.sm_key(sa_lid), 0);
    assert_eq!(seen(&c).unwrap(), [0; 16], "no SM_Key: the key is hidden");
    c.set_sm_key(sa_lid, Some(SA_KEY));
    assert_eq!(c.sm_key(sa_lid), SA_KEY);
    assert_eq!(seen(&c).unwrap(), [0x5a; 16], "the SA's SM_Key: shown");
    quick.set_sm_key(sa_lid, Some(0x0bad_cafe));
    let err = seen(&quick).unwrap_err();
    assert_eq!(err.errno(), ETIMEDOUT, "a wrong SM_Key is discarded: {err}");
    // The SA's ClassPortInfo is an SA request too: it carries the SM_Key.
    let sa = MgmtClass::SubnAdm.raw();
    let err = quick.class_port_info(sa, 2, sa_lid).unwrap_err();
    assert_eq!(err.errno(), ETIMEDOUT, "{err}");
    c.class_port_info(sa, 2, sa_lid).unwrap();
    // Another SA's key is not this one's.
    c.set_sm_key(sa_lid, None);
    c.set_sm_key(sa_lid.wrapping_add(1), Some(SA_KEY));
    assert_eq!(seen(&c).unwrap(), [0; 16]);
    drop((c, quick));
    f.unregister();
}
