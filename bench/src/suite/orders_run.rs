//! The `orders` phase in the suite: run in the durability-queue child right
//! after `reserve_queue`, so the CPU of a 3-line order is compared with the
//! CPU of one reservation measured minutes (not a whole run) apart on the same
//! child; and `--only orders`, which runs just those two phases in a child of
//! their own (about 20 s, for iterating on the order path). Skipped, with one
//! line saying why, with `--target`.

use std::path::Path;

use super::{
    plan, sku_base, Collected, SKU_INTERLEAVED, SKU_INTERLEAVED_ORDERS, SKU_ORDERS, SKU_RESERVE,
};
use crate::args::BenchArgs;
use crate::drive::progress::note;
use crate::phases::{self, orders, orders_interleaved};
use crate::results::key;
use crate::results::Memory;
use crate::stack::check::Target;
use crate::stack::child::StockdChild;
use crate::stack::namespace::Namespace;
use stockd::config::Durability;

/// Label (and log file name) of the `--only orders` child.
const CHILD_LABEL: &str = "child-queue-orders";

/// The orders phase against `target` (or its skip line); `false` when it
/// violated an invariant.
pub(super) async fn after_reserve(
    args: &BenchArgs,
    target: &Target<'_>,
    out: &mut Collected,
) -> anyhow::Result<bool> {
    let Some(stores) = target.stores else {
        note(&format!(
            "phase {} skipped: --target; its checks read the bench's own stores (a child stockd)",
            key::ORDERS
        ));
        return Ok(true);
    };
    let path = if stores.redis.is_cluster() {
        "Redis Cluster: held line by line under an intent"
    } else {
        "standalone Redis: orders decided in batched scripts"
    };
    note(&format!(
        "phase {}: {} lines per order over SKUs {:?}, a buyer per order ({path})",
        key::ORDERS,
        orders::LINES,
        skus(args)
    ));
    let checked = phases::orders::run(
        target,
        key::ORDERS,
        skus(args),
        plan(args.requests),
        args.concurrency,
    );
    if !out.gate(checked.await?).await {
        return Ok(false);
    }
    let base = sku_base(args);
    let skus = orders_interleaved::Skus {
        single: base + SKU_INTERLEAVED,
        order: SKU_INTERLEAVED_ORDERS.map(|offset| base + offset),
    };
    note(&format!(
        "phase {} / {}: {} rounds each of reservations (SKU {}) and orders (SKUs {:?}), \
         CPU until MySQL applied each round (the orders goal's measurement)",
        key::RESERVE_INTERLEAVED,
        key::ORDERS_INTERLEAVED,
        orders_interleaved::ROUNDS,
        skus.single,
        skus.order
    ));
    let checked = orders_interleaved::run(
        target,
        (key::RESERVE_INTERLEAVED, key::ORDERS_INTERLEAVED),
        skus,
        plan(args.requests),
        args.concurrency,
    );
    Ok(out.gate(checked.await?).await)
}

fn skus(args: &BenchArgs) -> [u64; orders::LINES] {
    let base = sku_base(args);
    SKU_ORDERS.map(|offset| base + offset)
}

/// `--only orders`: `reserve_queue`, then `orders`, in one durability-queue
/// child of their own.
pub(super) async fn only(
    args: &BenchArgs,
    ns: &Namespace,
    out: &mut Collected,
) -> anyhow::Result<()> {
    let out_dir = Path::new(&args.out_dir);
    note(&format!(
        "starting stockd --role all ({CHILD_LABEL}); logs in {}/{CHILD_LABEL}.log",
        out_dir.display()
    ));
    let child = StockdChild::start(ns, Durability::Queue, CHILD_LABEL, out_dir).await?;
    let stores = ns.stores()?;
    let target = Target::child(child.addr, &ns.admin_token, &stores);
    note(&format!("phase {}", key::RESERVE_QUEUE));
    let checked = phases::reserve::reserve(
        &target,
        key::RESERVE_QUEUE,
        "POST reservations, durability: queue".to_string(),
        sku_base(args) + SKU_RESERVE,
        plan(args.requests),
        args.concurrency,
    );
    if out.gate(checked.await?).await {
        after_reserve(args, &target, out).await?;
    }
    out.memory.push(Memory {
        process: format!("stockd --role all ({CHILD_LABEL})"),
        pid: child.pid(),
        peak_rss_mib: child.peak_rss_mib()?,
    });
    child.stop().await?;
    stores.db.disconnect().await;
    ns.cleanup().await
}
