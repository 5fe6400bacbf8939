//! One client operation as the history keeps it: what was asked (the
//! invocation), when, and how it completed — ok, fail or info, as Jepsen
//! names them — with the body fields a later replay is compared with.

use serde_json::Value;

use crate::load::Op;

/// What the client asked for. Confirm and cancel carry the user and count of
/// the reservation they act on (the check never compares them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub op: Op,
    pub sku: u64,
    pub rid: String,
    pub user: u64,
    pub count: u32,
}

/// The fields of a 2xx reservation body the check compares (contract §6).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Body {
    pub request_id: String,
    pub user_id: u64,
    pub count: u32,
    /// `RESERVED`, `CONFIRMED`, `RELEASED` or `REJECTED`.
    pub status: String,
    /// RFC 3339, as `stockd::clock::rfc3339_ms` writes it.
    pub expires_at: String,
}

impl Body {
    fn from_json(body: &Value) -> Option<Self> {
        Some(Self {
            request_id: body["request_id"].as_str()?.to_string(),
            user_id: body["user_id"].as_u64()?,
            count: u32::try_from(body["count"].as_u64()?).ok()?,
            status: body["status"].as_str()?.to_string(),
            expires_at: body["expires_at"].as_str()?.to_string(),
        })
    }
}

/// How an HTTP call completed (status 0: no HTTP answer).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Completion {
    pub status: u16,
    /// Problem `code`, or the transport error (`timeout`, `connect`, `transport`)
    /// with its innermost cause in parentheses.
    pub code: String,
    /// The answer carried `Idempotent-Replayed: true`.
    pub replayed: bool,
    /// Parsed body of a 2xx answer (None when absent or not a reservation).
    pub body: Option<Body>,
}

impl Completion {
    /// Reads an answer (or the transport error that took its place).
    pub async fn read(sent: Result<reqwest::Response, reqwest::Error>) -> Self {
        let resp = match sent {
            Ok(resp) => resp,
            Err(err) => return Self::transport(&err),
        };
        let status = resp.status().as_u16();
        let replayed = resp
            .headers()
            .get("idempotent-replayed")
            .is_some_and(|v| v == "true");
        let json: Value = resp.json().await.unwrap_or(Value::Null);
        let body = (200..300)
            .contains(&status)
            .then(|| Body::from_json(&json))
            .flatten();
        Self {
            status,
            code: json["code"].as_str().unwrap_or("").to_string(),
            replayed,
            body,
        }
    }

    fn transport(err: &reqwest::Error) -> Self {
        let kind = if err.is_timeout() {
            "timeout"
        } else if err.is_connect() {
            "connect"
        } else {
            "transport"
        };
        let mut cause: &dyn std::error::Error = err;
        while let Some(inner) = cause.source() {
            cause = inner;
        }
        Self {
            status: 0,
            code: format!("{kind} ({cause})"),
            replayed: false,
            body: None,
        }
    }
}

/// Jepsen's three completions, plus answers the API contract does not have.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// 2xx: the client was told it happened (for a reserve: 201/202 new, 200 replay).
    Ok,
    /// A definite 4xx refusal: nothing was written (docs/errors.md).
    Fail,
    /// Unknown: timeout, connection error, 503 or another 5xx.
    Info,
    /// Outside the contract (a reserve 200 without `Idempotent-Replayed`, a 3xx…).
    Odd,
}

/// One operation: invocation, completion, both in ms since the scenario began.
#[derive(Debug, Clone)]
pub struct Entry {
    pub req: Request,
    pub invoked_ms: u64,
    pub completed_ms: u64,
    pub done: Completion,
}

impl Entry {
    pub fn outcome(&self) -> Outcome {
        let status = self.done.status;
        match (self.req.op, status) {
            (_, 0) | (_, 500..=599) => Outcome::Info,
            (_, 400..=499) => Outcome::Fail,
            (Op::Reserve, 201 | 202) => Outcome::Ok,
            (Op::Reserve, 200) if self.done.replayed => Outcome::Ok,
            (Op::Confirm | Op::Cancel, 200) => Outcome::Ok,
            _ => Outcome::Odd,
        }
    }

    /// An ok reserve that took stock anew (201/202), not a replay.
    pub fn admitted(&self) -> bool {
        self.req.op == Op::Reserve && matches!(self.done.status, 201 | 202)
    }

    /// An ok reserve answered as a replay of an earlier admission.
    pub fn replay(&self) -> bool {
        self.req.op == Op::Reserve && self.outcome() == Outcome::Ok && !self.admitted()
    }

    /// `op sku/rid -> status code @invoked..completed ms`, for the report.
    pub fn describe(&self) -> String {
        format!(
            "{:?} {}/{} -> {} {}{} @{}..{} ms",
            self.req.op,
            self.req.sku,
            self.req.rid,
            self.done.status,
            self.done.code,
            if self.done.replayed { " replayed" } else { "" },
            self.invoked_ms,
            self.completed_ms
        )
    }
}
