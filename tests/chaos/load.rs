//! The bounded load driver: a request plan drawn up front from the scenario's
//! seed (buyers, SKUs, counts, replays of earlier request ids, confirms and
//! cancels), played at a fixed rate by a few workers, bounded in count and in
//! time. Every answer is recorded — status, problem code, latency — so the
//! scenario can check that each request id answered 201/202 reached MySQL,
//! and every operation goes into the scenario's history (`history/`).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::history::{self, History, Request};
use crate::seed::Rng;

/// One HTTP request never waits longer than this (a frozen dependency must
/// show as a slow answer, not hang the suite).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(20);
/// How long the harness keeps an idle keep-alive connection: under actix's
/// 5 s keep-alive, so the client never sends on a connection the api is
/// closing at that moment (a race HTTP allows: the request fails with
/// "connection closed before message completed" and proves nothing).
pub const POOL_IDLE_TIMEOUT: Duration = Duration::from_secs(2);
/// The retries of refused reservations stop sending after this.
const RETRY_LIMIT: Duration = Duration::from_secs(60);

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Op {
    Reserve,
    Confirm,
    Cancel,
}

/// One answer (status 0: no HTTP answer — connection refused, reset, timeout).
#[derive(Debug, Clone)]
pub struct Answer {
    pub op: Op,
    pub sku: u64,
    pub rid: String,
    pub user: u64,
    pub count: u32,
    pub status: u16,
    /// Problem `code`, `replayed` for an idempotent replay, or the transport error.
    pub code: String,
    /// When it was sent, in ms since the load started.
    pub sent_ms: u64,
    pub latency_ms: u64,
}

impl Answer {
    /// The client was told the reservation stands (201, 202, or a 200 replay).
    pub fn accepted(&self) -> bool {
        self.op == Op::Reserve && matches!(self.status, 200..=202)
    }
}

#[derive(Debug, Clone)]
pub struct LoadPlan {
    /// Prefix of every request id (unique per scenario phase).
    pub tag: String,
    pub skus: Vec<u64>,
    /// Buyers are user ids 1..=buyers.
    pub buyers: u64,
    pub requests: usize,
    pub rate_per_sec: u32,
    pub concurrency: usize,
    /// Hard stop even if requests remain.
    pub max_duration: Duration,
    /// Share of requests that resend an earlier request id unchanged.
    pub replay_share: f64,
    /// Share of accepted reservations confirmed / cancelled right after.
    pub confirm_share: f64,
    pub cancel_share: f64,
    /// Counts are drawn from 1..=max_count.
    pub max_count: u32,
}

impl LoadPlan {
    pub fn new(tag: &str, skus: &[u64], buyers: u64, requests: usize, rate_per_sec: u32) -> Self {
        Self {
            tag: tag.to_string(),
            skus: skus.to_vec(),
            buyers,
            requests,
            rate_per_sec,
            concurrency: 8,
            max_duration: Duration::from_secs(120),
            replay_share: 0.1,
            confirm_share: 0.05,
            cancel_share: 0.05,
            max_count: 1,
        }
    }
}

/// One planned reservation and what follows it.
#[derive(Debug, Clone)]
struct Planned {
    sku: u64,
    rid: String,
    user: u64,
    count: u32,
    then: Option<Op>,
}

fn draw(plan: &LoadPlan, rng: &mut Rng) -> Vec<Planned> {
    let mut out: Vec<Planned> = Vec::with_capacity(plan.requests);
    for i in 0..plan.requests {
        if !out.is_empty() && rng.chance(plan.replay_share) {
            let j = rng.range(0, out.len() as u64 - 1) as usize;
            let mut again = out[j].clone();
            again.then = None;
            out.push(again);
            continue;
        }
        let sku = plan.skus[rng.range(0, plan.skus.len() as u64 - 1) as usize];
        let roll = rng.range(0, 9_999) as f64 / 10_000.0;
        let then = if roll < plan.confirm_share {
            Some(Op::Confirm)
        } else if roll < plan.confirm_share + plan.cancel_share {
            Some(Op::Cancel)
        } else {
            None
        };
        out.push(Planned {
            sku,
            rid: format!("{}-{i}", plan.tag),
            user: rng.range(1, plan.buyers),
            count: rng.range(1, plan.max_count as u64) as u32,
            then,
        });
    }
    out
}

