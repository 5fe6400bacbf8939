//! The expiry storm's numbers as a table of the generated block (from the
//! `expiry_storm` phase's JSON; nothing when the run has none). The target
//! rows judge two of them; this table gives the rest a reader needs to see
//! where the release's time went: the lag percentiles, the path that
//! released, the closer's batch size.

use std::fmt::Write as _;

use serde_json::Value;

use super::cells::text;
use crate::report::numbers::thousands;

/// The table, or an empty string when the run did not measure a storm.
pub fn table(run: &Value) -> String {
    let phases = run["phases"].as_array().cloned().unwrap_or_default();
    let Some(s) = phases
        .iter()
        .find(|p| p["key"] == "expiry_storm")
        .map(|p| p["expiry_storm"].clone())
        .filter(|s| s.is_object())
    else {
        return String::new();
    };
    let num = |k: &str| s[k].as_f64().map_or("-".to_string(), thousands);
    let ms = |v: &Value| v.as_f64().map_or("-".to_string(), |v| format!("{v:.0} ms"));
    let mut out = String::from("\n### Expiry storm\n\n");
    let _ = writeln!(
        out,
        "{} reservations at full speed in a child with `reservation.ttl_secs: {}`, then their \
         release; times from the ledger (`expires_at_ms` → `finished_at_ms`) and, for the stock \
         back, from Redis read every 10 ms.\n",
        num("reserved"),
        text(&s["ttl_secs"])
    );
    out.push_str("| | |\n|---|--:|\n");
    let mut row = |k: &str, v: String| {
        let _ = writeln!(out, "| {k} | {v} |");
    };
    row("burst: reservations/s", num("reservations_per_sec"));
    row(
        "release: releases/s (first release → last)",
        num("releases_per_sec"),
    );
    row(
        "releases/s ÷ reservations/s",
        s["release_to_reserve"]
            .as_f64()
            .map_or("-".into(), |v| format!("{v:.2}")),
    );
    for q in ["p50", "p99", "max"] {
        row(&format!("due → release, {q}"), ms(&s["lag_ms"][q]));
    }
    row(
        "first due → first release",
        ms(&s["first_release_after_first_due_ms"]),
    );
    row(
        "last due → last release (ledger)",
        ms(&s["last_release_after_last_due_ms"]),
    );
    row(
        "last due → all stock back in Redis",
        ms(&s["stock_back_after_last_due_ms"]),
    );
    row("released by the delay queue", num("by_delay_queue"));
    row("released by the sweep", num("by_sweep"));
    row(
        "reservations per closer batch (mean)",
        s["closer_batch_mean"]
            .as_f64()
            .map_or("-".into(), |v| format!("{v:.0}")),
    );
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_table_shows_the_storm_and_nothing_without_one() {
        let run: serde_json::Value = serde_json::from_str(
            r#"{"phases": [{"key": "expiry_storm", "expiry_storm": {
                "ttl_secs": 10, "reserved": 60000, "reservations_per_sec": 6000.4,
                "released": 60000, "releases_per_sec": 5000.0, "release_to_reserve": 0.8333,
                "lag_ms": {"p50": 900.0, "p99": 2100.0, "p999": 2200.0, "max": 2300.0},
                "first_release_after_first_due_ms": 30, "last_release_after_last_due_ms": 2300,
                "stock_back_after_last_due_ms": 2320, "by_delay_queue": 60000, "by_sweep": 0,
                "closer_batch_mean": 470.2}}]}"#,
        )
        .unwrap();
        let table = super::table(&run);
        assert!(
            table.contains("| releases/s ÷ reservations/s | 0.83 |"),
            "{table}"
        );
        assert!(
            table.contains("| due → release, p99 | 2100 ms |"),
            "{table}"
        );
        assert!(table.contains("| released by the sweep | 0 |"), "{table}");
        assert!(super::table(&serde_json::json!({"phases": []})).is_empty());
    }
}
