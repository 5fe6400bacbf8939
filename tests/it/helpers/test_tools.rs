//! The non-cargo tools some tests run (`scripts/test-tools.sh`: schemathesis,
//! the OTLP receiver's Python, the events checker's Python), installed on
//! first use. A test that needs one fails (never skips) when it cannot be had.

use std::path::PathBuf;
use std::process::Command;

/// Runs `scripts/test-tools.sh <tool>` and returns the path it prints last.
pub fn test_tool(tool: &str) -> PathBuf {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let out = Command::new(root.join("scripts/test-tools.sh"))
        .arg(tool)
        .output()
        .expect("run scripts/test-tools.sh (bash)");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "{tool} is required by this test and could not be installed \
         (scripts/test-tools.sh {tool}: {}):\n{stderr}",
        out.status
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let path = stdout.lines().last().unwrap_or_default().trim();
    assert!(
        !path.is_empty(),
        "test-tools.sh {tool} printed no path:\n{stderr}"
    );
    PathBuf::from(path)
}
