//! The SM role: `umad_get_issm_path`, and what opening that path does.
//!
//! On a kernel, opening `/dev/infiniband/issmN` sets PortInfo:CapabilityMask.IsSM on
//! the port and closing it clears it; that open is how OpenSM takes the SM role.
//! vmad's transports have no such device, and a library cannot see a program's
//! `open(2)` calls. So the issm path is an empty file of this process's own
//! (`$XDG_RUNTIME_DIR/vmad/issm-<pid>-<ca>-<port>`, else under
//! `/tmp/vmad-<uid>/`), watched with inotify: its first open takes the role
//! ([`crate::port::Port::set_sm`] → [`crate::transport::Transport::set_sm`]), its
//! last close gives it up. The wish is remembered per CA port, so the order of
//! `umad_open_port` and the issm open does not matter, and a port opened later while
//! the file is held takes the role when it opens. inotify merges repeated events, so
//! an event only says "look again": the opens are counted in `/proc/self/fd`.
//!
//! Differences from the kernel's device, which a file cannot give: a second open
//! while the role is held succeeds instead of blocking (or failing EAGAIN with
//! `O_NONBLOCK`); the role is held until the last open closes. Across processes the
//! fabric decides (ibsim allows one SM client per node and refuses the second).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};

use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify, WatchDescriptor};

use super::{get_ca, get_port, ports, Port};
use crate::{Error, Result};

/// A CA port: (CA name, port number).
type PortKey = (String, u8);

#[derive(Default)]
struct Roles {
    /// Watched issm files: watch → (port, its file, held open when last looked).
    watches: BTreeMap<WatchDescriptor, (PortKey, PathBuf, bool)>,
    /// Paths already watched, so a second `get_issm_path` reuses the watch.
    paths: BTreeMap<PortKey, PathBuf>,
    /// Ports whose issm file is held open: they should hold the SM role.
    wanted: BTreeMap<PortKey, bool>,
}

static ROLES: Mutex<Option<Roles>> = Mutex::new(None);
static WATCHER: OnceLock<std::result::Result<Arc<Inotify>, String>> = OnceLock::new();

fn roles() -> MutexGuard<'static, Option<Roles>> {
    ROLES.lock().unwrap_or_else(PoisonError::into_inner)
}

/// `umad_get_issm_path`: the file whose open takes the SM role on port `port` of `ca`
/// (`""`: the first CA; port 0: its first active port). See the module docs.
///
/// # Errors
/// ENODEV for an unknown CA or port; EIO if the file or its watch cannot be made.
pub fn get_issm_path(ca: &str, port: u8) -> Result<PathBuf> {
    let info = get_ca(ca)?;
    let port_num = get_port(&info.name, port)?.port_num;
    let key = (info.name, port_num);
    if let Some(path) = roles().as_ref().and_then(|r| r.paths.get(&key)) {
        return Ok(path.clone());
    }
    let dir = runtime_dir();
    std::fs::create_dir_all(&dir)?;
    let path = dir.join(format!("issm-{}-{}-{}", std::process::id(), key.0, key.1));
    // Made before the watch, so that making it is not seen as an open.
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)?;
    // As /proc/self/fd shows it (a symlinked runtime directory would not compare equal).
    let path = std::fs::canonicalize(&path)?;
    let inotify = watcher()?;
    let wd = inotify
        .add_watch(
            &path,
            AddWatchFlags::IN_OPEN | AddWatchFlags::IN_CLOSE | AddWatchFlags::IN_DELETE_SELF,
        )
        .map_err(|e| Error::Io(e.into()))?;
    let mut guard = roles();
    let r = guard.get_or_insert_with(Roles::default);
    r.watches
        .entry(wd)
        .or_insert((key.clone(), path.clone(), false));
    r.paths.insert(key, path.clone());
    Ok(path)
}

