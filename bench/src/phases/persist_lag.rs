//! Persist lag: the time from a 201 to the reservation's ledger row being
//! committed in MySQL, at half of the measured reserve throughput (open loop,
//! so the rate is held however the answers come). The same run measures the
//! reserve latency at half load.
//!
//! A poller watches admitted request ids until they show up: with a child
//! stockd every id, by primary-key reads of the ledger every 10 ms; with
//! `--target` a 1-in-10 sample, through `GET .../reservations/{id}` and its
//! `persisted` field (the only view of MySQL the API gives).

use std::time::Duration;

use mysql_async::prelude::Queryable;
use tokio::sync::mpsc::{error::TryRecvError, UnboundedReceiver};
use tokio::time::Instant;

use super::{both, Checked};
use crate::drive::api::{Api, Reserver, UserOf};
use crate::drive::load::{drive, Plan};
use crate::measure::stats::{micros, Percentiles, Tally};
use crate::results::PhaseResult;
use crate::stack::batches::BatchCounters;
use crate::stack::check::{self, Expect, Target, DRAIN_TIMEOUT};
use stockd::db::Db;
use stockd::domain::SkuId;

/// Poll period against MySQL: bounds the lag's measuring error at ~10 ms, far
/// under the 200 ms target. Every 2 ms cost MariaDB ~100 µs of CPU per
/// reservation on a 2-core box, distorting the very latency being measured.
const POLL_MYSQL: Duration = Duration::from_millis(10);
/// Poll period over HTTP (`--target`): each poll is one GET per pending id.
const POLL_HTTP: Duration = Duration::from_millis(20);
/// Request ids per ledger query (one `IN (...)` list).
const PROBE_BATCH: usize = 500;
/// Most requests one lag run sends, whatever the measured rate.
const REQUESTS_MAX: u64 = 60_000;

/// Connections the HTTP probe spreads its GETs over.
const HTTP_PROBE_CONNECTIONS: usize = 8;
/// Over HTTP only every n-th admitted reservation is watched: a GET per
/// pending id per poll would otherwise add more load than it measures.
const HTTP_SAMPLE_EVERY: usize = 10;

/// How the poller learns that a reservation is in MySQL.
pub enum Probe<'a> {
    Mysql(&'a Db),
    Http(Vec<Api>),
}

impl Probe<'_> {
    /// Probes over HTTP; `client_token` for a target with `auth.required`.
    pub fn http(addr: std::net::SocketAddr, admin_token: &str, client_token: Option<&str>) -> Self {
        Probe::Http(
            (0..HTTP_PROBE_CONNECTIONS)
                .map(|_| Api::new(addr, admin_token).with_client_token(client_token))
                .collect(),
        )
    }
}

/// Runs `duration` of reservations at `rate_per_sec` against a fresh `sku`.
pub async fn run(
    target: &Target<'_>,
    mut probe: Probe<'_>,
    (half_key, lag_key): (&'static str, &'static str),
    sku: u64,
    rate_per_sec: f64,
    duration: Duration,
    concurrency: usize,
) -> anyhow::Result<Checked> {
    let requests = ((rate_per_sec * duration.as_secs_f64()).ceil() as u64).clamp(1, REQUESTS_MAX);
    let total = i64::try_from(requests)?;
    target.api().put_sku(sku, total, 1).await?;
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let workers: Vec<Reserver> = (0..concurrency)
        .map(|_| {
            target
                .reserver(sku, "l", UserOf::Unique)
                .reporting_to(tx.clone())
        })
        .collect();
    drop(tx);
    let plan = Plan {
        requests,
        // Twice the nominal time: room for the open loop to catch up after a stall.
        max_duration: duration * 2,
        rate_per_sec: Some(rate_per_sec),
    };
    let before = BatchCounters::read(target.addr).await;
    let (run, (mut lags, unpersisted)) =
        tokio::join!(drive(half_key, plan, workers), watch(rx, &mut probe, sku));
    let after = BatchCounters::read(target.addr).await;
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
    let mut half = PhaseResult::from_run(
        half_key,
        format!("POST reservations at {rate_per_sec:.0}/s (half the measured reserve rate)"),
        "req/s",
        concurrency,
        &run,
    );
    half.batches = before.zip(after).map(|(b, a)| a.since(&b));
    let mut lag = PhaseResult::from_rate(
        lag_key,
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
    let (every, sample_every) = match probe {
        Probe::Mysql(_) => (POLL_MYSQL, 1),
        Probe::Http(_) => (POLL_HTTP, HTTP_SAMPLE_EVERY),
    };
    let mut received = 0usize;
    loop {
        loop {
            match rx.try_recv() {
                Ok(item) => {
                    received += 1;
                    if received % sample_every == 0 {
                        pending.push(item);
                    }
                }
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
        Probe::Http(apis) => {
            let per_conn = batch.len().div_ceil(apis.len()).max(1);
            let probes = apis
                .iter_mut()
                .zip(batch.chunks(per_conn))
                .map(|(api, ids)| async move {
                    let mut found = Vec::new();
                    for (id, _) in ids {
                        if matches!(api.persisted(sku, id).await, Ok(true)) {
                            found.push(id.clone());
                        }
                    }
                    found
                });
            futures_util::future::join_all(probes)
                .await
                .into_iter()
                .flatten()
                .collect()
        }
    }
}
