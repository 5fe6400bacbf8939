//! The repair run every scenario that loses writes ends with (s03, s13, s14,
//! s16, s17): `stockd reconcile --once --repair --json`, each SKU's verdict
//! printed, and what it did returned; and the look without repair
//! (`--once --json`, s17's check that the loss is reported).

use super::Scenario;

/// What `stockd reconcile --once --repair --json` did.
#[derive(Debug, Default, Clone)]
pub struct Repair {
    /// (sku, verdict, drift, missing_in_redis, repaired) per SKU.
    pub skus: Vec<(u64, String, i64, i64, bool)>,
    /// MYSQL_BEHIND's repair over every SKU: lost deductions re-published,
    /// lost confirms/releases re-applied (0 on a binary without them).
    pub republished: i64,
    pub reapplied: i64,
}

impl Repair {
    /// The repaired SKUs. The JSON gives the verdict of the look after the
    /// repair: REDIS_AHEAD when only the stock CAS was left to do, OK when the
    /// rebuild of records and counters from MySQL already closed the gap.
    pub fn summary(&self) -> String {
        let done: Vec<String> = self
            .skus
            .iter()
            .filter(|s| s.4)
            .map(|s| {
                format!(
                    "sku {} repaired (verdict after the repair {}, drift {}, records missing {})",
                    s.0, s.1, s.2, s.3
                )
            })
            .collect();
        if done.is_empty() {
            "nothing".into()
        } else {
            done.join("; ")
        }
    }
}

/// Runs `stockd reconcile --once --repair --json`, prints each SKU's verdict.
pub async fn repair(sc: &Scenario) -> Repair {
    run(sc, true).await
}

/// Runs `stockd reconcile --once --json` (nothing repaired), prints each
/// SKU's verdict.
pub async fn check(sc: &Scenario) -> Repair {
    run(sc, false).await
}

async fn run(sc: &Scenario, repair: bool) -> Repair {
    let mut args = vec!["reconcile", "--once"];
    if repair {
        args.push("--repair");
    }
    args.push("--json");
    sc.note(&format!("stockd {}", args.join(" ")));
    let out = sc.stack.cli(&args).await;
    let report: serde_json::Value = serde_json::from_str(out.stdout.trim()).unwrap_or_default();
    let mut repair = Repair::default();
    match report["skus"].as_array() {
        Some(skus) => {
            for s in skus {
                println!(
                    "    sku {} verdict {} redis {} mysql {} in_flight {} drift {} missing_in_redis {} repaired {}{}",
                    s["sku_id"],
                    s["verdict"],
                    s["redis_available"],
                    s["mysql_available"],
                    s["in_flight"],
                    s["drift"],
                    s["missing_in_redis"],
                    s["repaired"],
                    lost_work(s)
                );
                repair.republished += s["republished"].as_i64().unwrap_or(0);
                repair.reapplied += s["reapplied"].as_i64().unwrap_or(0);
                repair.skus.push((
                    s["sku_id"].as_u64().unwrap_or(0),
                    s["verdict"].as_str().unwrap_or("?").to_string(),
                    s["drift"].as_i64().unwrap_or(0),
                    s["missing_in_redis"].as_i64().unwrap_or(0),
                    s["repaired"].as_bool().unwrap_or(false),
                ));
            }
        }
        None => print!("{}", out.text()),
    }
    repair
}

/// MYSQL_BEHIND's figures, for a binary whose report has them: what MySQL
/// lost and what the repair re-published or re-applied.
fn lost_work(line: &serde_json::Value) -> String {
    let fields = [
        "lost_reservations",
        "lost_units",
        "republished",
        "reapplied",
    ];
    fields
        .iter()
        .filter(|f| !line[**f].is_null())
        .map(|f| format!(" {f} {}", line[*f]))
        .collect()
}
