//! The order service of a chaos run (issue 28): a subscriber that keeps its
//! view of every reservation from `stockd.reservation.*` events alone —
//! deduplicated by id, as the docs tell subscribers to — on a durable quorum
//! queue of its own, reconnecting when the broker dies. After the drain its
//! view must equal MySQL's ledger: every row's status told, nothing told that
//! MySQL does not hold, no reservation told two final states, and no id told
//! with two bodies (`type`, `subject`, `data`: contract §18, issue 49).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use lapin::options::{BasicAckOptions, BasicConsumeOptions, QueueBindOptions, QueueDeclareOptions};
use lapin::types::{AMQPValue, FieldTable};
use mysql_async::prelude::Queryable;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::stack::Stack;
use crate::stores::LedgerRow;

/// The model's queue, bound to `<prefix>events` before the load starts.
const QUEUE_SUFFIX: &str = "chaos.order-service";
/// How long the event stream must stay quiet (and the outbox empty) before
/// the view is compared.
const QUIET: Duration = Duration::from_secs(3);
/// The longest wait for that quiet.
const SETTLE_LIMIT: Duration = Duration::from_secs(60);

#[derive(Default)]
struct View {
    /// The body each id was first told with.
    bodies: HashMap<String, Value>,
    /// Ids told again with another body.
    two_bodied: Vec<String>,
    /// (sku, request id) → the status the events told.
    status: HashMap<(u64, String), String>,
    /// Reservations told two different final states.
    conflicts: Vec<String>,
    events: u64,
    duplicates: u64,
    last_event: Option<Instant>,
}

impl View {
    fn apply(&mut self, event: &Value) {
        self.events += 1;
        self.last_event = Some(Instant::now());
        let Some(id) = event["id"].as_str() else {
            return;
        };
        let body = serde_json::json!({"type": event["type"], "subject": event["subject"],
            "data": event["data"]});
        if let Some(first) = self.bodies.get(id) {
            self.duplicates += 1;
            if *first != body {
                self.two_bodied.push(format!("{id}: {first} then {body}"));
            }
            return;
        }
        self.bodies.insert(id.to_string(), body);
        let data = &event["data"];
        let (Some(sku), Some(rid), Some(told)) = (
            data["sku_id"].as_u64(),
            data["request_id"].as_str(),
            data["status"].as_str(),
        ) else {
            return;
        };
        if event["type"] == "stockd.reservation.reserved" {
            // Redis' admission: MySQL has not spoken yet.
            self.status
                .entry((sku, rid.to_string()))
                .or_insert_with(|| "ADMITTED".into());
            return;
        }
        let key = (sku, rid.to_string());
        match self.status.get(&key).map(String::as_str) {
            Some(now) if is_final(now) && is_final(told) && now != told => {
                self.conflicts
                    .push(format!("{sku}/{rid}: told {now} and {told}"));
            }
            Some(now) if is_final(now) => {}
            _ => {
                self.status.insert(key, told.to_string());
            }
        }
    }
}

fn is_final(status: &str) -> bool {
    matches!(status, "CONFIRMED" | "RELEASED" | "REJECTED")
}

pub struct EventModel {
    view: Arc<Mutex<View>>,
    stop: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

impl EventModel {
    /// Declares and binds the model's queue, then consumes it until dropped.
    pub async fn start(stack: &Stack) -> Self {
        let url = stack.rabbit.url();
        let exchange = stack.topology.events_exchange.clone();
        let queue = format!("{}{QUEUE_SUFFIX}", stack.settings.amqp.queue_prefix);
        declare(&url, &queue, &exchange).await;
        let view = Arc::new(Mutex::new(View::default()));
        let stop = CancellationToken::new();
        let task = tokio::spawn(consume(url, queue, view.clone(), stop.clone()));
        Self { view, stop, task }
    }

