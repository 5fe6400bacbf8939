//! Batch admission (`redis/admission.rs`, `reserve.lua`): many reservations
//! of one bucket decided by one reserve script call must answer what one call
//! each, in the same order, would. The batch-specific cases are driven with
//! batches of a known make-up (`Reservations::decide_batch`, one call, no
//! lane); the lanes themselves are driven by concurrent `reserve` calls.

use std::time::Duration;

use deadpool_redis::redis;
use futures_util::StreamExt;
use serde_json::json;

use stockd::domain::{RequestId, Requester, ReservationStatus, ReserveOutcome, SkuId, UserId};
use stockd::redis::admission::Ask;
use stockd::redis::buckets::Layout;
use stockd::redis::{Keys, RedisError};

use crate::helpers::{PrivateRedis, TestApp, TestOptions};

const SKU: u64 = 1;

fn ask(rid: &str, user: u64, count: u32) -> Ask {
    Ask {
        request_id: RequestId::parse(rid).unwrap(),
        user_id: UserId::new(user).unwrap(),
        count,
        requester: String::new(),
        pass: stockd::redis::admission::PassArg::None,
    }
}

async fn decide(app: &TestApp, asks: &[Ask]) -> Vec<Result<ReserveOutcome, RedisError>> {
    let layout = Layout::single(SkuId::new(SKU).unwrap());
    app.res
        .redis
        .reservations()
        .decide_batch(&layout, 0, asks)
        .await
        .expect("the call itself succeeds")
}

/// One unit for each of `users` at once, through the lanes (`reserve`),
/// request ids `<tag><user>`: the answers in `users`' order.
async fn reserve_at_once(
    app: &TestApp,
    sku: SkuId,
    tag: &str,
    users: &[u64],
) -> Vec<Result<ReserveOutcome, RedisError>> {
    let calls = users.iter().map(|&u| {
        let store = app.res.redis.clone();
        let rid = RequestId::parse(&format!("{tag}{u}")).unwrap();
        async move {
            store
                .reservations()
                .reserve(sku, &rid, UserId::new(u).unwrap(), 1, &Requester::Anyone)
                .await
        }
    });
    futures_util::future::join_all(calls).await
}

fn is_reserved(outcome: &Result<ReserveOutcome, RedisError>) -> bool {
    matches!(outcome, Ok(ReserveOutcome::Reserved { .. }))
}

#[tokio::test]
async fn two_requests_of_one_buyer_in_one_batch_meet_a_limit_of_one() {
    let app = TestApp::spawn_with_sku(SKU, 10, 1).await;
    let out = decide(&app, &[ask("b1", 7, 1), ask("b2", 7, 1), ask("b3", 8, 1)]).await;
    assert!(is_reserved(&out[0]), "{out:?}");
    assert!(
        matches!(
            out[1],
            Ok(ReserveOutcome::LimitExceeded {
                bought: 1,
                limit: 1
            })
        ),
        "{out:?}"
    );
    assert!(
        is_reserved(&out[2]),
        "another buyer is not limited: {out:?}"
    );
    assert_eq!(app.redis_available(SKU).await, Some(8));
    app.wait_ledger_rows(2).await;
    app.cleanup().await;
}

#[tokio::test]
async fn a_replay_and_its_original_in_one_batch_answer_reserved_then_replayed() {
    let app = TestApp::spawn_with_sku(SKU, 10, 5).await;
    let out = decide(&app, &[ask("r1", 7, 2), ask("r1", 7, 2), ask("r1", 7, 3)]).await;
    let Ok(ReserveOutcome::Reserved { reservation, .. }) = &out[0] else {
        panic!("{out:?}")
    };
    let Ok(ReserveOutcome::Replayed { reservation: again }) = &out[1] else {
        panic!("{out:?}")
    };
    assert_eq!(again.status, ReservationStatus::Reserved);
    assert_eq!(
        (again.created_at_ms, again.expires_at_ms),
        (reservation.created_at_ms, reservation.expires_at_ms),
        "the replay answers the stored reservation"
    );
    assert!(
        matches!(out[2], Ok(ReserveOutcome::Mismatch)),
        "another count under the same id: {out:?}"
    );
    assert_eq!(app.redis_available(SKU).await, Some(8), "taken once");
    app.wait_ledger_rows(1).await;
    assert_eq!(app.ledger_rows().await, 1, "one deduction");
    app.cleanup().await;
}

