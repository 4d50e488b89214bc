//! `vmad fabric`: the embedded managed subnet served to other processes.
//!
//! A [`Server`] hosts one [`crate::subnet::Fabric`] (a topology file's, or the default
//! pair) with its built-in SM, SA, SMAs and PMAs, and serves it to any number of
//! client processes over **ibsim's socket protocol** ([`crate::transport::ibsim::proto`],
//! the same message layouts vmad's own ibsim client uses): vmad's `ibsim` transport
//! (the Rust API, the `vmad` command, the drop-in `libibumad.so.3`) and
//! umad2sim-preloaded programs attach to it unchanged, by `IBSIM_SOCKNAME`.
//!
//! What it does that ibsim does not:
//!
//! - **The managed subnet itself**: SM, SA (GetTable over RMPP between vmad clients:
//!   segments are ordinary MADs on this protocol), PMAs counting real traffic.
//! - **Real timeouts**: a MAD the fabric drops (link down, injected loss, nobody to
//!   take it) is silence, as on a wire; ibsim echoes every drop back at once.
//! - **Any number of clients** (slots up to 65,535, not ten), several per CA port; a
//!   client that dies is freed without a word from it (its process is watched).
//! - **Control while running** over a second, filesystem socket ([`request`]): links
//!   down and up, faults per link, counters, status, wait until up, stop.
//! - **Isolation**: the control socket lives in a directory only its user can enter
//!   ([`runtime_dir`]); ibsim's sockets are abstract (umad2sim's protocol wants
//!   that), so the server answers only datagrams whose sender runs as its own user
//!   (SO_PASSCRED), and a client's data socket takes datagrams from that client alone.
//!
//! What it does not: clients attach to a CA's port 1 (ibsim: a node's first port),
//! never to a switch; ibsim's remote (UDP) mode is not served; requests to QPs
//! above 1 are not delivered (ibsim's CONNECT `qp`).

mod ctl_cmd;
mod link;
mod server;

use std::os::fd::OwnedFd;
use std::os::unix::net::{UnixDatagram, UnixListener};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};

pub use ctl_cmd::request;

use crate::subnet::Fabric;
use crate::transport::registry::{DefaultCas, Registry};
use crate::{Error, Result};

/// The environment variable naming a running server's control socket: set by
/// `eval "$(vmad fabric up FILE)"`, read by `vmad fabric ctl`/`down` and, with
/// `VMAD_TRANSPORT` unset, by the default transport choice (vmad's ibsim client
/// on `IBSIM_SOCKNAME`).
pub const ENV: &str = "VMAD_FABRIC";

/// Where this user's servers keep their control sockets: `$XDG_RUNTIME_DIR/vmad`,
/// else `$TMPDIR/vmad-<uid>` (`/tmp`), the directory of vmad's issm files too; created
/// mode 0700 (narrowed to 0700 if it is this user's and wider), and refused if another
/// user owns it.
///
/// # Errors
/// EIO if it cannot be created, or if it is not this user's alone.
pub fn runtime_dir() -> Result<PathBuf> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
    let uid = nix::unistd::getuid().as_raw();
    let dir = match std::env::var_os("XDG_RUNTIME_DIR").filter(|d| !d.is_empty()) {
        Some(d) => PathBuf::from(d).join("vmad"),
        None => std::env::temp_dir().join(format!("vmad-{uid}")),
    };
    match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e.into()),
    }
    let meta = std::fs::symlink_metadata(&dir)?;
    if meta.is_dir() && meta.uid() == uid && meta.permissions().mode() & 0o077 != 0 {
        // Ours, made wider by another part of vmad (the issm files' `create_dir_all`):
        // narrow it, as nothing in it is for other users.
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700))?;
    }
    let meta = std::fs::symlink_metadata(&dir)?;
    if !meta.is_dir() || meta.uid() != uid || meta.permissions().mode() & 0o077 != 0 {
        return Err(Error::Io(std::io::Error::new(
            std::io::ErrorKind::PermissionDenied,
            format!(
                "{}: not a directory of uid {uid} with mode 0700",
                dir.display()
            ),
        )));
    }
    Ok(dir)
}

/// How to start a [`Server`].
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// The server's name: its control socket is `<dir>/<name>.sock`, its ibsim
    /// sockets `vmad.<uid>.<name>:ctl`, `…:out<slot>`.
    pub name: String,
    /// The directory of the control socket (default: [`runtime_dir`]).
    pub dir: Option<PathBuf>,
    /// After a turn with work, the loop polls again without sleeping for this long
    /// (default: none, it sleeps in `poll` at once). On an idle machine each exchange
    /// with a client that keeps few MADs in flight otherwise waits for this thread's
    /// wake-up from an idle CPU; spinning spares that, at the cost of a core while
    /// clients are busy (docs/fabric.md).
    pub spin: Option<std::time::Duration>,
}

impl ServerConfig {
    /// A server named `name` in [`runtime_dir`].
    pub fn new(name: &str) -> ServerConfig {
        ServerConfig {
            name: name.into(),
            dir: None,
            spin: None,
        }
    }
}

/// What the server's threads share.
pub(crate) struct Shared {
    pub(crate) fabric: Fabric,
    pub(crate) sockname: String,
    pub(crate) default_ca: String,
    pub(crate) uid: u32,
    pub(crate) state: Mutex<server::State>,
    pub(crate) stop: AtomicBool,
    /// Written to wake the main loop (a stop, a client found dead).
    wake_tx: UnixDatagram,
    /// Control connections that asked to stop: closed last, so their `read` returns
    /// once everything is down.
    pub(crate) stoppers: Mutex<Vec<std::os::unix::net::UnixStream>>,
    /// `ctl hold`: the most MADs a client (one attached now or later) is handed.
    pub(crate) hold: std::sync::atomic::AtomicU64,
    /// [`ServerConfig::spin`].
    pub(crate) spin: Option<std::time::Duration>,
}

