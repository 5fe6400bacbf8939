//! Dependency outages (issue: nothing accepted is ever lost). MySQL, Redis and
//! the broker are reached through a `FaultProxy` that the test takes down or
//! freezes; the shared servers are never touched.

use std::sync::Arc;
use std::time::{Duration, Instant};

use lapin::options::{BasicConsumeOptions, BasicQosOptions};
use serde_json::Value;

use crate::helpers::{TestApp, TestOptions};
use crate::proxy::{FaultProxy, Mode};

/// Options whose MySQL URL goes through `proxy`, with short retries so the old
/// "retry then dead-letter" path would fire within the outage.
fn mysql_via(proxy: &FaultProxy, consumer: bool) -> TestOptions {
    let port = proxy.port;
    TestOptions {
        consumer,
        tweak: Some(Arc::new(move |s| {
            // prefer_socket=false: mysql_async would otherwise switch to the
            // server's Unix socket and bypass the proxy.
            s.mysql.url = s
                .mysql
                .url
                .replace("127.0.0.1:3306", &format!("127.0.0.1:{port}"))
                + "?prefer_socket=false";
            s.mysql.connect_timeout_secs = 1;
            s.mysql.query_timeout_ms = 1000;
            s.amqp.max_retries = 1;
            s.amqp.retry_delay_ms = 200;
            s.amqp.delivery_limit = 5;
        })),
        ..TestOptions::default()
    }
}

/// Defect: a MySQL outage dead-lettered deductions answered 201. Now the
/// consumer holds them behind its breaker and applies them when MySQL is back.
#[tokio::test]
async fn a_mysql_outage_dead_letters_nothing_and_every_201_reaches_mysql() {
    let proxy = FaultProxy::start("127.0.0.1:3306").await;
    let app = TestApp::with(mysql_via(&proxy, true)).await;
    app.create_sku(1, 100, 5).await;
    proxy.set(Mode::Down);
    for i in 0..20 {
        let response = app.reserve(1, &format!("o{i}"), 100 + i, 1).await;
        assert_eq!(response.status(), 201, "Redis and the broker are up");
    }
    app.eventually("the breaker opened", Duration::from_secs(10), || async {
        app.res.mysql_breaker.is_open()
    })
    .await;
    let opened = Instant::now();
    let topology = app.res.publisher.topology().clone();
    // The old path dead-lettered a deduction after max_retries + 1 failed
    // attempts, retry_delay apart. Wait until the consumer held its batch
    // through as many failed MySQL probes and longer than that span — or
    // until something reached the DLQ, which the assertion below reports.
    let amqp = &app.res.settings.amqp;
    let old_path_attempts = u64::from(amqp.max_retries) + 1;
    let old_path_span = Duration::from_millis(amqp.retry_delay_ms) * amqp.max_retries;
    app.eventually(
        "the consumer held through the old path's attempts",
        Duration::from_secs(20),
        || async {
            app.queue_depth(&topology.deduct_dlq).await > 0
                || (app.res.mysql_breaker.is_open()
                    && app.res.mysql_breaker.failed_probes() >= old_path_attempts
                    && opened.elapsed() > old_path_span)
        },
    )
    .await;
    assert_eq!(
        app.queue_depth(&topology.deduct_dlq).await,
        0,
        "nothing dead-lettered"
    );
    proxy.set(Mode::Pass);
    app.wait_ledger_rows(20).await;
    app.wait_drained(1).await;
    assert!(!app.res.mysql_breaker.is_open(), "the breaker closed again");
    assert_eq!(app.queue_depth(&topology.deduct_dlq).await, 0);
    assert_eq!(app.queue_depth(&topology.deduct_retry_queue).await, 0);
    app.finish_conserved(1).await;
}

