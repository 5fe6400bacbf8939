//! Redis side of reconciliation and warm-up: an atomic snapshot of a SKU, the
//! compare-and-set repair, and the warm-up write (scripts `snapshot.lua`,
//! `adjust.lua`, `warmup.lua`).

use std::sync::LazyLock;

use deadpool_redis::redis::Script;

use super::{RedisError, RedisStore};
use crate::domain::{ReservationStatus, SkuId};

static SNAPSHOT: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("lua/snapshot.lua")));
static ADJUST: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("lua/adjust.lua")));
static WARMUP: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("lua/warmup.lua")));

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
    /// Atomic snapshot of one SKU; `None` when it is not loaded.
    pub async fn snapshot(
        &self,
        sku_id: SkuId,
        max_winners: usize,
    ) -> Result<Option<RedisSnapshot>, RedisError> {
        let mut invocation = SNAPSHOT.prepare_invoke();
        let res_prefix = self.keys().reservation_prefix(sku_id);
        invocation
            .key(self.keys().sku(sku_id))
            .key(self.keys().winners(sku_id))
            .arg(res_prefix)
            .arg(max_winners);
        let reply: Vec<String> = self
            .run(|mut c| async move { invocation.invoke_async(&mut c).await })
            .await?;
        parse_snapshot(&reply)
    }

    /// Moves `available` by `delta` if it still equals `expected`, and sets the
    /// `adjust` term to `new_adjust` (see `adjust.lua`).
    pub async fn adjust(
        &self,
        sku_id: SkuId,
        expected: i64,
        delta: i64,
        new_adjust: i64,
    ) -> Result<AdjustOutcome, RedisError> {
        let mut invocation = ADJUST.prepare_invoke();
        invocation
            .key(self.keys().sku(sku_id))
            .arg(expected)
            .arg(delta)
            .arg(self.keys().soldout_channel())
            .arg(sku_id.get())
            .arg(new_adjust);
        let reply: Vec<String> = self
            .run(|mut c| async move { invocation.invoke_async(&mut c).await })
            .await?;
        match (
            reply.first().map(String::as_str),
            reply.get(1).and_then(|v| v.parse().ok()),
        ) {
            (Some("OK"), Some(available)) => Ok(AdjustOutcome::Applied { available }),
            (Some("CHANGED"), _) => Ok(AdjustOutcome::Changed),
            _ => Err(RedisError::BadReply(format!("{reply:?}"))),
        }
    }

    /// Writes the SKU's state from MySQL (warm-up) and registers the SKU.
    pub async fn warm(
        &self,
        sku_id: SkuId,
        available: i64,
        total: i64,
        limit_per_user: u32,
        adjust: i64,
    ) -> Result<(), RedisError> {
        let mut invocation = WARMUP.prepare_invoke();
        invocation
            .key(self.keys().sku(sku_id))
            .arg(available)
            .arg(total)
            .arg(limit_per_user)
            .arg(adjust)
            .arg(self.keys().soldout_channel())
            .arg(sku_id.get());
        let _: Vec<String> = self
            .run(|mut c| async move { invocation.invoke_async(&mut c).await })
            .await?;
        self.register(sku_id).await
    }
}

fn parse_snapshot(reply: &[String]) -> Result<Option<RedisSnapshot>, RedisError> {
    let bad = || {
        RedisError::BadReply(format!(
            "snapshot {:?}",
            reply.iter().take(6).collect::<Vec<_>>()
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
    let listed = num(4)?;
    let winners = if listed < 0 {
        None
    } else {
        let mut records = Vec::with_capacity(listed as usize);
        for i in 0..listed as usize {
            let base = 5 + i * WINNER_FIELDS;
            records.push(WinnerRecord {
                request_id: reply.get(base).cloned().ok_or_else(bad)?,
                status: reply
                    .get(base + 1)
                    .and_then(|s| ReservationStatus::parse(s)),
                count: num(base + 2)?,
                created_ms: u64::try_from(num(base + 3)?).map_err(|_| bad())?,
            });
        }
        Some(records)
    };
    Ok(Some(RedisSnapshot {
        available: num(0)?,
        total: num(1)?,
        adjust: num(2)?,
        limit_per_user: num(3)?,
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
        let snap = parse_snapshot(&reply).unwrap().unwrap();
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
            parse_snapshot(&strings(&["", "", "", "", "0"])).unwrap(),
            None
        );
        let capped = parse_snapshot(&strings(&["1", "5", "0", "1", "-1"]))
            .unwrap()
            .unwrap();
        assert_eq!(capped.winners, None);
        assert_eq!(capped.internally_conserved(), None);
        let expired = parse_snapshot(&strings(&["4", "5", "0", "1", "1", "a", "", "1", "0"]))
            .unwrap()
            .unwrap();
        assert_eq!(expired.internally_conserved(), None);
        assert_eq!(expired.winners.unwrap()[0].created_ms, 0);
    }

    #[test]
    fn a_reply_missing_a_winners_created_time_is_a_bad_reply() {
        // The three-field layout of the old script must not parse silently.
        let old = strings(&["4", "5", "0", "1", "1", "a", "RESERVED", "1"]);
        assert!(matches!(parse_snapshot(&old), Err(RedisError::BadReply(_))));
        let negative = strings(&["4", "5", "0", "1", "1", "a", "RESERVED", "1", "-5"]);
        assert!(parse_snapshot(&negative).is_err());
    }
}
