//! Distributed tracing (issue 30) against a real OTLP receiver: PyPI's
//! `opentelemetry-proto` decoding what stockd exports (tests/otlp_receiver.py,
//! installed by `scripts/test-tools.sh otlp-receiver`).

use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::helpers::{poll_until, TestApp, TestOptions};
use crate::owned::OwnedProcess;
use crate::ports::free_port;

/// The caller's trace: sampled (flag 01), so it is recorded whatever the ratio.
const CALLER_SPAN: &str = "00f067aa0ba902b7";

/// The receiver, running until dropped; its spans as JSON lines in `out`.
struct Receiver {
    _process: OwnedProcess,
    out: PathBuf,
    endpoint: String,
}

impl Receiver {
    fn start(id: &str) -> Self {
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
        let python = crate::helpers::test_tool("otlp-receiver");
        let dir = std::env::temp_dir();
        let out = dir.join(format!("stockd-otlp-{id}.jsonl"));
        let port = free_port();
        let mut cmd = Command::new(python);
        cmd.arg(root.join("tests/otlp_receiver.py"))
            .arg(port.to_string())
            .arg(&out);
        let process = OwnedProcess::spawn(
            "otlp receiver",
            cmd,
            &dir.join(format!("stockd-otlp-{id}.log")),
        );
        let endpoint = format!("http://127.0.0.1:{port}");
        Self {
            _process: process,
            out,
            endpoint,
        }
    }

    fn spans(&self) -> Vec<Value> {
        let text = std::fs::read_to_string(&self.out).unwrap_or_default();
        text.lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.out);
    }
}

fn traced(endpoint: String, ratio: f64, timeout_ms: u64, queue: usize) -> TestOptions {
    TestOptions {
        tweak: Some(Arc::new(move |s| {
            s.telemetry.otlp.endpoint = Some(endpoint.clone());
            s.telemetry.otlp.sample_ratio = ratio;
            s.telemetry.otlp.export_timeout_ms = timeout_ms;
            s.telemetry.otlp.queue_max = queue;
        })),
        ..TestOptions::default()
    }
}

/// The spans of trace `trace_id` once every one of `names` has reached the
/// receiver (within 15 s; the test fails naming what did arrive otherwise).
async fn trace_holding(receiver: &Receiver, trace_id: &str, names: &[&str]) -> Vec<Value> {
    let mine = || -> Vec<Value> {
        (receiver.spans().into_iter())
            .filter(|s| s["trace_id"] == trace_id)
            .collect()
    };
    let complete = poll_until(Duration::from_secs(15), || async {
        let spans = mine();
        names.iter().all(|n| named(&spans, n).is_some())
    })
    .await;
    let spans = mine();
    assert!(complete, "the trace is incomplete: {spans:#?}");
    spans
}

fn named<'a>(spans: &'a [Value], name: &str) -> Option<&'a Value> {
    spans.iter().find(|s| s["name"] == name)
}

