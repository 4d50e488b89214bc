//! Unmodified C programs built against the system `<infiniband/umad.h>`, run on
//! vmad's drop-in over `verbs` and `hybrid` (the caller drives the CQ,
//! `src/transport/verbs/ready.rs`), against the kernel's `umad_agent serve` on rxe1:
//! - `tests/rxe/umad_fd_poll.c`: poll(2) on `umad_get_fd`'s descriptor and
//!   `umad_poll`; the descriptor is readable exactly while a message is queued;
//! - `tests/rxe/umad_cancel.c` (ASan, leaks checked): `pthread_cancel` of threads
//!   blocked in `umad_recv(-1)`/`umad_poll(-1)` or sending, as `capi/tests/c/cancel.c`
//!   on the embedded fabric; the port answers afterwards.
//!
//! `scripts/rxe-test` builds both (`target/rxe/`); `RXE_TEST_FILTER=rxe::dropin_c`.

use std::process::Output;

use super::super::kernel::{on, Agent, Lib};
use super::super::kernel_peer::*;

/// `program` on `lib` from rxe0 to the agent on rxe1 (its GID, our GID index), then
/// `extra` arguments; its output, logged.
fn run_c(lib: Lib, program: &str, extra: &[&str], envs: &[(&str, &str)]) -> Output {
    let mut cmd = on(lib, program);
    cmd.args([
        env("RXE0_DEV"),
        env("RXE0_PORT"),
        env("RXE1_GID"),
        env("RXE0_GID_INDEX"),
    ])
    .args(extra)
    .envs(envs.iter().copied());
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {program}: {e}"));
    eprintln!(
        "--- {program} {extra:?} on {lib:?}: {}\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// The C program's own checks passed: "N passed, 0 failed", N > 0, exit 0.
fn all_checks_passed(out: &Output, what: &str) {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let summary = stdout
        .lines()
        .rev()
        .find(|l| l.ends_with(" failed"))
        .unwrap_or_else(|| panic!("{what}: no summary line"));
    let passed: u32 = summary
        .split_whitespace()
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    assert!(
        summary.ends_with(" 0 failed") && passed > 0,
        "{what}: {summary}"
    );
    assert!(out.status.success(), "{what}: {}", out.status);
}

fn fd_poll(lib: Lib) {
    let _g = serial();
    let _agent = Agent::start(Lib::Classic);
    let out = run_c(lib, "umad_fd_poll", &["16"], &[]);
    all_checks_passed(&out, &format!("umad_fd_poll on {lib:?}"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("wakes=8 spurious=0"),
        "8 poll(2) waits, each woken once, by its answer: {stdout}"
    );
}

/// poll(2) on `umad_get_fd` and `umad_poll`, on `VMAD_TRANSPORT=verbs`.
#[test]
#[ignore = "needs the rxe VM: run by scripts/rxe-test"]
fn rxe_c_polls_umad_get_fd_on_verbs() {
    fd_poll(Lib::Verbs);
}

/// The same on `VMAD_TRANSPORT=hybrid` (the client's GMPs over vmad's UD QP).
#[test]
#[ignore = "needs the rxe VM: run by scripts/rxe-test"]
fn rxe_c_polls_umad_get_fd_on_hybrid() {
    fd_poll(Lib::Hybrid);
}

/// A cancelled `umad_recv` thread under ASan on `VMAD_TRANSPORT=verbs`: 200 rounds of
/// cancels landing anywhere; no crash, no leak (LeakSanitizer at exit: a leak makes the
/// program fail), and the port answers afterwards.
#[test]
#[ignore = "needs the rxe VM: run by scripts/rxe-test"]
fn rxe_c_cancelled_umad_recv_threads_under_asan_on_verbs() {
    let _g = serial();
    let _agent = Agent::start(Lib::Classic);
    let out = run_c(
        Lib::Verbs,
        "umad_cancel-asan",
        &["200"],
        &[("ASAN_OPTIONS", "detect_leaks=1:abort_on_error=0")],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !stderr.contains("Sanitizer"),
        "ASan found nothing (no error, no leak)"
    );
    all_checks_passed(&out, "umad_cancel on Verbs under ASan");
}