fn runtime_dir() -> PathBuf {
    match std::env::var_os("XDG_RUNTIME_DIR").filter(|d| !d.is_empty()) {
        Some(d) => PathBuf::from(d).join("vmad"),
        None => std::env::temp_dir().join(format!("vmad-{}", nix::unistd::getuid())),
    }
}

/// The process's inotify instance and its thread, started once.
fn watcher() -> Result<Arc<Inotify>> {
    let made = WATCHER.get_or_init(|| {
        let inotify = Inotify::init(InitFlags::IN_CLOEXEC).map_err(|e| e.to_string())?;
        let inotify = Arc::new(inotify);
        let reader = inotify.clone();
        std::thread::Builder::new()
            .name("vmad-issm".into())
            .spawn(move || watch(&reader))
            .map_err(|e| e.to_string())?;
        Ok(inotify)
    });
    made.clone()
        .map_err(|e| Error::Io(std::io::Error::other(format!("inotify: {e}"))))
}

/// The watcher thread: counts the opens of each issm file and moves the role.
fn watch(inotify: &Inotify) {
    loop {
        let events = match inotify.read_events() {
            Ok(ev) => ev,
            Err(nix::errno::Errno::EINTR) => continue,
            Err(_e) => {
                vmad_debug!(target: "vmad::umad", error = %_e, "issm watch ended");
                return;
            }
        };
        for ev in events {
            if let Some((key, on)) = count(ev.wd, ev.mask) {
                apply(&key, on);
            }
        }
    }
}

/// Look again at the file an event was about; `Some` when it went from closed to open
/// or back.
fn count(wd: WatchDescriptor, mask: AddWatchFlags) -> Option<(PortKey, bool)> {
    let path = {
        let guard = roles();
        guard.as_ref()?.watches.get(&wd)?.1.clone()
    };
    let held = held_open(&path);
    let mut guard = roles();
    let r = guard.as_mut()?;
    let (key, _, was) = r.watches.get_mut(&wd)?;
    let key = key.clone();
    let changed = std::mem::replace(was, held) != held;
    if mask.contains(AddWatchFlags::IN_DELETE_SELF) {
        r.paths.remove(&key);
    }
    if !changed {
        return None;
    }
    r.wanted.insert(key.clone(), held);
    Some((key, held))
}

/// Whether a descriptor of this process has `path` open.
fn held_open(path: &std::path::Path) -> bool {
    let Ok(fds) = std::fs::read_dir("/proc/self/fd") else {
        return false;
    };
    fds.flatten()
        .any(|fd| std::fs::read_link(fd.path()).is_ok_and(|target| target == path))
}

/// Give the role to (or take it from) the port `key` if this process has it open.
fn apply(key: &PortKey, on: bool) {
    let open = ports()
        .open
        .values()
        .find(|p| {
            let a = p.attrs();
            a.ca_name == key.0 && a.port_num == key.1 && p.is_open()
        })
        .cloned();
    if let Some(port) = open {
        set(&port, key, on);
    }
}

fn set(port: &Port, key: &PortKey, on: bool) {
    match port.set_sm(on) {
        Ok(()) => {
            vmad_debug!(target: "vmad::umad", ca = %key.0, port = key.1, on, "SM role");
        }
        Err(e) => {
            // No caller to return it to: the open(2) already succeeded. Say it once.
            eprintln!(
                "vmad: {} port {}: cannot {} the SM role: {e}",
                key.0,
                key.1,
                if on { "take" } else { "give up" }
            );
        }
    }
}

/// A port was just opened: if it is the port's first open and its issm file is held,
/// it takes the role now.
pub(super) fn opened(port: &Port) {
    if port.opens() != 1 {
        return;
    }
    let a = port.attrs();
    let key = (a.ca_name.clone(), a.port_num);
    let wanted = roles()
        .as_ref()
        .is_some_and(|r| r.wanted.get(&key).copied().unwrap_or(false));
    if wanted {
        set(port, &key, true);
    }
}
