//! A subscriber of the test's `<prefix>events` exchange, as the order
//! service would be one: an exclusive queue bound with `#` that keeps every
//! message it receives, and the check of those messages by a real
//! CloudEvents implementation and the AsyncAPI document
//! (`tests/events_check.py`, tools from `scripts/test-tools.sh events-checker`).

use std::path::PathBuf;
use std::process::Command;
use std::sync::{Arc, Mutex};

use futures_util::StreamExt;
use lapin::options::{BasicAckOptions, BasicConsumeOptions, QueueBindOptions, QueueDeclareOptions};
use lapin::types::FieldTable;
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use super::TestApp;

/// One message as the broker delivered it.
#[derive(Debug, Clone)]
pub struct Captured {
    pub routing_key: String,
    pub content_type: String,
    pub message_id: Option<String>,
    pub body: String,
}

impl Captured {
    /// The events the message carries (one object or a batch array).
    pub fn events(&self) -> Vec<Value> {
        match serde_json::from_str::<Value>(&self.body).unwrap() {
            Value::Array(events) => events,
            one => vec![one],
        }
    }
}

pub struct EventTap {
    seen: Arc<Mutex<Vec<Captured>>>,
    conn: lapin::Connection,
    /// The event relay the tap runs for the app (every role runs one; the
    /// test app starts its roles one by one, without it).
    relay: Option<(CancellationToken, tokio::task::JoinHandle<()>)>,
}

impl EventTap {
    /// Binds an exclusive queue to the app's events exchange (declared by
    /// the app's publisher already) with `binding`, and runs an event relay
    /// for the app until [`Self::close`].
    pub async fn bind(app: &TestApp, binding: &str) -> Self {
        let conn = super::broker(&app.direct_settings, "event-tap")
            .await
            .unwrap();
        let ch = conn.create_channel().await.unwrap();
        let exclusive = QueueDeclareOptions {
            exclusive: true,
            auto_delete: true,
            ..Default::default()
        };
        let queue = ch
            .queue_declare("".into(), exclusive, FieldTable::default())
            .await
            .unwrap();
        let exchange = app.res.publisher.topology().events_exchange.clone();
        ch.queue_bind(
            queue.name().clone(),
            exchange.as_str().into(),
            binding.into(),
            QueueBindOptions::default(),
            FieldTable::default(),
        )
        .await
        .unwrap();
        let mut deliveries = ch
            .basic_consume(
                queue.name().clone(),
                "tap".into(),
                BasicConsumeOptions::default(),
                FieldTable::default(),
            )
            .await
            .unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let sink = seen.clone();
        tokio::spawn(async move {
            while let Some(Ok(d)) = deliveries.next().await {
                let captured = Captured {
                    routing_key: d.routing_key.to_string(),
                    content_type: (d.properties.content_type().as_ref())
                        .map(|c| c.to_string())
                        .unwrap_or_default(),
                    message_id: d.properties.message_id().as_ref().map(|m| m.to_string()),
                    body: String::from_utf8_lossy(&d.data).into_owned(),
                };
                sink.lock().unwrap().push(captured);
                let _ = d.ack(BasicAckOptions::default()).await;
            }
        });
        let cancel = CancellationToken::new();
        let relay = stockd::outbox::EventRelay::new(
            app.res.db.clone(),
            app.res.publisher.clone(),
            &app.res.settings.events,
        );
        let task = tokio::spawn(relay.run_until_stopped(cancel.clone()));
        Self {
            seen,
            conn,
            relay: Some((cancel, task)),
        }
    }

    pub fn messages(&self) -> Vec<Captured> {
        self.seen.lock().unwrap().clone()
    }

    /// Every event received so far, in arrival order.
    pub fn events(&self) -> Vec<Value> {
        self.messages().iter().flat_map(Captured::events).collect()
    }

    /// `(type, id)` of every event received so far.
    pub fn kinds_and_ids(&self) -> Vec<(String, String)> {
        (self.events().iter())
            .map(|e| {
                (
                    e["type"].as_str().unwrap().to_string(),
                    e["id"].as_str().unwrap().to_string(),
                )
            })
            .collect()
    }

    /// Runs tests/events_check.py over every message received: each event
    /// parsed by the CloudEvents SDK and validated against docs/asyncapi.json.
    pub fn check_with_sdk_and_asyncapi(&self) -> String {
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
        let python = super::test_tool("events-checker");
        let capture: Vec<Value> = (self.messages().iter())
            .map(|m| {
                json!({"routing_key": m.routing_key, "content_type": m.content_type,
                       "message_id": m.message_id, "body": m.body})
            })
            .collect();
        let file =
            std::env::temp_dir().join(format!("stockd-events-{}.json", uuid::Uuid::new_v4()));
        std::fs::write(&file, serde_json::to_vec(&capture).unwrap()).unwrap();
        let out = Command::new(python)
            .arg(root.join("tests/events_check.py"))
            .arg(root.join("docs/asyncapi.json"))
            .arg(&file)
            .output()
            .expect("run tests/events_check.py");
        let _ = std::fs::remove_file(&file);
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            out.status.success(),
            "events_check refused the published events:\n{text}"
        );
        text
    }

    /// Stops the relay and closes the tap's connection (its queue goes).
    pub async fn close(mut self) {
        if let Some((cancel, task)) = self.relay.take() {
            cancel.cancel();
            task.await.unwrap();
        }
        let _ = self.conn.close(200, "".into()).await;
    }
}
