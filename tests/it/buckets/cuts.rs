//! A cut of a split SKU that Redis refuses leaves the buckets as they were
//! (issue 51 item 4): the cut decides on what the pool and the buckets hold
//! before it reclaims anything, and gives back what it reclaimed when the
//! pool still falls short, so no bucket is left drained and answering
//! `SOLD_OUT` while its units sit in the pool until a reconcile pass.

use serde_json::json;

use super::load;
use super::split::{create, finish_reconciled, view, wait_split_drained, Split};
use crate::helpers::{TestApp, TestOptions};

const SKU: u64 = 1;
const BUCKETS: u16 = 3;
const STOCK: i64 = 12;
/// Units sold while the consumer is stopped: Redis has promised them,
/// MySQL does not know yet.
const SOLD: usize = 2;
/// The bucket flagged drained while it holds stock.
const DRAINED: u16 = 1;

/// Pool and every bucket's stock and sold-out flag.
fn slots(split: &Split) -> (i64, Vec<(u64, i64, bool)>) {
    let stock = split
        .stock
        .iter()
        .map(|b| (b.bucket, b.available, b.sold_out))
        .collect();
    (split.pool, stock)
}

/// A split SKU of 12 whose buckets hold leased stock, one of them drained
/// while it holds some (as a release into a drained bucket leaves it, set
/// here by hand), and 2 units sold that MySQL does not know of yet (the
/// consumer stopped). A cut of 11 passes MySQL (12 available there) and is
/// refused by Redis (10 left): 409 `BELOW_RESERVED`, and right after, the
/// pool and every bucket hold what they held and every bucket with stock
/// still sells. Before, the cut reclaimed every bucket into the pool first
/// and left the drained one sold out: its buyer got `SOLD_OUT`.
#[tokio::test]
async fn a_refused_cut_of_a_split_sku_leaves_every_bucket_selling_what_it_held() {
    let mut app = TestApp::with(TestOptions {
        consumer: false,
        ..TestOptions::default()
    })
    .await;
    create(&app, SKU, STOCK, 1, BUCKETS).await;
    let buyers = load::pick_buyers(10, BUCKETS, &[SOLD + 1, 1, 1]);
    for (i, user) in buyers[0][..SOLD].iter().enumerate() {
        let rid = format!("sold-{i}");
        assert_eq!(
            app.reserve(SKU, &rid, *user, 1).await.status(),
            201,
            "{rid}"
        );
    }
    let layout = app
        .res
        .redis
        .buckets()
        .read_layout(TestApp::sku(SKU))
        .await
        .unwrap();
    let bucket_key = app.res.redis.keys().sku_at(layout.tag(DRAINED));
    app.redis_cmd(&["HSET", &bucket_key, "drained", "1"]).await;
    let before = slots(&view(&app, SKU).await);
    let held: Vec<u64> = before.1.iter().filter(|s| s.1 > 0).map(|s| s.0).collect();
    assert!(held.contains(&u64::from(DRAINED)), "{before:?}");

    let cut = STOCK - SOLD as i64 + 1;
    let (status, problem) = app
        .adjust(SKU, &json!({"delta": -cut, "reason": "lost"}))
        .await;
    assert_eq!(
        (status, problem["code"].as_str()),
        (409, Some("BELOW_RESERVED")),
        "{problem}"
    );
    assert_eq!(
        slots(&view(&app, SKU).await),
        before,
        "the refused cut moved stock"
    );
    let mut sold = SOLD;
    for bucket in held {
        let b = bucket as usize;
        let user = *buyers[b].last().unwrap();
        let answer = app.reserve(SKU, &format!("after-{b}"), user, 1).await;
        let status = answer.status().as_u16();
        let body = answer.text().await.unwrap();
        assert_eq!(status, 201, "bucket {b} held stock and sells it: {body}");
        sold += 1;
    }
    app.start_consumer();
    wait_split_drained(&app, SKU, sold as u64).await;
    app.assert_conserved(SKU).await;
    finish_reconciled(app, SKU).await;
}
