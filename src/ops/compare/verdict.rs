//! The comparison's verdict: where Redis stands against MySQL in one
//! [`Comparison`], read two ways from the same figures.
//!
//! - Net of work in flight ([`StoreVerdict::standing`], [`StoreVerdict::drift`]):
//!   Redis should hold MySQL's available minus what is in flight. This is
//!   what the reconciler judges while the pipeline runs (contract §8; its
//!   report's verdicts are these, with stuck and lost MySQL work on top).
//! - As read ([`StoreVerdict::gap`]): Redis' available minus MySQL's, which
//!   a drained pipeline brings to 0. This is `stockd audit`'s `stores_agree`
//!   (run after the drain: in-flight work shows there on purpose) and the
//!   load generator's check after each phase's drain.

use super::comparison::Comparison;

/// Where Redis stands, net of work in flight (the reconciler's drift verdicts).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Standing {
    /// Same available in both stores, nothing in flight.
    Agree,
    /// The stores differ exactly by work in flight.
    InFlight,
    /// Redis holds more than MySQL minus in flight, or lost the records of
    /// live ledger rows: lost Redis writes.
    RedisAhead,
    /// Redis holds less (leaked stock), or does not hold the SKU at all.
    RedisBehind,
    /// MySQL disagrees with itself (`total - available != live units`, a
    /// negative available, a buyer over the limit): nothing to judge Redis by.
    MysqlInconsistent,
}

/// One comparison's verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoreVerdict {
    pub standing: Standing,
    /// Redis' available minus what it should hold (MySQL's minus in flight;
    /// a SKU not loaded counts as 0 available); 0 when MySQL is inconsistent.
    pub drift: i64,
    /// Redis' available minus MySQL's, as read; `None`: not loaded in Redis.
    pub gap: Option<i64>,
}

impl Comparison {
    /// The verdict of this comparison (pure: the reads are done).
    pub fn verdict(&self) -> StoreVerdict {
        let gap = (self.redis.as_ref()).map(|redis| redis.available - self.mysql_available);
        if self.total_stock - self.mysql_available != self.ledger_units
            || self.mysql_available < 0
            || self.buyers_over_limit > 0
        {
            return StoreVerdict {
                standing: Standing::MysqlInconsistent,
                drift: 0,
                gap,
            };
        }
        let redis_available = self.redis.as_ref().map_or(0, |r| r.available);
        let drift = redis_available - (self.mysql_available - self.in_flight);
        let standing = match drift {
            _ if self.redis.is_none() => Standing::RedisBehind,
            // Records of live rows are gone: Redis lost acknowledged writes,
            // even where the stock figures happen to agree.
            _ if self.missing_in_redis > 0 => Standing::RedisAhead,
            d if d > 0 => Standing::RedisAhead,
            d if d < 0 => Standing::RedisBehind,
            _ if self.in_flight != 0 => Standing::InFlight,
            _ => Standing::Agree,
        };
        StoreVerdict {
            standing,
            drift,
            gap,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cmp(total: i64, mysql: i64, live: i64, redis: Option<i64>, in_flight: i64) -> Comparison {
        Comparison::sample(total, mysql, live, redis, in_flight)
    }

    fn verdict(standing: Standing, drift: i64, gap: Option<i64>) -> StoreVerdict {
        StoreVerdict {
            standing,
            drift,
            gap,
        }
    }

    #[test]
    fn in_flight_work_explains_a_gap_but_a_drained_reading_still_shows_it() {
        use Standing::*;
        assert_eq!(
            cmp(10, 7, 3, Some(7), 0).verdict(),
            verdict(Agree, 0, Some(0))
        );
        assert_eq!(
            cmp(10, 7, 3, Some(5), 2).verdict(),
            verdict(InFlight, 0, Some(-2))
        );
        assert_eq!(
            cmp(10, 7, 3, Some(9), 0).verdict(),
            verdict(RedisAhead, 2, Some(2))
        );
        assert_eq!(
            cmp(10, 7, 3, Some(4), 2).verdict(),
            verdict(RedisBehind, -1, Some(-3))
        );
        assert_eq!(
            cmp(10, 7, 3, None, 0).verdict(),
            verdict(RedisBehind, -7, None)
        );
        assert_eq!(
            cmp(10, 7, 2, Some(9), 0).verdict(),
            verdict(MysqlInconsistent, 0, Some(2))
        );
    }

    #[test]
    fn lost_records_make_redis_ahead_where_the_counts_agree() {
        let mut lost = cmp(10, 7, 3, Some(7), 0);
        lost.missing_in_redis = 1;
        assert_eq!(lost.verdict(), verdict(Standing::RedisAhead, 0, Some(0)));
        let mut over = cmp(10, 7, 3, Some(7), 0);
        over.buyers_over_limit = 1;
        assert_eq!(over.verdict().standing, Standing::MysqlInconsistent);
    }
}
