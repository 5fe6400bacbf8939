//! The hot-SKU phase in the suite: skipped (one line saying why) unless the
//! bench's Redis is a cluster with three primaries; otherwise run against a
//! stockd child of its own (durability: redis, a fresh namespace) or against
//! the `--target` stockd, which must be configured for the same cluster.

use std::path::Path;

use super::{sku_base, target_access, Collected, SKU_HOT};
use crate::args::BenchArgs;
use crate::drive::progress::note;
use crate::phases::{self, hot_sku};
use crate::results::key;
use crate::results::Memory;
use crate::stack::check::Target;
use crate::stack::child::StockdChild;
use crate::stack::namespace::Namespace;
use stockd::config::Durability;

/// Label (and log file name) of the phase's child stockd.
const CHILD_LABEL: &str = "child-hot-sku";

/// Runs the phase (or skips it); `false` when it violated an invariant.
pub(super) async fn run(
    args: &BenchArgs,
    ns: &Namespace,
    out: &mut Collected,
) -> anyhow::Result<bool> {
    let store = ns.redis()?;
    let primaries: Vec<String> = if store.is_cluster() {
        let nodes = store.primaries().await?;
        nodes.into_iter().map(|(addr, _)| addr).collect()
    } else {
        Vec::new()
    };
    if let Some(reason) = hot_sku::skip_reason(store.is_cluster(), primaries.len()) {
        note(&reason);
        return Ok(true);
    }
    let measured = out
        .throughput(key::RESERVE_REDIS)
        .or_else(|| out.throughput(key::RESERVE_TARGET));
    let rate = hot_sku::rate(args.hot_sku_rate, measured);
    note(&format!(
        "phase hot_sku: one deep-stock SKU in 1, then 3 buckets; {rate:.0} reservations/s \
         for {} s each; primaries {}",
        hot_sku::MEASURE_SECS,
        primaries.join(", ")
    ));
    let base = sku_base(args);
    let setup = hot_sku::Setup {
        primaries,
        skus: SKU_HOT.map(|offset| base + offset),
        plan: hot_sku::plan(rate),
        concurrency: args.concurrency,
    };
    match &args.target {
        None => in_child(args, ns, out, setup).await,
        Some(url) => {
            let (addr, token, client_token) = target_access(args, ns, url).await?;
            let target = Target {
                addr,
                admin_token: &token,
                client_token: client_token.as_deref(),
                stores: None,
            };
            let checked = phases::hot_sku::run(&target, &setup).await?;
            Ok(out.gate(checked).await)
        }
    }
}

/// The phase against a child stockd of its own, cleaned up afterwards.
async fn in_child(
    args: &BenchArgs,
    ns: &Namespace,
    out: &mut Collected,
    setup: hot_sku::Setup,
) -> anyhow::Result<bool> {
    let out_dir = Path::new(&args.out_dir);
    note(&format!(
        "starting stockd --role all ({CHILD_LABEL}); logs in {}/{CHILD_LABEL}.log",
        out_dir.display()
    ));
    let child = StockdChild::start(ns, Durability::Redis, CHILD_LABEL, out_dir).await?;
    let stores = ns.stores()?;
    let target = Target::child(child.addr, &ns.admin_token, &stores);
    let checked = phases::hot_sku::run(&target, &setup).await?;
    let ok = out.gate(checked).await;
    out.memory.push(Memory {
        process: format!("stockd --role all ({CHILD_LABEL})"),
        pid: child.pid(),
        peak_rss_mib: child.peak_rss_mib()?,
    });
    child.stop().await?;
    stores.db.disconnect().await;
    ns.cleanup().await?;
    Ok(ok)
}
