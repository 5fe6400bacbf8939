//! Scenario 29: a drop. Two SKUs open at T, by Redis's clock, and admit only
//! buyers who carry a pass; a crowd — buyers with one pass, with two (one
//! per SKU), with none, with a forged one, with someone else's — starts 2 s
//! before T against two api nodes, and one api node is killed at T + 1 s
//! (started again at T + 3 s, so its outbox is relayed). After the drain:
//! no unit held before T (Redis's clock), none without a valid pass of its
//! buyer, no pass used twice, no buyer over the hold budget, every
//! acknowledged hold in MySQL, the audits and the history clean.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::{Scenario, DRAIN_LIMIT};
use crate::history::{call_with_pass, History, Request};
use crate::load::{Answer, LoadReport, Op};
use crate::seed::Rng;
use crate::stack::Stack;
use crate::stockd::ADMIN_TOKEN;
use crate::{drain, stores};

const SKUS: [u64; 2] = [291, 292];
/// Units of each SKU, and the most one buyer may hold of one.
const TOTAL: i64 = 40;
const LIMIT: u32 = 2;
/// `limits.buyer_max_live_units`: less than two full holds.
const BUDGET: i64 = 3;
/// The crowd comes this long before T and stays this long after.
const EARLY: Duration = Duration::from_secs(2);
const AFTER: Duration = Duration::from_secs(6);

/// What a buyer of the crowd carries.
#[derive(Debug, Clone)]
enum Carries {
    /// One pass for both SKUs.
    One(String),
    /// A pass per SKU (`SKUS[0]`, `SKUS[1]`).
    Two(String, String),
    Nothing,
    /// A pass of its own whose signature was altered.
    Forged(String),
    /// Another buyer's pass.
    Borrowed(String),
}

impl Carries {
    fn pass_for(&self, sku: u64) -> Option<&str> {
        match self {
            Carries::One(p) | Carries::Forged(p) | Carries::Borrowed(p) => Some(p),
            Carries::Two(a, b) => Some(if sku == SKUS[0] { a } else { b }),
            Carries::Nothing => None,
        }
    }

    /// Whether a hold of this buyer may exist at all.
    fn may_hold(&self) -> bool {
        matches!(self, Carries::One(_) | Carries::Two(..))
    }
}

/// Removes the HS256 secret the stack's processes read, also on a panic.
struct SecretFile(std::path::PathBuf);

impl Drop for SecretFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "chaos suite: make chaos"]
async fn s29_drop_opens_on_redis_clock_for_pass_holders_within_budget() {
    let secret = SecretFile(std::env::temp_dir().join(format!(
        "stockd-s29-{}-{}.secret",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    )));
    std::fs::write(
        &secret.0,
        format!(
            "s29-waiting-room-shared-secret-{:020}\n",
            std::process::id()
        ),
    )
    .unwrap();
    let keys = format!(
        "[{{id: drop, hs256_secret_file: \"{}\"}}]",
        secret.0.display()
    );
    let extra = [
        ("STOCKD__PASSES__KEYS", keys),
        ("STOCKD__PASSES__ISSUER_KEY", "drop".to_string()),
        ("STOCKD__LIMITS__BUYER_MAX_LIVE_UNITS", BUDGET.to_string()),
    ];
    let mut sc = Scenario::begin(
        "s29",
        "drop: opening at T on Redis's clock, passes, hold budget, api kill at T + 1 s",
        &extra,
    )
    .await;
    sc.stack.start_roles(&["api", "consumer", "closer"]).await;
    sc.stack.start_role_as("api2", "api").await;
    let opens_ms = stores::redis_now_ms(&sc.stack).await + 10_000;
    for sku in SKUS {
        put_drop_sku(&sc.stack, sku, opens_ms).await;
    }
    let crowd = crowd(&sc.stack).await;
    sc.note(&format!(
        "{} buyers; SKUs {SKUS:?} open at {} (Redis clock), passes required, budget {BUDGET}",
        crowd.len(),
        stockd::clock::rfc3339_ms(opens_ms)
    ));
    let until_open =
        Duration::from_millis(opens_ms.saturating_sub(stores::redis_now_ms(&sc.stack).await));
    let opening = Instant::now() + until_open;
    tokio::time::sleep_until((opening - EARLY).into()).await;
    sc.note("the crowd arrives (T - 2 s)");
    let answers = Arc::new(Mutex::new(Vec::new()));
    let bases = [sc.stack.base.clone(), sc.stack.base_of("api2")];
    let mut tasks = Vec::new();
    for (user, carries) in crowd.iter() {
        let buyer = Buyer {
            user: *user,
            carries: carries.clone(),
            bases: bases.clone(),
            http: sc.stack.http.clone(),
            history: sc.history.clone(),
            answers: answers.clone(),
            rng: sc.rng.fork(),
            until: opening + AFTER,
        };
        tasks.push(tokio::spawn(buyer.run()));
    }
    tokio::time::sleep_until((opening + Duration::from_secs(1)).into()).await;
    sc.note("inject: kill -9 of api (T + 1 s)");
    sc.stack.kill_role("api");
    tokio::time::sleep_until((opening + Duration::from_secs(3)).into()).await;
    sc.stack.start_role("api").await;
    for task in tasks {
        task.await.unwrap();
    }
    let answers = std::mem::take(&mut *answers.lock().unwrap());
    let report = LoadReport::new("s29", answers);
    let accepted = report.accepted();
    let (drained, _) = drain::wait_drained(&sc.stack, &SKUS, &accepted, DRAIN_LIMIT).await;
    sc.expect(drained, format!("pipeline drained within {DRAIN_LIMIT:?}"));
    check_refusals(&mut sc, &report);
    check_holds(&mut sc, &crowd, opens_ms).await;
    sc.finish(&report).await;
}

