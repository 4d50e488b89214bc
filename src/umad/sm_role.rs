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
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError, Weak};

use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify, WatchDescriptor};

use super::{Inner, Port, Umad};
use crate::{Error, Result};

/// A CA port: (CA name, port number).
type PortKey = (String, u8);

#[derive(Default)]
struct Wishes {
    /// Watched issm files: watch → (port, its file, held open when last looked).
    watches: BTreeMap<WatchDescriptor, (PortKey, PathBuf, bool)>,
    /// Paths already watched, so a second `get_issm_path` reuses the watch.
    paths: BTreeMap<PortKey, PathBuf>,
    /// Ports whose issm file is held open: they should hold the SM role.
    wanted: BTreeMap<PortKey, bool>,
}

/// A [`Umad`]'s SM roles: the issm files it handed out, and an inotify instance
/// watching them (started by the first), whose thread ends with the instance.
#[derive(Default)]
pub(super) struct Roles {
    wishes: Mutex<Wishes>,
    watcher: OnceLock<std::result::Result<Arc<Inotify>, String>>,
}

impl Roles {
    fn wishes(&self) -> MutexGuard<'_, Wishes> {
        self.wishes.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A port was just opened: if it is the port's first open and its issm file is
    /// held, it takes the role now.
    pub(super) fn opened(&self, port: &Port) {
        if port.opens() != 1 {
            return;
        }
        let a = port.attrs();
        let key = (a.ca_name.clone(), a.port_num);
        let wanted = self.wishes().wanted.get(&key).copied().unwrap_or(false);
        if wanted {
            set(port, &key, true);
        }
    }
}

impl Drop for Roles {
    fn drop(&mut self) {
        // Removing the watches wakes the watcher thread, which then finds its instance
        // gone and ends.
        if let Some(Ok(inotify)) = self.watcher.get() {
            let watches = std::mem::take(&mut self.wishes().watches);
            for wd in watches.into_keys() {
                let _ = inotify.rm_watch(wd);
            }
        }
    }
}

impl Umad {
    /// `umad_get_issm_path`: the file whose open takes the SM role on port `port` of
    /// `ca` (`""`: the first CA; port 0: its first active port). It is an empty file of
    /// this process's, watched: its first open (by anyone in this process) gives the
    /// role to this instance's open port there, now or when it opens, and its last
    /// close takes it back. On a CA whose provider has a real issm device (the kernel
    /// transport) that device's path.
    ///
    /// # Errors
    /// ENODEV for an unknown CA or port; EIO if the file or its watch cannot be made.
    pub fn get_issm_path(&self, ca: &str, port: u8) -> Result<PathBuf> {
        let info = self.get_ca(ca)?;
        let port_num = self.get_port(&info.name, port)?.port_num;
        // A CA with a real issm device (the kernel transport's) names it: nothing to watch.
        if let Some(real) = self.registry().issm_path(&info.name, port_num)? {
            return Ok(real);
        }
        issm_file(&self.0, (info.name, port_num))
    }
}

/// The watched issm file of CA port `key`, made (and watched) on first call.
fn issm_file(umad: &Arc<Inner>, key: PortKey) -> Result<PathBuf> {
    let roles = &umad.roles;
    if let Some(path) = roles.wishes().paths.get(&key) {
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
    let inotify = watcher(umad)?;
    let wd = inotify
        .add_watch(
            &path,
            AddWatchFlags::IN_OPEN | AddWatchFlags::IN_CLOSE | AddWatchFlags::IN_DELETE_SELF,
        )
        .map_err(|e| Error::Io(e.into()))?;
    let mut r = roles.wishes();
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

/// The instance's inotify instance and its thread, started once.
fn watcher(umad: &Arc<Inner>) -> Result<Arc<Inotify>> {
    let made = umad.roles.watcher.get_or_init(|| {
        let inotify = Inotify::init(InitFlags::IN_CLOEXEC).map_err(|e| e.to_string())?;
        let inotify = Arc::new(inotify);
        let reader = inotify.clone();
        let owner = Arc::downgrade(umad);
        std::thread::Builder::new()
            .name("vmad-issm".into())
            .spawn(move || watch(&reader, &owner))
            .map_err(|e| e.to_string())?;
        Ok(inotify)
    });
    made.clone()
        .map_err(|e| Error::Io(std::io::Error::other(format!("inotify: {e}"))))
}

/// The watcher thread: counts the opens of each issm file and moves the role, until
/// its instance is gone.
fn watch(inotify: &Inotify, owner: &Weak<Inner>) {
    loop {
        let events = match inotify.read_events() {
            Ok(ev) => ev,
            Err(nix::errno::Errno::EINTR) => continue,
            Err(_e) => {
                vmad_debug!(target: "vmad::umad", error = %_e, "issm watch ended");
                return;
            }
        };
        let Some(umad) = owner.upgrade().map(Umad) else {
            return;
        };
        for ev in events {
            if let Some((key, on)) = count(&umad.0.roles, ev.wd, ev.mask) {
                apply(&umad, &key, on);
            }
        }
    }
}

/// Look again at the file an event was about; `Some` when it went from closed to open
/// or back.
fn count(roles: &Roles, wd: WatchDescriptor, mask: AddWatchFlags) -> Option<(PortKey, bool)> {
    let path = roles.wishes().watches.get(&wd)?.1.clone();
    let held = held_open(&path);
    let mut guard = roles.wishes();
    let r = &mut *guard;
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

/// Give the role to (or take it from) the port `key` if `umad` has it open.
fn apply(umad: &Umad, key: &PortKey, on: bool) {
    if let Some(port) = umad.open_on(&key.0, key.1) {
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
