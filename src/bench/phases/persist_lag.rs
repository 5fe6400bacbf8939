//! Persist lag: the time from a 201 to the reservation's ledger row being
//! committed in MySQL, at half of the measured reserve throughput (open loop,
//! so the rate is held however the answers come). The same run measures the
//! reserve latency at half load.
//!
//! A poller watches every admitted request id until it shows up: with a child
//! stockd by primary-key reads of the ledger (cheap, so it polls every 2 ms);
//! with `--target` through `GET .../reservations/{id}` and its `persisted`.

use std::time::Duration;

use mysql_async::prelude::Queryable;
use tokio::sync::mpsc::{error::TryRecvError, UnboundedReceiver};
use tokio::time::Instant;

use super::{both, key, Checked, PhaseResult};
use crate::bench::api::{Api, Reserver, UserOf};
use crate::bench::check::{self, Expect, Target, DRAIN_TIMEOUT};
use crate::bench::load::{drive, Plan};
use crate::bench::stats::{micros, Percentiles, Tally};
use crate::db::Db;
use crate::domain::SkuId;

/// Poll period against MySQL: bounds the lag's measuring error at ~2 ms,
/// well under the 200 ms target, for a few hundred cheap reads a second.
const POLL_MYSQL: Duration = Duration::from_millis(2);
/// Poll period over HTTP (`--target`): each poll is one GET per pending id.
const POLL_HTTP: Duration = Duration::from_millis(20);
/// Request ids per ledger query (one `IN (...)` list).
const PROBE_BATCH: usize = 500;
/// Most requests one lag run sends, whatever the measured rate.
const REQUESTS_MAX: u64 = 60_000;

/// How the poller learns that a reservation is in MySQL.
pub enum Probe<'a> {
    Mysql(&'a Db),
    Http(Api),
}

/// Runs `duration` of reservations at `rate_per_sec` against a fresh `sku`.
pub async fn run(
    target: &Target<'_>,
    mut probe: Probe<'_>,
    sku: u64,
    rate_per_sec: f64,
    duration: Duration,
    concurrency: usize,
) -> anyhow::Result<Checked> {
    let requests = ((rate_per_sec * duration.as_secs_f64()).ceil() as u64).clamp(1, REQUESTS_MAX);
    let total = i64::try_from(requests)?;
    Api::new(target.addr, target.admin_token)
        .put_sku(sku, total, 1)
        .await?;
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let workers: Vec<Reserver> = (0..concurrency)
        .map(|_| Reserver::new(target.addr, sku, "l", UserOf::Unique).reporting_to(tx.clone()))
        .collect();
    drop(tx);
    let plan = Plan {
        requests,
        // Twice the nominal time: room for the open loop to catch up after a stall.
        max_duration: duration * 2,
        rate_per_sec: Some(rate_per_sec),
    };
    let (run, (mut lags, unpersisted)) = tokio::join!(
        drive(key::HALF_LOAD, plan, workers),
        watch(rx, &mut probe, sku)
    );
    let expect = Expect {
        sku: SkuId::new(sku)?,
        total,
        admitted: run.tally.done as i64,
    };
    let mut violations =
        check::after_phase(target, expect, &both(&run.tally, &Tally::default())).await;
    if unpersisted > 0 {
        violations.push(format!(
            "{unpersisted} reservations answered 201/202 were not in MySQL within {DRAIN_TIMEOUT:?}"
        ));
    }
    let half = PhaseResult::from_run(
        key::HALF_LOAD,
        format!("POST reservations at {rate_per_sec:.0}/s (half the measured reserve rate)"),
        "req/s",
        concurrency,
        &run,
    );
    let mut lag = PhaseResult::from_rate(
        key::PERSIST_LAG,
        "201 → ledger row committed in MySQL, at half load".into(),
        "req/s",
        lags.len() as u64,
        run.elapsed,
    );
    lag.latency = Percentiles::of_micros(&mut lags).map(Into::into);
    Ok(Checked {
        results: vec![half, lag],
        violations,
    })
}

/// Collects the lag of every admitted id; returns the lags (µs) and how many
/// ids never showed up within [`DRAIN_TIMEOUT`] after the last answer.
async fn watch(
    mut rx: UnboundedReceiver<(String, Instant)>,
    probe: &mut Probe<'_>,
    sku: u64,
) -> (Vec<u32>, usize) {
    let mut pending: Vec<(String, Instant)> = Vec::new();
    let mut lags = Vec::new();
    let mut give_up_at: Option<Instant> = None;
    let every = match probe {
        Probe::Mysql(_) => POLL_MYSQL,
        Probe::Http(_) => POLL_HTTP,
    };
    loop {
        loop {
            match rx.try_recv() {
                Ok(item) => pending.push(item),
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => {
                    give_up_at.get_or_insert_with(|| Instant::now() + DRAIN_TIMEOUT);
                    break;
                }
            }
        }
        if give_up_at.is_some_and(|at| pending.is_empty() || Instant::now() >= at) {
            return (lags, pending.len());
        }
        let mut found_at = std::collections::HashMap::new();
        for chunk in pending.chunks(PROBE_BATCH) {
            let found = persisted(probe, sku, chunk).await;
            let now = Instant::now();
            found_at.extend(found.into_iter().map(|id| (id, now)));
        }
        pending.retain(|(id, answered)| match found_at.get(id) {
            Some(seen) => {
                lags.push(micros(*seen - *answered));
                false
            }
            None => true,
        });
        tokio::time::sleep(every).await;
    }
}

/// The ids of `batch` that are in MySQL now; a failed probe finds nothing.
async fn persisted(
    probe: &mut Probe<'_>,
    sku: u64,
    batch: &[(String, Instant)],
) -> std::collections::HashSet<String> {
    match probe {
        Probe::Mysql(db) => {
            // The ids are ours (`l<digits>`), so they are safe to inline; the text
            // protocol avoids preparing a statement per distinct list length.
            let list: Vec<String> = batch.iter().map(|(id, _)| format!("'{id}'")).collect();
            let sql = format!(
                "SELECT deduct_request_id FROM stock_deduct_idempotent
                 WHERE sku_id = {sku} AND deduct_request_id IN ({})",
                list.join(",")
            );
            match db.conn().await {
                Ok(mut conn) => conn
                    .query(sql)
                    .await
                    .unwrap_or_default()
                    .into_iter()
                    .collect(),
                Err(_) => Default::default(),
            }
        }
        Probe::Http(api) => {
            let mut found = std::collections::HashSet::new();
            for (id, _) in batch {
                if matches!(api.persisted(sku, id).await, Ok(true)) {
                    found.insert(id.clone());
                }
            }
            found
        }
    }
}
