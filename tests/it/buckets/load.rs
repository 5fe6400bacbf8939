//! The load of the bucket tests: buyers picked by the bucket they route to
//! (`bucket_of`), a skewed request plan, bounded concurrency, and a tally of
//! what the api answered.

use std::collections::BTreeMap;
use std::time::Duration;

use futures_util::StreamExt;
use serde_json::{json, Value};

use stockd::redis::buckets::bucket_of;

use crate::helpers::TestApp;

/// Longest wait for one answer: far above every timeout the api documents (a
/// slow dependency is a 503, contract §10.9), so a request still open then hangs.
const ANSWER_WAIT: Duration = Duration::from_secs(30);

/// How many ids past the wanted total `pick_buyers` may look at: a fair hash
/// fills each of a few buckets within about N × the wanted count.
const PICK_SCAN_FACTOR: u64 = 20;

/// The refusals a sale may answer (contract §6).
pub const REFUSALS: [&str; 3] = ["SOLD_OUT", "INSUFFICIENT_STOCK", "LIMIT_EXCEEDED"];

/// splitmix64: a deterministic generator, so every run sends the same plan.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        let out = stockd::redis::buckets::route::mix64(self.0);
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        out
    }

    /// Uniform in `0..n` (the modulo bias is irrelevant at these sizes).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    /// Fisher–Yates.
    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = self.below(i + 1);
            items.swap(i, j);
        }
    }
}

/// Buyer ids from `first` upward: `wanted[b]` of them routed to bucket `b` of
/// `n` (by the routing stockd itself uses).
pub fn pick_buyers(first: u64, n: u16, wanted: &[usize]) -> Vec<Vec<u64>> {
    assert_eq!(wanted.len(), usize::from(n), "one count per bucket");
    let total: u64 = wanted.iter().map(|&w| w as u64).sum();
    let bound = first + PICK_SCAN_FACTOR * total * u64::from(n) + 1_000;
    let mut picked: Vec<Vec<u64>> = vec![Vec::new(); wanted.len()];
    let mut user = first;
    while picked.iter().zip(wanted).any(|(p, &w)| p.len() < w) {
        let got: Vec<usize> = picked.iter().map(Vec::len).collect();
        assert!(
            user < bound,
            "ids {first}..{bound} never gave {wanted:?}: {got:?}"
        );
        let b = usize::from(bucket_of(user, n));
        if picked[b].len() < wanted[b] {
            picked[b].push(user);
        }
        user += 1;
    }
    picked
}

/// One request per bucket: buyer `index` of each bucket's `buyers`, with
/// the request id `rid_of(bucket)`.
pub fn one_per_bucket(
    buyers: &[Vec<u64>],
    index: usize,
    rid_of: impl Fn(usize) -> String,
) -> Vec<Req> {
    let per_bucket = buyers.iter().enumerate();
    per_bucket
        .map(|(b, users)| Req {
            rid: rid_of(b),
            user: users[index],
            bucket: b as u16,
        })
        .collect()
}

/// One planned reservation request (count 1).
#[derive(Debug, Clone)]
pub struct Req {
    pub rid: String,
    pub user: u64,
    /// `bucket_of(user, N)`: where stockd must admit or refuse it.
    pub bucket: u16,
}

/// The skewed sale: every buyer of `buyers[b]` for `b != hot` (the cold
/// buckets) sends one request, all within the first `early` requests; the hot
/// bucket's buyers send the rest (each at least one, some several), mixed into
/// the early part and alone after it. Once the cold buyers are done, what
/// their buckets leased and did not sell is stock only a reclaim can sell.
pub fn skewed_plan(
    rng: &mut Rng,
    buyers: &[Vec<u64>],
    hot: u16,
    requests: usize,
    early: usize,
) -> Vec<Req> {
    let req = |user: u64, bucket: usize| Req {
        rid: String::new(),
        user,
        bucket: bucket as u16,
    };
    let mut cold = Vec::new();
    for (b, users) in buyers.iter().enumerate() {
        if b != usize::from(hot) {
            cold.extend(users.iter().map(|&u| req(u, b)));
        }
    }
    let hot_users = &buyers[usize::from(hot)];
    let mut hot_reqs: Vec<Req> = hot_users
        .iter()
        .map(|&u| req(u, usize::from(hot)))
        .collect();
    assert!(requests >= cold.len() + hot_reqs.len(), "too few requests");
    assert!(early >= cold.len(), "the cold buyers fit in the early part");
    while cold.len() + hot_reqs.len() < requests {
        let u = hot_users[rng.below(hot_users.len())];
        hot_reqs.push(req(u, usize::from(hot)));
    }
    rng.shuffle(&mut hot_reqs);
    let late = hot_reqs.split_off(early - cold.len());
    let mut plan = cold;
    plan.extend(hot_reqs);
    rng.shuffle(&mut plan);
    plan.extend(late);
    for (i, r) in plan.iter_mut().enumerate() {
        r.rid = format!("s{i}");
    }
    plan
}

