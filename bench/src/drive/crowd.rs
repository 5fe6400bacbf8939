//! The crowd of a drop: buyers with a pass each, queued behind a fixed set
//! of keep-alive connections. A connection takes the next buyer and sends
//! that buyer's reservation (one unit, the pass in the body) again and again
//! while the answer is `SALE_NOT_STARTED` — a buyer refreshing before the
//! opening, the same `request_id` each time, as a retry is — and takes the
//! next buyer after any other answer. Closed loop, no pause: the crowd at
//! its most impatient.
//!
//! Unlike [`crate::drive::load`], every answer is kept with its send and
//! answer times (relative to the opening T), because the drop's questions
//! are about windows of one run: before T, the first second, sold out.
//! The crowd runs in steps ([`Crowd::run_until`]) so the phase can read
//! Redis' counters between them with no request in flight.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use tokio::time::Instant;

use crate::drive::api::conflict_label;
use crate::drive::http_client::HttpConn;
use crate::measure::drop_windows::Answer;
use crate::measure::stats::Outcome;

/// One buyer: its user id and the pass it was issued.
#[derive(Debug, Clone)]
pub struct Buyer {
    pub user: u64,
    pub pass: String,
}

/// The refusal a buyer answers by trying again.
const NOT_STARTED: &str = "409 SALE_NOT_STARTED";

/// The buyers and the connections that serve them.
pub struct Crowd {
    connections: Vec<Connection>,
    shared: Arc<Shared>,
}

struct Shared {
    path: String,
    /// Request ids are `<tag><buyer index>`: two crowds on one SKU must not
    /// share ids (a sent id whose hold exists is answered as its replay).
    tag: String,
    buyers: Vec<Buyer>,
    /// The next buyer no connection has taken yet.
    next: AtomicUsize,
    /// T: the answer times are measured from it.
    opening: Instant,
}

struct Connection {
    conn: HttpConn,
    /// The buyer this connection is serving (an index into `buyers`).
    current: Option<usize>,
    answers: Vec<Answer>,
}

impl Crowd {
    /// `connections` connections to `addr` for `buyers` of `sku`, request
    /// ids `<tag><i>`, the sale opening at `opening`.
    pub fn new(
        addr: std::net::SocketAddr,
        sku: u64,
        tag: &str,
        buyers: Vec<Buyer>,
        connections: usize,
        opening: Instant,
    ) -> Self {
        assert!(connections > 0, "a crowd needs a connection");
        let connections = (0..connections)
            .map(|_| Connection {
                conn: HttpConn::new(addr),
                current: None,
                answers: Vec::new(),
            })
            .collect();
        let shared = Shared {
            path: format!("/v1/skus/{sku}/reservations"),
            tag: tag.to_string(),
            buyers,
            next: AtomicUsize::new(0),
            opening,
        };
        Self {
            connections,
            shared: Arc::new(shared),
        }
    }

    /// Every connection sends until `until` or until no buyer is left, and
    /// this returns when the last answer is in (no request in flight).
    pub async fn run_until(&mut self, until: Instant) {
        let tasks: Vec<_> = std::mem::take(&mut self.connections)
            .into_iter()
            .map(|c| tokio::spawn(c.run(self.shared.clone(), until)))
            .collect();
        for task in tasks {
            self.connections
                .push(task.await.expect("a crowd connection panicked"));
        }
    }

    /// Whether every buyer has had an answer other than `SALE_NOT_STARTED`.
    pub fn done(&self) -> bool {
        self.shared.next.load(Ordering::Relaxed) >= self.shared.buyers.len()
            && self.connections.iter().all(|c| c.current.is_none())
    }

    /// Every answer so far, in no particular order.
    pub fn answers(&self) -> impl Iterator<Item = &Answer> {
        self.connections.iter().flat_map(|c| c.answers.iter())
    }
}

impl Connection {
    async fn run(mut self, shared: Arc<Shared>, until: Instant) -> Self {
        while Instant::now() < until {
            let buyer = match self.current {
                Some(i) => i,
                None => match shared.next.fetch_add(1, Ordering::Relaxed) {
                    i if i < shared.buyers.len() => i,
                    _ => break,
                },
            };
            let answer = self.send(&shared, buyer).await;
            self.current = (answer.outcome.label == NOT_STARTED).then_some(buyer);
            self.answers.push(answer);
        }
        self
    }

    async fn send(&mut self, shared: &Shared, index: usize) -> Answer {
        let buyer = &shared.buyers[index];
        let body = format!(
            r#"{{"request_id":"{}{index}","user_id":{},"count":1,"pass":"{}"}}"#,
            shared.tag, buyer.user, buyer.pass
        );
        let sent = Instant::now();
        let outcome = match self
            .conn
            .request("POST", &shared.path, "", body.as_bytes())
            .await
        {
            Ok(resp) => match resp.status {
                201 => Outcome::done("201"),
                202 => Outcome::done("202"),
                409 => Outcome::refused(conflict_label(resp.problem_code())),
                status => {
                    let code = resp.problem_code().unwrap_or_default();
                    Outcome::failed(format!("{status} {code}").trim_end().to_string())
                }
            },
            Err(err) => Outcome::failed(format!("transport: {}", err.kind())),
        };
        Answer {
            sent_us: from_opening_us(shared.opening, sent),
            answered_us: from_opening_us(shared.opening, Instant::now()),
            outcome,
        }
    }
}

/// µs from `opening` to `at`, negative before it.
pub fn from_opening_us(opening: Instant, at: Instant) -> i64 {
    if at >= opening {
        (at - opening).as_micros() as i64
    } else {
        -((opening - at).as_micros() as i64)
    }
}
