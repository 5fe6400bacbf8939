//! The servers' process helpers: [`OwnedProcess`] (tests/support/process.rs),
//! free ports, and the temp dir a test's servers keep their data in.

use std::path::PathBuf;

pub use crate::owned::{log_tail, OwnedProcess};
pub use crate::ports::free_port;

/// A directory removed (recursively) when dropped, unless `CHAOS_KEEP_DIRS`
/// is set (to read the servers' data and logs after a run).
pub struct TempDir {
    pub path: PathBuf,
}

impl TempDir {
    /// `stockd-<tag>-<pid>-<stamp>` under the system temp dir (`chaos-s01`,
    /// `tls-roundtrip`).
    pub fn new(tag: &str) -> Self {
        let stamp = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        let path = std::env::temp_dir().join(format!(
            "stockd-{tag}-{}-{}",
            std::process::id(),
            stamp % 1_000_000_000
        ));
        std::fs::create_dir_all(&path).expect("create temp dir");
        Self { path }
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        if std::env::var_os("CHAOS_KEEP_DIRS").is_some() {
            eprintln!("keeping {} (CHAOS_KEEP_DIRS)", self.path.display());
            return;
        }
        let _ = std::fs::remove_dir_all(&self.path);
    }
}