/// Defect: a consumer crash loop let `x-delivery-limit` dead-letter valid
/// deductions. Six crashes while holding the whole prefetch (a channel closed
/// without acks returns every delivery and counts one redelivery) leave every
/// deduction for the consumer.
#[tokio::test]
async fn six_consumer_crashes_holding_the_prefetch_dead_letter_nothing() {
    let mut app = TestApp::with(TestOptions {
        consumer: false,
        ..TestOptions::default()
    })
    .await;
    app.create_sku(1, 100, 100).await;
    for i in 0..30 {
        assert_eq!(app.reserve(1, &format!("c{i}"), 7, 1).await.status(), 201);
    }
    let topology = app.res.publisher.topology().clone();
    for _crash in 0..6 {
        let (conn, ch) = app.broker_channel("crashing-consumer").await;
        ch.basic_qos(1000, BasicQosOptions::default())
            .await
            .unwrap();
        let mut deliveries = ch
            .basic_consume(
                topology.deduct_queue.as_str().into(),
                "crash".into(),
                BasicConsumeOptions::default(),
                lapin::types::FieldTable::default(),
            )
            .await
            .unwrap();
        let mut held = 0;
        while held < 1 {
            use futures_util::StreamExt;
            let got = tokio::time::timeout(Duration::from_secs(10), deliveries.next()).await;
            assert!(matches!(got, Ok(Some(Ok(_)))), "a delivery to hold");
            held += 1;
        }
        // Hold the whole prefetch: every deduction delivered to this consumer.
        app.eventually("all delivered", Duration::from_secs(10), || async {
            app.queue_depth(&topology.deduct_queue).await == 0
        })
        .await;
        // The crash: the connection goes away with every delivery unacked.
        let _ = conn.close(320, "crash".into()).await;
    }
    assert_eq!(
        app.queue_depth(&topology.deduct_dlq).await,
        0,
        "nothing dead-lettered"
    );
    app.start_consumer();
    app.wait_ledger_rows(30).await;
    app.wait_drained(1).await;
    assert_eq!(app.queue_depth(&topology.deduct_dlq).await, 0);
    app.finish_conserved(1).await;
}

/// A poison message is dead-lettered by the consumer itself, with the reason
/// in header `x-stockd-reason` for the operator.
#[tokio::test]
async fn a_poison_message_is_dead_lettered_with_its_reason() {
    let app = TestApp::spawn().await;
    app.publish_raw(b"{not json").await;
    let topology = app.res.publisher.topology().clone();
    app.eventually("poison in the DLQ", Duration::from_secs(10), || async {
        app.queue_depth(&topology.deduct_dlq).await == 1
    })
    .await;
    let (conn, ch) = app.broker_channel("dlq-reader").await;
    let got = ch
        .basic_get(
            topology.deduct_dlq.as_str().into(),
            lapin::options::BasicGetOptions { no_ack: true },
        )
        .await
        .unwrap()
        .expect("the dead letter");
    let headers = got.delivery.properties.headers().clone().unwrap();
    let reason = headers.inner().get("x-stockd-reason").cloned();
    match reason {
        Some(lapin::types::AMQPValue::LongString(text)) => {
            assert!(text.to_string().starts_with("poison"), "{text}")
        }
        other => panic!("no reason header: {other:?}"),
    }
    let _ = conn.close(200, "".into()).await;
    app.cleanup().await;
}

/// Defect (lost-writes issue): MySQL had no query timeout. With MariaDB frozen
/// (no byte moves, no RST), confirm and cancel answer 503 + Retry-After within
/// `mysql.query_timeout_ms` plus a margin, instead of waiting for TCP.
#[tokio::test]
async fn confirm_and_cancel_answer_503_within_the_query_timeout_when_mysql_is_frozen() {
    let proxy = FaultProxy::start("127.0.0.1:3306").await;
    let app = TestApp::with(mysql_via(&proxy, true)).await;
    app.create_sku(1, 10, 5).await;
    app.reserve_ok(1, "f1", 7, 1).await;
    app.reserve_ok(1, "f2", 7, 1).await;
    app.wait_ledger_rows(2).await;
    proxy.set(Mode::Frozen);
    for (path, rid) in [("confirm", "f1"), ("cancel", "f2")] {
        let started = Instant::now();
        let url = app.url(&format!("/v1/skus/1/reservations/{rid}/{path}"));
        let response = app.client.post(url).send().await.unwrap();
        let took = started.elapsed();
        assert_eq!(response.status(), 503, "{path}");
        assert!(response.headers().contains_key("retry-after"));
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["code"], "UNAVAILABLE");
        // query_timeout_ms 1000 (+ margin for a busy test machine)
        assert!(took < Duration::from_millis(2500), "{path} took {took:?}");
    }
    proxy.set(Mode::Pass);
    app.eventually("confirm works again", Duration::from_secs(20), || async {
        app.confirm(1, "f1").await.0 == 200
    })
    .await;
    app.cleanup().await;
}