/// The batch that empties the SKU sells exactly the stock, refuses the rest
/// as sold out and broadcasts the sold-out flag once.
#[tokio::test]
async fn the_batch_that_sells_the_last_unit_raises_sold_out_once() {
    let app = TestApp::spawn_with_sku(SKU, 3, 1).await;
    let settings = &app.direct_settings.redis;
    // Any node of a cluster hears every PUBLISH.
    let client = redis::Client::open(settings.node_urls()[0].as_str()).unwrap();
    let mut pubsub = client.get_async_pubsub().await.unwrap();
    let channel = Keys::new(&settings.key_prefix).soldout_channel();
    pubsub.subscribe(&channel).await.unwrap();

    let asks: Vec<Ask> = (1..=6).map(|i| ask(&format!("s{i}"), 100 + i, 1)).collect();
    let out = decide(&app, &asks).await;
    assert!(out[..3].iter().all(is_reserved), "{out:?}");
    assert!(
        out[3..]
            .iter()
            .all(|o| matches!(o, Ok(ReserveOutcome::SoldOut))),
        "{out:?}"
    );
    let mut messages = Vec::new();
    let mut stream = pubsub.on_message();
    while let Ok(Some(msg)) = tokio::time::timeout(Duration::from_millis(500), stream.next()).await
    {
        messages.push(msg.get_payload::<String>().unwrap());
    }
    assert_eq!(messages, vec![format!("S:{SKU}")], "one broadcast");
    assert_eq!(app.redis_available(SKU).await, Some(0));
    app.wait_ledger_rows(3).await;
    app.cleanup().await;
}

/// A command that fails while one request is decided (its buyer's key holds
/// a string) fails that request alone: the ones before and after it in the
/// batch keep the outcome they would have had, and nothing of it is written.
#[tokio::test]
async fn a_redis_error_in_the_middle_of_a_batch_fails_that_request_alone() {
    let app = TestApp::spawn_with_sku(SKU, 10, 5).await;
    let keys = Keys::new(&app.direct_settings.redis.key_prefix);
    let buyer = keys.user(SkuId::new(SKU).unwrap(), UserId::new(8).unwrap());
    app.redis_cmd(&["SET", &buyer, "not a hash"]).await;

    let out = decide(&app, &[ask("e1", 7, 1), ask("e2", 8, 1), ask("e3", 9, 1)]).await;
    assert!(is_reserved(&out[0]), "{out:?}");
    assert!(
        matches!(&out[1], Err(RedisError::Script(text)) if text.contains("WRONGTYPE")),
        "{out:?}"
    );
    assert!(is_reserved(&out[2]), "{out:?}");
    assert_eq!(app.redis_available(SKU).await, Some(8), "two units taken");
    let replay = decide(&app, &[ask("e2", 8, 1)]).await;
    assert!(
        matches!(&replay[0], Err(RedisError::Script(_))),
        "still failing, and still nothing written: {replay:?}"
    );
    app.redis_del(&[buyer]).await;
    app.wait_ledger_rows(2).await;
    assert_eq!(
        app.ledger_rows().await,
        2,
        "no deduction for the failed one"
    );
    app.cleanup().await;
}

