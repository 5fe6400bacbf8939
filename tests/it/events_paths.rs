//! Every path that writes the ledger tells what it committed (issue 49), as
//! a subscriber deduplicating by id sees it: a seeded random run of single
//! reservations and orders, confirmed, cancelled and extended before or after
//! the consumer applied them (the lifecycle's apply-first path), expired by
//! the closer's sweep, and finally applied by the consumer; then a
//! reconcile. The subscriber model must end with exactly one event per
//! committed change, no id with two bodies, and each SKU's `sold_out` /
//! `back_in_stock` events in the order MySQL's available crossed 0.
//!
//! The oracle of MySQL's available history: the consumer is held until the
//! end, so nothing commits but the step the test runs; every transaction
//! moves a SKU one way only (a deduction takes, a release gives back), so
//! the available after each step — and, for a step that applies a
//! deduction first, after that apply — is the history, read from MySQL.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use serde_json::{json, Value};

use crate::events_race::two_bodied;
use crate::helpers::events::EventTap;
use crate::helpers::{poll_until_steady, TestApp, TestOptions};

/// Steps of one run; seeds run.
const STEPS: usize = 40;
const SEEDS: [u64; 3] = [7, 1_234, 99_991];
/// The SKUs and their stock: small, so the run crosses 0 often.
const SKUS: [(u64, i64); 2] = [(1, 3), (2, 2)];

/// xorshift64*: a fixed sequence per seed, no dependency.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 33) as usize % n
    }
}

/// A hold the run made: a single of one SKU, or the order of both.
#[derive(Debug, Clone)]
struct Hold {
    id: String,
    skus: Vec<u64>,
    order: bool,
    /// In MySQL already (applied by a lifecycle call).
    applied: bool,
    live: bool,
}

impl Hold {
    /// Posts `body` to `path`; the hold it made when the answer is 201 (an
    /// order when it has several SKUs).
    async fn taken(
        app: &TestApp,
        path: &str,
        body: &Value,
        id: String,
        skus: Vec<u64>,
    ) -> Option<Self> {
        let request = app.client.post(app.url(path)).json(body);
        let (status, _) = crate::helpers::http::send_for_json(request).await;
        (status == 201).then_some(Hold {
            id,
            order: skus.len() > 1,
            skus,
            applied: false,
            live: true,
        })
    }

    fn path(&self, action: &str) -> String {
        match self.order {
            true => format!("/v1/orders/{}/{action}", self.id),
            false => format!(
                "/v1/skus/{}/reservations/{}/{action}",
                self.skus[0], self.id
            ),
        }
    }
}

/// MySQL's available of every SKU.
async fn availables(app: &TestApp) -> BTreeMap<u64, i64> {
    let mut now = BTreeMap::new();
    for (sku, _) in SKUS {
        now.insert(sku, app.mysql_available(sku).await.unwrap());
    }
    now
}

/// The crossings a history of availables makes.
fn crossings(history: &[i64]) -> Vec<&'static str> {
    let mut kinds = Vec::new();
    for pair in history.windows(2) {
        if pair[0] > 0 && pair[1] <= 0 {
            kinds.push("stockd.sku.sold_out");
        }
        if pair[0] <= 0 && pair[1] > 0 {
            kinds.push("stockd.sku.back_in_stock");
        }
    }
    kinds
}

/// One run: the steps, then the consumer, then the checks.
async fn run(seed: u64) {
    let mut app = TestApp::with(TestOptions {
        consumer: false,
        ..TestOptions::default()
    })
    .await;
    for (sku, total) in SKUS {
        app.create_sku(sku, total, total).await;
    }
    let tap = EventTap::bind(&app, "#").await;
    let mut rng = Rng(seed);
    let mut holds: Vec<Hold> = Vec::new();
    let mut history: BTreeMap<u64, Vec<i64>> = SKUS.iter().map(|(s, t)| (*s, vec![*t])).collect();
    for step in 0..STEPS {
        let before = availables(&app).await;
        let live: Vec<usize> = (0..holds.len()).filter(|i| holds[*i].live).collect();
        let action = rng.below(7);
        let target = (!live.is_empty()).then(|| live[rng.below(live.len())]);
        match (action, target) {
            (0 | 1, _) | (_, None) => {
                let (sku, _) = SKUS[rng.below(SKUS.len())];
                let id = format!("p{seed}-{step}");
                let body = json!({"request_id": id, "user_id": 100 + step, "count": 1});
                let path = format!("/v1/skus/{sku}/reservations");
                holds.extend(Hold::taken(&app, &path, &body, id, vec![sku]).await);
            }
            (2, _) => {
                let id = format!("o{seed}-{step}");
                let body = json!({"order_id": id, "user_id": 100 + step,
                    "lines": [{"sku_id": 1, "count": 1}, {"sku_id": 2, "count": 1}]});
                holds.extend(Hold::taken(&app, "/v1/orders", &body, id, vec![1, 2]).await);
            }
            (3..=5, Some(i)) => {
                let verb = ["confirm", "cancel", "extend"][action - 3];
                let hold = holds[i].clone();
                let (status, body) = app.post_json(&hold.path(verb)).await;
                let at_limit = status == 409 && body["code"] == "EXTENSION_LIMIT";
                assert!(
                    status == 200 || at_limit,
                    "{verb} {}: {status} {body}",
                    hold.id
                );
                if !hold.applied {
                    // Applied first, in a transaction of its own.
                    for sku in &hold.skus {
                        history.get_mut(sku).unwrap().push(before[sku] - 1);
                    }
                }
                holds[i].applied = true;
                holds[i].live = verb == "extend";
            }
            (_, Some(_)) => {
                let (db, redis) = (&app.res.db, &app.res.redis);
                stockd::ops::sweep::pass(db, redis, u64::MAX, 100)
                    .await
                    .unwrap();
                for hold in holds.iter_mut().filter(|h| h.applied && h.live) {
                    hold.live = false;
                }
            }
        }
        for (sku, available) in availables(&app).await {
            history.get_mut(&sku).unwrap().push(available);
        }
    }
    app.start_consumer();
    for (sku, _) in SKUS {
        app.wait_drained(sku).await;
    }
    for (sku, available) in availables(&app).await {
        history.get_mut(&sku).unwrap().push(available);
    }
    let (status, _) = app.post_json_admin("/v1/admin/reconcile").await;
    assert_eq!(status, 200);
    check(&app, &tap, &history, seed).await;
    tap.close().await;
    app.cleanup().await;
}

