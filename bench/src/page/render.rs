//! The generated block of BENCHMARKS.md, from the text of a run's bench.json
//! (and of the instruction counts): one table of the machine and the run, then
//! every target with met or missed, every phase, the peak memory and the
//! instruction counts. Read as untyped JSON, so a bench.json of an earlier
//! build (a field fewer) still renders, and the block shows exactly what the
//! committed file holds.

use std::fmt::Write as _;

use anyhow::Context;
use serde_json::Value;

use super::cells::{cell, text};
use super::instructions;
use crate::report::numbers::thousands;

/// The 1-minute load average above which the run did not have the machine to
/// itself (the threshold `Machine::load_avg_1m_at_start` documents): the
/// absolute rates are then disturbed, the side-by-side ratios less so.
const QUIET_LOAD_MAX: f64 = 0.5;

/// The block (without its marker lines) for a run and, if measured, its
/// instruction counts and the last drop run (shown when the run has no drop).
pub fn render(
    run: &str,
    instructions: Option<&str>,
    drop_run: Option<&str>,
) -> anyhow::Result<String> {
    let run: Value = serde_json::from_str(run).context("bench.json is not JSON")?;
    let drop_run: Option<Value> = drop_run
        .map(serde_json::from_str)
        .transpose()
        .context("last-drop.json is not JSON")?;
    let mut out = String::new();
    let _ = writeln!(out, "## The current run\n");
    let run_json = super::RUN_JSON;
    let ins_json = super::INSTRUCTIONS_JSON;
    let sources = match instructions {
        Some(_) => format!("[{run_json}]({run_json}) and [{ins_json}]({ins_json})"),
        None => format!("[{run_json}]({run_json})"),
    };
    let _ = writeln!(
        out,
        "Rendered from {sources}, as `make bench` wrote them.\n"
    );
    out.push_str(&machine(&run));
    out.push_str(&targets(&run));
    out.push_str(&phases(&run));
    out.push_str(&super::storm_table::table(&run));
    out.push_str(&super::drop_table::table(&run, drop_run.as_ref()));
    out.push_str(&memory(&run));
    match instructions {
        Some(text) => out.push_str(&instructions::table(text)?),
        None => out.push_str(
            "\n### Instructions per event\n\nNot measured in this run \
             (`scripts/bench-instructions.sh` writes them).\n",
        ),
    }
    Ok(out)
}

fn machine(run: &Value) -> String {
    let m = &run["machine"];
    let load = m["load_avg_1m_at_start"].as_f64().unwrap_or(f64::NAN);
    let load_note = if load <= QUIET_LOAD_MAX {
        "quiet: the run had the machine to itself"
    } else {
        "busy: something else was running, so the absolute rates are low and noisy; the ratios of \
         phases measured side by side are disturbed less"
    };
    let (met, missed, unmeasured) = verdict_counts(run);
    let mut out = String::from("| | |\n|---|---|\n");
    let mut row = |k: &str, v: String| {
        let _ = writeln!(out, "| {k} | {} |", cell(&v));
    };
    row("date", text(&run["generated_at"]));
    row("commit", format!("`{}`", text(&run["commit"])));
    row(
        "command",
        format!(
            "`make bench`: `{}` (concurrency {})",
            text(&run["command"]),
            text(&run["concurrency"])
        ),
    );
    row(
        "machine",
        format!(
            "{} CPUs ({}), {:.1} GiB RAM, Linux {}; the load generator, stockd and the three \
             servers share them",
            text(&m["cpus"]),
            text(&m["cpu_model"]),
            m["memory_gib"].as_f64().unwrap_or(f64::NAN),
            text(&m["kernel"])
        ),
    );
    row("load average at start", format!("{load:.2} ({load_note})"));
    row(
        "servers",
        format!(
            "Redis {}, MariaDB {}, RabbitMQ {}",
            text(&m["redis"]),
            text(&m["mariadb"]),
            text(&m["rabbitmq"])
        ),
    );
    row("correctness", text(&run["correctness"]));
    row(
        "targets",
        format!("{met} met, {missed} missed, {unmeasured} not measured"),
    );
    out
}

fn verdict_counts(run: &Value) -> (usize, usize, usize) {
    let ratios = list(&run["ratios"]);
    let count = |want: Option<bool>| ratios.iter().filter(|r| r["met"].as_bool() == want).count();
    (count(Some(true)), count(Some(false)), count(None))
}

