//! Warm-up and reconciliation: drift between Redis, MySQL and the ledger is
//! found, alerted once, and repaired (contract §8, §10).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use deadpool_redis::redis;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use stockd::ops::reconcile::Verdict;
use stockd::ops::warmup::{warmup, WarmupOutcome};

use crate::helpers::{poll_until, TestApp, TestOptions};

/// The SKU's movements of `kind`, oldest first.
async fn movements_of(app: &TestApp, sku: u64, kind: &str) -> Vec<serde_json::Value> {
    let path = format!("/v1/admin/skus/{sku}/movements?limit=1000");
    let (status, page) = app.get_json_admin(&path).await;
    assert_eq!(status, 200, "{page}");
    (page["movements"].as_array().unwrap().iter())
        .filter(|m| m["kind"] == kind)
        .cloned()
        .collect()
}

async fn warm(app: &TestApp, sku: u64, force: bool) -> (u16, serde_json::Value) {
    let q = if force { "?force=true" } else { "" };
    app.post_json_admin(&format!("/v1/admin/skus/{sku}/warmup{q}"))
        .await
}

/// Warm-up loads a SKU; while reservations are in flight a second warm-up is
/// refused (409) unless forced; after Redis lost the SKU, reservations are 503
/// (never oversold) until warm-up runs.
#[tokio::test]
async fn warmup_is_refused_while_in_flight_and_a_lost_sku_waits_for_it() {
    let mut app = TestApp::spawn_with_sku(1, 10, 5).await;
    let (status, body) = warm(&app, 1, false).await;
    assert_eq!((status, body["available"].as_i64()), (200, Some(10)));
    app.stop_consumer().await;
    app.reserve_ok(1, "f1", 1, 2).await;
    let (status, body) = warm(&app, 1, false).await;
    assert_eq!(
        (status, body["code"].as_str()),
        (409, Some("CONFLICT")),
        "{body}"
    );
    // Forced: proceeds, and keeps the in-flight units out of Redis' count.
    let (status, body) = warm(&app, 1, true).await;
    assert_eq!((status, body["available"].as_i64()), (200, Some(8)));
    let (s, _) = warm(&app, 404, false).await;
    assert_eq!(s, 404);
    app.start_consumer();
    app.wait_ledger_rows(1).await;
    app.wait_drained(1).await;
    // Redis loses the SKU (restart without persistence).
    let mut conn = app.redis_conn().await;
    let key = app.res.redis.keys().sku(TestApp::sku(1));
    let _: () = redis::cmd("DEL")
        .arg(&key)
        .query_async(&mut conn)
        .await
        .unwrap();
    let resp = app.reserve(1, "f2", 2, 1).await;
    assert_eq!(resp.status(), 503);
    let report = app.reconcile(true).await;
    assert_eq!(report.skus[0].verdict, Verdict::RedisBehind);
    assert_eq!(report.skus[0].redis_available, None);
    assert!(
        !report.skus[0].repaired,
        "a lost SKU waits for an explicit warm-up"
    );
    let (status, _) = warm(&app, 1, false).await;
    assert_eq!(status, 200);
    // Only the warm-up that changed what Redis held is a movement.
    let warmups = movements_of(&app, 1, "warmup").await;
    assert_eq!(warmups.len(), 1, "{warmups:?}");
    let w = &warmups[0];
    assert_eq!(
        (
            w["delta"].as_i64(),
            w["redis_available_before"].is_null(),
            w["redis_available_after"].as_i64()
        ),
        (Some(0), true, Some(8)),
        "{w}"
    );
    app.reserve_ok(1, "f2", 2, 1).await;
    app.wait_ledger_rows(2).await;
    app.wait_drained(1).await;
    app.assert_conserved(1).await;
    assert_eq!(app.reconcile(false).await.skus[0].verdict, Verdict::Ok);
    app.cleanup().await;
}

