//! The pass and hold-budget rows of the instruction counts: one reservation
//! whose SKU requires a pass (HS256, then EdDSA), and one with the hold
//! budget on, beside the same reservation without either, in the api's and
//! its redis-server's instructions (`scripts/lib/instructions_passes.sh`
//! writes them as `passes`). The issue bounds the api's HS256 ratio at 1.1;
//! EdDSA and the budget are reported.

use std::fmt::Write as _;

use serde_json::Value;

use super::cells::text;
use crate::report::numbers::thousands;

/// The table, when the counts have a `passes` object (older runs do not).
pub fn passes(counts: &Value) -> String {
    let p = &counts["passes"];
    if !p.is_object() {
        return String::new();
    }
    let n = |key: &str| p[key].as_f64().unwrap_or(f64::NAN);
    let mut out = format!(
        "\nOne reservation with a pass, and with the hold budget on, beside the same reservation \
         without (`scripts/bench-instructions.sh`: {} HTTP requests per run, each with a distinct \
         valid pass minted beforehand; `limits.buyer_max_live_units` {} for the budget; kernel \
         work not counted):\n\n",
        text(&p["http_requests"]),
        text(&p["budget_units"]),
    );
    out.push_str(
        "| what | api | api ratio | goal | Redis | Redis ratio |\n|---|--:|--:|--:|--:|--:|\n",
    );
    let goal = format!("≤ {}", text(&p["hs256_goal"]));
    let rows = [
        ("without a pass, budget off", "", ""),
        ("an HS256 pass each", "hs256", goal.as_str()),
        ("an EdDSA pass each", "eddsa", ""),
        ("hold budget on, no pass", "budget", ""),
    ];
    for (what, k, goal) in rows {
        let (api, redis) = match k {
            "" => (n("api"), n("redis")),
            k => (n(&format!("{k}_api")), n(&format!("{k}_redis"))),
        };
        let _ = writeln!(
            out,
            "| {what} | {} | {:.2} | {goal} | {} | {:.2} |",
            thousands(api),
            api / n("api"),
            thousands(redis),
            redis / n("redis"),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    /// Each run's counts beside the count without, the HS256 row with its goal.
    #[test]
    fn each_run_is_shown_beside_the_count_without() {
        let json = serde_json::json!({"passes": {
            "http_requests": 2000, "budget_units": 2, "hs256_goal": 1.1,
            "api": 200000, "redis": 100000,
            "hs256_api": 230000, "hs256_redis": 150000,
            "eddsa_api": 400000, "eddsa_redis": 150000,
            "budget_api": 210000, "budget_redis": 130000}});
        let table = super::passes(&json);
        assert!(
            table.contains("| an HS256 pass each | 230,000 | 1.15 | ≤ 1.1 | 150,000 | 1.50 |"),
            "{table}"
        );
        assert!(
            table.contains("| hold budget on, no pass | 210,000 | 1.05 |  | 130,000 | 1.30 |"),
            "{table}"
        );
        assert_eq!(super::passes(&serde_json::json!({})), "");
    }
}