fn targets(run: &Value) -> String {
    let mut out = String::from(
        "\n### Targets\n\n| target | measured | goal | result | from |\n|---|--:|--:|---|---|\n",
    );
    for r in list(&run["ratios"]) {
        let measured = r["value"]
            .as_f64()
            .map_or("n/a".to_string(), |v| format!("{v:.2}"));
        let result = match r["met"].as_bool() {
            Some(true) => "met ✓",
            Some(false) => "missed ✗",
            None => "not measured",
        };
        let _ = writeln!(
            out,
            "| {} | {measured} | {} | {result} | {} |",
            cell(&text(&r["name"])),
            goal(&r["goal"]),
            cell(&text(&r["data"]))
        );
    }
    out
}

/// `{"at_least": 0.5}` → `≥ 0.5`, as the bench's own tables print it.
fn goal(goal: &Value) -> String {
    match (goal["at_least"].as_f64(), goal["at_most"].as_f64()) {
        (Some(t), _) => format!("≥ {t}"),
        (_, Some(t)) => format!("≤ {t}"),
        _ => "?".into(),
    }
}

fn phases(run: &Value) -> String {
    let mut out = String::from(
        "\n### Phases\n\n| phase | what | concurrency | count | throughput | p50 ms | p99 ms | \
         p999 ms |\n|---|---|--:|--:|--:|--:|--:|--:|\n",
    );
    for p in list(&run["phases"]) {
        let conc = match p["concurrency"].as_u64() {
            Some(0) | None => "-".to_string(),
            Some(c) => c.to_string(),
        };
        let lat = |q: &str| {
            p["latency"][q]
                .as_f64()
                .map_or("-".to_string(), |v| format!("{v:.2}"))
        };
        let _ = writeln!(
            out,
            "| {} | {} | {conc} | {} | {} {} | {} | {} | {} |",
            text(&p["key"]),
            cell(&text(&p["title"])),
            text(&p["count"]),
            thousands(p["throughput"].as_f64().unwrap_or(0.0)),
            text(&p["unit"]),
            lat("p50"),
            lat("p99"),
            lat("p999")
        );
    }
    out
}

fn memory(run: &Value) -> String {
    let mut out = String::from("\n### Peak memory\n\n| process | peak RSS MiB |\n|---|--:|\n");
    for m in list(&run["memory"]) {
        let _ = writeln!(
            out,
            "| {} | {:.1} |",
            cell(&text(&m["process"])),
            m["peak_rss_mib"].as_f64().unwrap_or(f64::NAN)
        );
    }
    out
}

fn list(v: &Value) -> Vec<Value> {
    v.as_array().cloned().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::render;

    const RUN: &str = r#"{
      "generated_at": "2026-12-06T13:00:00.000Z", "commit": "abc", "command": "stockd-bench",
      "concurrency": 64,
      "machine": {"cpus": 2, "cpu_model": "X", "memory_gib": 23.5, "kernel": "6.1",
                  "load_avg_1m_at_start": 2.5, "redis": "7", "mariadb": "10", "rabbitmq": "3"},
      "phases": [{"key": "ceiling", "title": "a | b", "unit": "req/s", "concurrency": 64,
                  "count": 10, "throughput": 1234.6,
                  "latency": {"p50": 1.0, "p99": 2.0, "p999": 3.0, "max": 4.0}}],
      "memory": [{"process": "stockd", "pid": 1, "peak_rss_mib": 100.04}],
      "ratios": [{"name": "r", "goal": {"at_least": 0.5}, "value": 0.4, "met": false, "data": "d"},
                 {"name": "s", "goal": {"at_most": 10.0}, "value": null, "met": null, "data": "n"}],
      "correctness": "all invariants held after every phase"
    }"#;

    #[test]
    fn the_block_names_the_busy_machine_every_phase_and_every_target() {
        let block = render(RUN, None, None).unwrap();
        assert!(
            block.contains("| load average at start | 2.50 (busy:"),
            "{block}"
        );
        assert!(
            block.contains("| targets | 0 met, 1 missed, 1 not measured |"),
            "{block}"
        );
        assert!(
            block.contains("| r | 0.40 | ≥ 0.5 | missed ✗ | d |"),
            "{block}"
        );
        assert!(
            block.contains("| s | n/a | ≤ 10 | not measured | n |"),
            "{block}"
        );
        assert!(
            block.contains("| ceiling | a \\| b | 64 | 10 | 1,235 req/s | 1.00 | 2.00 | 3.00 |"),
            "{block}"
        );
        assert!(block.contains("| stockd | 100.0 |"), "{block}");
        assert!(block.contains("Not measured in this run"), "{block}");
    }
}