/// Lost Redis writes (failover rollback): REDIS_AHEAD by exactly the lost units,
/// repaired at once; over-admitted reservations end REJECTED; MySQL never < 0.
#[tokio::test]
async fn lost_redis_writes_are_found_repaired_and_never_oversold() {
    let app = TestApp::spawn_with_sku(1, 40, 1).await;
    for u in 0..30u64 {
        assert_eq!(
            app.reserve(1, &format!("a{u}"), u + 1, 1).await.status(),
            201
        );
    }
    app.wait_ledger_rows(30).await;
    app.wait_drained(1).await;
    app.redis_incr_available(1, 10).await; // the failover forgot 10 deductions
    let report = app.reconcile(true).await;
    let line = &report.skus[0];
    assert_eq!(
        (line.verdict, line.drift, line.repaired),
        (Verdict::RedisAhead, 10, true),
        "{line:?}"
    );
    assert_eq!(app.redis_available(1).await, Some(10));
    let repairs = movements_of(&app, 1, "repair").await;
    assert_eq!(repairs.len(), 1, "{repairs:?}");
    let r = &repairs[0];
    assert_eq!(
        (
            r["delta"].as_i64(),
            r["redis_available_before"].as_i64(),
            r["redis_available_after"].as_i64()
        ),
        (Some(0), Some(20), Some(10)),
        "{r}"
    );
    assert_eq!(
        (r["actor"].as_str(), r["reason"].as_str()),
        (Some("reconciler"), Some("REDIS_AHEAD"))
    );
    assert_eq!(app.reconcile(false).await.skus[0].verdict, Verdict::Ok);
    // Unrepaired over-admission: Redis believes in 3 phantom units.
    app.redis_incr_available(1, 3).await;
    let mut accepted = 0;
    for u in 100..115u64 {
        let status = app
            .reserve(1, &format!("b{u}"), u, 1)
            .await
            .status()
            .as_u16();
        accepted += u32::from(status == 201);
    }
    assert_eq!(accepted, 13);
    app.wait_ledger_rows(43).await;
    app.wait_drained(1).await;
    let by_status = app.ledger_by_status(1).await;
    assert_eq!(by_status.get("RESERVED"), Some(&(40, 40)));
    assert_eq!(by_status.get("REJECTED"), Some(&(3, 3)));
    assert_eq!(app.mysql_available(1).await, Some(0));
    app.assert_conserved(1).await;
    assert!(app.reconcile(false).await.healthy());
    app.cleanup().await;
}

/// Leaked stock with the pipeline drained: REDIS_BEHIND, repaired only after a
/// second identical check.
#[tokio::test]
async fn leaked_stock_is_repaired_after_confirmation() {
    let app = TestApp::spawn_with_sku(1, 20, 5).await;
    app.reserve_ok(1, "x", 1, 2).await;
    app.wait_ledger_rows(1).await;
    app.wait_drained(1).await;
    app.redis_incr_available(1, -5).await;
    let first = app.reconcile(true).await.skus[0].clone();
    assert_eq!(
        (first.verdict, first.drift, first.repaired),
        (Verdict::RedisBehind, -5, false)
    );
    let second = app.reconcile(true).await.skus[0].clone();
    assert_eq!(
        (second.verdict, second.repaired),
        (Verdict::RedisBehind, true)
    );
    assert_eq!(app.redis_available(1).await, Some(18));
    let third = app.reconcile(true).await.skus[0].clone();
    assert_eq!(third.verdict, Verdict::Ok);
    assert_eq!(third.redis_conserved, Some(true));
    app.cleanup().await;
}

/// The webhook receives one alert per finding, not one per check.
#[tokio::test]
async fn the_webhook_gets_one_alert_per_finding() {
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
    let app = TestApp::with(TestOptions {
        webhook_url: Some(url),
        ..TestOptions::default()
    })
    .await;
    app.create_sku(1, 10, 5).await;
    app.redis_incr_available(1, -2).await;
    for _ in 0..3 {
        assert_eq!(
            app.reconcile(false).await.skus[0].verdict,
            Verdict::RedisBehind
        );
    }
    app.redis_incr_available(1, 5).await;
    assert_eq!(
        app.reconcile(false).await.skus[0].verdict,
        Verdict::RedisAhead
    );
    app.eventually("both alerts delivered", Duration::from_secs(5), || async {
        bodies.lock().unwrap().len() >= 2
    })
    .await;
    let got = bodies.lock().unwrap().clone();
    assert_eq!(got.len(), 2, "{got:?}");
    assert!(got[0].contains("\"verdict\":\"REDIS_BEHIND\"") && got[0].contains("\"drift\":-2"));
    assert!(got[1].contains("\"verdict\":\"REDIS_AHEAD\""));
    app.cleanup().await;
}