/// A Redis that stops answering while batches are queued (`CLIENT PAUSE` on a
/// private server, past the call's bound): every request of those batches
/// answers an error, and each is then either reserved exactly once (found by
/// its replay) or not at all; never a batch half applied.
#[tokio::test]
async fn a_redis_that_stalls_mid_batch_fails_each_request_whole_and_replays_settle_it() {
    let private = PrivateRedis::start().await;
    let opts = TestOptions {
        redis_url: Some(private.url.clone()),
        tweak: Some(std::sync::Arc::new(|s: &mut stockd::config::Settings| {
            s.redis.command_timeout_ms = 200;
            s.redis.connect_timeout_ms = 200;
        })),
        ..TestOptions::default()
    };
    let app = TestApp::with(opts).await;
    app.create_sku(SKU, 100, 1).await;
    let admin = redis::Client::open(private.url.as_str()).unwrap();
    let mut admin = admin.get_multiplexed_async_connection().await.unwrap();
    let _: () = redis::cmd("CLIENT")
        .arg("PAUSE")
        .arg(700)
        .arg("WRITE")
        .query_async(&mut admin)
        .await
        .unwrap();
    let sku = SkuId::new(SKU).unwrap();
    let users: Vec<u64> = (1..=30).collect();
    let answers = reserve_at_once(&app, sku, "p", &users).await;
    let failed = answers.iter().filter(|a| a.is_err()).count();
    assert!(failed > 0, "the pause outlasted the bound: {answers:?}");
    tokio::time::sleep(Duration::from_millis(800)).await;

    let mut reserved = 0;
    for i in 1..=30u64 {
        let rid = RequestId::parse(&format!("p{i}")).unwrap();
        let user = UserId::new(i).unwrap();
        let again = app
            .res
            .redis
            .reservations()
            .reserve(sku, &rid, user, 1, &Requester::Anyone)
            .await;
        match again {
            Ok(ReserveOutcome::Replayed { .. }) | Ok(ReserveOutcome::Reserved { .. }) => {
                reserved += 1
            }
            other => panic!("p{i}: {other:?}"),
        }
    }
    assert_eq!(reserved, 30, "every request holds its unit once");
    assert_eq!(
        app.redis_available(SKU).await,
        Some(70),
        "each unit taken once"
    );
    app.wait_ledger_rows(30).await;
    app.cleanup().await;
}

/// Concurrent requests for one bucket of a split SKU go in shared calls
/// (fewer calls than requests) and sell exactly the stock while the bucket
/// runs dry and leases more.
#[tokio::test]
async fn batches_on_a_split_sku_that_runs_dry_sell_exactly_the_stock() {
    // A server of its own: its script count is this test's alone.
    let private = PrivateRedis::start().await;
    let app = TestApp::with(TestOptions {
        redis_url: Some(private.url.clone()),
        ..TestOptions::default()
    })
    .await;
    let body = json!({"total_stock": 40, "limit_per_user": 1, "buckets": 3});
    let (status, answer) = app.put_sku_json(SKU, &body).await;
    assert!(status == 200 || status == 201, "{status} {answer}");
    let sku = SkuId::new(SKU).unwrap();
    let layout = app.res.redis.buckets().layout(sku).await.unwrap();
    let buyers: Vec<u64> = (1..)
        .filter(|&u| layout.bucket_of(UserId::new(u).unwrap()) == 0)
        .take(80)
        .collect();
    let before = private.script_calls().await;
    let answers = reserve_at_once(&app, sku, "d", &buyers).await;
    let calls_made = private.script_calls().await - before;
    let won = answers.iter().filter(|a| is_reserved(a)).count();
    let refused = answers
        .iter()
        .filter(|a| {
            matches!(
                a,
                Ok(ReserveOutcome::SoldOut) | Ok(ReserveOutcome::Insufficient { .. })
            )
        })
        .count();
    assert_eq!(won, 40, "{answers:?}");
    assert_eq!(refused, 40, "{answers:?}");
    // One call each would be 80 reserve calls, plus the refills' scripts.
    assert!(
        calls_made < 80,
        "{calls_made} script calls for 80 concurrent requests: no batch formed"
    );
    app.wait_ledger_rows(40).await;
    app.cleanup().await;
}

/// A request of `user` carrying the pass `pass_id`, which the script claims
/// for the hold itself (a standalone Redis, contract §20).
fn ask_with_pass(rid: &str, user: u64, count: u32, pass_id: &str) -> Ask {
    Ask {
        pass: stockd::redis::admission::PassArg::ClaimHere {
            user_id: UserId::new(user).unwrap(),
            pass_id: RequestId::parse(pass_id).unwrap(),
            keep_until_ms: stockd::clock::unix_ms() + 60_000,
        },
        ..ask(rid, user, count)
    }
}

