//! `vmad man DIR` and `vmad completions SHELL`: the man pages and completion
//! scripts come from the clap definitions at run time, so an installed vmad
//! documents exactly the flags it parses (scripts/install calls both).

use std::path::PathBuf;

use clap::{Args, CommandFactory};
use clap_complete::Shell;
use serde_json::json;

use crate::{Cli, CmdResult, Output};

#[derive(Debug, Args)]
pub(crate) struct ManArgs {
    /// Directory to write vmad.1 and vmad-SUBCOMMAND.1 into (created if missing).
    #[arg(long = "out", default_value = ".")]
    out: PathBuf,
}

#[derive(Debug, Args)]
pub(crate) struct CompletionArgs {
    /// The shell to complete for.
    #[arg(value_enum)]
    shell: Shell,
}

pub(crate) fn man(a: &ManArgs) -> CmdResult {
    std::fs::create_dir_all(&a.out)?;
    clap_mangen::generate_to(Cli::command(), &a.out)?;
    let mut pages: Vec<String> = std::fs::read_dir(&a.out)?
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.starts_with("vmad") && n.ends_with(".1"))
        .collect();
    pages.sort();
    Ok(Output {
        text: pages.iter().map(|p| format!("{p}\n")).collect(),
        json: json!({ "dir": a.out, "pages": pages }),
        exit: None,
    })
}

pub(crate) fn completions(a: &CompletionArgs) -> CmdResult {
    let mut script = Vec::new();
    clap_complete::generate(a.shell, &mut Cli::command(), "vmad", &mut script);
    Ok(Output {
        text: String::from_utf8_lossy(&script).into_owned(),
        json: json!({ "shell": a.shell.to_string(), "script": String::from_utf8_lossy(&script) }),
        exit: None,
    })
}
