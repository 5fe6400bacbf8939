//! A SKU's Redis state as the reconciler reads it: one bucket's atomic read
//! (`snapshot.lua`, [`BucketSnapshot`]), the whole SKU's ([`RedisSnapshot`],
//! merged over buckets by `merge.rs` when split) and the winners listed in it.

use crate::domain::ReservationStatus;
use crate::redis::buckets::PendingTransfer;
use crate::redis::RedisError;

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

/// One bucket's atomic read (`snapshot.lua`): the whole SKU when it has one
/// bucket; merged over buckets by `merge.rs` otherwise.
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
