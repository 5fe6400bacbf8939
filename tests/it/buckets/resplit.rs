//! A re-split as the buyers see it: right after an admin re-split of a SKU
//! to fewer buckets, the api's local sold-out board must not refuse buyers of
//! a SKU that has stock (contract §7, §11).

use std::time::{Duration, Instant};

use serde_json::json;

use super::load;
use super::split::{create, view, wait_split_drained};
use super::SALE_BUYERS_FROM;
use stockd::redis::buckets::bucket_of;
use stockd::soldout::SoldOutBoard;

use crate::helpers::{send_for_json, TestApp};

const OLD_BUCKETS: u16 = 4;
const NEW_BUCKETS: u16 = 2;
/// Deep enough that the second of reservations below never empties it.
const STOCK: i64 = 5_000;
const LIMIT: u32 = 2;
/// How long buyers keep coming after the re-split: longer than the board's
/// re-validation (half of `soldout.flag_ttl_ms`), which used to end the
/// wrong refusals.
const AFTER_RESPLIT: Duration = Duration::from_secs(1);
/// First buyer id of the buyers after the re-split (clear of the warm-up's).
const FRESH_BUYERS_FROM: u64 = 70_000_000;

/// A SKU split over 4 buckets with stock, the api's layout cache and board
/// warm (one refused request per bucket: they leave no buyer state, so N may
/// change), re-split to 2 by the admin PUT: every fresh buyer in the second
/// after it is admitted while the SKU shows stock, none answered 409
/// `SOLD_OUT` by a flag left from a bucket the re-split emptied.
#[tokio::test]
async fn a_resplit_to_fewer_buckets_never_refuses_a_buyer_while_stock_is_left() {
    let app = TestApp::spawn().await;
    app.wait_subscribers(1).await;
    let base = app.base.clone();
    resplit_and_buy(&app, &base, &app.board()).await;
    app.cleanup().await;
}

/// The same on a second api node, whose layout cache still holds the old
/// layout when the re-split happens on the first (it learns the new one
/// from the first script that answers `LAYOUT`).
#[tokio::test]
async fn a_resplit_on_another_node_never_refuses_a_buyer_while_stock_is_left() {
    let mut app = TestApp::spawn().await;
    let (b_base, b) = app.spawn_api();
    app.wait_subscribers(2).await;
    let b_board = b.soldout.clone().expect("the sold-out board is on");
    resplit_and_buy(&app, &b_base, &b_board).await;
    app.cleanup().await;
}

/// Creates SKU 1 in `OLD_BUCKETS`, warms the node at `base`, re-splits it to
/// `NEW_BUCKETS` through the test's first node, then sends fresh buyers to
/// `base` for `AFTER_RESPLIT`: none may be refused `SOLD_OUT` (`board`: that
/// node's, shown with each refusal).
async fn resplit_and_buy(app: &TestApp, base: &str, board: &SoldOutBoard) {
    create(app, 1, STOCK, i64::from(LIMIT), OLD_BUCKETS).await;
    let warm = load::pick_buyers(SALE_BUYERS_FROM, OLD_BUCKETS, &[1, 1, 1, 1]);
    for (b, users) in warm.iter().enumerate() {
        let body =
            json!({"request_id": format!("warm-{b}"), "user_id": users[0], "count": LIMIT + 1});
        let url = format!("{base}/v1/skus/1/reservations");
        let (status, _) = send_for_json(app.client.post(url).json(&body)).await;
        assert_eq!(status, 409, "over the limit in bucket {b}");
    }
    let body = json!({"total_stock": STOCK, "limit_per_user": LIMIT, "buckets": NEW_BUCKETS});
    let (status, answer) = app.put_sku_json(1, &body).await;
    assert_eq!(status, 200, "{answer}");
    let resplit = Instant::now();
    let mut refused = Vec::new();
    let mut admitted = 0u64;
    let mut user = FRESH_BUYERS_FROM;
    while resplit.elapsed() < AFTER_RESPLIT {
        user += 1;
        let (status, body) = app
            .reserve_at(base, 1, &format!("after-{user}"), user)
            .await;
        match (status, body["code"].as_str()) {
            (201 | 202, _) => admitted += 1,
            (409, Some("SOLD_OUT")) => refused.push(format!(
                "buyer {user} (bucket {} of {NEW_BUCKETS}) at {} ms, board {:?}",
                bucket_of(user, NEW_BUCKETS),
                resplit.elapsed().as_millis(),
                board.flagged()
            )),
            other => panic!("buyer {user}: {other:?} {body}"),
        }
    }
    let after = view(app, 1).await;
    assert_eq!(after.available, STOCK - admitted as i64, "{after:?}");
    assert!(
        refused.is_empty(),
        "{} of {} buyers refused SOLD_OUT after the re-split while {} units were left:\n{}",
        refused.len(),
        refused.len() as u64 + admitted,
        after.available,
        refused.join("\n")
    );
    wait_split_drained(app, 1, admitted).await;
}
