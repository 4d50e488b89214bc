//! The SM role follows the issm file: its first open takes it, its last close gives it
//! up, whichever comes first of the port's open and the file's (`umad_get_issm_path`).

use std::sync::Arc;
use std::time::Duration;

use crossbeam_channel::Sender;
use vmad::transport::registry::{self, CaInfo, CaProvider};
use vmad::transport::{PortAttrs, Transport};
use vmad::umad;

use crate::test_transport::Mortal;

/// A CA whose port reports its `set_sm` calls on `roles`.
struct RoleCa {
    roles: Sender<bool>,
}

impl RoleCa {
    fn attrs(name: &str) -> PortAttrs {
        Mortal::new(name).0.attrs().clone()
    }
}

impl CaProvider for RoleCa {
    fn ca_info(&self, name: &str) -> Option<CaInfo> {
        Some(CaInfo {
            name: name.into(),
            node_type: 1,
            node_guid: 1,
            system_guid: 1,
            fw_ver: String::new(),
            ca_type: String::new(),
            hw_ver: String::new(),
            ports: vec![RoleCa::attrs(name)],
        })
    }

    fn open(&self, name: &str, _port: u8) -> vmad::Result<Box<dyn Transport>> {
        let (mut t, _kill) = Mortal::new(name);
        t.roles = Some(self.roles.clone());
        Ok(Box::new(t))
    }
}

/// How long the issm watcher may take to see an open or a close: a hang guard,
/// generous for a loaded machine; it answers in microseconds.
const WAIT: Duration = Duration::from_secs(60);

#[test]
fn opening_the_issm_path_takes_the_sm_role_and_closing_it_gives_it_up() {
    let (tx, rx) = crossbeam_channel::unbounded();
    registry::register_cas(&["smrole0".into()], Arc::new(RoleCa { roles: tx })).unwrap();
    let path = umad::get_issm_path("smrole0", 1).unwrap();
    assert_eq!(
        umad::get_issm_path("smrole0", 1).unwrap(),
        path,
        "one file per port"
    );
    assert!(path.to_string_lossy().contains("smrole0"), "{path:?}");

    // Port first, then the file (OpenSM's order).
    let id = umad::open_port("smrole0", 1).unwrap();
    assert!(
        rx.try_recv().is_err(),
        "opening the port alone takes no role"
    );
    let f = std::fs::File::open(&path).unwrap();
    assert_eq!(rx.recv_timeout(WAIT), Ok(true), "the open took the role");
    // A second open of the file changes nothing; the last close gives it up.
    let g = std::fs::File::open(&path).unwrap();
    drop(f);
    drop(g);
    assert_eq!(
        rx.recv_timeout(WAIT),
        Ok(false),
        "the last close gave it up"
    );
    assert!(rx.try_recv().is_err(), "exactly one take and one give-up");
    umad::close_port(id).unwrap();

    // File first, then the port: the port takes the role, whether the watcher sees the
    // file's open before the port opens (the port takes it as it opens) or after (the
    // watcher gives it to the open port).
    let f = std::fs::File::open(&path).unwrap();
    let id = umad::open_port("smrole0", 1).unwrap();
    assert_eq!(rx.recv_timeout(WAIT), Ok(true), "the port took the role");
    // Now the watcher has seen the open: a port opened while the file is held takes the
    // role as it opens, before open_port returns (closing gives nothing up: the file
    // still holds the wish).
    umad::close_port(id).unwrap();
    let id = umad::open_port("smrole0", 1).unwrap();
    assert_eq!(
        rx.try_recv(),
        Ok(true),
        "the port took the role as it opened"
    );
    drop(f);
    assert_eq!(rx.recv_timeout(WAIT), Ok(false));
    umad::close_port(id).unwrap();
    registry::unregister_ca("smrole0");
}

/// A `Umad` handle of its own watches its own issm files: the role moves on the port it
/// opened, through a CA the process-wide instance does not know.
#[test]
fn a_umad_handles_issm_file_moves_the_role_on_its_own_port() {
    let (tx, rx) = crossbeam_channel::unbounded();
    let registry = Arc::new(umad::Registry::new());
    registry
        .register_cas(&["smhnd0".into()], Arc::new(RoleCa { roles: tx }))
        .unwrap();
    let own = umad::Umad::new(registry);
    assert!(umad::get_ca("smhnd0").is_err());
    let path = own.get_issm_path("smhnd0", 1).unwrap();
    let id = own.open_port("smhnd0", 1).unwrap();
    let f = std::fs::File::open(&path).unwrap();
    assert_eq!(rx.recv_timeout(WAIT), Ok(true), "the open took the role");
    drop(f);
    assert_eq!(rx.recv_timeout(WAIT), Ok(false), "the close gave it up");
    own.close_port(id).unwrap();
    drop(own);
    let _ = std::fs::remove_file(path);
}
