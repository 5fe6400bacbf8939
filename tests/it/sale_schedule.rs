//! The sale's clock in the reconciler (docs/contract.md §19, "Scheduled
//! warm-up" and "Events"): a SKU whose sale opens within
//! `sale.warmup_lead_secs` is warmed from MySQL once per opening (again when
//! the opening moves), never one outside the lead; another SKU's live sale
//! does not hold it back; a warm-up refused near the opening pages once, as
//! does a SKU the check after the warm-up finds inconsistent;
//! openings and closings are told once each across passes and reconcilers.
//! The schedule's pass is driven directly, as the reconciler role runs it.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use mysql_async::prelude::Queryable;
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::helpers::events::EventTap;
use crate::helpers::{poll_until, TestApp, TestOptions};
use stockd::clock::{rfc3339_ms, unix_ms};
use stockd::ops::sale_schedule::{SaleSchedule, WarmResult};

fn now() -> i64 {
    unix_ms() as i64
}

/// Sets SKU `sku`'s window (its stock as every test here creates it: 10
/// units, 5 per buyer).
async fn set_window(app: &TestApp, sku: u64, opens_ms: i64, closes_ms: Option<i64>) {
    let sale = json!({"opens_at": rfc3339_ms(opens_ms as u64),
                      "closes_at": closes_ms.map(|c| rfc3339_ms(c as u64))});
    let body = json!({"total_stock": 10, "limit_per_user": 5, "sale": sale});
    let (status, body) = app.put_sku_json(sku, &body).await;
    assert_eq!(status, 200, "{body}");
}

/// (event id, data) of every staged event of `kind`, by outbox order.
async fn staged(app: &TestApp, kind: &str) -> Vec<(String, Value)> {
    let mut conn = app.mysql().await;
    let rows: Vec<(Vec<u8>, Vec<u8>)> = conn
        .exec(
            "SELECT event_id, data FROM event_outbox WHERE type = ? ORDER BY seq",
            (kind,),
        )
        .await
        .unwrap();
    (rows.into_iter())
        .map(|(id, data)| {
            let id = String::from_utf8(id).unwrap();
            (id, serde_json::from_slice(&data).unwrap())
        })
        .collect()
}

/// The SKU's warm marker (`sale_warmed_for_ms`).
async fn warmed_for(app: &TestApp, sku: u64) -> Option<i64> {
    let mut conn = app.mysql().await;
    let sql = "SELECT sale_warmed_for_ms FROM sku_stock WHERE sku_id = ?";
    conn.exec_first::<Option<i64>, _, _>(sql, (sku,))
        .await
        .unwrap()
        .flatten()
}

/// The SKUs a pass warmed, with their results.
fn results(warmups: &[(stockd::domain::SkuId, WarmResult)]) -> Vec<(u64, WarmResult)> {
    (warmups.iter())
        .map(|(sku, r)| (sku.get(), r.clone()))
        .collect()
}

