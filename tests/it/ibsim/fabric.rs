//! A running ibsim (and optionally OpenSM) for one test, started and stopped
//! through the project's scripts, under a unique socket name.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

use vmad::transport::ibsim::{Endpoint, IbsimConfig};

fn script(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("scripts")
        .join(name)
}

/// A topology shipped in tests/topo.
pub(crate) fn topo(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/topo")
        .join(name)
}

/// One ibsim, stopped (with its OpenSM) on drop.
#[derive(Debug)]
pub(crate) struct Fabric {
    pub(crate) run: PathBuf,
    pub(crate) endpoint: Endpoint,
    pub(crate) console: PathBuf,
    /// What `ibsim-start` exported (`IBSIM_SOCKNAME`, …): the environment a program on
    /// this ibsim needs.
    pub(crate) env: Vec<(String, String)>,
}

impl Fabric {
    /// `scripts/ibsim-start tests/topo/<topology> -- <extra>`.
    pub(crate) fn start(topology: &str, extra: &[&str]) -> Fabric {
        Fabric::start_file(&topo(topology), extra)
    }

    /// `scripts/ibsim-start <file> -- <extra>`.
    pub(crate) fn start_file(file: &Path, extra: &[&str]) -> Fabric {
        let mut cmd = Command::new(script("ibsim-start"));
        cmd.arg(file);
        if !extra.is_empty() {
            cmd.arg("--").args(extra);
        }
        let out = cmd.output().expect("run scripts/ibsim-start");
        assert!(
            out.status.success(),
            "ibsim-start failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let env = String::from_utf8(out.stdout).unwrap();
        let var = |k: &str| {
            env.lines()
                .find_map(|l| l.strip_prefix(&format!("export {k}=")))
                .map(str::to_string)
        };
        let run = PathBuf::from(var("VMAD_IBSIM_RUN").expect("VMAD_IBSIM_RUN"));
        let endpoint = match var("IBSIM_SERVER_NAME") {
            Some(host) => Endpoint::Remote {
                host,
                port: var("IBSIM_SERVER_PORT").unwrap().parse().unwrap(),
            },
            None => Endpoint::Local {
                sockname: var("IBSIM_SOCKNAME").expect("IBSIM_SOCKNAME"),
            },
        };
        let env = env
            .lines()
            .filter_map(|l| l.strip_prefix("export "))
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| (k.to_owned(), v.trim_matches(['\'', '"']).to_owned()))
            .collect();
        Fabric {
            console: run.join("console"),
            run,
            endpoint,
            env,
        }
    }

    /// A transport configuration attaching at `node` (None: ibsim's default node).
    pub(crate) fn config(&self, node: Option<&str>) -> IbsimConfig {
        IbsimConfig {
            endpoint: self.endpoint.clone(),
            node: node.map(str::to_string),
            ..IbsimConfig::default()
        }
    }

    /// `scripts/opensm-start <run> [args]`: OpenSM up (SUBNET UP) when this returns.
    pub(crate) fn opensm(&self, args: &[&str]) {
        let out = Command::new(script("opensm-start"))
            .arg(&self.run)
            .args(args)
            .output()
            .expect("run scripts/opensm-start");
        assert!(
            out.status.success(),
            "opensm-start failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Send one command line to ibsim's console.
    pub(crate) fn console(&self, line: &str) {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .open(&self.console)
            .expect("open ibsim console FIFO");
        writeln!(f, "{line}").unwrap();
    }

    /// Send a console command and return what ibsim printed for it (up to its next prompt).
    pub(crate) fn command(&self, line: &str) -> String {
        use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
        use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify};
        use std::os::fd::AsFd;
        let start = self.log().len();
        // Watched before the command goes, so that no write of ibsim's is missed: each
        // one wakes the loop below to look at the log again.
        let inotify = Inotify::init(InitFlags::IN_NONBLOCK | InitFlags::IN_CLOEXEC).unwrap();
        inotify
            .add_watch(&self.run.join("ibsim.log"), AddWatchFlags::IN_MODIFY)
            .unwrap();
        self.console(line);
        // ibsim answers at once; the bound only keeps a broken run from hanging.
        let give_up = std::time::Instant::now() + std::time::Duration::from_secs(60);
        loop {
            let log = self.log();
            if let Some(end) = log.get(start..).and_then(|tail| tail.find("sim> ")) {
                return log[start..start + end].to_string();
            }
            let left = give_up.saturating_duration_since(std::time::Instant::now());
            assert!(!left.is_zero(), "no prompt after {line:?}");
            let mut fds = [PollFd::new(inotify.as_fd(), PollFlags::POLLIN)];
            let ms = PollTimeout::try_from(left.as_millis().min(60_000) as i32)
                .unwrap_or(PollTimeout::MAX);
            let _ = poll(&mut fds, ms);
            let _ = inotify.read_events();
        }
    }

    /// ibsim's console log so far.
    pub(crate) fn log(&self) -> String {
        std::fs::read_to_string(self.run.join("ibsim.log")).unwrap_or_default()
    }

    /// Run a libibumad tool under umad2sim (`scripts/ibsim-exec`) attached at `node`;
    /// its stdout. Panics if it fails.
    pub(crate) fn exec(&self, node: Option<&str>, args: &[&str]) -> String {
        let mut cmd = Command::new(script("ibsim-exec"));
        cmd.arg(&self.run).args(args);
        match node {
            Some(n) => cmd.env("SIM_HOST", n),
            None => cmd.env_remove("SIM_HOST"),
        };
        let out = cmd.output().expect("run scripts/ibsim-exec");
        assert!(
            out.status.success(),
            "{args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }
}

impl Drop for Fabric {
    fn drop(&mut self) {
        // Keep the logs of a failing test for a look; remove them otherwise.
        let mut cmd = Command::new(script("ibsim-stop"));
        cmd.arg(&self.run);
        if std::thread::panicking() {
            cmd.arg("--keep");
            eprintln!("ibsim run directory kept: {}", self.run.display());
        }
        let _ = cmd.status();
    }
}