    /// Waits until the events stop (and the event outbox is empty), then
    /// compares the view with the ledger; returns what differs.
    pub async fn compare(self, stack: &Stack, ledger: &[LedgerRow]) -> Vec<String> {
        let started = Instant::now();
        loop {
            let quiet = (self.view.lock().unwrap().last_event).is_none_or(|t| t.elapsed() >= QUIET);
            if quiet && pending_events(stack).await == 0 || started.elapsed() > SETTLE_LIMIT {
                break;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        self.stop.cancel();
        let _ = self.task.await;
        let view = Arc::try_unwrap(self.view)
            .ok()
            .unwrap()
            .into_inner()
            .unwrap();
        let mut failures = view.conflicts.clone();
        if !view.two_bodied.is_empty() {
            failures.push(format!(
                "events model: {} ids told with two bodies: {}",
                view.two_bodied.len(),
                view.two_bodied
                    .iter()
                    .take(3)
                    .cloned()
                    .collect::<Vec<_>>()
                    .join("; ")
            ));
        }
        let mut told_missing = Vec::new();
        let mut wrong = Vec::new();
        for row in ledger {
            match view.status.get(&(row.sku, row.rid.clone())) {
                None => told_missing.push(format!("{}/{}", row.sku, row.rid)),
                Some(told) if *told != row.status => {
                    wrong.push(format!(
                        "{}/{}: told {told}, MySQL {}",
                        row.sku, row.rid, row.status
                    ));
                }
                Some(_) => {}
            }
        }
        let in_ledger: HashSet<(u64, &str)> =
            ledger.iter().map(|r| (r.sku, r.rid.as_str())).collect();
        let phantom: Vec<String> = (view.status.keys())
            .filter(|(sku, rid)| !in_ledger.contains(&(*sku, rid.as_str())))
            .map(|(sku, rid)| format!("{sku}/{rid}"))
            .collect();
        println!(
            "events model: {} events ({} duplicates by id), {} reservations told, ledger {} rows; \
             not told {}, told wrong {}, told but not in MySQL {}, conflicts {}",
            view.events,
            view.duplicates,
            view.status.len(),
            ledger.len(),
            told_missing.len(),
            wrong.len(),
            phantom.len(),
            view.conflicts.len()
        );
        let first = |v: &[String]| v.iter().take(5).cloned().collect::<Vec<_>>().join(", ");
        if !told_missing.is_empty() {
            failures.push(format!(
                "events model: {} ledger rows never told: {}",
                told_missing.len(),
                first(&told_missing)
            ));
        }
        if !wrong.is_empty() {
            failures.push(format!(
                "events model: {} told another status: {}",
                wrong.len(),
                first(&wrong)
            ));
        }
        if !phantom.is_empty() {
            failures.push(format!(
                "events model: {} told but not in MySQL: {}",
                phantom.len(),
                first(&phantom)
            ));
        }
        failures
    }
}

/// Events committed and not yet published (the relay's backlog).
async fn pending_events(stack: &Stack) -> u64 {
    let mut db = stack.db().await;
    let n: Option<u64> = db
        .query_first("SELECT COUNT(*) FROM event_outbox WHERE published_at_ms IS NULL")
        .await
        .unwrap_or(Some(u64::MAX));
    let _ = db.disconnect().await;
    n.unwrap_or(0)
}

async fn connect(url: &str) -> Result<lapin::Connection, stockd::mq::MqError> {
    let no_tls = stockd::config::TlsFiles::default();
    stockd::mq::connect_with(url, &no_tls, "chaos-events-model").await
}

async fn declare(url: &str, queue: &str, exchange: &str) {
    let conn = connect(url)
        .await
        .expect("the events model connects to the broker");
    let ch = conn.create_channel().await.unwrap();
    let mut args = FieldTable::default();
    args.insert(
        "x-queue-type".into(),
        AMQPValue::LongString("quorum".into()),
    );
    let durable = QueueDeclareOptions {
        durable: true,
        ..Default::default()
    };
    ch.queue_declare(queue.into(), durable, args).await.unwrap();
    // Before any role ran, the exchange is not there yet: declared as stockd
    // declares it (an equivalent declaration is a no-op).
    let topic = lapin::options::ExchangeDeclareOptions {
        durable: true,
        ..Default::default()
    };
    ch.exchange_declare(
        exchange.into(),
        lapin::ExchangeKind::Topic,
        topic,
        FieldTable::default(),
    )
    .await
    .unwrap();
    ch.queue_bind(
        queue.into(),
        exchange.into(),
        "stockd.reservation.#".into(),
        QueueBindOptions::default(),
        FieldTable::default(),
    )
    .await
    .unwrap();
    let _ = conn.close(200, "".into()).await;
}

/// Consumes `queue` into `view`, reconnecting after a broker failure.
async fn consume(url: String, queue: String, view: Arc<Mutex<View>>, stop: CancellationToken) {
    while !stop.is_cancelled() {
        let Ok(conn) = connect(&url).await else {
            tokio::time::sleep(Duration::from_millis(500)).await;
            continue;
        };
        let consumed = async {
            let ch = conn.create_channel().await?;
            let mut deliveries = ch
                .basic_consume(
                    queue.as_str().into(),
                    "model".into(),
                    BasicConsumeOptions::default(),
                    FieldTable::default(),
                )
                .await?;
            while let Some(delivery) = deliveries.next().await {
                let d = delivery?;
                let body: Value = serde_json::from_slice(&d.data).unwrap_or(Value::Null);
                {
                    let mut view = view.lock().unwrap();
                    match &body {
                        Value::Array(events) => events.iter().for_each(|e| view.apply(e)),
                        one => view.apply(one),
                    }
                }
                d.ack(BasicAckOptions::default()).await?;
            }
            Ok::<(), lapin::Error>(())
        };
        tokio::select! {
            _ = consumed => {}
            _ = stop.cancelled() => {}
        }
        let _ = conn.close(200, "".into()).await;
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
