//! Live adjustments from the harness (s28): an operator who adds and removes
//! units of a hot SKU while it sells, each decision with its own
//! `adjustment_id`, retried with the same id after a 503 or a lost answer as
//! docs/operations.md ("Adjusting stock during a sale") advises; and the
//! check that MySQL's movements hold every decision exactly once.
//!
//! Some first attempts are sent with a client timeout far below what the
//! server needs, so the answer is lost while the server goes on: the retry
//! must then replay, never apply a second time.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use mysql_async::prelude::Queryable;
use serde_json::json;

use crate::seed::Rng;
use crate::stockd::ADMIN_TOKEN;

/// Attempts of one decision before the harness gives up on it (its outcome
/// is then unknown: applied once or not at all, never twice).
const ATTEMPTS_MAX: usize = 40;
/// Pause before a retry: the api may be down (killed) for a few seconds.
const RETRY_PAUSE: Duration = Duration::from_millis(250);
/// Client timeout of an ordinary attempt; above the server's 3 s bound.
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(10);
/// Client timeout (ms, drawn in this range) of a first attempt whose answer
/// is lost on purpose: about one adjustment's time on a busy machine, so the
/// client gives up sometimes before the request reached the server, often
/// while the server works or has just committed (a retry then replays).
const LOSE_ANSWER_TIMEOUT_MS: (u64, u64) = (2, 30);
/// Share of decisions whose first answer is lost on purpose.
const LOSE_ANSWER_SHARE: f64 = 0.35;
/// Largest |delta| of one decision.
const DELTA_MAX: u64 = 12;

/// One operator decision and what became of it.
#[derive(Debug, Clone)]
pub struct Decision {
    pub id: String,
    pub delta: i64,
    /// Status of every attempt (0: no answer).
    pub attempts: Vec<u16>,
    /// The `adjustment_id` of every attempt: `id` each time, as the docs
    /// advise. The check counts the movements of all of them, so a client
    /// that changed the key on a retry shows as a decision applied twice.
    pub sent_ids: Vec<String>,
    /// The problem `code` of the last answer (empty for a 2xx or none).
    pub code: String,
}

impl Decision {
    /// The last answer: 200/201 applied, 4xx refused, 0 or 5xx unknown.
    pub fn last(&self) -> u16 {
        self.attempts.last().copied().unwrap_or(0)
    }
    pub fn applied(&self) -> bool {
        matches!(self.last(), 200 | 201)
    }
    pub fn refused(&self) -> bool {
        (400..500).contains(&self.last())
    }
}

/// The operator: adjusts `sku` until `stop`, one decision at a time.
pub async fn operate(
    http: reqwest::Client,
    base: String,
    sku: u64,
    mut rng: Rng,
    stop: Arc<AtomicBool>,
) -> Vec<Decision> {
    let mut decisions = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        let n = decisions.len();
        let size = rng.range(1, DELTA_MAX) as i64;
        // Slightly more additions than cuts, so cuts keep finding stock.
        let delta = if rng.chance(0.55) { size } else { -size };
        let id = format!("s28-adj-{n}");
        let lose_first = rng.chance(LOSE_ANSWER_SHARE).then(|| {
            Duration::from_millis(rng.range(LOSE_ANSWER_TIMEOUT_MS.0, LOSE_ANSWER_TIMEOUT_MS.1))
        });
        let decision = decide(&http, &base, sku, &id, delta, lose_first).await;
        decisions.push(decision);
        tokio::time::sleep(rng.jitter_ms(100, 300)).await;
    }
    decisions
}

/// Sends one decision until a definite answer (2xx or 4xx), same id each time.
async fn decide(
    http: &reqwest::Client,
    base: &str,
    sku: u64,
    id: &str,
    delta: i64,
    lose_first: Option<Duration>,
) -> Decision {
    let mut attempts = Vec::new();
    let mut sent_ids = Vec::new();
    let mut code = String::new();
    for attempt in 0..ATTEMPTS_MAX {
        let key = id.to_string();
        let body = json!({"delta": delta, "reason": "s28 live adjustment", "adjustment_id": key});
        let timeout = match lose_first {
            Some(short) if attempt == 0 => short,
            _ => ATTEMPT_TIMEOUT,
        };
        let sent = http
            .post(format!("{base}/v1/admin/skus/{sku}/adjustments"))
            .bearer_auth(ADMIN_TOKEN)
            .timeout(timeout)
            .json(&body)
            .send()
            .await;
        let status = match sent {
            Ok(resp) => {
                let status = resp.status().as_u16();
                let body: serde_json::Value = resp.json().await.unwrap_or_default();
                code = body["code"].as_str().unwrap_or_default().to_string();
                status
            }
            Err(_) => 0,
        };
        attempts.push(status);
        sent_ids.push(key);
        if (200..500).contains(&status) {
            break;
        }
        tokio::time::sleep(RETRY_PAUSE).await;
    }
    Decision {
        id: id.to_string(),
        delta,
        attempts,
        sent_ids,
        code,
    }
}