struct Shared {
    base: String,
    client: reqwest::Client,
    planned: Vec<Planned>,
    next: AtomicUsize,
    started: Instant,
    interval: Duration,
    max_duration: Duration,
    /// Set by [`Load::stop_sending`]: no new request is sent.
    stopped: AtomicBool,
    answers: Mutex<Vec<Answer>>,
    /// The scenario's history: every operation is recorded there too.
    history: History,
}

pub struct Load {
    shared: Arc<Shared>,
    workers: Vec<tokio::task::JoinHandle<()>>,
    tag: String,
}

impl Load {
    /// Starts playing `plan` against the api at `base`, recording every
    /// operation in `history`.
    pub fn start(base: &str, plan: LoadPlan, rng: &mut Rng, history: History) -> Self {
        assert!(plan.rate_per_sec > 0 && plan.concurrency > 0);
        let planned = draw(&plan, rng);
        let load = Self::play(base, &plan, planned, history);
        println!(
            "  load {}: {} requests at {}/s on skus {:?}, buyers 1..={}, {} workers",
            plan.tag, plan.requests, plan.rate_per_sec, plan.skus, plan.buyers, plan.concurrency
        );
        load
    }

    /// Sends once more, same request id and body, every reservation of
    /// `report` answered 503 or not at all and never accepted (what a client
    /// does after a 503 + Retry-After): one whose first attempt had in fact
    /// been reserved must answer 200 replayed, never 201 again.
    pub async fn retry_refused(
        base: &str,
        report: &LoadReport,
        rate_per_sec: u32,
        history: History,
    ) -> LoadReport {
        let accepted = report.accepted();
        let mut seen = std::collections::BTreeSet::new();
        let planned: Vec<Planned> = report
            .answers
            .iter()
            .filter(|a| a.op == Op::Reserve && matches!(a.status, 0 | 503))
            .filter(|a| !accepted.contains_key(&(a.sku, a.rid.clone())))
            .filter(|a| seen.insert(a.rid.clone()))
            .map(|a| Planned {
                sku: a.sku,
                rid: a.rid.clone(),
                user: a.user,
                count: a.count,
                then: None,
            })
            .collect();
        let mut plan = LoadPlan::new(
            &format!("{}-retry", report.tag),
            &[],
            1,
            planned.len(),
            rate_per_sec,
        );
        plan.max_duration = RETRY_LIMIT;
        println!(
            "  load {}: {} refused reservations sent again",
            plan.tag,
            planned.len()
        );
        Self::play(base, &plan, planned, history).finish().await
    }

    fn play(base: &str, plan: &LoadPlan, planned: Vec<Planned>, history: History) -> Self {
        let shared = Arc::new(Shared {
            base: base.to_string(),
            client: reqwest::Client::builder()
                .timeout(REQUEST_TIMEOUT)
                .pool_idle_timeout(POOL_IDLE_TIMEOUT)
                .pool_max_idle_per_host(plan.concurrency)
                .build()
                .unwrap(),
            planned,
            next: AtomicUsize::new(0),
            started: Instant::now(),
            interval: Duration::from_secs_f64(1.0 / plan.rate_per_sec as f64),
            max_duration: plan.max_duration,
            stopped: AtomicBool::new(false),
            answers: Mutex::new(Vec::new()),
            history,
        });
        let workers = (0..plan.concurrency)
            .map(|_| tokio::spawn(worker(shared.clone())))
            .collect();
        Self {
            shared,
            workers,
            tag: plan.tag.clone(),
        }
    }

    pub fn elapsed_ms(&self) -> u64 {
        self.shared.started.elapsed().as_millis() as u64
    }

    pub fn accepted_count(&self) -> usize {
        let answers = self.shared.answers.lock().unwrap();
        answers.iter().filter(|a| a.accepted()).count()
    }

    /// Every answer received so far (the load goes on).
    pub fn answers_so_far(&self) -> Vec<Answer> {
        self.shared.answers.lock().unwrap().clone()
    }

