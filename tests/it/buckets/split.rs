//! A split SKU as the tests see it: its view (pool and buckets), its
//! creation with N buckets, and the waits and checks once its pipeline
//! drained (every bucket's outbox, the ledger, the reconciler's verdict).

use std::cell::RefCell;
use std::time::Duration;

use mysql_async::prelude::Queryable;
use serde_json::{json, Value};

use stockd::ops::reconcile::{SkuReport, Verdict};

use super::LIMIT;
use crate::helpers::{poll_until, poll_until_steady, TestApp};

/// The bucket figures of a SKU view (`GET /v1/skus/{id}`, admin PUT answer).
#[derive(Debug)]
pub struct Split {
    pub available: i64,
    pub sold_out: bool,
    pub buckets: u64,
    pub pool: i64,
    pub stock: Vec<BucketStock>,
}

#[derive(Debug)]
pub struct BucketStock {
    pub bucket: u64,
    pub available: i64,
    pub sold_out: bool,
}

/// The view's split; a SKU in one bucket shows none (its view is contract §6's,
/// unchanged) and reads as one bucket holding everything.
pub fn split_of(v: &Value) -> Split {
    let int = |x: &Value, name: &str| x[name].as_i64().unwrap_or_else(|| panic!("{name}: {v}"));
    let flag = |x: &Value, name: &str| x[name].as_bool().unwrap_or_else(|| panic!("{name}: {v}"));
    if v.get("buckets").is_none() {
        assert!(
            v.get("pool").is_none() && v.get("bucket_stock").is_none(),
            "a split view without its bucket count: {v}"
        );
        return Split {
            available: int(v, "available"),
            sold_out: flag(v, "sold_out"),
            buckets: 1,
            pool: 0,
            stock: vec![BucketStock {
                bucket: 0,
                available: int(v, "available"),
                sold_out: flag(v, "sold_out"),
            }],
        };
    }
    let entries = v["bucket_stock"]
        .as_array()
        .unwrap_or_else(|| panic!("bucket_stock: {v}"));
    Split {
        available: int(v, "available"),
        sold_out: flag(v, "sold_out"),
        buckets: int(v, "buckets") as u64,
        pool: int(v, "pool"),
        stock: entries
            .iter()
            .map(|e| {
                // Present on every entry, judged by the tests above only where
                // the contract says what it must be.
                let _ = flag(e, "drained");
                BucketStock {
                    bucket: int(e, "bucket") as u64,
                    available: int(e, "available"),
                    sold_out: flag(e, "sold_out"),
                }
            })
            .collect(),
    }
}

pub async fn view(app: &TestApp, sku: u64) -> Split {
    let (status, body) = app.get_json(&format!("/v1/skus/{sku}")).await;
    assert_eq!(status, 200, "GET sku {sku}: {body}");
    split_of(&body)
}

pub async fn create(app: &TestApp, sku: u64, total: i64, limit: i64, buckets: u16) {
    let body = json!({"total_stock": total, "limit_per_user": limit, "buckets": buckets});
    let (status, answer) = app.put_sku_json(sku, &body).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(split_of(&answer).buckets, u64::from(buckets), "{answer}");
}

/// `redis.max_buckets` of the test's settings.
pub fn buckets_max(app: &TestApp) -> u16 {
    app.res.settings.redis.max_buckets
}

/// Longest wait for the consumer to apply a finished sale (debug build).
pub const DRAIN_WAIT: Duration = Duration::from_secs(180);
/// Longest the reconciler may call a drained, multi-slot SKU not yet judgeable.
const RECONCILE_WAIT: Duration = Duration::from_secs(20);

/// Waits until the SKU's ledger holds `rows` rows and nothing is on the way:
/// every outbox stream (one per bucket) empty, the work queue empty, the
/// consumer holding nothing. Seen on consecutive polls.
pub async fn wait_split_drained(app: &TestApp, sku: u64, rows: u64) {
    let queue = app.res.publisher.topology().deduct_queue.clone();
    let drained = poll_until_steady(DRAIN_WAIT, || async {
        app.consumer_in_hand() == 0
            && app.ledger_rows_of(sku).await == rows
            && app.outbox_entries().await == 0
            && app.queue_depth(&queue).await == 0
            && app.consumer_in_hand() == 0
    })
    .await;
    assert!(
        drained,
        "timed out after {DRAIN_WAIT:?} waiting for: SKU {sku}: {rows} ledger rows and the pipeline drained"
    );
}

/// The drained SKU in MySQL: exactly these units per status (one unit per
/// row), conservation, no buyer over the limit, and the view's `available`
/// equal to MySQL's.
pub async fn assert_ledger(app: &TestApp, sku: u64, units: &[(&str, i64)]) {
    let by_status = app.ledger_by_status(sku).await;
    let mut got: Vec<(String, i64)> = by_status
        .iter()
        .map(|(s, (_, u))| (s.clone(), *u))
        .collect();
    got.sort();
    let mut want: Vec<(String, i64)> = units.iter().map(|(s, u)| (s.to_string(), *u)).collect();
    want.sort();
    assert_eq!(got, want, "ledger units per status");
    let mut conn = app.mysql().await;
    let over: Vec<(u64, i64)> = conn
        .exec(
            "SELECT user_id, CAST(SUM(deduct_count) AS SIGNED) FROM stock_deduct_idempotent
             WHERE sku_id = ? AND status IN ('RESERVED', 'CONFIRMED')
             GROUP BY user_id HAVING SUM(deduct_count) > ?",
            (sku, LIMIT),
        )
        .await
        .unwrap();
    assert!(over.is_empty(), "buyers over {LIMIT} in MySQL: {over:?}");
    drop(conn);
    // MySQL's conservation, and Redis (pool + buckets) == MySQL.
    app.assert_conserved(sku).await;
}

/// Polls the reconciler (no repair) until the SKU's verdict is OK: a
/// multi-slot read is judged only when stable, so a check may need another.
pub async fn reconciled_ok(app: &TestApp, sku: u64) -> SkuReport {
    let last = RefCell::new(None);
    poll_until(RECONCILE_WAIT, || async {
        let report = app.reconcile(false).await;
        let line = report
            .skus
            .iter()
            .find(|l| l.sku_id == sku)
            .cloned()
            .unwrap_or_else(|| panic!("SKU {sku} not in {report:?}"));
        assert!(report.healthy(), "{report:?}");
        let ok = line.verdict == Verdict::Ok;
        *last.borrow_mut() = Some(line);
        ok
    })
    .await;
    let line = last.into_inner().expect("the reconciler ran");
    assert_eq!(line.verdict, Verdict::Ok, "{line:?}");
    line
}

/// The end of a split SKU's test: the reconciler's verdict OK, then
/// everything the test created removed.
pub async fn finish_reconciled(app: TestApp, sku: u64) {
    reconciled_ok(&app, sku).await;
    app.cleanup().await;
}
