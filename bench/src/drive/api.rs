//! The stockd HTTP calls the benchmark makes (contract §6), over [`HttpConn`], and
//! the reservation requester the HTTP phases drive.

use std::borrow::Cow;
use std::net::SocketAddr;

use anyhow::Context;
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::drive::http_client::{HttpConn, Response};
use crate::drive::load::Requester;
use crate::measure::stats::Outcome;

/// Admin and read calls against one stockd (not on the measured path).
pub struct Api {
    addr: SocketAddr,
    conn: HttpConn,
    auth: String,
    /// The `Authorization` line of the public calls: a client token when the
    /// target requires one (`auth.required`), else empty.
    client_auth: String,
}

impl Api {
    pub fn new(addr: SocketAddr, admin_token: &str) -> Self {
        Self {
            addr,
            conn: HttpConn::new(addr),
            auth: format!("Authorization: Bearer {admin_token}\r\n"),
            client_auth: String::new(),
        }
    }

    /// Sends `token` (a client with scopes reserve, read, lifecycle) on the
    /// public calls.
    pub fn with_client_token(mut self, token: Option<&str>) -> Self {
        self.client_auth = client_auth(token);
        self
    }

    /// `PUT /v1/admin/skus/{sku}`: creates or restocks the SKU.
    pub async fn put_sku(&mut self, sku: u64, total: i64, limit: i64) -> anyhow::Result<()> {
        let body = format!(r#"{{"total_stock":{total},"limit_per_user":{limit}}}"#);
        self.put_sku_body(sku, &body).await.map(drop)
    }

    /// `PUT /v1/admin/skus/{sku}` with `"buckets": n` (stock buckets): creates
    /// the SKU split into `buckets`; the answer's admin view.
    pub async fn put_split_sku(
        &mut self,
        sku: u64,
        total: i64,
        limit: i64,
        buckets: u16,
    ) -> anyhow::Result<serde_json::Value> {
        let body =
            format!(r#"{{"total_stock":{total},"limit_per_user":{limit},"buckets":{buckets}}}"#);
        self.put_sku_body(sku, &body).await
    }

    /// `PUT /v1/admin/skus/{sku}` with `body` as given (e.g. sale terms,
    /// contract §19); the answer's admin view.
    pub async fn put_sku_json(
        &mut self,
        sku: u64,
        body: &serde_json::Value,
    ) -> anyhow::Result<serde_json::Value> {
        self.put_sku_body(sku, &body.to_string()).await
    }

    /// `POST /v1/passes` (contract §20) with the admin token: a pass for
    /// `user` on `skus`, valid for `ttl_secs`.
    pub async fn issue_pass(
        &mut self,
        user: u64,
        skus: &[u64],
        ttl_secs: u64,
    ) -> anyhow::Result<String> {
        let path = "/v1/passes";
        let body = serde_json::json!({"user_id": user, "sku_ids": skus, "ttl_secs": ttl_secs});
        let resp = self
            .conn
            .request("POST", path, &self.auth, body.to_string().as_bytes())
            .await
            .with_context(|| format!("POST {path}"))?;
        ensure_status(&resp, 201, path)?;
        let value: serde_json::Value = serde_json::from_slice(&resp.body)?;
        value["pass"]
            .as_str()
            .map(str::to_string)
            .with_context(|| format!("POST {path}: no `pass` in {value}"))
    }

    async fn put_sku_body(&mut self, sku: u64, body: &str) -> anyhow::Result<serde_json::Value> {
        let path = format!("/v1/admin/skus/{sku}");
        let resp = self
            .conn
            .request("PUT", &path, &self.auth, body.as_bytes())
            .await
            .with_context(|| format!("PUT {path}"))?;
        ensure_status(&resp, 200, &path)?;
        serde_json::from_slice(&resp.body).with_context(|| format!("PUT {path}: body"))
    }

    /// `GET /v1/skus/{sku}` → `available` as Redis sees it.
    pub async fn available(&mut self, sku: u64) -> anyhow::Result<i64> {
        let path = format!("/v1/skus/{sku}");
        self.sku_view(sku).await?["available"]
            .as_i64()
            .with_context(|| format!("GET {path}: no `available`"))
    }

    /// `GET /v1/skus/{sku}`: the whole public view (with buckets and pool for
    /// a split SKU).
    pub async fn sku_view(&mut self, sku: u64) -> anyhow::Result<serde_json::Value> {
        let path = format!("/v1/skus/{sku}");
        let resp = self
            .conn
            .request("GET", &path, &self.client_auth, b"")
            .await?;
        ensure_status(&resp, 200, &path)?;
        serde_json::from_slice(&resp.body).with_context(|| format!("GET {path}: body"))
    }

    /// `GET /v1/skus/{sku}/reservations/{rid}` → whether it is in MySQL yet.
    pub async fn persisted(&mut self, sku: u64, request_id: &str) -> anyhow::Result<bool> {
        let path = format!("/v1/skus/{sku}/reservations/{request_id}");
        let resp = self
            .conn
            .request("GET", &path, &self.client_auth, b"")
            .await?;
        ensure_status(&resp, 200, &path)?;
        let value: serde_json::Value = serde_json::from_slice(&resp.body)?;
        Ok(value["persisted"].as_bool() == Some(true))
    }

    /// `GET /metrics`: the Prometheus text.
    pub async fn metrics(&mut self) -> anyhow::Result<String> {
        let path = "/metrics";
        let resp = self.conn.request("GET", path, "", b"").await?;
        ensure_status(&resp, 200, path)?;
        Ok(String::from_utf8_lossy(&resp.body).into_owned())
    }

    /// `POST /v1/admin/reconcile`: the reconciler's report, one entry per SKU.
    pub async fn reconcile(&mut self) -> anyhow::Result<serde_json::Value> {
        let path = "/v1/admin/reconcile";
        let resp = self.conn.request("POST", path, &self.auth, b"").await?;
        ensure_status(&resp, 200, path)?;
        Ok(serde_json::from_slice(&resp.body)?)
    }

    /// One reservation outside any measurement (e.g. to sell a SKU out); its
    /// request id is `<tag>0`.
    pub async fn reserve_one(&self, sku: u64, tag: &str, user: u64) -> Outcome {
        let mut reserver = Reserver::new(self.addr, sku, tag, UserOf::Fixed(user));
        reserver.auth = self.client_auth.clone();
        reserver.call(0).await
    }
}

/// The `Authorization` header line of a client token; empty without one.
pub(crate) fn client_auth(token: Option<&str>) -> String {
    token.map_or_else(String::new, |t| format!("Authorization: Bearer {t}\r\n"))
}

fn ensure_status(resp: &Response, want: u16, what: &str) -> anyhow::Result<()> {
    anyhow::ensure!(
        resp.status == want,
        "{what}: status {} body {}",
        resp.status,
        String::from_utf8_lossy(&resp.body)
    );
    Ok(())
}

/// Warm-up buyers are numbered from here: none of them is a measured buyer
/// (`1..=requests`), who would otherwise meet the per-buyer limit in the
/// measured run.
pub const WARMUP_USERS: u64 = 1 << 41;

/// Which user request `i` comes from.
#[derive(Debug, Clone, Copy)]
pub enum UserOf {
    /// Every request from a user of its own: `user = i + 1`.
    Unique,
    /// Every request from a user of its own, numbered from `base`: `user =
    /// base + i` (a warm-up whose buyers must not be the measured run's).
    UniqueFrom(u64),
    /// `clicks` requests in a row per user: `user = i / clicks + 1`.
    Clicks(u64),
    Fixed(u64),
}

/// A worker posting reservations of one unit: request id `<tag><i>`.
pub struct Reserver {
    conn: HttpConn,
    path: String,
    tag: String,
    users: UserOf,
    /// The `Authorization` line (a client token), or empty.
    auth: String,
    /// Where admitted request ids go with their answer time (persist lag).
    admitted: Option<mpsc::UnboundedSender<(String, Instant)>>,
}

impl Reserver {
    pub fn new(addr: SocketAddr, sku: u64, tag: &str, users: UserOf) -> Self {
        Self {
            conn: HttpConn::new(addr),
            path: format!("/v1/skus/{sku}/reservations"),
            tag: tag.to_string(),
            users,
            auth: String::new(),
            admitted: None,
        }
    }

    /// Sends `token` (a client with scope reserve) on every reservation.
    pub fn with_client_token(mut self, token: Option<&str>) -> Self {
        self.auth = client_auth(token);
        self
    }

    pub fn reporting_to(mut self, tx: mpsc::UnboundedSender<(String, Instant)>) -> Self {
        self.admitted = Some(tx);
        self
    }
}

impl Requester for Reserver {
    async fn call(&mut self, index: u64) -> Outcome {
        let user = match self.users {
            UserOf::Unique => index + 1,
            UserOf::UniqueFrom(base) => base + index,
            UserOf::Clicks(n) => index / n + 1,
            UserOf::Fixed(u) => u,
        };
        let rid = format!("{}{index}", self.tag);
        let body = format!(r#"{{"request_id":"{rid}","user_id":{user},"count":1}}"#);
        let resp = match self
            .conn
            .request("POST", &self.path, &self.auth, body.as_bytes())
            .await
        {
            Ok(resp) => resp,
            Err(err) => return Outcome::failed(format!("transport: {}", err.kind())),
        };
        match resp.status {
            201 | 202 => {
                if let Some(tx) = &self.admitted {
                    let _ = tx.send((rid, Instant::now()));
                }
                Outcome::done(if resp.status == 201 { "201" } else { "202" })
            }
            409 => Outcome::refused(conflict_label(resp.problem_code())),
            status => {
                let code = resp.problem_code().unwrap_or_default();
                Outcome::failed(format!("{status} {code}").trim_end().to_string())
            }
        }
    }
}

/// Static labels for the expected refusals; anything else keeps its code.
pub(crate) fn conflict_label(code: Option<String>) -> Cow<'static, str> {
    match code.as_deref() {
        Some("SOLD_OUT") => Cow::Borrowed("409 SOLD_OUT"),
        Some("LIMIT_EXCEEDED") => Cow::Borrowed("409 LIMIT_EXCEEDED"),
        Some("INSUFFICIENT_STOCK") => Cow::Borrowed("409 INSUFFICIENT_STOCK"),
        Some(other) => Cow::Owned(format!("409 {other}")),
        None => Cow::Borrowed("409"),
    }
}