/// Defect (lost-writes issue): a short MySQL outage across the expiry of two
/// pending reservations dead-lettered both expiry messages. The closer now
/// holds them behind the breaker: nothing in `expiry.dlq`, both released once.
#[tokio::test]
async fn a_mysql_outage_across_expiry_dead_letters_no_expiry() {
    let proxy = FaultProxy::start("127.0.0.1:3306").await;
    let mut opts = mysql_via(&proxy, true);
    opts.closer = true;
    opts.ttl_secs = 2;
    let app = TestApp::with(opts).await;
    app.create_sku(1, 10, 5).await;
    app.reserve_ok(1, "e1", 7, 1).await;
    app.reserve_ok(1, "e2", 8, 1).await;
    app.wait_ledger_rows(2).await;
    let probes_before = app.res.mysql_breaker.failed_probes();
    proxy.set(Mode::Down);
    let topology = app.res.publisher.topology().clone();
    // The delay queue releases both expiries into the closer while MySQL is
    // down; the old requeue loop dead-lettered each after delivery_limit + 1
    // failed deliveries. Wait until neither waits in a queue (the closer holds
    // both) and the closer held through as many failed attempts (its first
    // try + delivery_limit probes) — or until one reached the expiry DLQ,
    // which the assertion below reports.
    let old_path_probes = u64::from(app.res.settings.amqp.delivery_limit);
    app.eventually(
        "both expiries held by the closer through delivery_limit failed probes",
        Duration::from_secs(30),
        || async {
            if app.queue_depth(&topology.expiry_dlq).await > 0 {
                return true;
            }
            app.queue_depth(&topology.expiry_delay_queue).await == 0
                && app.queue_depth(&topology.expiry_queue).await == 0
                && app.res.mysql_breaker.is_open()
                && app.res.mysql_breaker.failed_probes() - probes_before >= old_path_probes
        },
    )
    .await;
    assert_eq!(
        app.queue_depth(&topology.expiry_dlq).await,
        0,
        "no expiry dead-lettered"
    );
    proxy.set(Mode::Pass);
    app.eventually("both released", Duration::from_secs(20), || async {
        app.ledger_status(1, "e1").await.as_deref() == Some("RELEASED")
            && app.ledger_status(1, "e2").await.as_deref() == Some("RELEASED")
    })
    .await;
    app.eventually("stock back in Redis", Duration::from_secs(10), || async {
        app.redis_available(1).await == Some(10)
    })
    .await;
    assert_eq!(app.mysql_available(1).await, Some(10), "released once");
    assert_eq!(app.queue_depth(&topology.expiry_dlq).await, 0);
    app.cleanup().await;
}

/// Defect (lost-writes issue): answers came later than the configured
/// timeouts. With Redis frozen a reserve answers 503 within
/// `redis.connect_timeout_ms + redis.command_timeout_ms` (+ margin); with the
/// broker frozen it answers 202 within `amqp.publish_timeout_ms` (+ margin).
#[tokio::test]
async fn every_answer_comes_within_the_documented_bound_when_redis_or_the_broker_freezes() {
    let redis_proxy = FaultProxy::start("127.0.0.1:6379").await;
    let amqp_proxy = FaultProxy::start("127.0.0.1:5672").await;
    let (rp, ap) = (redis_proxy.port, amqp_proxy.port);
    let app = TestApp::with(TestOptions {
        tweak: Some(Arc::new(move |s| {
            redis_through_proxy(s, rp, 300);
            s.amqp.urls.clear();
            s.amqp.url = s
                .amqp
                .url
                .replace("127.0.0.1:5672", &format!("127.0.0.1:{ap}"));
            s.amqp.publish_timeout_ms = 500;
        })),
        ..TestOptions::default()
    })
    .await;
    app.create_sku(1, 1000, 1000).await;
    app.reserve_ok(1, "warm", 1, 1).await;

    redis_proxy.set(Mode::Frozen);
    // bound: 300 + 300 ms; margin for a busy test machine
    let slowest = slowest_of_ten_reserves(&app, "r", 503).await;
    assert!(
        slowest < Duration::from_millis(1500),
        "slowest 503 took {slowest:?}"
    );
    redis_proxy.set(Mode::Pass);

    // A 503 is "outcome unknown": a command that was on the wire may still run
    // once Redis answers, so only the answered ids are followed below.
    let mut accepted = vec!["warm".to_string(), "again".to_string()];
    app.eventually("Redis answers again", Duration::from_secs(10), || async {
        app.reserve(1, "again", 1, 1).await.status().as_u16() < 500
    })
    .await;
    amqp_proxy.set(Mode::Frozen);
    let amqp_failures = failures_of(&app, "amqp").await;
    let slowest = slowest_of_ten_reserves(&app, "b", 202).await;
    accepted.extend((0..10).map(|i| format!("b{i}")));
    // bound: Redis call + 500 ms publish timeout; margin for a busy machine
    assert!(
        slowest < Duration::from_millis(1500),
        "slowest 202 took {slowest:?}"
    );
    // The broker's outage is logged and counted like Redis' and MySQL's,
    // though its callers got 202, not 503.
    assert!(
        failures_of(&app, "amqp").await > amqp_failures,
        "publishes that timed out count as broker failures"
    );
    amqp_proxy.set(Mode::Pass);
    app.eventually(
        "every accepted id in MySQL",
        Duration::from_secs(30),
        || async {
            for rid in &accepted {
                if app.ledger_status(1, rid).await.is_none() {
                    return false;
                }
            }
            true
        },
    )
    .await;
    // Late confirms and relay republishes (duplicates) must be consumed too.
    app.finish_drained(1).await;
}

