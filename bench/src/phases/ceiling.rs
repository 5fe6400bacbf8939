//! Ceiling: the reserve Lua script called straight through the project's Redis
//! client (`RedisStore::reserve`, one multiplexed connection, as the api uses
//! it), no HTTP. The single-call ceiling (`redis.batch_max: 1`, one script
//! call per reservation, the design of every peer) is what the reserve phases
//! are judged against; the batched ceiling (the configured `redis.batch_max`)
//! shows what batch admission gives stage 1 on this machine.

use std::sync::Arc;

use super::Checked;
use crate::drive::load::{drive, Plan, Requester};
use crate::measure::stats::Outcome;
use crate::results::{key, BatchSizes, PhaseResult};
use crate::stack::check::{self, Expect};
use crate::stack::namespace::Namespace;
use stockd::domain::{RequestId, ReserveOutcome, SkuId, UserId};
use stockd::redis::RedisStore;

/// SKU the single-call ceiling reserves from; the batched one takes the next
/// (the namespace is reset before children start).
const CEILING_SKU: u64 = 1;

struct Direct {
    store: Arc<RedisStore>,
    sku: SkuId,
}

impl Requester for Direct {
    async fn call(&mut self, index: u64) -> Outcome {
        let rid = RequestId::parse(&format!("c{index}")).expect("c<digits> is a valid id");
        let user = UserId::new(index + 1).expect("index + 1 is positive");
        match self
            .store
            .reservations()
            .reserve(self.sku, &rid, user, 1, &stockd::domain::Requester::Anyone)
            .await
        {
            Ok(ReserveOutcome::Reserved { .. }) => Outcome::done("reserved"),
            Ok(other) => Outcome::refused(other.label()),
            Err(err) => Outcome::failed(format!("redis: {err}")),
        }
    }
}

/// `batched`: through batch admission with the configured `redis.batch_max`
/// (key `ceiling_batched`); else one call per reservation (key `ceiling`).
pub async fn run(
    ns: &Namespace,
    plan: Plan,
    concurrency: usize,
    batched: bool,
) -> anyhow::Result<Checked> {
    let phase = if batched {
        key::CEILING_BATCHED
    } else {
        key::CEILING
    };
    // Nothing drains the outbox here: let it hold every entry instead of
    // measuring backpressure refusals.
    let mut settings = ns.settings.redis.clone();
    settings.outbox_max_len = settings.outbox_max_len.max(plan.requests + 1);
    if !batched {
        settings.batch_max = 1;
    }
    let store = Arc::new(RedisStore::new(
        &settings,
        ns.settings.reservation.ttl_secs,
    )?);
    store.load_scripts().await?;
    let sku = SkuId::new(CEILING_SKU + u64::from(batched)).expect("positive");
    let total = i64::try_from(plan.requests)?;
    let op = uuid::Uuid::new_v4().simple().to_string();
    store
        .skus()
        .load_sku(
            &stockd::redis::buckets::Layout::single(sku),
            total,
            total,
            1,
            plan.requests,
            stockd::redis::Step {
                op: &op,
                mode: stockd::redis::LoadMode::Create,
                movement_id: 0,
                record_cut: false,
            },
        )
        .await?;
    let workers = (0..concurrency)
        .map(|_| Direct {
            store: store.clone(),
            sku,
        })
        .collect();
    let calls_before = script_calls(&store).await;
    let run = drive(phase, plan, workers).await;
    let calls = script_calls(&store)
        .await
        .zip(calls_before)
        .map(|(after, before)| after - before);
    let expect = Expect {
        sku,
        total,
        admitted: run.tally.done as i64,
    };
    let mut violations = check::answers(expect, &run.tally);
    let available = store.skus().sku(sku).await?.map(|s| s.available);
    if available != Some(total - expect.admitted) {
        violations.push(format!(
            "{phase}: Redis available {available:?}, expected {}",
            total - expect.admitted
        ));
    }
    let outbox = store.outbox().len(sku).await?;
    if outbox != run.tally.done {
        violations.push(format!(
            "{phase}: {outbox} outbox entries for {} reservations",
            run.tally.done
        ));
    }
    let title = if batched {
        format!(
            "reserve Lua via RedisStore::reserve, batches of up to {}, no HTTP",
            settings.batch_max
        )
    } else {
        "reserve Lua via RedisStore::reserve, one call each, no HTTP".to_string()
    };
    let mut result = PhaseResult::from_run(phase, title, "req/s", concurrency, &run);
    result.batches = calls.filter(|&c| c > 0.0).map(|c| BatchSizes {
        per_message: None,
        messages: 0,
        per_transaction: None,
        per_reserve_call: Some(run.tally.done as f64 / c),
    });
    Ok(Checked::one(result, violations))
}

/// `EVALSHA` calls so far, summed over the primaries (`INFO commandstats`):
/// reservations ÷ calls is the batch size the phase reached. Counts every
/// client's calls, so a bench sharing its Redis with other work reads high.
async fn script_calls(store: &RedisStore) -> Option<f64> {
    let mut calls = 0.0;
    for (_, mut conn) in store.primaries().await.ok()? {
        let info: String = deadpool_redis::redis::cmd("INFO")
            .arg("commandstats")
            .query_async(&mut conn)
            .await
            .ok()?;
        calls += info
            .lines()
            .find_map(|l| l.strip_prefix("cmdstat_evalsha:calls="))
            .and_then(|rest| rest.split(',').next())
            .and_then(|n| n.parse::<f64>().ok())
            .unwrap_or(0.0);
    }
    Some(calls)
}