/// A SKU opening within the lead is warmed by one pass: Redis gets MySQL's
/// stock, the marker names the opening, `sale_warmed` is staged once and
/// counted. The next pass leaves it; a moved opening warms it again; a SKU
/// opening beyond the lead is not warmed.
#[tokio::test]
async fn a_sku_opening_within_the_lead_is_warmed_once_per_opening() {
    let app = TestApp::spawn_with_sku(1, 10, 5).await;
    app.create_sku(2, 10, 5).await;
    let opens = now() + 600_000;
    set_window(&app, 1, opens, None).await;
    set_window(&app, 2, now() + 7_200_000, None).await;
    app.redis_incr_available(1, -3).await; // Redis lost three units' worth
    let before = app
        .metric_sum("stockd_sale_warmups_total{result=\"warmed\"}")
        .await;
    let schedule = SaleSchedule::from_resources(&app.res);

    let first = schedule.run_once().await.unwrap();
    assert_eq!(
        results(&first.warmups),
        vec![(1, WarmResult::Warmed { available: 10 })]
    );
    assert_eq!(app.redis_available(1).await, Some(10), "MySQL's stock");
    assert_eq!(warmed_for(&app, 1).await, Some(opens));
    assert_eq!(warmed_for(&app, 2).await, None, "beyond the lead");
    let events = staged(&app, "stockd.sku.sale_warmed").await;
    assert_eq!(events.len(), 1, "{events:?}");
    assert!(events[0].0.starts_with("skus/1#sale_warmed@"), "{events:?}");
    assert_eq!(events[0].1["opens_at"], rfc3339_ms(opens as u64));
    assert_eq!(events[0].1["available"], 10);
    let after = app
        .metric_sum("stockd_sale_warmups_total{result=\"warmed\"}")
        .await;
    assert!(after >= before + 1.0, "{before} -> {after}");

    let second = schedule.run_once().await.unwrap();
    assert!(second.warmups.is_empty(), "{:?}", second.warmups);
    assert_eq!(staged(&app, "stockd.sku.sale_warmed").await.len(), 1);

    let moved = opens + 60_000;
    set_window(&app, 1, moved, None).await;
    app.redis_incr_available(1, -2).await;
    let third = schedule.run_once().await.unwrap();
    assert_eq!(
        results(&third.warmups),
        vec![(1, WarmResult::Warmed { available: 10 })]
    );
    assert_eq!(app.redis_available(1).await, Some(10));
    assert_eq!(warmed_for(&app, 1).await, Some(moved));
    let events = staged(&app, "stockd.sku.sale_warmed").await;
    assert_eq!(events.len(), 2, "{events:?}");
    assert_eq!(events[1].1["opens_at"], rfc3339_ms(moved as u64));
    app.assert_conserved(2).await;
    app.finish_drained_and_conserved(1).await;
}

/// Another SKU's sale does not hold a warm-up back: its reservation is
/// accepted and still queued for the consumer when the pass starts, and the
/// SKU opening soon is warmed once the queue passed the warm-up's probe.
#[tokio::test]
async fn another_skus_sale_does_not_hold_back_a_scheduled_warmup() {
    let mut app = TestApp::spawn_with_sku(1, 10, 5).await;
    app.create_sku(2, 10, 5).await;
    set_window(&app, 1, now() + 600_000, None).await;
    app.stop_consumer().await;
    app.reserve_ok(2, "y1", 1, 1).await;
    let schedule = Arc::new(SaleSchedule::from_resources(&app.res));
    let pass = tokio::spawn({
        let schedule = schedule.clone();
        async move { schedule.run_once().await.unwrap() }
    });
    // The consumer comes back while the warm-up waits for its probe.
    tokio::time::sleep(Duration::from_millis(300)).await;
    app.start_consumer();
    let report = pass.await.unwrap();
    assert_eq!(
        results(&report.warmups),
        vec![(1, WarmResult::Warmed { available: 10 })]
    );
    app.wait_ledger_rows(1).await;
    app.wait_drained(2).await;
    app.assert_conserved(2).await;
    app.finish_drained_and_conserved(1).await;
}

