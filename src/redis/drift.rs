//! Redis side of reconciliation and warm-up: an atomic snapshot of a SKU, the
//! compare-and-set repair, and the warm-up write (scripts `snapshot.lua`,
//! `adjust.lua`, `warmup.lua`).

use super::buckets::{Holder, Layout};
use super::{scripts, RedisError, RedisStore};
use crate::domain::{ReservationStatus, SkuId};

/// Values per winner in `snapshot.lua`'s reply: request id, status, count, created_ms.
const WINNER_FIELDS: usize = 4;

/// One winning reservation as Redis holds it (`status` is `None` once expired).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WinnerRecord {
    pub request_id: String,
    pub status: Option<ReservationStatus>,
    pub count: i64,
    /// Admission time (Redis clock); 0 when the record expired or is a
    /// tombstone. The reconciler's STUCK verdict ages in-flight work by it.
    pub created_ms: u64,
}

/// A SKU's Redis state, read atomically.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RedisSnapshot {
    pub available: i64,
    pub total: i64,
    /// Units removed by repairs (see `adjust.lua`).
    pub adjust: i64,
    pub limit_per_user: i64,
    /// A split SKU's pool as read (the reconciler's repair compares and sets
    /// it); `None` for a SKU in one bucket, whose repair targets `available`.
    pub pool: Option<i64>,
    /// `None` when there were too many winners to list.
    pub winners: Option<Vec<WinnerRecord>>,
}

impl RedisSnapshot {
    /// Units of winning records that still hold stock (live or rejected);
    /// `None` when unknown (too many winners, or expired records).
    pub fn recorded_units(&self) -> Option<i64> {
        let winners = self.winners.as_ref()?;
        let mut units = 0;
        for w in winners {
            if w.status? != ReservationStatus::Released {
                units += w.count;
            }
        }
        Some(units)
    }

