//! A one-line progress report on stderr for long runs (`bench`, `discover`):
//! shown when stderr is a terminal or `--progress` asks for it, redrawn at
//! most ten times a second so it never slows the run it reports on.

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

pub(crate) struct Progress {
    on: bool,
    last: Option<Instant>,
    /// The latest state, drawn or not: `done` draws it if the rate limit held it back.
    line: String,
    stale: bool,
}

impl Progress {
    pub(crate) fn new(asked: bool) -> Progress {
        Progress {
            on: asked || std::io::stderr().is_terminal(),
            last: None,
            line: String::new(),
            stale: false,
        }
    }

    /// Record `what`; redraw unless the line was drawn less than 100 ms ago.
    pub(crate) fn show(&mut self, what: std::fmt::Arguments<'_>) {
        if !self.on {
            return;
        }
        self.line = what.to_string();
        self.stale = true;
        if self
            .last
            .is_none_or(|t| t.elapsed() >= Duration::from_millis(100))
        {
            self.draw();
        }
    }

    fn draw(&mut self) {
        self.last = Some(Instant::now());
        self.stale = false;
        let mut err = std::io::stderr().lock();
        let _ = write!(err, "\r{}   ", self.line);
        let _ = err.flush();
    }

    /// Draw the final state and end the line, so what follows starts on its own.
    pub(crate) fn done(&mut self) {
        if self.stale {
            self.draw();
        }
        if self.last.is_some() {
            eprintln!();
        }
        self.last = None;
    }
}
