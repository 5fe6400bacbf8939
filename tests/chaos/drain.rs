//! Waiting for the pipeline to drain after load stopped: outboxes empty, work
//! queues empty, every accepted reservation in the ledger, no Redis mirror
//! pending, Redis and MySQL agreeing per SKU — twice in a row. Bounded: after
//! the deadline the scenario goes on to the audit, which reports what is left.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crate::stack::Stack;
use crate::stores;

/// Pause between two looks.
const POLL: Duration = Duration::from_millis(500);
/// When outboxes and work queues are empty and what is still unsettled
/// (missing ledger rows, pending mirrors, Redis != MySQL) has not changed for
/// this long, it is a finding, not work in flight: stop waiting and let the
/// audit report it.
const STUCK_AFTER: Duration = Duration::from_secs(10);

/// What the last look saw; `drained` when every part was settled.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Look {
    pub outbox: u64,
    pub queued: Vec<(String, Option<u32>)>,
    pub missing: usize,
    pub pending_mirrors: usize,
    /// (sku, redis, mysql) where they differ.
    pub disagree: Vec<(u64, Option<i64>, i64)>,
    /// Messages (ready + unacknowledged) in the work queues, from rabbitmqctl;
    /// asked only once everything else is settled (a CLI call takes ~1 s).
    pub in_work_queues: Option<u64>,
}

impl Look {
    /// Nothing waits in an outbox or a work queue: what is not settled now
    /// will not settle by itself.
    fn quiet(&self) -> bool {
        self.outbox == 0 && self.queued.iter().all(|(_, n)| *n == Some(0))
    }

    pub fn drained(&self) -> bool {
        self.outbox == 0
            && self.queued.iter().all(|(_, n)| *n == Some(0))
            && self.missing == 0
            && self.pending_mirrors == 0
            && self.disagree.is_empty()
            && self.in_work_queues == Some(0)
    }
}

pub async fn look(
    stack: &Stack,
    skus: &[u64],
    accepted: &BTreeMap<(u64, String), (u64, u32)>,
) -> Look {
    let mut outbox = 0;
    for sku in skus {
        outbox += stores::outbox_len(stack, *sku).await;
    }
    let queued = stores::ready_counts(stack, &stores::work_queues(stack)).await;
    let ledger = stores::ledger(stack).await;
    let keys = stores::by_key(&ledger);
    let missing = accepted.keys().filter(|k| !keys.contains_key(*k)).count();
    let pending_mirrors = ledger.iter().filter(|r| r.redis_pending).count();
    let mut disagree = Vec::new();
    for row in stores::sku_rows(stack).await {
        let redis = stores::redis_available(stack, row.sku).await;
        if redis != Some(row.available) {
            disagree.push((row.sku, redis, row.available));
        }
    }
    let mut seen = Look {
        outbox,
        queued,
        missing,
        pending_mirrors,
        disagree,
        in_work_queues: None,
    };
    seen.in_work_queues = Some(0);
    if seen.drained() {
        let work = stores::work_queues(stack);
        let listed = stack.rabbit.list_queues().await;
        let total = listed
            .iter()
            .filter(|q| work.contains(&q.0))
            .map(|q| q.1)
            .sum();
        seen.in_work_queues = Some(total);
    } else {
        seen.in_work_queues = None;
    }
    seen
}

/// Polls until two consecutive looks are drained, or `limit` passes.
pub async fn wait_drained(
    stack: &Stack,
    skus: &[u64],
    accepted: &BTreeMap<(u64, String), (u64, u32)>,
    limit: Duration,
) -> (bool, Look) {
    let start = Instant::now();
    let mut settled_once = false;
    let mut stuck: Option<(Instant, Look)> = None;
    loop {
        let seen = look(stack, skus, accepted).await;
        if seen.quiet() && !seen.drained() {
            match &stuck {
                Some((since, same)) if *same == seen => {
                    if since.elapsed() > STUCK_AFTER {
                        println!("  pipeline quiet but unsettled, unchanged for {STUCK_AFTER:?}: {seen:?}");
                        return (false, seen);
                    }
                }
                _ => stuck = Some((Instant::now(), seen.clone())),
            }
        } else {
            stuck = None;
        }
        if seen.drained() {
            if settled_once {
                println!(
                    "  pipeline drained after {:.1} s",
                    start.elapsed().as_secs_f64()
                );
                return (true, seen);
            }
            settled_once = true;
        } else {
            settled_once = false;
        }
        if start.elapsed() > limit {
            println!("  pipeline NOT drained after {limit:?}: {seen:?}");
            return (false, seen);
        }
        tokio::time::sleep(POLL).await;
    }
}
