//! The order requester of the `orders` phase: `POST /v1/orders` of the same
//! few SKUs, one unit of each, every order from a buyer of its own.
//!
//! Its own file beside [`super::api::Reserver`] because an order is a
//! different request shape (several lines, a 409 naming the line that
//! failed), while the answers are classified the same way, so the phase's
//! tally reads like the reserve phase's.

use std::net::SocketAddr;

use crate::drive::api::{client_auth, conflict_label};
use crate::drive::http_client::HttpConn;
use crate::drive::load::Requester;
use crate::measure::stats::Outcome;

/// A worker posting orders with order id `<tag><i>` from buyer `users + i`.
pub struct OrderPoster {
    conn: HttpConn,
    tag: String,
    /// The first buyer: order `i` comes from `users + i`.
    users: u64,
    /// The `"lines":[...]` member, the same for every order of the worker.
    lines_json: String,
    /// The `Authorization` line (a client token), or empty.
    auth: String,
}

impl OrderPoster {
    /// Orders of one unit of each of `skus` (sent sorted, as the API stores them).
    pub fn new(addr: SocketAddr, skus: &[u64], tag: &str, users: u64) -> Self {
        Self {
            conn: HttpConn::new(addr),
            tag: tag.to_string(),
            users,
            lines_json: lines_json(skus),
            auth: String::new(),
        }
    }

    /// Sends `token` (a client with scope reserve) on every order.
    pub fn with_client_token(mut self, token: Option<&str>) -> Self {
        self.auth = client_auth(token);
        self
    }

    fn body(&self, index: u64) -> String {
        format!(
            r#"{{"order_id":"{}{index}","user_id":{},"lines":{}}}"#,
            self.tag,
            self.users + index,
            self.lines_json
        )
    }
}

/// `[{"sku_id":a,"count":1},...]`, by ascending SKU id.
fn lines_json(skus: &[u64]) -> String {
    let mut sorted = skus.to_vec();
    sorted.sort_unstable();
    let lines: Vec<String> = sorted
        .iter()
        .map(|sku| format!(r#"{{"sku_id":{sku},"count":1}}"#))
        .collect();
    format!("[{}]", lines.join(","))
}

impl Requester for OrderPoster {
    async fn call(&mut self, index: u64) -> Outcome {
        let body = self.body(index);
        let resp = match self
            .conn
            .request("POST", "/v1/orders", &self.auth, body.as_bytes())
            .await
        {
            Ok(resp) => resp,
            Err(err) => return Outcome::failed(format!("transport: {}", err.kind())),
        };
        match resp.status {
            201 => Outcome::done("201"),
            202 => Outcome::done("202"),
            409 => Outcome::refused(conflict_label(resp.problem_code())),
            status => {
                let code = resp.problem_code().unwrap_or_default();
                Outcome::failed(format!("{status} {code}").trim_end().to_string())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_order_names_every_sku_once_sorted_from_a_buyer_of_its_own() {
        let addr: SocketAddr = "127.0.0.1:1".parse().unwrap();
        let poster = OrderPoster::new(addr, &[9, 7, 8], "o", 1);
        let body: serde_json::Value = serde_json::from_str(&poster.body(41)).unwrap();
        assert_eq!(body["order_id"], "o41");
        assert_eq!(body["user_id"], 42);
        let skus: Vec<u64> = body["lines"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| {
                assert_eq!(l["count"], 1);
                l["sku_id"].as_u64().unwrap()
            })
            .collect();
        assert_eq!(skus, [7, 8, 9]);
    }
}