/// A warm-up refused for the SKU's own work in flight is retried each pass:
/// far from the opening it does not page; near it, it pages once however
/// many passes it stays refused; once the work drained it is warmed.
#[tokio::test]
async fn a_warmup_refused_near_the_opening_pages_once() {
    let (url, bodies) = webhook_sink().await;
    let mut app = TestApp::with(TestOptions {
        webhook_url: Some(url),
        tweak: Some(Arc::new(|s| s.reconcile.warmup_probe_wait_ms = 300)),
        ..TestOptions::default()
    })
    .await;
    app.create_sku(1, 10, 5).await;
    app.stop_consumer().await;
    app.reserve_ok(1, "x1", 1, 1).await; // queued: in flight for SKU 1
    let schedule = SaleSchedule::from_resources(&app.res);
    let refusals = app
        .metric_sum("stockd_sale_warmups_total{result=\"refused\"}")
        .await;

    set_window(&app, 1, now() + 3_000_000, None).await; // within the lead, far
    let far = schedule.run_once().await.unwrap();
    assert!(
        matches!(results(&far.warmups)[..], [(1, WarmResult::Refused(_))]),
        "{:?}",
        far.warmups
    );
    set_window(&app, 1, now() + 60_000, None).await; // near
    for _ in 0..2 {
        let near = schedule.run_once().await.unwrap();
        assert!(
            matches!(results(&near.warmups)[..], [(1, WarmResult::Refused(_))]),
            "{:?}",
            near.warmups
        );
    }
    app.eventually("the page delivered", Duration::from_secs(5), || async {
        !bodies.lock().unwrap().is_empty()
    })
    .await;
    let after = app
        .metric_sum("stockd_sale_warmups_total{result=\"refused\"}")
        .await;
    assert!(after >= refusals + 3.0, "{refusals} -> {after}");
    assert_eq!(warmed_for(&app, 1).await, None);

    app.start_consumer();
    app.wait_ledger_rows(1).await;
    app.wait_drained(1).await;
    let warmed = schedule.run_once().await.unwrap();
    assert_eq!(
        results(&warmed.warmups),
        vec![(1, WarmResult::Warmed { available: 9 })]
    );
    tokio::time::sleep(Duration::from_millis(300)).await; // a stray page would land
    let got = bodies.lock().unwrap().clone();
    assert_eq!(got.len(), 1, "one page for three refusals: {got:?}");
    assert!(
        got[0].contains("\"verdict\":\"SALE_NOT_WARMED\""),
        "{}",
        got[0]
    );
    assert!(got[0].contains("\"sku_id\":1"), "{}", got[0]);
    app.finish_drained_and_conserved(1).await;
}

/// A SKU that is not `OK` after its warm-up (MySQL's own conservation
/// broken) is counted `inconsistent`, not marked nor told, and pages when
/// its opening is near, with the stores' figures.
#[tokio::test]
async fn a_sku_inconsistent_after_its_warmup_pages_and_stays_unwarmed() {
    let (url, bodies) = webhook_sink().await;
    let app = TestApp::with(TestOptions {
        webhook_url: Some(url),
        ..TestOptions::default()
    })
    .await;
    app.create_sku(1, 10, 5).await;
    set_window(&app, 1, now() + 60_000, None).await;
    let mut conn = app.mysql().await;
    let break_it = "UPDATE sku_stock SET available_stock = available_stock - 1 WHERE sku_id = 1";
    conn.query_drop(break_it).await.unwrap();
    let schedule = SaleSchedule::from_resources(&app.res);
    let report = schedule.run_once().await.unwrap();
    assert!(
        matches!(
            results(&report.warmups)[..],
            [(
                1,
                WarmResult::Inconsistent {
                    verdict: stockd::ops::reconcile::Verdict::MysqlInconsistent,
                    mysql_available: 9,
                    ..
                }
            )]
        ),
        "{:?}",
        report.warmups
    );
    assert_eq!(warmed_for(&app, 1).await, None);
    assert!(staged(&app, "stockd.sku.sale_warmed").await.is_empty());
    app.eventually("the page delivered", Duration::from_secs(5), || async {
        !bodies.lock().unwrap().is_empty()
    })
    .await;
    let got = bodies.lock().unwrap().clone();
    assert!(
        got[0].contains("\"verdict\":\"SALE_NOT_WARMED\""),
        "{}",
        got[0]
    );
    assert!(got[0].contains("\"mysql_available\":9"), "{}", got[0]);
    // Mended, so the test ends conserved.
    let mend = "UPDATE sku_stock SET available_stock = available_stock + 1 WHERE sku_id = 1";
    conn.query_drop(mend).await.unwrap();
    app.redis_incr_available(1, 1).await;
    drop(conn);
    app.finish_drained_and_conserved(1).await;
}

