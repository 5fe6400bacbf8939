//! The api's readiness (`GET /readyz`, contract §14), computed in the background.
//!
//! Why: checking the stores on every probe put a Redis PING and SCRIPT EXISTS,
//! a MySQL pool checkout and a broker check behind each call, so a loop of
//! `GET /readyz` from one host (the route is open and not rate limited: it is a
//! probe) queued up behind the pools that confirm and cancel use (issue 48,
//! API4). Here one task per api process checks each store at most once a
//! second and keeps the last answer in an atomic; the handler reads it and
//! touches no store. Until the first round completes the node is not ready;
//! draining is the handler's (it turns readiness false at once).

use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::time::MissedTickBehavior;
use tokio_util::sync::CancellationToken;

use crate::resources::Resources;

/// Least time between the starts of two rounds of checks.
pub const PERIOD: Duration = Duration::from_secs(1);

/// What one round found.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Checks {
    pub redis: bool,
    pub scripts_loaded: bool,
    pub mysql: bool,
    pub amqp: bool,
}

impl Checks {
    /// Every store answered and the scripts are loaded.
    pub fn pass(&self) -> bool {
        self.redis && self.scripts_loaded && self.mysql && self.amqp
    }

    fn bits(self) -> u8 {
        let bit = |on: bool, bit: u8| if on { bit } else { 0 };
        CHECKED
            | bit(self.redis, REDIS)
            | bit(self.scripts_loaded, SCRIPTS)
            | bit(self.mysql, MYSQL)
            | bit(self.amqp, AMQP)
    }

    fn from_bits(bits: u8) -> Option<Self> {
        (bits & CHECKED != 0).then_some(Self {
            redis: bits & REDIS != 0,
            scripts_loaded: bits & SCRIPTS != 0,
            mysql: bits & MYSQL != 0,
            amqp: bits & AMQP != 0,
        })
    }
}

const CHECKED: u8 = 1;
const REDIS: u8 = 2;
const SCRIPTS: u8 = 4;
const MYSQL: u8 = 8;
const AMQP: u8 = 16;

/// The last round's result and how many rounds ran; shared by the task and
/// the handler.
#[derive(Debug, Default)]
pub struct Readiness {
    last: AtomicU8,
    rounds: AtomicU64,
}

impl Readiness {
    /// The last completed round's checks; `None` before the first.
    pub fn last(&self) -> Option<Checks> {
        Checks::from_bits(self.last.load(Ordering::Acquire))
    }

    /// Ready: a round completed, everything passed and the node is not
    /// `draining`.
    pub fn ready(&self, draining: bool) -> bool {
        !draining && self.last().is_some_and(|c| c.pass())
    }

    /// Rounds of checks started so far (each touches every store once).
    pub fn checks_run(&self) -> u64 {
        self.rounds.load(Ordering::Relaxed)
    }

    fn record(&self, checks: Checks) {
        self.last.store(checks.bits(), Ordering::Release);
    }
}

/// One round: Redis (then its scripts), MySQL and the broker, side by side;
/// each bounded by its store's own timeouts.
pub async fn check(res: &Resources) -> Checks {
    let redis = async {
        let up = res.redis.ping().await.is_ok();
        (up, up && res.redis.scripts_loaded().await.unwrap_or(false))
    };
    let ((redis, scripts_loaded), mysql, amqp) =
        tokio::join!(redis, res.db.ping(), res.publisher.ensure_connected());
    Checks {
        redis,
        scripts_loaded,
        mysql: mysql.is_ok(),
        amqp: amqp.is_ok(),
    }
}

/// The task that keeps `readiness` current, a round at most every [`PERIOD`]
/// (the first at once), until `cancel`.
pub fn spawn(
    res: Resources,
    readiness: Arc<Readiness>,
    cancel: CancellationToken,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(PERIOD);
        tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = cancel.cancelled() => return,
                _ = tick.tick() => {}
            }
            readiness.rounds.fetch_add(1, Ordering::Relaxed);
            tokio::select! {
                _ = cancel.cancelled() => return,
                checks = check(&res) => readiness.record(checks),
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn not_ready_before_the_first_round_and_while_draining() {
        let readiness = Readiness::default();
        assert_eq!(readiness.last(), None);
        assert!(!readiness.ready(false));
        let all = Checks {
            redis: true,
            scripts_loaded: true,
            mysql: true,
            amqp: true,
        };
        readiness.record(all);
        assert_eq!(readiness.last(), Some(all));
        assert!(readiness.ready(false));
        assert!(!readiness.ready(true), "draining wins at once");
        let no_mysql = Checks {
            mysql: false,
            ..all
        };
        readiness.record(no_mysql);
        assert_eq!(readiness.last(), Some(no_mysql));
        assert!(!readiness.ready(false));
        readiness.record(Checks::default());
        assert_eq!(readiness.last(), Some(Checks::default()));
    }
}
