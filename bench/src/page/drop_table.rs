//! The drop's numbers as a table of the generated block (the `drop` phase's
//! JSON, `phases::drop`): the run's own, or — when the run has none — that of
//! the last `stockd-bench --phase drop` kept beside it
//! (`docs/bench/last-drop.json`), named with its own date, commit and
//! command so it never passes for the run's. Nothing when neither has one.

use std::fmt::Write as _;

use serde_json::Value;

use super::cells::{cell, text};
use crate::report::numbers::thousands;

/// The drop phase of `run`, if it has one.
fn drop_of(run: &Value) -> Option<Value> {
    let phases = run["phases"].as_array()?;
    let phase = phases.iter().find(|p| p["key"] == "drop")?;
    phase["drop"].is_object().then(|| phase["drop"].clone())
}

/// The table: from `run`, else from `kept` (another run's bench.json).
pub fn table(run: &Value, kept: Option<&Value>) -> String {
    let (d, source) = match (drop_of(run), kept.and_then(drop_of)) {
        (Some(d), _) => (d, "Measured in this run.".to_string()),
        (None, Some(d)) => {
            let k = kept.expect("a drop was found in it");
            let source = format!(
                "Not in this run: from [{json}]({json}), `{}` at commit `{}`, {}.",
                text(&k["command"]),
                text(&k["commit"]),
                text(&k["generated_at"]),
                json = super::DROP_JSON,
            );
            (d, source)
        }
        (None, None) => return String::new(),
    };
    let num = |v: &Value| v.as_f64().map_or("-".to_string(), thousands);
    let ms = |v: &Value| v.as_f64().map_or("-".to_string(), |v| format!("{v:.1} ms"));
    let mut out = String::from("\n### Drop\n\n");
    let _ = writeln!(
        out,
        "{source} {} units to {} buyers with an HS256 pass each (`POST /v1/passes` before T), \
         {} connections from T − {} ms, `sale.clock_margin_ms` {}, \
         `limits.buyer_max_live_units` {}; Redis calls from `INFO commandstats` of a \
         redis-server only the drop's stockd uses.\n",
        num(&d["stock"]),
        num(&d["buyers"]),
        num(&d["connections"]),
        text(&d["crowd_before_ms"]),
        text(&d["clock_margin_ms"]),
        text(&d["buyer_max_live_units"]),
    );
    out.push_str("| | |\n|---|--:|\n");
    let mut row = |k: &str, v: String| {
        let _ = writeln!(out, "| {} | {} |", cell(k), cell(&v));
    };
    row("T → sold out", ms(&d["sold_out_after_ms"]));
    row("holds/s, T → sold out", num(&d["holds_per_sec"]));
    row("answers/s after T", num(&d["answers_per_sec"]));
    let first = &d["first_second"];
    row(
        "answers in the first second after T",
        num(&d["first_second_answers"]),
    );
    for q in ["p50", "p99", "max"] {
        row(&format!("first second, {q}"), ms(&first[q]));
    }
    row(
        "answers before T − margin (from memory)",
        codes(&d["before_margin"]),
    );
    row(
        "answers within the margin (Redis decides)",
        codes(&d["within_margin"]),
    );
    row(
        "Redis: the quiet second before the crowd",
        redis(&d["redis_quiet"]),
    );
    row(
        "Redis: while answering before T − margin (goal: 0 scripts)",
        redis(&d["redis_before_margin"]),
    );
    row("Redis: within the margin", redis(&d["redis_within_margin"]));
    row(
        &format!(
            "Redis: {} requests with a forged pass (goal: 0 scripts)",
            text(&d["refused_passes"])
        ),
        redis(&d["redis_refused_passes"]),
    );
    out
}

/// `{"409 SALE_NOT_STARTED": 12}` → `12 × 409 SALE_NOT_STARTED`.
fn codes(v: &Value) -> String {
    let Some(map) = v.as_object() else {
        return "-".into();
    };
    if map.is_empty() {
        return "none".into();
    }
    (map.iter())
        .map(|(label, n)| format!("{} × {label}", thousands(n.as_f64().unwrap_or(0.0))))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A window's calls: total, scripts, the time it covered.
fn redis(w: &Value) -> String {
    format!(
        "{} calls, {} scripts in {:.0} ms",
        text(&w["calls"]),
        text(&w["script_calls"]),
        w["ms"].as_f64().unwrap_or(f64::NAN)
    )
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    fn run_with(drop: serde_json::Value) -> serde_json::Value {
        json!({"phases": [{"key": "drop", "drop": drop}],
               "command": "stockd-bench --phase drop", "commit": "c", "generated_at": "t"})
    }

    /// The run's own drop is shown as this run's; another run's is named.
    #[test]
    fn the_table_says_whose_drop_it_shows() {
        let d = json!({"stock": 2000, "sold_out_after_ms": 812.4,
                       "before_margin": {"409 SALE_NOT_STARTED": 1200},
                       "redis_before_margin": {"calls": 3, "script_calls": 0, "ms": 950.0}});
        let own = super::table(&run_with(d.clone()), None);
        assert!(own.contains("Measured in this run."), "{own}");
        assert!(own.contains("| T → sold out | 812.4 ms |"), "{own}");
        assert!(own.contains("1,200 × 409 SALE_NOT_STARTED"), "{own}");
        assert!(own.contains("3 calls, 0 scripts in 950 ms"), "{own}");
        let kept = run_with(d);
        let other = super::table(&json!({"phases": []}), Some(&kept));
        assert!(
            other.contains("`stockd-bench --phase drop` at commit `c`"),
            "{other}"
        );
        assert_eq!(super::table(&json!({"phases": []}), None), "");
    }
}