/// What the subscriber must have seen once the events settle.
async fn check(app: &TestApp, tap: &EventTap, history: &BTreeMap<u64, Vec<i64>>, seed: u64) {
    let ledger: Vec<(u64, String, String, bool)> = {
        use mysql_async::prelude::Queryable;
        let mut db = app.mysql().await;
        let rows: Vec<(u64, String, String, u8)> = db
            .query(
                "SELECT sku_id, deduct_request_id, status, order_line
                   FROM stock_deduct_idempotent",
            )
            .await
            .unwrap();
        rows.into_iter()
            .map(|(sku, id, status, line)| (sku, id, status, line == 1))
            .collect()
    };
    let want: BTreeSet<String> = (ledger.iter())
        .flat_map(|(sku, id, status, order_line)| {
            let subject = match order_line {
                true => format!("orders/{id}"),
                false => format!("skus/{sku}/reservations/{id}"),
            };
            let last = match status.as_str() {
                "CONFIRMED" => Some("confirmed"),
                "RELEASED" => Some("released"),
                _ => None,
            };
            std::iter::once(format!("{subject}#persisted"))
                .chain(last.map(|w| format!("{subject}#{w}")))
                .collect::<Vec<_>>()
        })
        .collect();
    let told = |events: &[Value]| -> BTreeSet<String> {
        (events.iter())
            .filter(|e| {
                e["type"]
                    .as_str()
                    .unwrap()
                    .starts_with("stockd.reservation.")
                    || e["type"].as_str().unwrap().starts_with("stockd.order.")
            })
            .filter(|e| !e["type"].as_str().unwrap().ends_with(".reserved"))
            .map(|e| e["id"].as_str().unwrap().to_string())
            .collect()
    };
    let settled = poll_until_steady(Duration::from_secs(30), || async {
        told(&tap.events()) == want
    })
    .await;
    let events = tap.events();
    assert!(
        settled,
        "seed {seed}: told {:?}\nwant {want:?}",
        told(&events)
    );
    assert_eq!(two_bodied(&events), vec![], "seed {seed}: one id, one body");
    for (sku, samples) in history {
        let subject = format!("skus/{sku}");
        let mut seen: Vec<(u64, String)> = (events.iter())
            .filter(|e| e["subject"] == subject.as_str())
            .filter(|e| {
                e["type"] == "stockd.sku.sold_out" || e["type"] == "stockd.sku.back_in_stock"
            })
            .map(|e| {
                let id = e["id"].as_str().unwrap();
                let seq = id.rsplit_once('@').unwrap().1.parse().unwrap();
                (seq, e["type"].as_str().unwrap().to_string())
            })
            .collect::<BTreeMap<_, _>>()
            .into_iter()
            .collect();
        seen.sort();
        let kinds: Vec<&str> = seen.iter().map(|(_, k)| k.as_str()).collect();
        assert_eq!(
            kinds,
            crossings(samples),
            "seed {seed}, SKU {sku}: history {samples:?}"
        );
    }
}

/// See the module doc; three seeds, 40 steps each.
#[tokio::test]
async fn every_ledger_path_tells_each_change_once_with_one_body_and_its_crossings() {
    for seed in SEEDS {
        run(seed).await;
    }
}

#[test]
fn crossings_follow_a_history() {
    assert_eq!(
        crossings(&[3, 2, 0, 1, 1, 0]),
        vec![
            "stockd.sku.sold_out",
            "stockd.sku.back_in_stock",
            "stockd.sku.sold_out"
        ]
    );
    assert!(crossings(&[2, 1, 2]).is_empty());
}
