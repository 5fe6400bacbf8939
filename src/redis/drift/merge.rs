//! The reconciler's view of a split SKU: one figure of available stock over
//! the pool, every bucket and the transfers in flight, read without a
//! multi-slot transaction (none exists across primaries).
//!
//! Reads: home (pool, pending leases) → each bucket (its stock, winners,
//! pending gives, and whether each lease to it was credited) → home again
//! (whether each give was credited). Each read is atomic in its slot. The
//! figure is judged only when the two home reads agree on the pool and the
//! pending leases: every transfer between the reads moves the pool or
//! changes that set, so agreeing reads count each unit exactly once — in its
//! source, in a pending entry not yet credited, or in its destination.

use super::{BucketSnapshot, Drift, RedisSnapshot};
use crate::redis::buckets::{Holder, Layout, PendingTransfer};
use crate::redis::RedisError;

/// Reads tried before a busy SKU is reported unsettled (the next pass retries).
const ATTEMPTS: usize = 5;

impl Drift {
    pub(super) async fn merged_snapshot(
        &self,
        layout: &Layout,
        max_winners: usize,
    ) -> Result<Option<RedisSnapshot>, RedisError> {
        // `reconcile.max_winners` bounds each read (one Lua call blocks its
        // primary while it lists), so it applies per bucket.
        for _ in 0..ATTEMPTS {
            let home_tag = layout.tag(0);
            // The first home read only fixes the pool and the pending leases;
            // its winners are read by the second (0: none listed, no work).
            let Some(first) = self.bucket_snapshot(home_tag, &[], 0).await? else {
                return Ok(None);
            };
            let mut buckets = Vec::new();
            for bucket in layout.buckets().skip(1) {
                let asked = ids_to(&first.pending, |d| d == Holder::Bucket(bucket));
                let snap = self
                    .bucket_snapshot(layout.tag(bucket), &asked, max_winners)
                    .await?;
                buckets.push((asked, snap));
            }
            // Credited to the home slot: leases to bucket 0, gives to the pool.
            let mut home_asked = ids_to(&first.pending, |d| {
                d == Holder::Bucket(0) || d == Holder::Pool
            });
            for (_, snap) in &buckets {
                if let Some(snap) = snap {
                    home_asked.extend(snap.pending.iter().map(|p| p.id.clone()));
                }
            }
            let Some(second) = self
                .bucket_snapshot(home_tag, &home_asked, max_winners)
                .await?
            else {
                return Ok(None);
            };
            if second.pool != first.pool || !same_ids(&first.pending, &second.pending) {
                continue;
            }
            return Ok(Some(merge(&second, &home_asked, &buckets)));
        }
        Err(RedisError::Unsettled(format!(
            "SKU {}: stock kept moving between its buckets during {ATTEMPTS} reads",
            layout.sku()
        )))
    }
}

fn ids_to(pending: &[PendingTransfer], to: impl Fn(Holder) -> bool) -> Vec<String> {
    pending
        .iter()
        .filter(|p| to(p.dest))
        .map(|p| p.id.clone())
        .collect()
}

fn same_ids(a: &[PendingTransfer], b: &[PendingTransfer]) -> bool {
    let mut a: Vec<&str> = a.iter().map(|p| p.id.as_str()).collect();
    let mut b: Vec<&str> = b.iter().map(|p| p.id.as_str()).collect();
    a.sort_unstable();
    b.sort_unstable();
    a == b
}

/// Units of `pending` not credited per `(asked, credited)` of the destination.
fn uncredited(pending: &PendingTransfer, asked: &[String], credited: &[bool]) -> i64 {
    let done = asked
        .iter()
        .position(|id| *id == pending.id)
        .and_then(|i| credited.get(i).copied())
        .unwrap_or(false);
    if done {
        0
    } else {
        pending.units
    }
}

fn merge(
    home: &BucketSnapshot,
    home_asked: &[String],
    buckets: &[(Vec<String>, Option<BucketSnapshot>)],
) -> RedisSnapshot {
    let mut available = home.pool + home.available;
    let mut winners = home.winners.clone();
    for pending in &home.pending {
        available += match pending.dest {
            Holder::Bucket(b) if b > 0 => match buckets.get(usize::from(b) - 1) {
                Some((asked, Some(snap))) => uncredited(pending, asked, &snap.credited),
                _ => pending.units,
            },
            _ => uncredited(pending, home_asked, &home.credited),
        };
    }
    for (_, snap) in buckets {
        let Some(snap) = snap else { continue };
        available += snap.available;
        for pending in &snap.pending {
            available += uncredited(pending, home_asked, &home.credited);
        }
        match (&mut winners, &snap.winners) {
            (Some(all), Some(more)) => all.extend(more.iter().cloned()),
            _ => winners = None,
        }
    }
    RedisSnapshot {
        available,
        total: home.total,
        adjust: home.adjust,
        limit_per_user: home.limit_per_user,
        pool: Some(home.pool),
        winners,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snap(
        available: i64,
        pool: i64,
        pending: Vec<PendingTransfer>,
        credited: Vec<bool>,
    ) -> BucketSnapshot {
        BucketSnapshot {
            available,
            total: 100,
            adjust: 0,
            limit_per_user: 2,
            pool,
            drained: false,
            pending,
            credited,
            winners: Some(Vec::new()),
        }
    }

    fn pending(id: &str, dest: Holder, units: i64) -> PendingTransfer {
        PendingTransfer {
            id: id.into(),
            dest,
            units,
            at_secs: 1,
        }
    }

    #[test]
    fn a_lease_counts_once_whether_or_not_it_was_credited() {
        // 60 in the pool, 10 in bucket 0, 20 leased to bucket 1 and credited
        // (bucket 1 shows 20), 10 more leased to bucket 2 not yet credited.
        let home = snap(
            10,
            60,
            vec![
                pending("x1", Holder::Bucket(1), 20),
                pending("x2", Holder::Bucket(2), 10),
            ],
            vec![],
        );
        let b1 = snap(20, 0, vec![], vec![true]);
        let b2 = snap(0, 0, vec![], vec![false]);
        let merged = merge(
            &home,
            &[],
            &[(vec!["x1".into()], Some(b1)), (vec!["x2".into()], Some(b2))],
        );
        assert_eq!(merged.available, 100);
        assert_eq!(merged.pool, Some(60));
    }

    #[test]
    fn a_give_to_the_pool_counts_once() {
        // Bucket 1 gave 5 (pending there); the pool has it only once credited.
        let b1 = snap(15, 0, vec![pending("g", Holder::Pool, 5)], vec![]);
        let not_yet = snap(0, 80, vec![], vec![false]);
        let merged = merge(&not_yet, &["g".into()], &[(vec![], Some(b1.clone()))]);
        assert_eq!(merged.available, 100);
        let done = snap(0, 85, vec![], vec![true]);
        let merged = merge(&done, &["g".into()], &[(vec![], Some(b1))]);
        assert_eq!(merged.available, 100);
    }

    #[test]
    fn a_bucket_with_too_many_winners_makes_the_merged_list_unknown() {
        let mut b1 = snap(0, 0, vec![], vec![]);
        b1.winners = None;
        let merged = merge(&snap(0, 0, vec![], vec![]), &[], &[(vec![], Some(b1))]);
        assert_eq!(merged.winners, None);
    }
}