/// Ten reserves of buyer 1 (ids `{prefix}0`..`{prefix}9`), each answered
/// `status`; the slowest answer's time.
async fn slowest_of_ten_reserves(app: &TestApp, prefix: &str, status: u16) -> Duration {
    let mut slowest = Duration::ZERO;
    for i in 0..10 {
        let started = Instant::now();
        let response = app.reserve(1, &format!("{prefix}{i}"), 1, 1).await;
        slowest = slowest.max(started.elapsed());
        assert_eq!(response.status(), status, "{prefix}{i}");
    }
    slowest
}

/// Points `s` at one standalone Redis through the proxy on `port`, with
/// connect and command timeouts of `timeout_ms` each.
fn redis_through_proxy(s: &mut stockd::config::Settings, port: u16, timeout_ms: u64) {
    crate::helpers::standalone_redis(s);
    s.redis.url = s
        .redis
        .url
        .replace("127.0.0.1:6379", &format!("127.0.0.1:{port}"));
    s.redis.command_timeout_ms = timeout_ms;
    s.redis.connect_timeout_ms = timeout_ms;
}

/// Defect: during an outage every failed request logged an ERROR line. Now the
/// outage log records the outage once and counts requests in a metric.
#[tokio::test]
async fn an_outage_is_logged_once_and_counted_per_request() {
    let proxy = FaultProxy::start("127.0.0.1:6379").await;
    let port = proxy.port;
    let app = TestApp::with(TestOptions {
        tweak: Some(Arc::new(move |s| redis_through_proxy(s, port, 200))),
        ..TestOptions::default()
    })
    .await;
    app.create_sku(1, 10, 5).await;
    proxy.set(Mode::Down);
    let before = failures(&app).await;
    for i in 0..25 {
        assert_eq!(app.reserve(1, &format!("d{i}"), 1, 1).await.status(), 503);
    }
    let after = failures(&app).await;
    assert!(
        after - before >= 25.0,
        "every failed request is counted ({before} -> {after})"
    );
    proxy.set(Mode::Pass);
    app.cleanup().await;
}

async fn failures(app: &TestApp) -> f64 {
    failures_of(app, "redis").await
}

async fn failures_of(app: &TestApp, dependency: &str) -> f64 {
    let series = format!("stockd_dependency_failures_total{{dependency=\"{dependency}\"}}");
    app.metric_sum(&series).await
}

/// A worker role (consumer, closer) shows its MySQL breaker on its own
/// `/readyz` (`metrics.bind`): 503 while it holds deliveries, 200 again after.
#[tokio::test]
async fn a_workers_readyz_shows_its_mysql_breaker() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let addr = listener.local_addr().unwrap();
    let breaker = Arc::new(stockd::health::Breaker::new("mysql"));
    let cancel = tokio_util::sync::CancellationToken::new();
    let server =
        stockd::telemetry::metrics_listener::start(listener, breaker.clone(), cancel.clone())
            .unwrap();
    let client = reqwest::Client::new();
    let readyz = || async {
        let response = client
            .get(format!("http://{addr}/readyz"))
            .send()
            .await
            .unwrap();
        let status = response.status().as_u16();
        (status, response.json::<Value>().await.unwrap())
    };
    assert_eq!(readyz().await.0, 200);
    breaker.trip("test", &"connection refused");
    let (status, body) = readyz().await;
    assert_eq!(status, 503);
    assert_eq!(body["checks"]["mysql_breaker_closed"], false);
    breaker.reset("test");
    assert_eq!(readyz().await.0, 200);
    cancel.cancel();
    let _ = server.await;
}