/// No false alarms: 20 s of reserve / confirm / cancel / expiry with a check
/// every second report only OK or IN_FLIGHT, with every winner listed.
#[tokio::test]
async fn a_busy_pipeline_never_looks_like_drift() {
    busy_pipeline_reports_no_drift(None).await;
}

/// The same with too many winners to list (`reconcile.max_winners` 50), where
/// the in-flight figure is an estimate: a release landing between the MySQL
/// and the Redis reads once made this report REDIS_AHEAD with drift 1.
#[tokio::test]
async fn a_busy_pipeline_never_looks_like_drift_when_estimated() {
    busy_pipeline_reports_no_drift(Some(50)).await;
}

async fn busy_pipeline_reports_no_drift(max_winners: Option<usize>) {
    let app = TestApp::with(TestOptions {
        ttl_secs: 2,
        closer: true,
        tweak: max_winners.map(|m| -> crate::helpers::SettingsTweak {
            Arc::new(move |s| s.reconcile.max_winners = m)
        }),
        ..TestOptions::default()
    })
    .await;
    app.create_sku(1, 1_000_000, 1_000).await;
    let deadline = Instant::now() + Duration::from_secs(20);
    // Load rounds finished so far: the checks below pace themselves on it.
    let rounds_done = AtomicU64::new(0);
    let load = async {
        let mut n: u64 = 0;
        while Instant::now() < deadline {
            let batch = (0..16).map(|k| {
                let rid = format!("l{n}-{k}");
                let app = &app;
                async move {
                    let status = app
                        .reserve(1, &rid, (n * 16 + k) % 500 + 1, 1)
                        .await
                        .status();
                    if status.as_u16() == 201 {
                        match k % 3 {
                            0 => drop(app.confirm(1, &rid).await),
                            1 => drop(app.cancel(1, &rid).await),
                            _ => {} // left to expire
                        }
                    }
                }
            });
            futures_util::future::join_all(batch).await;
            n += 1;
            rounds_done.store(n, Ordering::SeqCst);
        }
        n
    };
    let checks = async {
        let mut verdicts = Vec::new();
        let mut seen = 0;
        while Instant::now() < deadline {
            // One check after each round of the load that landed since the
            // last check: every check looks at a pipeline in motion.
            let left = deadline.saturating_duration_since(Instant::now());
            let next_round = || async { rounds_done.load(Ordering::SeqCst) > seen };
            if !poll_until(left, next_round).await {
                break;
            }
            seen = rounds_done.load(Ordering::SeqCst);
            let report = app.reconcile(false).await;
            verdicts.push((report.skus[0].verdict, report.skus[0].drift));
        }
        verdicts
    };
    let (rounds, verdicts) = tokio::join!(load, checks);
    assert!(rounds > 10, "the load ran");
    assert!(verdicts.len() >= 15);
    for (verdict, drift) in &verdicts {
        assert!(
            verdict.is_healthy(),
            "false alarm: {verdict:?} drift {drift}; all: {verdicts:?}"
        );
    }
    app.finish_drained(1).await;
}

/// The library warm-up reports a SKU MySQL does not know.
#[tokio::test]
async fn warming_an_unknown_sku_is_not_found() {
    let app = TestApp::spawn().await;
    let res = &app.res;
    let outcome = warmup(
        &res.db,
        &res.redis,
        &res.publisher,
        TestApp::sku(77),
        false,
        &res.settings.reconcile,
    )
    .await
    .unwrap();
    assert_eq!(outcome, WarmupOutcome::NotFound);
    app.cleanup().await;
}