/// Openings and closings by Redis's clock are told once each: across
/// passes, and with two reconcilers passing at once. A window moved before
/// it opened tells only its new opening; a SKU without a window, nothing.
/// What a subscriber receives is valid against docs/asyncapi.json.
#[tokio::test]
async fn openings_and_closings_are_told_once_across_passes_and_reconcilers() {
    let app = TestApp::spawn_with_sku(1, 10, 5).await;
    let tap = EventTap::bind(&app, "stockd.sku.#").await;
    app.create_sku(2, 10, 5).await;
    app.create_sku(3, 10, 5).await;
    let start = now();
    let (opens, closes) = (start + 3_000, start + 3_500);
    set_window(&app, 1, opens, Some(closes)).await;
    set_window(&app, 3, start + 3_200, None).await;
    let one = SaleSchedule::from_resources(&app.res);
    let two = SaleSchedule::from_resources(&app.res);
    let early = one.run_once().await.unwrap();
    assert!(early.told.is_empty(), "{:?}", early.told);
    let moved = start + 3_800;
    set_window(&app, 3, moved, None).await; // moved before it opened

    tokio::time::sleep(Duration::from_millis((moved + 200 - now()).max(0) as u64)).await;
    let (a, b) = tokio::join!(one.run_once(), two.run_once());
    let mut told: Vec<(u64, &str)> = (a.unwrap().told.iter())
        .chain(b.unwrap().told.iter())
        .map(|(sku, kind)| (sku.get(), kind.as_str()))
        .collect();
    told.sort();
    assert_eq!(
        told,
        vec![
            (1, "stockd.sku.sale_closed"),
            (1, "stockd.sku.sale_opened"),
            (3, "stockd.sku.sale_opened"),
        ]
    );
    for schedule in [&one, &two] {
        let again = schedule.run_once().await.unwrap();
        assert!(again.told.is_empty(), "{:?}", again.told);
    }
    let opened = staged(&app, "stockd.sku.sale_opened").await;
    let ids: Vec<&str> = opened.iter().map(|(id, _)| id.as_str()).collect();
    let want = [
        format!("skus/1#sale_opened@{opens}"),
        format!("skus/3#sale_opened@{moved}"),
    ];
    assert_eq!(ids, want, "once each, the new opening of SKU 3");
    assert_eq!(
        opened[0].1,
        json!({"sku_id": 1, "opens_at": rfc3339_ms(opens as u64),
               "closes_at": rfc3339_ms(closes as u64)})
    );
    let closed = staged(&app, "stockd.sku.sale_closed").await;
    assert_eq!(closed.len(), 1, "{closed:?}");
    assert_eq!(closed[0].0, format!("skus/1#sale_closed@{closes}"));
    let sale_events = || {
        let kinds = tap.kinds_and_ids();
        let n = |kind: &str| kinds.iter().filter(|(k, _)| k == kind).count();
        (
            n("stockd.sku.sale_warmed"),
            n("stockd.sku.sale_opened"),
            n("stockd.sku.sale_closed"),
        )
    };
    let arrived = poll_until(Duration::from_secs(30), || async {
        sale_events() == (2, 2, 1)
    })
    .await;
    assert!(arrived, "{:?}", tap.kinds_and_ids());
    let report = tap.check_with_sdk_and_asyncapi();
    assert!(report.contains(" 0 errors"), "{report}");
    tap.close().await;
    app.assert_conserved(2).await;
    app.assert_conserved(3).await;
    app.finish_drained_and_conserved(1).await;
}

/// An HTTP sink for alert webhooks: its URL and the bodies it received.
async fn webhook_sink() -> (String, Arc<Mutex<Vec<String>>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    let bodies = Arc::new(Mutex::new(Vec::<String>::new()));
    let sink = bodies.clone();
    tokio::spawn(async move {
        loop {
            let (mut sock, _) = listener.accept().await.unwrap();
            let mut buf = vec![0u8; 8192];
            let n = sock.read(&mut buf).await.unwrap();
            sink.lock()
                .unwrap()
                .push(String::from_utf8_lossy(&buf[..n]).to_string());
            sock.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n")
                .await
                .unwrap();
        }
    });
    (url, bodies)
}
