//! One child process a test owns: spawned in its own process group, its
//! output in a log file, stopped by pid (SIGKILL of the group) when dropped —
//! also when the test panics. Nothing here ever signals a process the test
//! did not start. Shared by the `it` binary (private TLS servers) and the
//! `chaos` binary (fault injection), which uses the freeze/terminate half.
#![allow(dead_code)] // each test binary uses a part: the other part is dead there

use std::fs::{File, OpenOptions};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Lines of a log printed when something fails.
pub const LOG_TAIL_LINES: usize = 40;

/// How long a SIGTERM'd process gets before it is killed.
const TERM_GRACE: Duration = Duration::from_secs(30);

pub struct OwnedProcess {
    /// What it is, for messages (`redis-server :41234`).
    pub name: String,
    child: Child,
    /// stdout and stderr of the process.
    pub log: PathBuf,
    /// Set while the group is stopped (SIGSTOP), so `Drop` continues it first.
    frozen: bool,
}

impl OwnedProcess {
    /// Spawns `cmd` as the leader of a new process group, output appended to `log`.
    pub fn spawn(name: &str, mut cmd: Command, log: &Path) -> Self {
        let out = open_log(log);
        let err = out.try_clone().expect("clone log handle");
        cmd.stdin(Stdio::null())
            .stdout(Stdio::from(out))
            .stderr(Stdio::from(err))
            .process_group(0);
        let child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("spawning {name} ({cmd:?}): {e}"));
        Self {
            name: name.to_string(),
            child,
            log: log.to_path_buf(),
            frozen: false,
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// `Some(status)` once the process has exited.
    pub fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// SIGKILL to the whole group (the process and whatever it forked), then reap.
    pub fn kill9(&mut self) {
        signal_group(self.pid(), libc::SIGKILL);
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.frozen = false;
    }

    /// SIGTERM, then SIGKILL if it has not exited within [`TERM_GRACE`].
    pub fn terminate(&mut self) -> Option<std::process::ExitStatus> {
        signal_group(self.pid(), libc::SIGCONT);
        // SIGTERM to the leader only: it runs the shutdown of its own children.
        unsafe {
            libc::kill(self.pid() as i32, libc::SIGTERM);
        }
        let deadline = Instant::now() + TERM_GRACE;
        while Instant::now() < deadline {
            if let Some(status) = self.exited() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        eprintln!(
            "{} ignored SIGTERM for {TERM_GRACE:?}; killing it",
            self.name
        );
        self.kill9();
        None
    }

    /// SIGSTOP to the group: the process keeps its sockets but answers nothing.
    pub fn freeze(&mut self) {
        signal_group(self.pid(), libc::SIGSTOP);
        self.frozen = true;
    }

    pub fn thaw(&mut self) {
        signal_group(self.pid(), libc::SIGCONT);
        self.frozen = false;
    }

    pub fn log_tail(&self) -> String {
        log_tail(&self.log, LOG_TAIL_LINES)
    }
}

impl Drop for OwnedProcess {
    fn drop(&mut self) {
        if self.frozen {
            signal_group(self.pid(), libc::SIGCONT);
        }
        if self.exited().is_none() {
            self.kill9();
        }
    }
}

/// Signals the process group led by `pid` (every process spawned here leads one).
fn signal_group(pid: u32, signal: i32) {
    assert!(pid > 1, "refusing to signal pid {pid}");
    // SAFETY: kill(2) with a negative pid addresses exactly the group this
    // suite created with process_group(0); no memory is involved.
    unsafe {
        libc::kill(-(pid as i32), signal);
    }
}

fn open_log(path: &Path) -> File {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).expect("log dir");
    }
    OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .unwrap_or_else(|e| panic!("opening log {}: {e}", path.display()))
}

/// The last `lines` lines of a text file (empty if it does not exist).
pub fn log_tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read(path).unwrap_or_default();
    let text = String::from_utf8_lossy(&text);
    let all: Vec<&str> = text.lines().collect();
    let from = all.len().saturating_sub(lines);
    let mut out = format!(
        "--- last {} lines of {}\n",
        all.len() - from,
        path.display()
    );
    for line in &all[from..] {
        out.push_str("  | ");
        out.push_str(line);
        out.push('\n');
    }
    out
}
