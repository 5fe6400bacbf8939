//! The instruction counts of `scripts/bench-instructions.sh` as a table of the
//! generated block. Instructions, unlike seconds, do not drift with a shared
//! VM's speed: the same code counts the same on a busy and a quiet machine, so
//! these rows compare across runs and commits where the throughputs cannot.

use std::fmt::Write as _;

use anyhow::Context;
use serde_json::Value;

use super::cells::{cell, text};

/// The table of the counts, with what they were counted on.
pub fn table(json: &str) -> anyhow::Result<String> {
    let counts: Value = serde_json::from_str(json).context("instructions.json is not JSON")?;
    let mut out = String::from("\n### Instructions per event\n\n");
    let _ = writeln!(
        out,
        "Counted by callgrind in a private redis-server {} and mariadbd {} at commit `{}`, {}: \
         {} orders of 3 lines and {} one-unit reservations, the Redis scripts in calls of {}.\n",
        text(&counts["redis"]),
        text(&counts["mariadb"]),
        text(&counts["commit"]),
        text(&counts["generated_at"]),
        text(&counts["orders"]),
        text(&counts["reservations"]),
        text(&counts["redis_events_per_call"]),
    );
    out.push_str(
        "| what | per order | per reservation | order / reservation |\n|---|--:|--:|--:|\n",
    );
    for row in counts["rows"].as_array().cloned().unwrap_or_default() {
        let order = row["per_order"].as_f64().unwrap_or(f64::NAN);
        let single = row["per_reservation"].as_f64().unwrap_or(f64::NAN);
        let _ = writeln!(
            out,
            "| {} | {} | {} | {:.2} |",
            cell(&text(&row["what"])),
            crate::report::numbers::thousands(order),
            crate::report::numbers::thousands(single),
            order / single
        );
    }
    out.push_str(&releases(&counts));
    out.push_str(&super::hot_sku_table::hot_sku(&counts));
    out.push_str(&super::pass_cost_table::passes(&counts));
    Ok(out)
}

/// The release rows (an expiry released by the closer's batch, beside one
/// reservation), when the counts have them: the issue's goal is a ratio ≤ 1
/// at the batch sizes a storm gives.
fn releases(counts: &Value) -> String {
    let rows = counts["release_rows"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    if rows.is_empty() {
        return String::new();
    }
    let mut out = format!(
        "\nPer release of an expired reservation ({} released by finish.lua, {} by the closer's \
         statements, at each batch size; goal: release / reservation ≤ 1 at a storm's batch \
         sizes):\n\n",
        text(&counts["releases"]),
        text(&counts["reservations"])
    );
    out.push_str(
        "| what | batch | per release | per reservation | release / reservation |\n\
         |---|--:|--:|--:|--:|\n",
    );
    for row in rows {
        let release = row["per_release"].as_f64().unwrap_or(f64::NAN);
        let single = row["per_reservation"].as_f64().unwrap_or(f64::NAN);
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {:.2} |",
            cell(&text(&row["what"])),
            text(&row["batch"]),
            crate::report::numbers::thousands(release),
            crate::report::numbers::thousands(single),
            release / single
        );
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_table_gives_each_count_and_its_ratio() {
        let json = r#"{"generated_at": "t", "commit": "c", "redis": "7", "mariadb": "10",
            "redis_events_per_call": 16, "orders": 3200, "reservations": 3000,
            "rows": [{"key": "k", "what": "Redis: order.lua / reserve.lua",
                      "per_order": 30000, "per_reservation": 20000}]}"#;
        let table = super::table(json).unwrap();
        assert!(
            table.contains("| Redis: order.lua / reserve.lua | 30,000 | 20,000 | 1.50 |"),
            "{table}"
        );
        assert!(table.contains("at commit `c`"), "{table}");
        assert!(!table.contains("Per release"), "no release rows, no table");
    }

    #[test]
    fn the_release_rows_give_each_batch_size_and_its_ratio() {
        let json = r#"{"generated_at": "t", "commit": "c", "redis": "7", "mariadb": "10",
            "redis_events_per_call": 16, "orders": 3200, "reservations": 3000,
            "releases": 3200, "rows": [],
            "release_rows": [{"key": "k", "what": "Redis: finish.lua", "batch": 64,
                              "per_release": 50000, "per_reservation": 100000}]}"#;
        let table = super::table(json).unwrap();
        assert!(
            table.contains("| Redis: finish.lua | 64 | 50,000 | 100,000 | 0.50 |"),
            "{table}"
        );
    }
}