    /// Redis' own conservation: `total - available == winning units + adjust`.
    /// `None` when it cannot be judged (too many winners, or expired records).
    pub fn internally_conserved(&self) -> Option<bool> {
        let units = self.recorded_units()?;
        Some(self.total - self.available == units + self.adjust)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AdjustOutcome {
    Applied {
        available: i64,
    },
    /// `available` moved since the check; nothing was changed.
    Changed,
}

impl RedisStore {
    /// Snapshot of one SKU; `None` when it is not loaded. Atomic for a SKU in
    /// one bucket; for a split SKU, merged from one read per bucket and judged
    /// only when stable (see [`super::buckets::merge`]).
    pub async fn snapshot(
        &self,
        sku_id: SkuId,
        max_winners: usize,
    ) -> Result<Option<RedisSnapshot>, RedisError> {
        let layout = self.layout(sku_id).await?;
        if layout.is_split() {
            return self.merged_snapshot(&layout, max_winners).await;
        }
        let tag = sku_id.to_string();
        Ok(self
            .bucket_snapshot(&tag, &[], max_winners)
            .await?
            .map(RedisSnapshot::from))
    }

    /// Atomic read of one bucket (`tag`), with whether each of `asked` was
    /// credited to it.
    pub async fn bucket_snapshot(
        &self,
        tag: &str,
        asked: &[String],
        max_winners: usize,
    ) -> Result<Option<BucketSnapshot>, RedisError> {
        let mut invocation = scripts::SNAPSHOT.prepare_invoke();
        let keys = self.keys();
        invocation
            .key(keys.sku_at(tag))
            .key(keys.winners_at(tag))
            .key(keys.transfers_out_at(tag))
            .key(keys.transfers_in_at(tag))
            .arg(keys.reservation_prefix_at(tag))
            .arg(max_winners)
            .arg(asked.join(","));
        let reply: Vec<String> = self
            .run(|mut c| async move { invocation.invoke_async(&mut c).await })
            .await?;
        parse_snapshot(&reply)
    }

    /// Moves stock by `delta` if Redis still holds what `seen` read, and sets
    /// the `adjust` term to `new_adjust` (see `adjust.lua`). A SKU in one
    /// bucket is repaired in `available`; a split SKU in its pool (then every
    /// bucket is undrained, so stock put back is sold).
    pub async fn adjust(
        &self,
        sku_id: SkuId,
        seen: &RedisSnapshot,
        delta: i64,
        new_adjust: i64,
    ) -> Result<AdjustOutcome, RedisError> {
        let (field, expected) = match seen.pool {
            Some(pool) => ("pool", pool),
            None => ("available", seen.available),
        };
        let mut invocation = scripts::ADJUST.prepare_invoke();
        invocation
            .key(self.keys().sku(sku_id))
            .arg(expected)
            .arg(delta)
            .arg(self.keys().soldout_channel())
            .arg(sku_id.get())
            .arg(new_adjust)
            .arg(field);
        let reply: Vec<String> = self
            .run(|mut c| async move { invocation.invoke_async(&mut c).await })
            .await?;
        match (
            reply.first().map(String::as_str),
            reply.get(1).and_then(|v| v.parse::<i64>().ok()),
        ) {
            (Some("OK"), Some(value)) => {
                if seen.pool.is_some() && delta > 0 {
                    self.undrain_all(&*self.layout(sku_id).await?).await?;
                }
                let available = seen.available + value - expected;
                Ok(AdjustOutcome::Applied { available })
            }
            (Some("CHANGED"), _) => Ok(AdjustOutcome::Changed),
            _ => Err(RedisError::BadReply(format!("{reply:?}"))),
        }
    }

    /// Writes the SKU's state from MySQL (warm-up) and registers the SKU. A
    /// split SKU gets everything into its pool, every bucket emptied and
    /// primed again.
    pub async fn warm(
        &self,
        layout: &Layout,
        available: i64,
        total: i64,
        limit_per_user: u32,
        adjust: i64,
    ) -> Result<(), RedisError> {
        let sku_id = layout.sku();
        let mut invocation = scripts::WARMUP.prepare_invoke();
        invocation
            .key(self.keys().sku(sku_id))
            .key(self.keys().transfers_out_at(layout.tag(0)))
            .arg(available)
            .arg(total)
            .arg(limit_per_user)
            .arg(adjust)
            .arg(self.keys().soldout_channel())
            .arg(sku_id.get())
            .arg(layout.n())
            .arg(layout.tags_field());
        let _: Vec<String> = self
            .run(|mut c| async move { invocation.invoke_async(&mut c).await })
            .await?;
        self.layouts.forget(sku_id);
        if layout.is_split() {
            self.init_buckets(layout, u64::from(limit_per_user), true)
                .await?;
            self.prime(layout).await?;
        }
        self.register(sku_id).await
    }
}

/// One bucket's atomic read (`snapshot.lua`): the whole SKU when it has one
/// bucket; merged over buckets by [`super::buckets::merge`] otherwise.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BucketSnapshot {
    pub available: i64,
    pub total: i64,
    pub adjust: i64,
    pub limit_per_user: i64,
    /// Units in the pool (home bucket of a split SKU; 0 otherwise).
    pub pool: i64,
    pub drained: bool,
    /// Transfers out of this bucket not yet settled.
    pub pending: Vec<PendingTransfer>,
    /// For each id asked about: whether it was already credited here.
    pub credited: Vec<bool>,
    pub winners: Option<Vec<WinnerRecord>>,
}

/// A stock transfer recorded in its source's `xout` hash (`dest:units:secs`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingTransfer {
    pub id: String,
    pub dest: Holder,
    pub units: i64,
    /// When the debit ran (Redis TIME, seconds).
    pub at_secs: u64,
}

impl PendingTransfer {
    pub(crate) fn parse(id: &str, entry: &str) -> Option<Self> {
        let mut parts = entry.split(':');
        let dest = Holder::parse(parts.next()?)?;
        let units = parts.next()?.parse().ok()?;
        let at_secs = parts.next()?.parse().ok()?;
        Some(Self {
            id: id.to_string(),
            dest,
            units,
            at_secs,
        })
    }
}

impl From<BucketSnapshot> for RedisSnapshot {
    fn from(b: BucketSnapshot) -> Self {
        Self {
            available: b.available,
            total: b.total,
            adjust: b.adjust,
            limit_per_user: b.limit_per_user,
            pool: None,
            winners: b.winners,
        }
    }
}

