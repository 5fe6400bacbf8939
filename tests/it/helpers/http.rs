//! HTTP calls a test makes against its own api (admin token included): one
//! way to send a request and read its answer, so a test names only the route.

use serde_json::{json, Value};

use super::{TestApp, ADMIN_TOKEN};

/// Sends `request`; its status and JSON body (`Null` when the body is none).
pub async fn send_for_json(request: reqwest::RequestBuilder) -> (u16, Value) {
    let resp = request.send().await.unwrap();
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap_or(Value::Null))
}

/// A `POST /v1/orders` body: `order_id` of `user` over `(sku, count)` lines.
pub fn order_body(order_id: &str, user: u64, lines: &[(u64, u32)]) -> Value {
    let lines: Vec<Value> = lines
        .iter()
        .map(|&(sku, count)| json!({"sku_id": sku, "count": count}))
        .collect();
    json!({"order_id": order_id, "user_id": user, "lines": lines})
}

impl TestApp {
    /// `POST /v1/orders` with `body`: status and JSON answer.
    pub async fn place_order(&self, body: &Value) -> (u16, Value) {
        send_for_json(self.client.post(self.url("/v1/orders")).json(body)).await
    }

    /// `path` on the public listener.
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// GET `url` (any listener), no token.
    pub async fn get_url(&self, url: &str) -> reqwest::Response {
        self.client.get(url).send().await.unwrap()
    }

    /// GET `path` on the public listener, no token.
    pub async fn get(&self, path: &str) -> reqwest::Response {
        self.get_url(&self.url(path)).await
    }

    /// GET `path` on the public listener with the admin token.
    pub async fn get_admin(&self, path: &str) -> reqwest::Response {
        let request = self.client.get(self.url(path)).bearer_auth(ADMIN_TOKEN);
        request.send().await.unwrap()
    }

    /// POST `path` on the public listener with the admin token.
    pub async fn post_admin(&self, path: &str) -> reqwest::Response {
        let request = self.client.post(self.url(path)).bearer_auth(ADMIN_TOKEN);
        request.send().await.unwrap()
    }

    pub async fn put_sku(&self, sku: u64, total: i64, limit: i64) -> reqwest::Response {
        self.client
            .put(self.url(&format!("/v1/admin/skus/{sku}")))
            .bearer_auth(ADMIN_TOKEN)
            .json(&json!({"total_stock": total, "limit_per_user": limit}))
            .send()
            .await
            .unwrap()
    }

    /// The admin PUT of a SKU with any `body` (extra fields such as
    /// `buckets`): its status and JSON answer.
    pub async fn put_sku_json(&self, sku: u64, body: &Value) -> (u16, Value) {
        self.put_sku_json_at(&self.base, sku, body).await
    }

    /// [`Self::put_sku_json`] on the listener at `base` (the admin one).
    pub async fn put_sku_json_at(&self, base: &str, sku: u64, body: &Value) -> (u16, Value) {
        let url = format!("{base}/v1/admin/skus/{sku}");
        send_for_json(self.client.put(url).bearer_auth(ADMIN_TOKEN).json(body)).await
    }

    /// An admin PUT of a SKU that must fail: its status and problem code
    /// (the answer checked to be problem+json).
    pub async fn put_sku_problem(&self, sku: u64, body: &Value) -> (u16, String) {
        let url = self.url(&format!("/v1/admin/skus/{sku}"));
        let request = self.client.put(url).bearer_auth(ADMIN_TOKEN).json(body);
        let resp = request.send().await.unwrap();
        let status = resp.status().as_u16();
        let ct = resp.headers().get("content-type").cloned();
        let problem: Value = resp.json().await.unwrap_or(Value::Null);
        assert_eq!(
            ct.as_ref().and_then(|v| v.to_str().ok()),
            Some("application/problem+json"),
            "{status} {problem}"
        );
        let code = problem["code"].as_str().unwrap_or_default().to_string();
        (status, code)
    }

    pub async fn create_sku(&self, sku: u64, total: i64, limit: i64) {
        let resp = self.put_sku(sku, total, limit).await;
        assert_eq!(resp.status(), 200, "{}", resp.text().await.unwrap());
    }

    pub async fn reserve_at(&self, base: &str, sku: u64, rid: &str, user: u64) -> (u16, Value) {
        let body = json!({"request_id": rid, "user_id": user, "count": 1});
        let url = format!("{base}/v1/skus/{sku}/reservations");
        send_for_json(self.client.post(url).json(&body)).await
    }

    pub async fn reserve(
        &self,
        sku: u64,
        request_id: &str,
        user: u64,
        count: u32,
    ) -> reqwest::Response {
        self.client
            .post(self.url(&format!("/v1/skus/{sku}/reservations")))
            .json(&json!({"request_id": request_id, "user_id": user, "count": count}))
            .send()
            .await
            .unwrap()
    }

    /// Reserves and asserts the answer is 201 (admitted, first time).
    pub async fn reserve_ok(&self, sku: u64, request_id: &str, user: u64, count: u32) {
        let resp = self.reserve(sku, request_id, user, count).await;
        assert_eq!(resp.status(), 201, "reserve {request_id}");
    }

    /// A reservation taken, durable or still persisting: 201, or 202 when the
    /// broker's confirm came later than `amqp.publish_timeout_ms` (a busy
    /// cluster; the relay then publishes it). For tests about what follows a
    /// sale, not about the confirm's timing.
    pub async fn reserve_taken(&self, sku: u64, request_id: &str, user: u64, count: u32) {
        let status = self.reserve(sku, request_id, user, count).await.status();
        assert!(
            status == 201 || status == 202,
            "reserve {request_id}: {status}"
        );
    }

    /// The Prometheus text of the test app's `/metrics`.
    pub async fn metrics_text(&self) -> String {
        self.get("/metrics").await.text().await.unwrap()
    }

    pub async fn get_json(&self, path: &str) -> (u16, Value) {
        send_for_json(self.client.get(self.url(path))).await
    }

    /// GET with the admin token (on the public listener).
    pub async fn get_json_admin(&self, path: &str) -> (u16, Value) {
        send_for_json(self.client.get(self.url(path)).bearer_auth(ADMIN_TOKEN)).await
    }

    pub async fn confirm(&self, sku: u64, rid: &str) -> (u16, Value) {
        self.post_json(&format!("/v1/skus/{sku}/reservations/{rid}/confirm"))
            .await
    }

    pub async fn cancel(&self, sku: u64, rid: &str) -> (u16, Value) {
        self.post_json(&format!("/v1/skus/{sku}/reservations/{rid}/cancel"))
            .await
    }

    /// The admin listener's base URL when `admin.bind` is set.
    pub fn admin_base(&self) -> Option<String> {
        let addr = self.api.as_ref()?.admin_addr?;
        Some(format!("http://{addr}"))
    }

    /// POST with the admin token (on the public listener).
    pub async fn post_json_admin(&self, path: &str) -> (u16, Value) {
        send_for_json(self.client.post(self.url(path)).bearer_auth(ADMIN_TOKEN)).await
    }

    pub async fn post_json(&self, path: &str) -> (u16, Value) {
        send_for_json(self.client.post(self.url(path))).await
    }
}
