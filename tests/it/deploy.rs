//! The deployment artifacts are checked by their own validators: systemd units
//! by `systemd-analyze verify`, alert rules by `promtool check rules` (and their
//! unit tests), the dashboard's queries by promtool's PromQL parser.

use std::process::Command;

use crate::helpers::success_and_output;

fn run(script: &str) -> (bool, String) {
    let root = env!("CARGO_MANIFEST_DIR");
    let tools = Command::new("bash")
        .arg(format!("{root}/scripts/check-tools.sh"))
        .output()
        .unwrap();
    assert!(
        tools.status.success(),
        "{}",
        String::from_utf8_lossy(&tools.stderr)
    );
    let out = Command::new("sh")
        .arg(format!("{root}/{script}"))
        .output()
        .unwrap();
    success_and_output(&out)
}

/// `systemd-analyze verify` accepts every unit (any warning fails).
#[test]
fn the_systemd_units_verify() {
    let (ok, text) = run("deploy/systemd/verify.sh");
    assert!(ok, "{text}");
    assert!(
        !text.contains("SKIPPED"),
        "verification must not be skipped: {text}"
    );
}

/// `promtool check rules` and `promtool test rules` pass on the alert rules.
#[test]
fn the_alert_rules_are_valid() {
    let (ok, text) = run("deploy/prometheus/check.sh");
    assert!(ok, "{text}");
    assert!(text.contains("SUCCESS"), "{text}");
}

/// The Grafana dashboard is valid JSON and every query parses as PromQL.
#[test]
fn the_dashboard_queries_parse() {
    let (ok, text) = run("deploy/grafana/check.sh");
    assert!(ok, "{text}");
}

/// The Dockerfile builds the product alone, never the load generator (the
/// workspace's `stockd-bench`): every `cargo build` in it names `-p stockd`,
/// none builds the whole workspace, and the real build is `--bin stockd`.
#[test]
fn the_dockerfile_builds_stockd_without_the_bench() {
    let root = env!("CARGO_MANIFEST_DIR");
    let dockerfile = std::fs::read_to_string(format!("{root}/Dockerfile")).unwrap();
    // One instruction per logical line: `\` + newline continues it.
    let joined = dockerfile.replace("\\\n", " ");
    let builds: Vec<&str> = joined
        .lines()
        .filter(|line| !line.trim_start().starts_with('#'))
        .flat_map(|line| line.split("&&"))
        .filter(|step| step.contains("cargo build"))
        .collect();
    assert!(
        builds.iter().any(|step| step.contains("--bin stockd")),
        "no `cargo build ... --bin stockd` in the Dockerfile: {builds:?}"
    );
    for step in &builds {
        assert!(
            step.contains("-p stockd ") && !step.contains("--workspace"),
            "builds more than the product: {step}"
        );
    }
}