/// In one batch, the first hold with a pass claims it and the next hold with
/// the same pass is PASS_USED with nothing written; a hold the stock refuses
/// leaves its pass unclaimed; a replay of the claiming hold replays. Only on
/// a standalone Redis: on a cluster the claim is a call of its own (the
/// buyer's slot is not the SKU's), which `passes.rs` drives over HTTP.
#[tokio::test]
async fn a_pass_claimed_by_the_admission_buys_one_hold_of_a_batch() {
    let app = TestApp::spawn_with_sku(SKU, 3, 5).await;
    if app.res.redis.is_cluster() {
        app.cleanup().await;
        return;
    }
    let out = decide(
        &app,
        &[
            ask_with_pass("p1", 7, 1, "pass-a"),
            ask_with_pass("p2", 7, 1, "pass-a"),
            ask_with_pass("p3", 8, 5, "pass-b"),
            ask_with_pass("p1", 7, 1, "pass-a"),
        ],
    )
    .await;
    assert!(is_reserved(&out[0]), "{out:?}");
    assert!(matches!(out[1], Ok(ReserveOutcome::PassUsed)), "{out:?}");
    assert!(
        matches!(out[2], Ok(ReserveOutcome::Insufficient { .. })),
        "{out:?}"
    );
    assert!(
        matches!(out[3], Ok(ReserveOutcome::Replayed { .. })),
        "{out:?}"
    );
    let keys = Keys::new(&app.direct_settings.redis.key_prefix);
    let user = UserId::new(7).unwrap();
    let mut conn = app.redis_conn().await;
    let holder: Option<String> = redis::cmd("GET")
        .arg(keys.pass(user, &RequestId::parse("pass-a").unwrap()))
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(
        holder.as_deref(),
        Some("r:1:p1"),
        "the hold that claimed it"
    );
    let refused: Option<String> = redis::cmd("GET")
        .arg(keys.pass(
            UserId::new(8).unwrap(),
            &RequestId::parse("pass-b").unwrap(),
        ))
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(refused, None, "a refused hold does not use its pass up");
    let unused_p2: Option<String> = redis::cmd("HGET")
        .arg(keys.reservation(SkuId::new(SKU).unwrap(), &RequestId::parse("p2").unwrap()))
        .arg("user")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(unused_p2, None, "PASS_USED writes no record");
    assert_eq!(app.redis_available(SKU).await, Some(2), "one unit taken");
    app.wait_ledger_rows(1).await;
    app.cleanup().await;
}

/// A batch writes one outbox entry for all it admitted (each reply names
/// the entry and its place in it, the relay reads each deduction back with
/// its own buyer and client), and the entry goes only once every one of its
/// deductions was confirmed: here the relay publishes them (no api did), the
/// ledger gets all four, and the entry is removed after the fourth.
#[tokio::test]
async fn a_batch_shares_one_outbox_entry_removed_once_all_are_confirmed() {
    let app = TestApp::spawn_with_sku(SKU, 10, 1).await;
    let mut asks: Vec<Ask> = (1..=5).map(|i| ask(&format!("o{i}"), 200 + i, 1)).collect();
    asks[1].requester = "cshop,a:b".into();
    asks[2].user_id = asks[0].user_id; // refused: the buyer's limit is 1
    let out = decide(&app, &asks).await;
    let places: Vec<(u16, u16)> = (out.iter())
        .filter_map(|o| match o {
            Ok(ReserveOutcome::Reserved { outbox, .. }) => Some((outbox.index, outbox.of)),
            _ => None,
        })
        .collect();
    assert_eq!(places, vec![(0, 4), (1, 4), (2, 4), (3, 4)], "{out:?}");
    assert_eq!(
        app.res.redis.outbox().len(TestApp::sku(SKU)).await.unwrap(),
        1
    );
    let entries = app
        .res
        .redis
        .outbox()
        .stale(TestApp::sku(SKU), 0, 10)
        .await
        .unwrap();
    let read: Vec<(String, u64, Option<String>, i64)> = (entries.iter())
        .map(|e| {
            let told = e.told.first().map_or(-1, |t| t.1);
            let m = &e.message;
            (
                m.request_id.to_string(),
                m.user_id.get(),
                m.client.clone(),
                told,
            )
        })
        .collect();
    let client = Some("shop,a:b".to_string());
    assert_eq!(
        read,
        vec![
            ("o1".into(), 201, None, 9),
            ("o2".into(), 202, client, 8),
            ("o4".into(), 204, None, 7),
            ("o5".into(), 205, None, 6),
        ]
    );
    app.wait_ledger_rows(4).await;
    app.eventually(
        "the shared entry removed",
        Duration::from_secs(20),
        || async { app.res.redis.outbox().len(TestApp::sku(SKU)).await.unwrap() == 0 },
    )
    .await;
    app.cleanup().await;
}
