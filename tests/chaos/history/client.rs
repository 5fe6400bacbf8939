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
    call_with_pass(client, base, history, req, None).await
}

/// [`call`] of a reserve that carries an admission pass (`pass` in the
/// body; docs/contract.md §20). The pass is not part of the history's
/// request: a replay is compared by its id, user and count alone.
pub async fn call_with_pass(
    client: &reqwest::Client,
    base: &str,
    history: &History,
    req: Request,
    pass: Option<&str>,
) -> Entry {
    let (sku, rid) = (req.sku, &req.rid);
    let builder = match req.op {
        Op::Reserve => {
            let mut body = json!({"request_id": rid, "user_id": req.user, "count": req.count});
            if let Some(pass) = pass {
                body["pass"] = json!(pass);
            }
            client
                .post(format!("{base}/v1/skus/{sku}/reservations"))
                .json(&body)
        }
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
