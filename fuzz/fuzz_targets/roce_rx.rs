//! The RoCE v2 transport's receive path: a UDP datagram as `recv_from` returns it
//! (BTH, DETH, payload, pad, ICRC; from any source address and port), through the
//! transport's checks (runt, opcode, ICRC, MAD size, QP, Q_Key, P_Key) to the engine.
//! No panic; what is accepted is a 256-byte MAD in the datagram; a parsed datagram
//! re-emitted parses back to the same fields. One input byte chooses the port's
//! address family (IPv6: the ICRC is checked) and whether the harness recomputes
//! the ICRC after the fuzzer's changes (so mutations get past it).
#![no_main]

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use vmad::engine::Engine;
use vmad::transport::roce::codec::{self, Flow, Header};
use vmad::transport::roce::{RoceConfig, RoceTransport};
use vmad::wire::roce::{ICRC_LEN, UD_OVERHEAD};
use vmad::wire::MAD_SIZE;
use vmad_fuzz::*;

/// Ports bound once per process (on loopback, any free UDP port): only their
/// addresses and P_Keys are read.
struct Ports {
    v4: RoceTransport,
    v4_limited: RoceTransport,
    v6: Option<RoceTransport>,
}

fn ports() -> &'static Ports {
    static PORTS: OnceLock<Ports> = OnceLock::new();
    PORTS.get_or_init(|| {
        let open = |ip: IpAddr, pkey: u16| {
            let mut c = RoceConfig::new(ip);
            c.udp_port = 0;
            c.pkey = pkey;
            RoceTransport::open(c)
        };
        Ports {
            v4: open(Ipv4Addr::LOCALHOST.into(), 0xffff).expect("bind 127.0.0.1"),
            v4_limited: open(Ipv4Addr::LOCALHOST.into(), 0x0012).expect("bind 127.0.0.1"),
            // Loopback IPv6 may be off in a sandbox: the IPv4 ports still run.
            v6: open(Ipv6Addr::LOCALHOST.into(), 0xffff).ok(),
        }
    })
}

fuzz_target!(|data: &[u8]| {
    let mut b = Bytes(data);
    let sel = b.u8();
    let p = ports();
    let port = match sel & 3 {
        0 | 1 => p.v6.as_ref().unwrap_or(&p.v4),
        2 => &p.v4,
        _ => &p.v4_limited,
    };
    let local = port.local_addr();
    let src_ip = match local.ip() {
        IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::new(127, 0, 0, b.u8())),
        IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::from(u128::from(b.u32()))),
    };
    let from = SocketAddr::new(src_ip, b.u16());
    let flow = Flow {
        src: (from.ip(), from.port()),
        dst: (local.ip(), local.port()),
    };
    let mut d = b.0.to_vec();
    if sel & 4 != 0 && d.len() >= UD_OVERHEAD {
        let end = d.len() - ICRC_LEN;
        let crc = codec::icrc(&flow, &d[..end]);
        d[end..].copy_from_slice(&crc.to_le_bytes());
    }

    if let Some((range, meta)) = port.accept_for_fuzzing(&d, from) {
        assert_eq!(range.len(), MAD_SIZE);
        assert!(range.end <= d.len());
        let mut engine = Engine::new(config());
        agents(&mut engine);
        deliver(&mut engine, meta, &d[range]);
    }

    // The codec alone: what parses (ICRC checked) re-emits to the same fields.
    if let Ok(ud) = codec::parse(&d, Some(&flow)) {
        let payload = &d[ud.payload.clone()];
        let h = Header {
            pkey: ud.pkey,
            dest_qp: ud.dest_qp,
            psn: ud.psn,
            qkey: ud.qkey,
            src_qp: ud.src_qp,
        };
        let mut out = vec![0u8; payload.len() + 3 + UD_OVERHEAD];
        let n = codec::emit(&mut out, &h, payload, &flow);
        let back = codec::parse(&out[..n], Some(&flow)).expect("emitted datagram parses");
        assert_eq!(
            (back.pkey, back.dest_qp, back.psn, back.qkey, back.src_qp),
            (ud.pkey, ud.dest_qp, ud.psn, ud.qkey, ud.src_qp)
        );
        assert_eq!(&out[back.payload], payload);
    }
});