/// One row of `stock_movements`.
#[derive(Debug, Clone)]
struct Movement {
    kind: String,
    delta: i64,
    adjustment_id: Option<String>,
    redis_pending: bool,
}

async fn movements(conn: &mut mysql_async::Conn, sku: u64) -> Vec<Movement> {
    let rows: Vec<(String, i64, Option<String>, u8)> = conn
        .exec(
            "SELECT kind, delta, adjustment_id, redis_pending FROM stock_movements
             WHERE sku_id = ? ORDER BY id",
            (sku,),
        )
        .await
        .expect("read stock_movements");
    rows.into_iter()
        .map(|(kind, delta, adjustment_id, pending)| Movement {
            kind,
            delta,
            adjustment_id,
            redis_pending: pending != 0,
        })
        .collect()
}

/// Every way MySQL's movements of `sku` disagree with the decisions: a
/// decision answered 2xx applied not exactly once or with another delta
/// (lost / twice), one refused applied, an unknown applied more than once, an
/// id the operator never sent, a step still pending, a Redis correction
/// (`repair` or `warmup`: Redis had moved by something MySQL had not, e.g.
/// a step applied twice), or `total_stock` not the sum of the deltas.
pub async fn check_movements(
    conn: &mut mysql_async::Conn,
    sku: u64,
    decisions: &[Decision],
) -> Vec<String> {
    let rows = movements(conn, sku).await;
    let mut problems = Vec::new();
    let mut by_id: BTreeMap<&str, Vec<&Movement>> = BTreeMap::new();
    for row in &rows {
        if let Some(id) = row.adjustment_id.as_deref() {
            by_id.entry(id).or_default().push(row);
        }
    }
    for d in decisions {
        let ids: std::collections::BTreeSet<&str> = d.sent_ids.iter().map(String::as_str).collect();
        let found: Vec<&Movement> = ids
            .iter()
            .flat_map(|id| by_id.remove(id).unwrap_or_default())
            .collect();
        let deltas: Vec<i64> = found.iter().map(|m| m.delta).collect();
        let fits = deltas.iter().all(|x| *x == d.delta);
        let bad = if d.applied() {
            deltas.len() != 1 || !fits
        } else if d.refused() {
            !deltas.is_empty()
        } else {
            deltas.len() > 1 || !fits
        };
        if bad {
            problems.push(format!(
                "adjustment {} (delta {}, answers {:?}) is in MySQL as {:?}",
                d.id, d.delta, d.attempts, deltas
            ));
        }
    }
    for (id, found) in by_id {
        problems.push(format!(
            "adjustment {id} never sent, in MySQL {} times",
            found.len()
        ));
    }
    for row in rows.iter().filter(|r| r.redis_pending) {
        problems.push(format!(
            "{} {:+} still pending its Redis step",
            row.kind, row.delta
        ));
    }
    let corrections: Vec<&str> = rows
        .iter()
        .filter(|r| r.kind == "repair" || r.kind == "warmup")
        .map(|r| r.kind.as_str())
        .collect();
    if !corrections.is_empty() {
        problems.push(format!("Redis corrected during the run: {corrections:?}"));
    }
    let total: i64 = conn
        .exec_first("SELECT total_stock FROM sku_stock WHERE sku_id = ?", (sku,))
        .await
        .expect("read sku_stock")
        .unwrap_or(-1);
    let sum: i64 = rows.iter().map(|r| r.delta).sum();
    if total != sum {
        problems.push(format!(
            "total_stock {total} != sum of movement deltas {sum}"
        ));
    }
    problems
}