/// A reservation sent with a sampled `traceparent` makes one trace, under the
/// caller's span, holding the api span, the Redis script, the publish and the
/// consumer's commit of that deduction; the consumer's batch span links to
/// the publish. With a 0 ratio, a request without `traceparent` is not
/// recorded (parent-based sampling) but still answers a trace id.
#[tokio::test]
async fn one_trace_holds_the_request_redis_publish_and_mysql_commit() {
    let receiver = Receiver::start(&uuid::Uuid::new_v4().simple().to_string());
    let app = TestApp::with(traced(receiver.endpoint.clone(), 0.0, 2000, 2048)).await;
    app.create_sku(1, 5, 5).await;
    let trace_id = &uuid::Uuid::new_v4().simple().to_string();
    let resp = app
        .client
        .post(app.url("/v1/skus/1/reservations"))
        .header("traceparent", format!("00-{trace_id}-{CALLER_SPAN}-01"))
        .json(&serde_json::json!({"request_id": "tr-1", "user_id": 1, "count": 1}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 201);
    assert_eq!(resp.headers()["x-trace-id"], trace_id.as_str());
    let untraced = app
        .client
        .post(app.url("/v1/skus/1/reservations"))
        .json(&serde_json::json!({"request_id": "tr-2", "user_id": 2, "count": 1}))
        .send()
        .await
        .unwrap();
    let other = untraced.headers()["x-trace-id"]
        .to_str()
        .unwrap()
        .to_string();
    assert!(other.len() == 32 && other != *trace_id, "{other}");
    app.wait_ledger_rows(2).await;
    let names = [
        "POST /v1/skus/{sku_id}/reservations",
        "redis reserve.lua",
        "consumer commit",
    ];
    let complete = poll_until(Duration::from_secs(15), || async {
        let spans = receiver.spans();
        let mine: Vec<Value> = spans
            .into_iter()
            .filter(|s| s["trace_id"] == trace_id.as_str())
            .collect();
        names.iter().all(|n| named(&mine, n).is_some())
            && mine
                .iter()
                .any(|s| s["attributes"]["messaging.operation.type"] == "publish")
    })
    .await;
    let spans = receiver.spans();
    assert!(complete, "the trace is incomplete: {spans:#?}");
    let mine: Vec<&Value> = spans
        .iter()
        .filter(|s| s["trace_id"] == trace_id.as_str())
        .collect();
    let server = mine.iter().find(|s| s["name"] == names[0]).unwrap();
    assert_eq!(
        server["parent_span_id"], CALLER_SPAN,
        "the api span continues the caller's"
    );
    assert_eq!(server["attributes"]["http.response.status_code"], 201);
    assert_eq!(server["attributes"]["stockd.outcome"], "reserved");
    let redis = mine.iter().find(|s| s["name"] == names[1]).unwrap();
    assert_eq!(redis["parent_span_id"], server["span_id"]);
    assert_eq!(redis["attributes"]["db.system"], "redis");
    let publish = mine
        .iter()
        .find(|s| s["attributes"]["messaging.operation.type"] == "publish")
        .unwrap();
    assert_eq!(publish["parent_span_id"], server["span_id"]);
    assert_eq!(publish["attributes"]["messaging.system"], "rabbitmq");
    assert_eq!(publish["attributes"]["stockd.request.id"], "tr-1");
    let commit = mine.iter().find(|s| s["name"] == names[2]).unwrap();
    assert_eq!(
        commit["parent_span_id"], publish["span_id"],
        "the commit continues the deduction's publish"
    );
    assert_eq!(commit["attributes"]["db.system"], "mysql");
    assert_eq!(commit["attributes"]["stockd.sku.id"], 1);
    assert_eq!(commit["attributes"]["stockd.outcome"], "committed");
    let batch = spans
        .iter()
        .find(|s| {
            s["links"]
                .as_array()
                .unwrap()
                .iter()
                .any(|l| l["span_id"] == publish["span_id"])
        })
        .expect("a batch span links to the publish");
    assert!(
        batch["name"].as_str().unwrap().starts_with("process "),
        "{batch}"
    );
    assert!(spans
        .iter()
        .any(|s| s["name"] == "mysql commit" && s["parent_span_id"] == batch["span_id"]));
    assert!(
        !spans.iter().any(|s| s["trace_id"] == other.as_str()),
        "a 0 ratio records no new trace"
    );
    app.finish_drained(1).await;
}

/// An order is traced as a reservation is: under the caller's span, the api
/// span with the outcome and the order id, the admission's Redis span, the
/// order's one publish, and the consumer's commit continuing that publish.
#[tokio::test]
async fn an_orders_placement_is_traced_as_a_reservations_is() {
    let receiver = Receiver::start(&uuid::Uuid::new_v4().simple().to_string());
    let app = TestApp::with(traced(receiver.endpoint.clone(), 0.0, 2000, 2048)).await;
    app.create_sku(1, 5, 5).await;
    app.create_sku(2, 5, 5).await;
    let trace_id = &uuid::Uuid::new_v4().simple().to_string();
    let order = serde_json::json!({"order_id": "tr-placed", "user_id": 4,
        "lines": [{"sku_id": 1, "count": 1}, {"sku_id": 2, "count": 2}]});
    let resp = app
        .client
        .post(app.url("/v1/orders"))
        .header("traceparent", format!("00-{trace_id}-{CALLER_SPAN}-01"))
        .json(&order)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 201);
    let names = ["POST /v1/orders", "redis order.lua", "consumer commit"];
    let spans = trace_holding(&receiver, trace_id, &names).await;
    let server = named(&spans, names[0]).unwrap();
    assert_eq!(server["parent_span_id"], CALLER_SPAN);
    assert_eq!(server["attributes"]["stockd.outcome"], "reserved");
    assert_eq!(server["attributes"]["stockd.request.id"], "tr-placed");
    let redis = named(&spans, names[1]).unwrap();
    assert_eq!(redis["parent_span_id"], server["span_id"]);
    assert_eq!(redis["attributes"]["db.system"], "redis");
    assert_eq!(redis["attributes"]["stockd.order.lines"], 2);
    let publish = spans
        .iter()
        .find(|s| s["attributes"]["messaging.operation.type"] == "publish")
        .expect("the order's publish is traced");
    assert_eq!(publish["parent_span_id"], server["span_id"]);
    assert_eq!(publish["attributes"]["stockd.request.id"], "tr-placed");
    let commit = named(&spans, names[2]).unwrap();
    assert_eq!(
        commit["parent_span_id"], publish["span_id"],
        "the commit continues the order's publish"
    );
    for sku in [1, 2] {
        app.wait_drained(sku).await;
    }
    app.cleanup().await;
}