pub(super) fn parse_snapshot(reply: &[String]) -> Result<Option<BucketSnapshot>, RedisError> {
    let bad = || {
        RedisError::BadReply(format!(
            "snapshot {:?}",
            reply.iter().take(8).collect::<Vec<_>>()
        ))
    };
    let num = |i: usize| {
        reply
            .get(i)
            .and_then(|s| s.parse::<i64>().ok())
            .ok_or_else(bad)
    };
    if reply.first().is_some_and(String::is_empty) {
        return Ok(None);
    }
    let mut at = 6;
    let pending_count = usize::try_from(num(at)?).map_err(|_| bad())?;
    at += 1;
    let mut pending = Vec::with_capacity(pending_count);
    for _ in 0..pending_count {
        let id = reply.get(at).ok_or_else(bad)?;
        let entry = reply.get(at + 1).ok_or_else(bad)?;
        pending.push(PendingTransfer::parse(id, entry).ok_or_else(bad)?);
        at += 2;
    }
    let asked = usize::try_from(num(at)?).map_err(|_| bad())?;
    at += 1;
    let mut credited = Vec::with_capacity(asked);
    for _ in 0..asked {
        credited.push(num(at)? == 1);
        at += 1;
    }
    let listed = num(at)?;
    at += 1;
    let winners = if listed < 0 {
        None
    } else {
        let mut records = Vec::with_capacity(listed as usize);
        for i in 0..listed as usize {
            let base = at + i * WINNER_FIELDS;
            records.push(WinnerRecord {
                request_id: reply.get(base).cloned().ok_or_else(bad)?,
                status: reply
                    .get(base + 1)
                    .and_then(|s| ReservationStatus::parse(s)),
                count: num(base + 2)?,
                created_ms: u64::try_from(num(base + 3)?).map_err(|_| bad())?,
            });
        }
        if reply.len() != at + listed as usize * WINNER_FIELDS {
            return Err(bad());
        }
        Some(records)
    };
    Ok(Some(BucketSnapshot {
        available: num(0)?,
        total: num(1)?,
        adjust: num(2)?,
        limit_per_user: num(3)?,
        pool: num(4)?,
        drained: num(5)? == 1,
        pending,
        credited,
        winners,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_snapshot_lists_winners_and_judges_conservation() {
        let reply = strings(&[
            "7",
            "10",
            "0",
            "2",
            "0",
            "0",
            "0",
            "0",
            "2",
            "a",
            "RESERVED",
            "2",
            "1700000000123",
            "b",
            "CONFIRMED",
            "1",
            "1700000000456",
        ]);
        let snap: RedisSnapshot = parse_snapshot(&reply).unwrap().unwrap().into();
        assert_eq!(snap.available, 7);
        let winners = snap.winners.as_ref().unwrap();
        assert_eq!(winners.len(), 2);
        assert_eq!(
            winners[1],
            WinnerRecord {
                request_id: "b".into(),
                status: Some(ReservationStatus::Confirmed),
                count: 1,
                created_ms: 1_700_000_000_456,
            }
        );
        assert_eq!(snap.internally_conserved(), Some(true));
        let broken = RedisSnapshot {
            available: 8,
            ..snap.clone()
        };
        assert_eq!(broken.internally_conserved(), Some(false));
    }

    #[test]
    fn unloaded_capped_and_expired_snapshots_are_told_apart() {
        assert_eq!(
            parse_snapshot(&strings(&["", "", "", "", "", "", "0", "0", "0"])).unwrap(),
            None
        );
        let capped: RedisSnapshot =
            parse_snapshot(&strings(&["1", "5", "0", "1", "0", "0", "0", "0", "-1"]))
                .unwrap()
                .unwrap()
                .into();
        assert_eq!(capped.winners, None);
        assert_eq!(capped.internally_conserved(), None);
        let expired: RedisSnapshot = parse_snapshot(&strings(&[
            "4", "5", "0", "1", "0", "0", "0", "0", "1", "a", "", "1", "0",
        ]))
        .unwrap()
        .unwrap()
        .into();
        assert_eq!(expired.internally_conserved(), None);
        assert_eq!(expired.winners.unwrap()[0].created_ms, 0);
    }

    #[test]
    fn a_reply_missing_a_winners_created_time_is_a_bad_reply() {
        // The three-field layout of the old script must not parse silently.
        let old = strings(&[
            "4", "5", "0", "1", "0", "0", "0", "0", "1", "a", "RESERVED", "1",
        ]);
        assert!(matches!(parse_snapshot(&old), Err(RedisError::BadReply(_))));
        let negative = strings(&[
            "4", "5", "0", "1", "0", "0", "0", "0", "1", "a", "RESERVED", "1", "-5",
        ]);
        assert!(parse_snapshot(&negative).is_err());
    }
}