/// What the api answered to one request.
#[derive(Debug, Clone)]
pub struct Answer {
    /// 0: no answer (transport error or `ANSWER_WAIT` passed).
    pub status: u16,
    pub code: Option<String>,
    pub replayed: bool,
    pub body: Value,
}

pub async fn reserve(app: &TestApp, sku: u64, req: &Req) -> Answer {
    let call = app
        .client
        .post(format!("{}/v1/skus/{sku}/reservations", app.base))
        .json(&json!({"request_id": req.rid, "user_id": req.user, "count": 1}))
        .send();
    let failed = |why: String| Answer {
        status: 0,
        code: None,
        replayed: false,
        body: Value::String(why),
    };
    let resp = match tokio::time::timeout(ANSWER_WAIT, call).await {
        Ok(Ok(resp)) => resp,
        Ok(Err(e)) => return failed(e.to_string()),
        Err(_) => return failed(format!("no answer within {ANSWER_WAIT:?}")),
    };
    let status = resp.status().as_u16();
    let replayed = resp
        .headers()
        .get("idempotent-replayed")
        .is_some_and(|v| v == "true");
    let body: Value = resp.json().await.unwrap_or(Value::Null);
    let code = body["code"].as_str().map(String::from);
    Answer {
        status,
        code,
        replayed,
        body,
    }
}

/// Sends every request of `plan`, at most `in_flight` at a time; the answers
/// in plan order.
pub async fn run(app: &TestApp, sku: u64, plan: &[Req], in_flight: usize) -> Vec<Answer> {
    let mut answers: Vec<(usize, Answer)> = futures_util::stream::iter(plan.iter().enumerate())
        .map(|(i, req)| async move { (i, reserve(app, sku, req).await) })
        .buffer_unordered(in_flight)
        .collect()
        .await;
    answers.sort_by_key(|(i, _)| *i);
    answers.into_iter().map(|(_, a)| a).collect()
}

/// One answer judged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Admitted,
    Refused(String),
    /// 503 or no answer: whether it took a unit is unknown until retried.
    Unavailable,
    Unexpected,
}

/// `replay_ok`: a 200 replay counts as admitted (a retry of the same id).
pub fn outcome(a: &Answer, replay_ok: bool) -> Outcome {
    match (a.status, a.code.as_deref()) {
        (201 | 202, _) => Outcome::Admitted,
        (200, _) if replay_ok && a.replayed => Outcome::Admitted,
        (409, Some(code)) if REFUSALS.contains(&code) => Outcome::Refused(code.to_string()),
        (503 | 0, _) => Outcome::Unavailable,
        _ => Outcome::Unexpected,
    }
}

/// The answers of a run, counted.
#[derive(Debug, Default)]
pub struct Tally {
    /// Plan indexes that took a unit (sorted).
    pub admitted: Vec<usize>,
    /// Refusal code → requests.
    pub refused: BTreeMap<String, usize>,
    /// First answers that were 503 or none, with their retry's answer.
    pub unavailable: Vec<(usize, Answer, Answer)>,
    /// Anything else (first answer, or the retry of an unavailable one).
    pub unexpected: Vec<(usize, Answer)>,
}

impl Tally {
    /// Counts `answers`; each unavailable one is retried once with the same
    /// request id, whose answer (a replay if it had taken a unit) decides.
    pub async fn of(app: &TestApp, sku: u64, plan: &[Req], answers: &[Answer]) -> Self {
        let mut t = Self::default();
        for (i, a) in answers.iter().enumerate() {
            match outcome(a, false) {
                Outcome::Admitted => t.admitted.push(i),
                Outcome::Refused(code) => *t.refused.entry(code).or_default() += 1,
                Outcome::Unavailable => t.unavailable.push((i, a.clone(), a.clone())),
                Outcome::Unexpected => t.unexpected.push((i, a.clone())),
            }
        }
        for (i, _, retry) in &mut t.unavailable {
            *retry = reserve(app, sku, &plan[*i]).await;
            match outcome(retry, true) {
                Outcome::Admitted => t.admitted.push(*i),
                Outcome::Refused(code) => *t.refused.entry(code).or_default() += 1,
                _ => t.unexpected.push((*i, retry.clone())),
            }
        }
        t.admitted.sort_unstable();
        t
    }

    /// Admitted requests per bucket.
    pub fn admitted_per_bucket(&self, plan: &[Req], n: u16) -> Vec<usize> {
        let mut per = vec![0; usize::from(n)];
        for &i in &self.admitted {
            per[usize::from(plan[i].bucket)] += 1;
        }
        per
    }
}
