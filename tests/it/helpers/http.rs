//! HTTP calls a test makes against its own api (admin token included).

use serde_json::{json, Value};

use super::{TestApp, ADMIN_TOKEN};

impl TestApp {
    pub async fn put_sku(&self, sku: u64, total: i64, limit: i64) -> reqwest::Response {
        self.client
            .put(format!("{}/v1/admin/skus/{sku}", self.base))
            .bearer_auth(ADMIN_TOKEN)
            .json(&json!({"total_stock": total, "limit_per_user": limit}))
            .send()
            .await
            .unwrap()
    }

    pub async fn create_sku(&self, sku: u64, total: i64, limit: i64) {
        let resp = self.put_sku(sku, total, limit).await;
        assert_eq!(resp.status(), 200, "{}", resp.text().await.unwrap());
    }

    pub async fn reserve_at(&self, base: &str, sku: u64, rid: &str, user: u64) -> (u16, Value) {
        let resp = self
            .client
            .post(format!("{base}/v1/skus/{sku}/reservations"))
            .json(&json!({"request_id": rid, "user_id": user, "count": 1}))
            .send()
            .await
            .unwrap();
        let status = resp.status().as_u16();
        (status, resp.json().await.unwrap_or(Value::Null))
    }

    pub async fn reserve(
        &self,
        sku: u64,
        request_id: &str,
        user: u64,
        count: u32,
    ) -> reqwest::Response {
        self.client
            .post(format!("{}/v1/skus/{sku}/reservations", self.base))
            .json(&json!({"request_id": request_id, "user_id": user, "count": count}))
            .send()
            .await
            .unwrap()
    }

    /// The Prometheus text of the test app's `/metrics`.
    pub async fn metrics_text(&self) -> String {
        self.client
            .get(format!("{}/metrics", self.base))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    }

    pub async fn get_json(&self, path: &str) -> (u16, Value) {
        let resp = self
            .client
            .get(format!("{}{path}", self.base))
            .send()
            .await
            .unwrap();
        let status = resp.status().as_u16();
        (status, resp.json().await.unwrap_or(Value::Null))
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
        let resp = self
            .client
            .post(format!("{}{path}", self.base))
            .bearer_auth(ADMIN_TOKEN)
            .send()
            .await
            .unwrap();
        let status = resp.status().as_u16();
        (status, resp.json().await.unwrap_or(Value::Null))
    }

    pub async fn post_json(&self, path: &str) -> (u16, Value) {
        let resp = self
            .client
            .post(format!("{}{path}", self.base))
            .send()
            .await
            .unwrap();
        let status = resp.status().as_u16();
        (status, resp.json().await.unwrap_or(Value::Null))
    }
}
