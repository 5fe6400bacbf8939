//! The progress line on stderr while a phase runs. On a terminal it is one line
//! rewritten in place with `\r`; in a log (CI, `make bench | tee`) it is a plain
//! line every few seconds, so the log stays readable and short.

use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

/// Redraw period on a terminal: fast enough to look live, cheap enough to ignore.
const TERMINAL_TICK: Duration = Duration::from_millis(250);
/// Line period in a log: a 10-second phase writes a handful of lines.
const PLAIN_TICK: Duration = Duration::from_secs(2);

/// A running progress line; [`Progress::finish`] clears it.
pub struct Progress {
    done: Arc<AtomicU64>,
    stop: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

impl Progress {
    /// Starts reporting `label`: `done / total` events (`total` 0 means unknown).
    pub fn start(label: &str, total: u64) -> Self {
        let done = Arc::new(AtomicU64::new(0));
        let stop = CancellationToken::new();
        let terminal = std::io::stderr().is_terminal();
        let task = tokio::spawn(report(
            label.to_string(),
            total,
            done.clone(),
            stop.clone(),
            terminal,
        ));
        Self { done, stop, task }
    }

    /// The counter the workers bump once per finished event.
    pub fn counter(&self) -> Arc<AtomicU64> {
        self.done.clone()
    }

    pub async fn finish(self) {
        self.stop.cancel();
        let _ = self.task.await;
    }
}

async fn report(
    label: String,
    total: u64,
    done: Arc<AtomicU64>,
    stop: CancellationToken,
    terminal: bool,
) {
    let started = Instant::now();
    let tick = if terminal { TERMINAL_TICK } else { PLAIN_TICK };
    let mut interval = tokio::time::interval_at(tokio::time::Instant::now() + tick, tick);
    loop {
        tokio::select! {
            _ = interval.tick() => {}
            _ = stop.cancelled() => break,
        }
        let n = done.load(Ordering::Relaxed);
        let elapsed = started.elapsed().as_secs_f64();
        let rate = if elapsed > 0.0 {
            n as f64 / elapsed
        } else {
            0.0
        };
        let of = if total > 0 {
            format!("{n}/{total}")
        } else {
            n.to_string()
        };
        let line = format!("  {label:<22} {of:>15}  {rate:>9.0}/s  {elapsed:>5.1}s");
        let mut err = std::io::stderr().lock();
        let _ = if terminal {
            write!(err, "\r\x1b[2K{line}")
        } else {
            writeln!(err, "{line}")
        };
        let _ = err.flush();
    }
    if terminal {
        let mut err = std::io::stderr().lock();
        let _ = write!(err, "\r\x1b[2K");
        let _ = err.flush();
    }
}

/// A one-off status line (phase boundaries), on its own line either way.
pub fn note(text: &str) {
    eprintln!("stockd-bench: {text}");
}
