//! The expiry storm in the suite: after the reserve children (a freshly reset
//! namespace, a child of its own with a short time to pay), and with
//! `--only expiry-storm` alone (about a minute). Skipped, with one line
//! saying why, with `--target`: its time to pay is the target's own, and the
//! checks read the bench's stores.

use std::path::Path;

use super::{sku_base, Collected, SKU_STORM};
use crate::args::BenchArgs;
use crate::drive::progress::note;
use crate::phases::expiry_storm::{self, Setup, CHILD_LABEL, TTL_SECS};
use crate::results::key;
use crate::stack::namespace::Namespace;

/// Runs the storm; `false` when it violated an invariant.
pub(super) async fn run(
    args: &BenchArgs,
    ns: &Namespace,
    out: &mut Collected,
) -> anyhow::Result<bool> {
    if args.target.is_some() {
        note(&format!(
            "phase {} skipped: --target; the storm needs a child whose time to pay is short",
            key::EXPIRY_STORM
        ));
        return Ok(true);
    }
    ns.cleanup().await?;
    let setup = Setup {
        sku: sku_base(args) + SKU_STORM,
        expiries: args.storm_expiries,
        concurrency: args.concurrency,
    };
    let out_dir = Path::new(&args.out_dir);
    note(&format!(
        "phase {}: {} reservations at full speed, reservation.ttl_secs {TTL_SECS}, then their \
         release; logs in {}/{CHILD_LABEL}.log",
        key::EXPIRY_STORM,
        setup.expiries,
        out_dir.display()
    ));
    let (checked, memory) = expiry_storm::run(ns, out_dir, setup).await?;
    out.memory.push(memory);
    let ok = out.gate(checked).await;
    ns.cleanup().await?;
    Ok(ok)
}
