//! The reconciler's verdicts (contract §8) and the pure rules that give them: the
//! drift verdict of one comparison of the stores ([`classify`], the words of
//! [`crate::ops::compare::StoreVerdict`]), then stuck work and lost MySQL work
//! on top ([`escalate`]). Kept apart from the passes that gather
//! the inputs so every rule has a unit test.

use serde::Serialize;

use super::mysql_behind::LostWork;
use crate::ops::compare::{Comparison, Standing};
use crate::ops::stuck::Stuck;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Verdict {
    Ok,
    InFlight,
    RedisAhead,
    RedisBehind,
    MysqlInconsistent,
    Stuck,
    MysqlBehind,
}

impl Verdict {
    /// Every verdict, in the order of the enum (the API's schema lists
    /// their names, `roles/api/routes/contract.rs`).
    pub const ALL: [Self; 7] = [
        Self::Ok,
        Self::InFlight,
        Self::RedisAhead,
        Self::RedisBehind,
        Self::MysqlInconsistent,
        Self::Stuck,
        Self::MysqlBehind,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ok => "OK",
            Self::InFlight => "IN_FLIGHT",
            Self::RedisAhead => "REDIS_AHEAD",
            Self::RedisBehind => "REDIS_BEHIND",
            Self::MysqlInconsistent => "MYSQL_INCONSISTENT",
            Self::Stuck => "STUCK",
            Self::MysqlBehind => "MYSQL_BEHIND",
        }
    }

    /// Healthy verdicts: `stockd reconcile --once` exits 0 on these only.
    pub fn is_healthy(self) -> bool {
        matches!(self, Self::Ok | Self::InFlight)
    }
}

/// The reported verdict: lost MySQL work, then stuck work, outrank everything
/// below REDIS_AHEAD.
pub fn escalate(verdict: Verdict, stuck: &Stuck, lost: &LostWork) -> Verdict {
    match verdict {
        Verdict::Ok | Verdict::InFlight | Verdict::RedisBehind if !lost.is_empty() => {
            Verdict::MysqlBehind
        }
        Verdict::Ok | Verdict::InFlight | Verdict::RedisBehind if stuck.units > 0 => Verdict::Stuck,
        other => other,
    }
}

/// Verdict and drift (Redis minus what it should hold) of one comparison:
/// the comparison's own verdict ([`Comparison::verdict`]) in the report's words.
pub fn classify(cmp: &Comparison) -> (Verdict, i64) {
    let judged = cmp.verdict();
    let verdict = match judged.standing {
        Standing::Agree => Verdict::Ok,
        Standing::InFlight => Verdict::InFlight,
        Standing::RedisAhead => Verdict::RedisAhead,
        Standing::RedisBehind => Verdict::RedisBehind,
        Standing::MysqlInconsistent => Verdict::MysqlInconsistent,
    };
    (verdict, judged.drift)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obs(total: i64, mysql: i64, live: i64, redis: Option<i64>, in_flight: i64) -> Comparison {
        Comparison::sample(total, mysql, live, redis, in_flight)
    }

    #[test]
    fn verdicts_follow_the_spec() {
        assert_eq!(classify(&obs(10, 7, 3, Some(7), 0)), (Verdict::Ok, 0));
        assert_eq!(classify(&obs(10, 7, 3, Some(5), 2)), (Verdict::InFlight, 0));
        assert_eq!(
            classify(&obs(10, 7, 3, Some(9), 0)),
            (Verdict::RedisAhead, 2)
        );
        assert_eq!(
            classify(&obs(10, 7, 3, Some(4), 2)),
            (Verdict::RedisBehind, -1)
        );
        assert_eq!(
            classify(&obs(10, 7, 2, Some(7), 0)).0,
            Verdict::MysqlInconsistent
        );
        assert_eq!(classify(&obs(10, 7, 3, None, 0)).0, Verdict::RedisBehind);
    }

    #[test]
    fn only_ok_and_in_flight_are_healthy() {
        assert!(Verdict::Ok.is_healthy() && Verdict::InFlight.is_healthy());
        for v in [
            Verdict::RedisAhead,
            Verdict::RedisBehind,
            Verdict::MysqlInconsistent,
            Verdict::Stuck,
            Verdict::MysqlBehind,
        ] {
            assert!(!v.is_healthy());
        }
    }

    #[test]
    fn stuck_outranks_in_flight_and_behind_but_not_ahead_or_inconsistent() {
        let stuck = Stuck {
            units: 2,
            place: Some("dlq"),
        };
        let none = LostWork::default();
        for v in [Verdict::Ok, Verdict::InFlight, Verdict::RedisBehind] {
            assert_eq!(escalate(v, &stuck, &none), Verdict::Stuck, "{v:?}");
            assert_eq!(escalate(v, &Stuck::default(), &none), v);
        }
        for v in [Verdict::RedisAhead, Verdict::MysqlInconsistent] {
            assert_eq!(escalate(v, &stuck, &none), v);
        }
    }

    #[test]
    fn lost_mysql_work_outranks_stuck_but_not_ahead_or_inconsistent() {
        let stuck = Stuck {
            units: 2,
            place: Some("in_flight"),
        };
        let lost = LostWork {
            deductions: Vec::new(),
            decisions: vec![("paid".into(), crate::domain::ReservationStatus::Confirmed)],
        };
        for v in [Verdict::Ok, Verdict::InFlight, Verdict::RedisBehind] {
            assert_eq!(escalate(v, &stuck, &lost), Verdict::MysqlBehind, "{v:?}");
        }
        for v in [Verdict::RedisAhead, Verdict::MysqlInconsistent] {
            assert_eq!(escalate(v, &stuck, &lost), v);
        }
    }
}
