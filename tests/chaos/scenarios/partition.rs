//! What the partition scenarios (s18–s22) share: their settings (the
//! documented bounds made short and explicit), one cut or flap of some links
//! under load with the windows before, during and after it, the retry of
//! every refused reservation after the heal (same request id), the
//! "never taken twice" check, and the acknowledged-in-MySQL count of the
//! counts line.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use super::bounds::{self, Bound, Window};
use super::{cluster, Scenario};
use crate::load::{Answer, Load, LoadPlan, LoadReport, Op};
use crate::net::Link;
use crate::stores;

/// `redis.command_timeout_ms` (test.yaml has 3000): a reserve whose Redis
/// link is cut answers 503 within connect (1000) + 500 ms.
pub const REDIS_COMMAND_TIMEOUT_MS: u64 = 500;
/// `mysql.query_timeout_ms` of config/base.yaml (test.yaml raises it).
pub const MYSQL_QUERY_TIMEOUT_MS: u64 = 3_000;
/// Refused reservations are sent again at this rate after the heal.
const RETRY_RATE: u32 = 100;
/// Queues empty before the counts are taken.
const QUEUES_LIMIT: Duration = Duration::from_secs(60);

pub fn settings() -> Vec<(&'static str, String)> {
    vec![
        (
            "STOCKD__REDIS__COMMAND_TIMEOUT_MS",
            REDIS_COMMAND_TIMEOUT_MS.to_string(),
        ),
        (
            "STOCKD__MYSQL__QUERY_TIMEOUT_MS",
            MYSQL_QUERY_TIMEOUT_MS.to_string(),
        ),
    ]
}

/// One Redis call's bound (architecture.md, "Every wait is bounded").
pub fn redis_call_ms(sc: &Scenario) -> u64 {
    sc.stack.settings.redis.connect_timeout_ms + REDIS_COMMAND_TIMEOUT_MS
}

#[derive(Debug, Clone, Copy)]
pub enum Fault {
    /// Every packet dropped.
    Cut,
    /// This share of packets (percent) dropped at random, each direction.
    Flap(u8),
}

/// A load run with a fault in the middle of it.
pub struct Phases {
    pub report: LoadReport,
    pub before: Window,
    pub during: Window,
    pub after: Window,
}

impl Phases {
    pub fn windows(&self) -> [Window; 3] {
        [self.before.clone(), self.during.clone(), self.after.clone()]
    }
}

/// One step of a fault: `fault` on `links` for `length`.
#[derive(Debug, Clone)]
pub struct Step {
    pub links: Vec<Link>,
    pub fault: Fault,
    pub length: Duration,
}

/// Plays `plan` on `base`; after ~`lead_ms` runs each step in turn (every
/// link healed between steps and after the last), then waits for the load
/// to end. The window "during" covers every step.
pub async fn under_load(
    sc: &mut Scenario,
    base: &str,
    plan: LoadPlan,
    lead_ms: u64,
    steps: &[Step],
) -> Phases {
    let mut rng = sc.rng.fork();
    let load = Load::start(base, plan, &mut rng, sc.history.clone());
    sc.pause(lead_ms, 1_000).await;
    let from_ms = load.elapsed_ms();
    for step in steps {
        run_step(sc, step).await;
    }
    let to_ms = load.elapsed_ms();
    let report = load.finish().await;
    Phases {
        report,
        before: Window::new("before the fault", 0, from_ms),
        during: Window::new("during the fault", from_ms, to_ms),
        after: Window::new("after the heal", to_ms, u64::MAX),
    }
}

async fn run_step(sc: &Scenario, step: &Step) {
    let net = sc.stack.net();
    sc.note(&format!(
        "inject: {:?} {} for {:?}",
        step.fault,
        describe(&step.links),
        step.length
    ));
    match step.fault {
        Fault::Cut => net.cut(&step.links),
        Fault::Flap(percent) => net.flap(&step.links, percent),
    }
    tokio::time::sleep(step.length).await;
    let dropped: u64 = hosts_of(&step.links)
        .iter()
        .map(|h| net.dropped_packets(h))
        .sum();
    net.heal();
    sc.note(&format!("healed ({dropped} packets dropped)"));
}

fn hosts_of(links: &[Link]) -> Vec<String> {
    let mut hosts: Vec<String> = links.iter().map(|l| l.host.clone()).collect();
    hosts.sort();
    hosts.dedup();
    hosts
}