    /// Sends no further request of the plan (a scenario that ends its load on
    /// an event, not on a count); the ones in flight are still answered.
    pub fn stop_sending(&self) {
        self.shared.stopped.store(true, Ordering::SeqCst);
    }

    /// Waits until every planned request was sent and answered (bounded by
    /// the plan's max duration and the request timeout).
    pub async fn finish(self) -> LoadReport {
        for w in self.workers {
            w.await.expect("load worker panicked");
        }
        let answers = std::mem::take(&mut *self.shared.answers.lock().unwrap());
        LoadReport::new(&self.tag, answers)
    }
}

async fn worker(shared: Arc<Shared>) {
    loop {
        if shared.started.elapsed() > shared.max_duration {
            return;
        }
        let i = shared.next.fetch_add(1, Ordering::SeqCst);
        let Some(req) = shared.planned.get(i) else {
            return;
        };
        let due = shared.started + shared.interval * i as u32;
        tokio::time::sleep_until(due.into()).await;
        if shared.stopped.load(Ordering::SeqCst) {
            return;
        }
        let answer = send(&shared, Op::Reserve, req).await;
        let accepted = matches!(answer.status, 201 | 202);
        shared.answers.lock().unwrap().push(answer);
        if let (true, Some(op)) = (accepted, req.then) {
            let answer = send(&shared, op, req).await;
            shared.answers.lock().unwrap().push(answer);
        }
    }
}

async fn send(shared: &Shared, op: Op, req: &Planned) -> Answer {
    let sent_ms = shared.started.elapsed().as_millis() as u64;
    let request = Request {
        op,
        sku: req.sku,
        rid: req.rid.clone(),
        user: req.user,
        count: req.count,
    };
    let entry = history::call(&shared.client, &shared.base, &shared.history, request).await;
    let done = entry.done;
    Answer {
        op,
        sku: req.sku,
        rid: req.rid.clone(),
        user: req.user,
        count: req.count,
        status: done.status,
        code: if done.replayed {
            "replayed".to_string()
        } else {
            done.code
        },
        sent_ms,
        latency_ms: entry.completed_ms - entry.invoked_ms,
    }
}

/// Every answer of one load run.
#[derive(Debug, Clone, Default)]
pub struct LoadReport {
    pub tag: String,
    pub answers: Vec<Answer>,
}

impl LoadReport {
    pub fn new(tag: &str, answers: Vec<Answer>) -> Self {
        Self {
            tag: tag.to_string(),
            answers,
        }
    }

    /// Merges several runs (phases of one scenario).
    pub fn merge(reports: &[&LoadReport]) -> Self {
        let answers = reports.iter().flat_map(|r| r.answers.clone()).collect();
        Self::new("all", answers)
    }

    /// (sku, request id) → (user, count) of every reservation the client was
    /// told stands.
    pub fn accepted(&self) -> BTreeMap<(u64, String), (u64, u32)> {
        self.answers
            .iter()
            .filter(|a| a.accepted())
            .map(|a| ((a.sku, a.rid.clone()), (a.user, a.count)))
            .collect()
    }

    pub fn count(&self, op: Op, status: u16) -> usize {
        self.answers
            .iter()
            .filter(|a| a.op == op && a.status == status)
            .count()
    }

    /// One line per (op, status, code) with its count and worst latency.
    pub fn print_summary(&self) {
        let mut rows: BTreeMap<(Op, u16, String), (usize, u64)> = BTreeMap::new();
        for a in &self.answers {
            let row = rows.entry((a.op, a.status, a.code.clone())).or_default();
            row.0 += 1;
            row.1 = row.1.max(a.latency_ms);
        }
        println!(
            "  load {}: {} answers, {} accepted reservations",
            self.tag,
            self.answers.len(),
            self.accepted().len()
        );
        println!(
            "    {:<8} {:>6} {:<24} {:>7} {:>9}",
            "op", "status", "code", "count", "max_ms"
        );
        for ((op, status, code), (n, max_ms)) in rows {
            println!(
                "    {:<8} {status:>6} {code:<24} {n:>7} {max_ms:>9}",
                format!("{op:?}")
            );
        }
    }
}