/// Creates `sku` with its window opening at `opens_ms` and passes required.
async fn put_drop_sku(stack: &Stack, sku: u64, opens_ms: u64) {
    let body = json!({
        "total_stock": TOTAL,
        "limit_per_user": LIMIT,
        "sale": {"opens_at": stockd::clock::rfc3339_ms(opens_ms), "closes_at": null},
        "requires_pass": true,
    });
    let resp = stack
        .http
        .put(format!("{}/v1/admin/skus/{sku}", stack.base))
        .bearer_auth(ADMIN_TOKEN)
        .json(&body)
        .send()
        .await
        .expect("PUT sku");
    let status = resp.status();
    let text = resp.text().await.unwrap_or_default();
    assert_eq!(status, 200, "creating drop sku {sku}: {text}");
}

/// `POST /v1/passes` for `user` and `skus`, as a waiting room would ask.
async fn issue_pass(stack: &Stack, user: u64, skus: &[u64]) -> String {
    let resp = stack
        .http
        .post(format!("{}/v1/passes", stack.base))
        .bearer_auth(ADMIN_TOKEN)
        .json(&json!({"user_id": user, "sku_ids": skus, "ttl_secs": 600}))
        .send()
        .await
        .expect("POST /v1/passes");
    let status = resp.status();
    let body: Value = resp.json().await.unwrap_or(Value::Null);
    assert_eq!(status, 201, "issuing a pass for buyer {user}: {body}");
    body["pass"]
        .as_str()
        .expect("pass in the answer")
        .to_string()
}

/// A pass whose signature no longer matches: one character in the middle
/// of the signature changed (the last one may only carry padding bits).
fn forged(pass: &str) -> String {
    let at = pass.len() - 10;
    let old = pass.as_bytes()[at];
    let new = if old == b'A' { 'B' } else { 'A' };
    format!("{}{new}{}", &pass[..at], &pass[at + 1..])
}

/// The crowd by user id: 1–30 one pass, 31–40 two, 41–55 none, 56–65 a
/// forged pass, 66–75 buyer 1's pass.
async fn crowd(stack: &Stack) -> BTreeMap<u64, Carries> {
    let mut crowd = BTreeMap::new();
    for user in 1..=30 {
        crowd.insert(user, Carries::One(issue_pass(stack, user, &SKUS).await));
    }
    for user in 31..=40 {
        let a = issue_pass(stack, user, &SKUS[..1]).await;
        let b = issue_pass(stack, user, &SKUS[1..]).await;
        crowd.insert(user, Carries::Two(a, b));
    }
    for user in 41..=55 {
        crowd.insert(user, Carries::Nothing);
    }
    for user in 56..=65 {
        let own = issue_pass(stack, user, &SKUS).await;
        crowd.insert(user, Carries::Forged(forged(&own)));
    }
    let first = match &crowd[&1] {
        Carries::One(p) => p.clone(),
        _ => unreachable!(),
    };
    for user in 66..=75 {
        crowd.insert(user, Carries::Borrowed(first.clone()));
    }
    crowd
}

/// One buyer of the crowd: tries again and again on either api node, now
/// and then replaying its last request unchanged.
struct Buyer {
    user: u64,
    carries: Carries,
    bases: [String; 2],
    http: reqwest::Client,
    history: History,
    answers: Arc<Mutex<Vec<Answer>>>,
    rng: Rng,
    until: Instant,
}