fn describe(links: &[Link]) -> String {
    links
        .iter()
        .map(|l| {
            let arrow = if l.replies_only { "<-" } else { "<->" };
            match l.peer_port {
                Some(p) => format!("{} {arrow} {}:{p}", l.host, l.peer),
                None => format!("{} {arrow} {}", l.host, l.peer),
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Sends every refused reservation of `report` again (same id, body) to
/// `base`; prints what they answered; returns the retries' own report.
pub async fn retry_refused(sc: &Scenario, base: &str, report: &LoadReport) -> LoadReport {
    let retries = Load::retry_refused(base, report, RETRY_RATE, sc.history.clone()).await;
    let by = statuses(&retries.answers);
    sc.note(&format!(
        "retries of refused reservations: {} sent, answers {by:?}",
        retries.answers.len()
    ));
    // Which id answered what when it was not taken anew: a replay, a
    // refusal, a transport error. A failed run names them without a rerun.
    let other: Vec<String> = retries
        .answers
        .iter()
        .filter(|a| a.op == Op::Reserve && !matches!(a.status, 201 | 202))
        .map(|a| format!("{} -> {} {} @{} ms", a.rid, a.status, a.code, a.sent_ms))
        .collect();
    if !other.is_empty() {
        sc.note(&format!("retries not taken anew: {}", other.join("; ")));
    }
    retries
}

/// Judges `bound` over `window` when the window holds such answers at all
/// (a confirm or cancel may not fall into a short window); notes it if not.
pub fn judge_if_any(sc: &mut Scenario, answers: &[Answer], window: &Window, bound: &Bound) {
    if window.of(answers, bound.op).is_empty() {
        sc.note(&format!("{}: no {:?} sent", window.name, bound.op));
        return;
    }
    bounds::judge(sc, answers, window, bound);
}

/// Request ids refused (503 or no answer) by `load`, never acknowledged as
/// new (201/202) in `load` or `retries`, that later replayed (200
/// `replayed`): in the load itself (it sends some ids again) after the first
/// refusal, or in `retries`. Only a refused attempt that ran can have made the
/// record such a replay reads (the history's "info taken").
pub fn replayed_after_refusal<'a>(load: &'a LoadReport, retries: &'a LoadReport) -> Vec<String> {
    let reserves = |r: &'a LoadReport| r.answers.iter().filter(|a| a.op == Op::Reserve);
    let taken_anew: BTreeSet<(u64, &str)> = reserves(load)
        .chain(reserves(retries))
        .filter(|a| matches!(a.status, 201 | 202))
        .map(|a| (a.sku, a.rid.as_str()))
        .collect();
    let mut first_refused: BTreeMap<(u64, &str), u64> = BTreeMap::new();
    for a in reserves(load).filter(|a| matches!(a.status, 0 | 503)) {
        let at = first_refused.entry((a.sku, &a.rid)).or_insert(a.sent_ms);
        *at = (*at).min(a.sent_ms);
    }
    let replay = |a: &&Answer| a.status == 200 && a.code == "replayed";
    first_refused
        .iter()
        .filter(|(key, _)| !taken_anew.contains(key))
        .filter(|((sku, rid), refused_ms)| {
            let same = |a: &&Answer| a.sku == *sku && a.rid == *rid && replay(a);
            reserves(load)
                .filter(same)
                .any(|a| a.sent_ms > **refused_ms)
                || reserves(retries).any(|a| same(&a))
        })
        .map(|((_, rid), _)| rid.to_string())
        .collect()
}

/// (status, code) → count of the reserve answers.
pub fn statuses(answers: &[Answer]) -> BTreeMap<(u16, String), usize> {
    let mut by = BTreeMap::new();
    for a in answers.iter().filter(|a| a.op == Op::Reserve) {
        *by.entry((a.status, a.code.clone())).or_default() += 1;
    }
    by
}

/// Reserve answers with `status` (and `code`, when given).
pub fn count(answers: &[&Answer], status: u16, code: Option<&str>) -> usize {
    answers
        .iter()
        .filter(|a| a.status == status && code.is_none_or(|c| a.code == c))
        .count()
}

/// No request id was taken twice: at most one first-time acceptance
/// (201/202) per id; every later answer for it is a replay (200).
pub fn expect_single_take(sc: &mut Scenario, answers: &[Answer]) {
    let mut takes: BTreeMap<(u64, &str), usize> = BTreeMap::new();
    for a in answers.iter().filter(|a| a.op == Op::Reserve) {
        if matches!(a.status, 201 | 202) {
            *takes.entry((a.sku, a.rid.as_str())).or_default() += 1;
        }
    }
    let twice: Vec<_> = takes.iter().filter(|(_, n)| **n > 1).take(5).collect();
    let n = takes.values().filter(|n| **n > 1).count();
    sc.expect(
        n == 0,
        format!("no request id acknowledged twice as new ({n}: {twice:?})"),
    );
}

/// Waits for empty work queues, then: acknowledged reservations with a
/// ledger row, of all acknowledged, and units oversold.
pub async fn settled_counts(sc: &Scenario, report: &LoadReport) -> (usize, usize, i64) {
    sc.wait_queues_empty(QUEUES_LIMIT).await;
    let accepted = report.accepted();
    let ledger = stores::ledger(&sc.stack).await;
    let rows = stores::by_key(&ledger);
    let in_mysql = accepted.keys().filter(|k| rows.contains_key(*k)).count();
    let oversold = cluster::oversold(&sc.stack).await;
    (in_mysql, accepted.len(), oversold)
}

/// Every answer of the whole run (load and retries) within the documented
/// bound of its operation: a reserve within one Redis call plus the publish,
/// a confirm or cancel within the MySQL bound plus the Redis mirror's (each
/// + [`bounds::MARGIN_MS`]).
pub fn judge_whole_run(sc: &mut Scenario, answers: &[Answer]) {
    let redis_ms = redis_call_ms(sc);
    let publish_ms = sc.stack.settings.amqp.publish_timeout_ms;
    let whole = Window::new("whole run", 0, u64::MAX);
    let reserve = Bound {
        op: Op::Reserve,
        bound_ms: redis_ms + publish_ms + bounds::MARGIN_MS,
        statuses: &[200, 201, 202, 409, 503],
        expected: None,
    };
    bounds::judge(sc, answers, &whole, &reserve);
    for op in [Op::Confirm, Op::Cancel] {
        let bound = Bound {
            op,
            bound_ms: MYSQL_QUERY_TIMEOUT_MS + redis_ms + bounds::MARGIN_MS,
            statuses: &[200, 409, 503],
            expected: None,
        };
        judge_if_any(sc, answers, &whole, &bound);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reserve(rid: &str, status: u16, code: &str, sent_ms: u64) -> Answer {
        Answer {
            op: Op::Reserve,
            sku: 1,
            rid: rid.into(),
            user: 7,
            count: 1,
            status,
            code: code.into(),
            sent_ms,
            latency_ms: 1,
        }
    }

    fn report(answers: Vec<Answer>) -> LoadReport {
        LoadReport {
            tag: "t".into(),
            answers,
        }
    }

    #[test]
    fn a_refused_id_counts_once_it_replays_later_in_the_load_or_its_retries() {
        let load = report(vec![
            reserve("a", 503, "UNAVAILABLE", 10),
            reserve("a", 200, "replayed", 50),
            reserve("b", 503, "UNAVAILABLE", 20),
            reserve("c", 503, "UNAVAILABLE", 30),
        ]);
        let retries = report(vec![
            reserve("b", 200, "replayed", 1),
            reserve("c", 201, "", 2),
        ]);
        assert_eq!(replayed_after_refusal(&load, &retries), ["a", "b"]);
    }

    #[test]
    fn a_replay_before_the_refusal_or_of_an_id_taken_anew_is_no_replay_of_it() {
        let load = report(vec![
            reserve("a", 200, "replayed", 5),
            reserve("a", 503, "UNAVAILABLE", 10),
            reserve("b", 503, "UNAVAILABLE", 20),
            reserve("c", 201, "", 1),
            reserve("c", 503, "UNAVAILABLE", 30),
        ]);
        let retries = report(vec![
            reserve("b", 201, "", 1),
            reserve("b", 200, "replayed", 3),
            reserve("x", 200, "replayed", 2),
            reserve("c", 200, "replayed", 4),
        ]);
        assert!(replayed_after_refusal(&load, &retries).is_empty());
    }
}
