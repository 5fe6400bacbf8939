//! The drop in the suite: after the expiry storm (a freshly reset namespace,
//! a child of its own on a private redis-server), and with `--only drop`
//! (`--phase drop`) alone (under a minute). Skipped, with one line saying
//! why, with `--target`: the phase configures its child's pass key and hold
//! budget, and counts the Redis calls of a server only that child uses.

use std::path::Path;

use super::{sku_base, Collected, SKU_DROP};
use crate::args::BenchArgs;
use crate::drive::progress::note;
use crate::phases::drop::{self, CHILD_LABEL, CONNECTIONS};
use crate::results::key;
use crate::stack::namespace::Namespace;

/// Runs the drop; `false` when it violated an invariant.
pub(super) async fn run(
    args: &BenchArgs,
    ns: &Namespace,
    out: &mut Collected,
) -> anyhow::Result<bool> {
    if args.target.is_some() {
        note(&format!(
            "phase {} skipped: --target; the drop configures its own child's pass key and \
             budget and counts the calls of a private Redis",
            key::DROP
        ));
        return Ok(true);
    }
    ns.cleanup().await?;
    let out_dir = Path::new(&args.out_dir);
    note(&format!(
        "phase {}: {CONNECTIONS} connections waiting for the opening, passes required, hold \
         budget on; logs in {}/{CHILD_LABEL}.log",
        key::DROP,
        out_dir.display()
    ));
    let (checked, memory) = drop::run(ns, out_dir, sku_base(args) + SKU_DROP).await?;
    out.memory.push(memory);
    let ok = out.gate(checked).await;
    ns.cleanup().await?;
    Ok(ok)
}
