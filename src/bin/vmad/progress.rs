//! A one-line progress report on stderr for long runs (`bench`, `discover`):
//! shown when stderr is a terminal or `--progress` asks for it, redrawn at
//! most ten times a second so it never slows the run it reports on.

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

pub(crate) struct Progress {
    on: bool,
    last: Option<Instant>,
    drawn: bool,
}

impl Progress {
    pub(crate) fn new(asked: bool) -> Progress {
        Progress {
            on: asked || std::io::stderr().is_terminal(),
            last: None,
            drawn: false,
        }
    }

    /// Redraw the line with `what`, unless it was drawn less than 100 ms ago.
    pub(crate) fn show(&mut self, what: std::fmt::Arguments<'_>) {
        if !self.on
            || self
                .last
                .is_some_and(|t| t.elapsed() < Duration::from_millis(100))
        {
            return;
        }
        self.last = Some(Instant::now());
        self.drawn = true;
        let mut err = std::io::stderr().lock();
        let _ = write!(err, "\r{what}   ");
        let _ = err.flush();
    }

    /// End the line, so what follows starts on its own.
    pub(crate) fn done(&mut self) {
        if self.drawn {
            eprintln!();
            self.drawn = false;
        }
        self.last = None;
    }
}
