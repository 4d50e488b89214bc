//! Building request MADs and running one request/response exchange.

use std::time::{Duration, Instant};

use vmad::engine::{AgentId, AgentSpec, Event, SendRequest};
use vmad::port::Port;
use vmad::types::{MadAddr, Qp, GSI_QKEY};
use vmad::wire::{mad, rmpp, smp, vendor};

use crate::Failure;

pub(crate) const GET: u8 = 0x01;
pub(crate) const GET_TABLE: u8 = 0x12;
pub(crate) const CLASS_SA: u8 = 0x03;
pub(crate) const CLASS_DR: u8 = 0x81;
pub(crate) const CLASS_LID: u8 = 0x01;
/// ibping's class: vendor range 2 + 2, OUI OpenIB.
pub(crate) const CLASS_PING: u8 = 0x32;
/// vmad's RMPP bench class (vendor range 2 + 3, OUI OpenIB).
pub(crate) const CLASS_BULK: u8 = 0x33;
pub(crate) use vmad::wire::vendor::OPENIB_OUI;

pub(crate) const ATTR_NODE_DESC: u16 = 0x0010;
pub(crate) const ATTR_NODE_INFO: u16 = 0x0011;
pub(crate) const ATTR_PORT_INFO: u16 = 0x0015;
pub(crate) const ATTR_NODE_RECORD: u16 = 0x0011;
pub(crate) const ATTR_PATH_RECORD: u16 = 0x0035;

/// Method mask with the given methods set.
pub(crate) fn mask(methods: &[u8]) -> [u64; 2] {
    let mut m = [0u64; 2];
    for &x in methods {
        m[usize::from(x / 64)] |= 1 << (x % 64);
    }
    m
}

/// A client-only agent.
pub(crate) fn client(
    port: &Port,
    class: u8,
    version: u8,
    rmpp: bool,
    oui: u32,
) -> Result<AgentId, Failure> {
    Ok(port.register(AgentSpec {
        qp: Qp::for_class(class),
        mgmt_class: class.into(),
        class_version: version,
        rmpp_version: u8::from(rmpp),
        method_mask: [0; 2],
        oui,
        user_rmpp: false,
    })?)
}

/// A 256-byte request: common header, and the OUI for vendor range 2.
pub(crate) fn request(
    class: u8,
    version: u8,
    method: u8,
    attr: u16,
    attr_mod: u32,
    tid: u32,
) -> Vec<u8> {
    let mut m = vec![0u8; 256];
    mad::Repr {
        base_version: mad::BASE_VERSION,
        mgmt_class: mad::MgmtClass::from(class),
        class_version: version,
        method: mad::Method::from(method),
        status: mad::MadStatus::OK,
        class_specific: 0,
        tid: u64::from(tid),
        attr_id: attr,
        attr_mod,
    }
    .emit(&mut mad::Packet::new_unchecked(&mut m[..]));
    if vendor::is_vendor_range2(class) {
        vendor::Packet::new_unchecked(&mut m[..]).set_oui(OPENIB_OUI);
    }
    m
}

/// Mark a MAD as an RMPP DATA transfer (the engine segments it).
pub(crate) fn set_rmpp_active(m: &mut [u8]) {
    let mut r = rmpp::Packet::new_unchecked(m);
    r.set_rmpp_version(rmpp::VERSION);
    r.set_rmpp_type(rmpp::RmppType::Data);
    r.set_resp_time_flags(rmpp::RESP_TIME_NONE, rmpp::FLAG_ACTIVE);
}

/// A directed-route SMP Get along `path` (out ports, hop 1 first).
pub(crate) fn dr_get(attr: u16, attr_mod: u32, path: &[u8], tid: u32) -> Vec<u8> {
    let mut m = request(CLASS_DR, 1, GET, attr, attr_mod, tid);
    let mut dr = smp::DirectedRoute {
        hop_count: path.len() as u8,
        ..smp::DirectedRoute::default()
    };
    dr.initial_path[1..=path.len()].copy_from_slice(path);
    smp::Repr {
        m_key: 0,
        data: [0; smp::DATA_LEN],
        dr: Some(dr),
    }
    .emit(&mut smp::Packet::new_unchecked(&mut m[..]));
    m
}

/// The address of QP1 (GSI) at `lid`.
pub(crate) fn gsi(lid: u16) -> MadAddr {
    MadAddr {
        qpn: 1,
        qkey: GSI_QKEY,
        lid,
        ..MadAddr::default()
    }
}

/// The LID of the port's SM, where its SA answers, asked of the fabric again until an
/// SM has set it: a port opened while the SM is still coming up has none yet, and the
/// fabric may not say when it gets one (ibsim does not). Waits up to `wait`.
pub(crate) fn sm_lid(port: &Port, wait: Duration) -> Result<u16, Failure> {
    let deadline = Instant::now() + wait;
    loop {
        let lid = port.refresh_attrs()?.sm_lid;
        if lid != 0 {
            return Ok(lid);
        }
        if Instant::now() >= deadline {
            return Err(Failure::timeout(format!(
                "no SM has set this port's SM LID within {} ms (is a subnet manager running?); \
                 --sa-lid names the SA's LID",
                wait.as_millis()
            )));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The permissive destination of a directed-route SMP.
pub(crate) fn smi_dr() -> MadAddr {
    MadAddr {
        qpn: 0,
        lid: 0xffff,
        ..MadAddr::default()
    }
}

/// The address of QP0 (SMI) at `lid`.
pub(crate) fn smi(lid: u16) -> MadAddr {
    MadAddr {
        qpn: 0,
        lid,
        ..MadAddr::default()
    }
}

/// Send one request and wait for its response (or its timeout report).
/// Returns the response bytes (a whole reassembled RMPP message for RMPP agents).
pub(crate) fn transact(
    port: &Port,
    agent: AgentId,
    addr: MadAddr,
    mad: &[u8],
    timeout_ms: u32,
    retries: u32,
) -> Result<Vec<u8>, Failure> {
    port.send(
        agent,
        SendRequest {
            addr,
            mad,
            timeout_ms,
            retries,
        },
    )?;
    let tid = low_tid(mad);
    // The engine reports a timeout itself; this bound only catches a wedged port.
    let limit = Duration::from_millis(u64::from(timeout_ms) * u64::from(retries + 1) + 5000);
    let start = Instant::now();
    loop {
        let left = limit
            .checked_sub(start.elapsed())
            .ok_or_else(|| Failure::timeout("no answer and no timeout report"))?;
        match port.recv(Some(left))? {
            Event::Recv { agent: a, mad, .. } if a == agent && low_tid(&mad) == tid => {
                return Ok(mad)
            }
            Event::SendTimedOut {
                agent: a, header, ..
            } if a == agent && low_tid(&header) == tid => {
                return Err(Failure::timeout(format!(
                    "timed out after {} attempt(s) of {timeout_ms} ms",
                    retries + 1
                )))
            }
            _ => {}
        }
    }
}

/// The low 32 bits of a MAD's TID (the high word is the agent's).
pub(crate) fn low_tid(m: &[u8]) -> u32 {
    mad::Packet::new_checked(m).map_or(0, |p| p.tid() as u32)
}

/// MAD status, 16 bits (the D bit of DR SMPs masked off).
pub(crate) fn status(m: &[u8]) -> u16 {
    smp::Packet::new_unchecked(m).smp_status().0
}

/// A NodeDescription as text (NUL-terminated, at most 64 bytes).
pub(crate) fn desc_text(b: &[u8]) -> String {
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    String::from_utf8_lossy(&b[..end]).into_owned()
}
