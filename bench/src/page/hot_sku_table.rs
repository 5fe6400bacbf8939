//! The hot-SKU rows of the instruction counts: one reservation's Redis work
//! beside the seed's one-call script, and the api's work per reservation
//! beside an actix-web floor (`scripts/lib/instructions_hot_sku.sh` writes
//! them as `hot_sku`). These are the two ratios the hot-SKU cost is judged by
//! (goals: ≤ 1.0 and ≤ 2), so the generated block shows them with the
//! command that reproduces them.

use std::fmt::Write as _;

use serde_json::Value;

use super::cells::text;

/// The table, when the counts have a `hot_sku` object (older runs do not).
pub fn hot_sku(counts: &Value) -> String {
    let hot = &counts["hot_sku"];
    if !hot.is_object() {
        return String::new();
    }
    let n = |key: &str| hot[key].as_f64().unwrap_or(f64::NAN);
    let mut out = format!(
        "\nOne reservation of a hot SKU beside its anchors (`scripts/bench-instructions.sh`: the \
         seed's script in {} calls, each its own round trip; {} HTTP requests over {} \
         connections; kernel work not counted):\n\n",
        text(&hot["anchor_calls"]),
        text(&hot["http_requests"]),
        text(&hot["http_connections"]),
    );
    out.push_str("| what | instructions | ratio | goal |\n|---|--:|--:|--:|\n");
    let rows: [(String, f64, f64, &str); 6] = [
        (
            "Redis: the seed's script, one call each".into(),
            n("seed_call"),
            1.0,
            "",
        ),
        (
            format!(
                "Redis: reserve.lua in calls of {} + the acker's XDEL (the calls' shared entries, {} per XDEL)",
                text(&hot["per_call"]),
                text(&hot["ack_ids"])
            ),
            n("redis_batch"),
            n("redis_batch") / n("seed_call"),
            "≤ 1.0",
        ),
        (
            "Redis: reserve.lua in calls of 1 + XDEL (1 id)".into(),
            n("redis_quiet"),
            n("redis_quiet") / n("seed_call"),
            "",
        ),
        (
            "the actix-web floor, per request".into(),
            n("actix_floor"),
            1.0,
            "",
        ),
        (
            "stockd --role api, relay and acker included".into(),
            n("api"),
            n("api") / n("actix_floor"),
            "≤ 2",
        ),
        (
            "stockd --role consumer, per deduction applied".into(),
            n("consumer"),
            n("consumer") / n("actix_floor"),
            "",
        ),
    ];
    for (what, count, ratio, goal) in rows {
        let _ = writeln!(
            out,
            "| {what} | {} | {ratio:.2} | {goal} |",
            crate::report::numbers::thousands(count)
        );
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_hot_sku_rows_give_each_count_and_its_ratio_to_its_anchor() {
        let counts: serde_json::Value = serde_json::from_str(
            r#"{"hot_sku": {"seed_call": 50000, "anchor_calls": 2000, "per_call": 16,
                "ack_ids": 16, "redis_batch": 150000, "redis_quiet": 300000,
                "actix_floor": 40000, "api": 100000, "consumer": 20000,
                "http_requests": 2000, "http_connections": 16}}"#,
        )
        .unwrap();
        let table = super::hot_sku(&counts);
        assert!(
            table.contains(
                "| Redis: reserve.lua in calls of 16 + the acker's XDEL (the calls' shared entries, 16 per XDEL) | 150,000 | 3.00 | ≤ 1.0 |"
            ),
            "{table}"
        );
        assert!(
            table
                .contains("| stockd --role api, relay and acker included | 100,000 | 2.50 | ≤ 2 |"),
            "{table}"
        );
        assert!(super::hot_sku(&serde_json::json!({})).is_empty());
    }
}