impl Shared {
    pub(crate) fn wake(&self) {
        let _ = self.wake_tx.send(&[1]);
    }
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A running fabric server: bound, not yet serving until [`Server::run`].
pub struct Server {
    shared: Arc<Shared>,
    ctl: OwnedFd,
    wake_rx: UnixDatagram,
    listener: UnixListener,
    path: PathBuf,
}

impl core::fmt::Debug for Server {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Server")
            .field("path", &self.path)
            .field("sockname", &self.shared.sockname)
            .finish_non_exhaustive()
    }
}

impl Server {
    /// Bind the sockets of a server for `fabric` (built with its SM's first sweep
    /// done: the subnet is up once this returns).
    ///
    /// # Errors
    /// EINVAL for a fabric without CAs or a bad name; EADDRINUSE if a server of that
    /// name runs; what [`runtime_dir`] refuses.
    pub fn bind(fabric: Fabric, config: &ServerConfig) -> Result<Server> {
        let name = &config.name;
        if name.is_empty()
            || name.len() > 40
            || !name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        {
            return Err(Error::InvalidArgument(
                "a fabric server name is 1 to 40 of [A-Za-z0-9_-]",
            ));
        }
        let default_ca = fabric
            .ca_names()
            .into_iter()
            .next()
            .ok_or(Error::InvalidArgument("the fabric has no CA to attach to"))?;
        let dir = match &config.dir {
            Some(d) => d.clone(),
            None => runtime_dir()?,
        };
        let uid = nix::unistd::getuid().as_raw();
        let sockname = format!("vmad.{uid}.{name}");
        // The abstract name is the lock: a second server of this name fails here,
        // before it touches the first one's control socket.
        let ctl = server::bind_ctl(&sockname)?;
        let path = dir.join(format!("{name}.sock"));
        let _ = std::fs::remove_file(&path);
        let listener = UnixListener::bind(&path)?;
        let (wake_tx, wake_rx) = UnixDatagram::pair()?;
        wake_rx.set_nonblocking(true)?;
        wake_tx.set_nonblocking(true)?;
        let shared = Arc::new(Shared {
            fabric,
            sockname,
            default_ca,
            uid,
            state: Mutex::default(),
            stop: AtomicBool::new(false),
            wake_tx,
            stoppers: Mutex::default(),
            hold: std::sync::atomic::AtomicU64::new(u64::MAX),
            spin: config.spin,
        });
        Ok(Server {
            shared,
            ctl,
            wake_rx,
            listener,
            path,
        })
    }

    /// The control socket's path (the value of [`ENV`]).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The `IBSIM_SOCKNAME` clients attach with.
    pub fn sockname(&self) -> &str {
        &self.shared.sockname
    }

    /// The environment clients need, as `sh` assignments.
    pub fn env(&self) -> String {
        env_lines(&self.path, &self.shared.sockname)
    }

    /// Serve until a `stop` arrives on the control socket; then close every client's
    /// port and remove the control socket.
    ///
    /// # Errors
    /// EIO if the control socket's thread cannot start.
    pub fn run(self) -> Result<()> {
        let Server {
            shared,
            ctl,
            wake_rx,
            listener,
            path,
        } = self;
        let s = shared.clone();
        let accept = std::thread::Builder::new()
            .name("vmad-fabric-ctl".into())
            .spawn(move || ctl_cmd::accept_loop(&s, &listener))?;
        server::run(&shared, &ctl, &wake_rx);
        // One connection more gets the accept thread out of `accept` to see the stop.
        drop(std::os::unix::net::UnixStream::connect(&path));
        let _ = accept.join();
        let _ = std::fs::remove_file(&path);
        let slots: Vec<u16> = lock(&shared.state).clients.keys().copied().collect();
        for slot in slots {
            server::free(&shared, slot);
        }
        drop(ctl);
        lock(&shared.stoppers).clear();
        Ok(())
    }
}

/// Quote for `sh`: inside single quotes, `'` becomes `'\''`.
fn sh_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

fn env_lines(path: &Path, sockname: &str) -> String {
    format!(
        "{ENV}={}; export {ENV};\nIBSIM_SOCKNAME={}; export IBSIM_SOCKNAME;\n\
         unset IBSIM_SERVER_NAME IBSIM_SERVER_PORT;\n",
        sh_quote(&path.to_string_lossy()),
        sh_quote(sockname)
    )
}

/// Whether the environment names a fabric server and leaves the transport to the
/// default choice (`VMAD_TRANSPORT` unset): then the default is vmad's ibsim client
/// on `IBSIM_SOCKNAME`, attached to the server.
pub fn selected_by_env() -> bool {
    let set = |k: &str| std::env::var_os(k).is_some_and(|v| !v.is_empty());
    set(ENV) && !set("VMAD_TRANSPORT")
}

/// The default CAs of the process-wide registry while [`selected_by_env`]: `ibsim0`,
/// vmad's ibsim client attached to the server as `IBSIM_SOCKNAME` and `SIM_HOST` say.
#[derive(Debug, Clone, Copy, Default)]
pub struct EnvDefault;

impl DefaultCas for EnvDefault {
    fn ensure(&self, registry: &Arc<Registry>) {
        if !registry.contains("ibsim0") {
            let config = crate::transport::ibsim::IbsimConfig::from_env();
            let _ = crate::transport::ibsim::register_ca_in(registry, "ibsim0", config);
        }
    }
}