impl Buyer {
    async fn run(mut self) {
        let mut n = 0u64;
        let mut last: Option<(u64, String, u32)> = None;
        while Instant::now() < self.until {
            let (sku, rid, count) = match &last {
                Some(prior) if self.rng.chance(0.1) => prior.clone(),
                _ => {
                    n += 1;
                    let sku = SKUS[self.rng.range(0, 1) as usize];
                    let count = if matches!(self.carries, Carries::Two(..)) {
                        LIMIT
                    } else {
                        self.rng.range(1, u64::from(LIMIT)) as u32
                    };
                    (sku, format!("s29-u{}-{n}", self.user), count)
                }
            };
            let base = &self.bases[(n % 2) as usize];
            let req = Request {
                op: Op::Reserve,
                sku,
                rid: rid.clone(),
                user: self.user,
                count,
            };
            let pass = self.carries.pass_for(sku);
            let entry = call_with_pass(&self.http, base, &self.history, req, pass).await;
            self.answers.lock().unwrap().push(Answer {
                op: Op::Reserve,
                sku,
                rid: rid.clone(),
                user: self.user,
                count,
                status: entry.done.status,
                code: entry.done.code.clone(),
                sent_ms: entry.invoked_ms,
                latency_ms: entry.completed_ms - entry.invoked_ms,
            });
            last = Some((sku, rid, count));
            let pause = self.rng.jitter_ms(100, 200);
            tokio::time::sleep(pause).await;
        }
    }
}

/// The refusals a drop must show: the early crowd turned away, buyers
/// without a valid pass turned away; the rest are noted.
fn check_refusals(sc: &mut Scenario, report: &LoadReport) {
    let mut by_code: BTreeMap<String, usize> = BTreeMap::new();
    for a in &report.answers {
        *by_code
            .entry(format!("{} {}", a.status, a.code))
            .or_default() += 1;
    }
    sc.note(&format!("answers by status and code: {by_code:?}"));
    let count = |code: &str| report.answers.iter().filter(|a| a.code == code).count();
    for code in ["SALE_NOT_STARTED", "PASS_REQUIRED", "PASS_INVALID"] {
        let n = count(code);
        sc.expect(n > 0, format!("the crowd met {code} ({n} answers)"));
    }
    let odd = report
        .answers
        .iter()
        .filter(|a| a.status >= 500 && a.status != 503)
        .count();
    sc.expect(odd == 0, format!("no 5xx other than 503 ({odd})"));
}

/// The ledger's holds of the drop, against who may hold what and when.
async fn check_holds(sc: &mut Scenario, crowd: &BTreeMap<u64, Carries>, opens_ms: u64) {
    let mut db = sc.stack.db().await;
    let rows: Vec<(u64, String, u64, i64, u64, String)> = mysql_async::prelude::Queryable::query(
        &mut db,
        format!(
            "SELECT sku_id, deduct_request_id, user_id, CAST(deduct_count AS SIGNED), \
             reserved_at_ms, status FROM stock_deduct_idempotent WHERE sku_id IN ({}, {})",
            SKUS[0], SKUS[1]
        ),
    )
    .await
    .unwrap();
    let _ = db.disconnect().await;
    let sold: i64 = rows.iter().map(|r| r.3).sum();
    sc.note(&format!("{} holds, {sold} units in MySQL", rows.len()));
    sc.expect(!rows.is_empty(), "the drop sold something".to_string());
    let early: Vec<_> = rows.iter().filter(|r| r.4 < opens_ms).collect();
    sc.expect(
        early.is_empty(),
        format!("no hold before T by Redis's clock ({early:?})"),
    );
    let passless: Vec<_> = rows
        .iter()
        .filter(|r| !crowd.get(&r.2).is_some_and(Carries::may_hold))
        .collect();
    sc.expect(
        passless.is_empty(),
        format!("no hold without a valid pass of its buyer ({passless:?})"),
    );
    // One pass, one hold: a buyer with one pass holds once; with a pass per
    // SKU, once per SKU.
    let mut per_pass: BTreeMap<(u64, u64), usize> = BTreeMap::new();
    let mut live_units: BTreeMap<u64, i64> = BTreeMap::new();
    for (sku, _, user, count, _, status) in &rows {
        let pass_of = match crowd.get(user) {
            Some(Carries::Two(..)) => *sku,
            _ => 0,
        };
        *per_pass.entry((*user, pass_of)).or_default() += 1;
        if stores::LIVE.contains(&status.as_str()) {
            *live_units.entry(*user).or_default() += count;
        }
    }
    let twice: Vec<_> = per_pass.iter().filter(|(_, n)| **n > 1).collect();
    sc.expect(twice.is_empty(), format!("no pass held twice ({twice:?})"));
    let over: Vec<_> = live_units.iter().filter(|(_, n)| **n > BUDGET).collect();
    sc.expect(
        over.is_empty(),
        format!("no buyer over the budget of {BUDGET} live units ({over:?})"),
    );
}
