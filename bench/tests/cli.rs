//! `stockd-bench`'s command line as a user meets it: its help names the
//! `stockd` it starts, and it refuses production before it reads or creates
//! anything.

// Test code: a panic on a failed unwrap is the failure report (Cargo.toml [lints]).
#![allow(clippy::unwrap_used)]

use std::process::Command;

/// Runs `stockd-bench` from the workspace root (where config/ is) and returns
/// its exit code and stdout + stderr.
fn stockd_bench(args: &[&str], env: &[(&str, &str)]) -> (i32, String) {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_stockd-bench"));
    cmd.args(args).current_dir(root).env("STOCKD_ENV", "local");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code().unwrap_or(-1), text)
}

/// `--help` lists the phases' options and says which `stockd` the children run.
#[test]
fn the_help_names_its_options_and_the_stockd_it_starts() {
    let (code, text) = stockd_bench(&["--help"], &[]);
    assert_eq!(code, 0, "{text}");
    for option in ["--only", "--demo", "--target", "--stockd"] {
        assert!(text.contains(option), "{option} missing: {text}");
    }
    assert!(text.contains("beside this one"), "{text}");
}

/// With `STOCKD_ENV=production` it stops before it reads the configuration or
/// creates anything (not even its `--out-dir`), and says why.
#[test]
fn it_refuses_production_before_creating_anything() {
    let out_dir = std::env::temp_dir().join(format!("stockd-bench-prod-{}", std::process::id()));
    let out_arg = out_dir.display().to_string();
    let (code, text) = stockd_bench(
        &["--requests", "1", "--out-dir", &out_arg],
        &[
            ("STOCKD_ENV", "production"),
            ("STOCKD_CONFIG_DIR", "/nonexistent"),
        ],
    );
    assert_ne!(code, 0, "{text}");
    assert!(text.contains("STOCKD_ENV=production"), "{text}");
    assert!(text.contains("creates SKUs"), "the reason is named: {text}");
    assert!(!out_dir.exists(), "the bench created {}", out_dir.display());
}
