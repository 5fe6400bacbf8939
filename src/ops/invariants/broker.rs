//! The invariant check's broker checks: the deduct work and retry queues are empty
//! (passive declares), and nothing sits in a dead-letter queue (a
//! non-destructive browse, so each dead-lettered deduction can be named).

use super::{Checks, InvariantCheckError, DLQ_EMPTY, QUEUES_DRAINED};
use crate::domain::SkuId;
use crate::ops::dlq::{self, DlqFilter, DlqKind};
use crate::resources::Resources;

/// Most dead letters one check reads per DLQ; beyond it, messages are counted
/// (without a SKU filter) but not named.
pub(super) const DLQ_BROWSE_MAX: usize = 10_000;

pub(super) async fn check(
    res: &Resources,
    skus: &[SkuId],
    checks: &mut Checks,
) -> Result<(), InvariantCheckError> {
    let topology = res.publisher.topology();
    for queue in [&topology.deduct_queue, &topology.deduct_retry_queue] {
        let depth = res.publisher.queue_depth(queue).await?;
        if depth > 0 {
            checks.add(QUEUES_DRAINED, u64::from(depth), || {
                format!("{queue}: {depth} messages waiting")
            });
        }
    }
    for kind in [DlqKind::Deduct, DlqKind::Expiry] {
        let filter = DlqFilter {
            kind,
            sku: None,
            max_messages: DLQ_BROWSE_MAX,
        };
        let listing = dlq::list(&res.publisher, filter, &mut |_| {}).await?;
        let queue = &listing.queue_name;
        let wanted = |sku: u64| skus.is_empty() || skus.iter().any(|s| s.get() == sku);
        for d in listing.deductions.iter().filter(|d| wanted(d.sku_id)) {
            checks.one(DLQ_EMPTY, || {
                let attempts = d
                    .attempts
                    .map_or(String::new(), |a| format!(", attempts {a}"));
                format!(
                    "{queue}: sku {} request {} user {} count {} (reason {}{attempts})",
                    d.sku_id, d.request_id, d.user_id, d.count, d.reason
                )
            });
        }
        if !skus.is_empty() {
            continue; // poison and unread messages belong to no SKU
        }
        for p in &listing.poison {
            checks.one(DLQ_EMPTY, || {
                format!(
                    "{queue}: poison message {} (reason {}): {}",
                    p.message_id.as_deref().unwrap_or("without id"),
                    p.reason,
                    p.error
                )
            });
        }
        let unread = listing.messages_unread;
        if unread > 0 {
            checks.add(DLQ_EMPTY, u64::from(unread), || {
                format!("{queue}: {unread} more messages not read (audit reads {DLQ_BROWSE_MAX})")
            });
        }
    }
    Ok(())
}
