//! The one way the harness sends a client operation (reserve, confirm,
//! cancel): the load driver and a scenario's direct calls both go through
//! [`call`], so every operation a scenario makes is in its history.

use serde_json::json;

use super::record::{Completion, Entry, Request};
use super::History;
use crate::load::Op;

/// Sends `req` to the api at `base`, records invocation and completion in
/// `history`, and returns the entry.
pub async fn call(client: &reqwest::Client, base: &str, history: &History, req: Request) -> Entry {
    let (sku, rid) = (req.sku, &req.rid);
    let builder = match req.op {
        Op::Reserve => client
            .post(format!("{base}/v1/skus/{sku}/reservations"))
            .json(&json!({"request_id": rid, "user_id": req.user, "count": req.count})),
        Op::Confirm => client.post(format!("{base}/v1/skus/{sku}/reservations/{rid}/confirm")),
        Op::Cancel => client.post(format!("{base}/v1/skus/{sku}/reservations/{rid}/cancel")),
    };
    let invoked_ms = history.now_ms();
    let done = Completion::read(builder.send().await).await;
    let entry = Entry {
        req,
        invoked_ms,
        completed_ms: history.now_ms(),
        done,
    };
    history.record(entry.clone());
    entry
}
