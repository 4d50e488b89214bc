//! The demo fabric behind `--transport sim`: the library's default pair
//! ([`Fabric::default_builder`]), `vmadsim0` (LID 1, where the built-in SM and SA
//! run) and `vmadsim1` (LID 2) on switch `vmadsw0` (LID 3), the LIDs every other
//! user of the embedded subnet sees. The built-in SA answers SA queries; `vmadsim1`
//! runs two responders on vmad's own port API:
//!
//! - an ibping responder (class 0x32, OUI 00:14:05): GetResp with its node
//!   description;
//! - a bulk responder (class 0x33): an RMPP GetResp of AttributeModifier bytes.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use vmad::engine::{AgentId, AgentSpec, Event, SendRequest};
use vmad::port::{Port, PortConfig};
use vmad::subnet::{Fabric, FabricBuilder};
use vmad::types::{MadAddr, Qp};
use vmad::wire::mad::{self, MadStatus};
use vmad::wire::{rmpp, vendor};

use crate::Failure;

/// The CA the CLI uses by default.
pub(crate) const CLIENT_CA: &str = "vmadsim0";
/// The CA the responders run on.
pub(crate) const SERVER_CA: &str = "vmadsim1";
/// LID of `vmadsim1`, where `ping` goes by default.
pub(crate) const SERVER_LID: u16 = 2;
/// ibping's class: vendor range 2 + 2, OUI OpenIB.
pub(crate) const CLASS_PING: u8 = 0x32;
/// vmad's RMPP bench class (vendor range 2 + 3, OUI OpenIB).
pub(crate) const CLASS_BULK: u8 = 0x33;
pub(crate) use vmad::wire::vendor::OPENIB_OUI;
const GET: u8 = mad::Method::Get.raw();

/// Method mask with the given methods set.
fn mask(methods: &[u8]) -> [u64; 2] {
    let mut m = [0u64; 2];
    for &x in methods {
        m[usize::from(x / 64)] |= 1 << (x % 64);
    }
    m
}

/// Mark a MAD as an RMPP DATA transfer (the engine segments it).
fn set_rmpp_active(m: &mut [u8]) {
    let mut r = rmpp::Packet::new_unchecked(m);
    r.set_rmpp_version(rmpp::VERSION);
    r.set_rmpp_type(rmpp::RmppType::Data);
    r.set_resp_time_flags(rmpp::RESP_TIME_NONE, rmpp::FLAG_ACTIVE);
}

/// The pattern byte `i` of a bulk response.
pub(crate) fn bulk_byte(i: usize) -> u8 {
    (i * 7) as u8
}

/// The running demo fabric; dropping it stops the responders.
pub(crate) struct Demo {
    fabric: Fabric,
    port: Arc<Port>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

pub(crate) struct Agents {
    ping: AgentId,
    bulk: AgentId,
}

fn serve(
    port: &Port,
    spec_class: u8,
    version: u8,
    rmpp: bool,
    methods: &[u8],
    oui: u32,
) -> Result<AgentId, Failure> {
    Ok(port.register(AgentSpec {
        qp: Qp::Gsi,
        mgmt_class: spec_class.into(),
        class_version: version,
        rmpp_version: u8::from(rmpp),
        method_mask: mask(methods),
        oui,
        user_rmpp: false,
    })?)
}

impl Demo {
    /// Build the default pair and start the responders on `vmadsim1`.
    pub(crate) fn start() -> Result<Demo, Failure> {
        let fabric = Fabric::default_builder().build()?;
        let (_, port) = vmad::umad::open_with(SERVER_CA, 1, PortConfig::default())?;
        let agents = responders(&port)?;
        let stop = Arc::new(AtomicBool::new(false));
        let (p, s) = (port.clone(), stop.clone());
        let thread = std::thread::Builder::new()
            .name("vmad-demo".into())
            .spawn(move || respond_loop(&p, &s, &agents))?;
        Ok(Demo {
            fabric,
            port,
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for Demo {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        self.port.close();
        self.fabric.unregister();
    }
}

/// The ping and bulk responders (no SA) on `port`.
pub(crate) fn responders(port: &Port) -> Result<Agents, Failure> {
    Ok(Agents {
        ping: serve(port, CLASS_PING, 1, false, &[GET], OPENIB_OUI)?,
        bulk: serve(port, CLASS_BULK, 1, true, &[GET], OPENIB_OUI)?,
    })
}

/// Answer requests until `stop` is set or the port closes.
pub(crate) fn respond_loop(port: &Port, stop: &AtomicBool, agents: &Agents) {
    while !stop.load(Ordering::Relaxed) {
        match port.recv(Some(Duration::from_millis(20))) {
            Ok(Event::Recv { agent, addr, mad }) => {
                let reply = if agent == agents.ping {
                    Some(ping_reply(&mad, &port.attrs().ca_name))
                } else if agent == agents.bulk {
                    Some(bulk_reply(&mad))
                } else {
                    None
                };
                if let Some(r) = reply {
                    send_reply(port, agent, addr, &r);
                }
            }
            Ok(_) | Err(vmad::Error::TimedOut) => {}
            Err(_) => break,
        }
    }
}

fn send_reply(port: &Port, agent: AgentId, addr: MadAddr, mad: &[u8]) {
    // A failed reply is the requester's timeout, as on a real fabric.
    let _ = port.send(
        agent,
        SendRequest {
            addr,
            mad,
            timeout_ms: 0,
            retries: 0,
        },
    );
}

/// The request's header as a response's, `hdr` bytes of it.
fn response_header(req: &[u8], hdr: usize, status: u16) -> Vec<u8> {
    let mut r = req[..hdr.min(req.len())].to_vec();
    r.resize(hdr, 0);
    let mut h = mad::Packet::new_unchecked(&mut r[..]);
    h.set_method(h.method().response());
    h.set_status(MadStatus(status));
    r[rmpp::OFFSET..rmpp::END].fill(0);
    r
}

/// ibping's answer: the responder's name in the data.
fn ping_reply(req: &[u8], name: &str) -> Vec<u8> {
    let mut r = response_header(req, 256, 0);
    let text = &name.as_bytes()[..name.len().min(64)];
    vendor::Packet::new_unchecked(&mut r[..]).data_mut()[..text.len()].copy_from_slice(text);
    r
}

fn bulk_reply(req: &[u8]) -> Vec<u8> {
    let n = (mad::Packet::new_unchecked(req).attr_mod() as usize).min(1 << 24);
    let mut r = response_header(req, 40, 0);
    set_rmpp_active(&mut r);
    r.extend((0..n).map(bulk_byte));
    r
}

/// Build the subnet of the ibsim topology file `path` (its built-in SM sweeps it) and
/// register `ca` (default: the file's first CA) for the CLI to open; the registry keeps
/// the fabric alive.
pub(crate) fn topology(path: &str, ca: Option<&str>) -> Result<String, Failure> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        Failure::new(
            crate::exit::Exit::NoInput,
            format!("VMAD_SIM_TOPO={path}: {e}"),
        )
    })?;
    let builder = FabricBuilder::from_topology(&text)?;
    let ca = match ca {
        Some(ca) => ca.to_owned(),
        None => builder
            .ca_names()
            .into_iter()
            .next()
            .ok_or_else(|| Failure::usage(format!("{path} has no CA")))?,
    };
    builder.register_only(&[&ca]).build()?;
    Ok(ca)
}