/// An order's confirm records the `lifecycle confirm` span a reservation's
/// does, under the request's span, named by the order id (no single SKU).
#[tokio::test]
async fn an_orders_confirm_is_traced_as_a_reservations_is() {
    let receiver = Receiver::start(&uuid::Uuid::new_v4().simple().to_string());
    let app = TestApp::with(traced(receiver.endpoint.clone(), 0.0, 2000, 2048)).await;
    app.create_sku(1, 5, 5).await;
    app.create_sku(2, 5, 5).await;
    let order = serde_json::json!({"order_id": "tr-order", "user_id": 3,
        "lines": [{"sku_id": 1, "count": 1}, {"sku_id": 2, "count": 1}]});
    let resp = app.client.post(app.url("/v1/orders")).json(&order);
    assert_eq!(resp.send().await.unwrap().status(), 201);
    app.eventually("the order in MySQL", Duration::from_secs(20), || async {
        let (_, read) = app.get_json("/v1/orders/tr-order").await;
        read["persisted"] == true
    })
    .await;
    let trace_id = &uuid::Uuid::new_v4().simple().to_string();
    let resp = app
        .client
        .post(app.url("/v1/orders/tr-order/confirm"))
        .header("traceparent", format!("00-{trace_id}-{CALLER_SPAN}-01"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let names = ["POST /v1/orders/{order_id}/confirm", "lifecycle confirm"];
    let spans = trace_holding(&receiver, trace_id, &names).await;
    let server = named(&spans, names[0]).unwrap();
    let confirm = named(&spans, names[1]).unwrap();
    assert_eq!(confirm["parent_span_id"], server["span_id"]);
    assert_eq!(confirm["attributes"]["db.system"], "mysql");
    assert_eq!(confirm["attributes"]["stockd.request.id"], "tr-order");
    assert_eq!(confirm["attributes"]["stockd.outcome"], "changed");
    assert!(
        confirm["attributes"]["stockd.sku.id"].is_null(),
        "{confirm}"
    );
    for sku in [1, 2] {
        app.wait_drained(sku).await;
    }
    app.cleanup().await;
}

/// A collector that is down (closed port) or stalled (accepts, never answers)
/// never delays an answer: every reservation answers within 1 s while each
/// export waits 2 s, and the spans that do not fit the queue are dropped and
/// counted.
#[tokio::test]
async fn a_dead_or_stalled_collector_never_delays_an_answer() {
    let stalled = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let closed = format!("http://127.0.0.1:{}", free_port());
    for endpoint in [closed, format!("http://{}", stalled.local_addr().unwrap())] {
        let app = TestApp::with(traced(endpoint.clone(), 1.0, 2000, 4)).await;
        app.create_sku(1, 100, 100).await;
        let mut slowest = Duration::ZERO;
        for i in 0..20 {
            let started = Instant::now();
            let status = app.reserve(1, &format!("d-{i}"), i + 1, 1).await.status();
            slowest = slowest.max(started.elapsed());
            assert_eq!(status, 201, "{endpoint}");
        }
        assert!(
            slowest < Duration::from_secs(1),
            "{endpoint}: an answer took {slowest:?}"
        );
        let text = app.metrics_text().await;
        assert!(
            text.contains("stockd_trace_spans_dropped_total{reason=\"queue_full\"}"),
            "{endpoint}: no drop counted"
        );
        app.wait_ledger_rows(20).await;
        app.finish_drained(1).await;
    }
}
