//! What a scenario's fault may legitimately do to an acknowledged outcome.
//! Without a declaration the check is strict: every acknowledged reservation
//! stands in MySQL exactly as answered. A scenario that makes Redis lose
//! writes says so with `Scenario::declare_redis_loss` once the fault that
//! lost them (the kill, restore or takeover) is over, giving the time it
//! began; only then, and only for the operations on the right side of that
//! fault, are these outcomes counted under their own names instead of failing
//! the scenario.

/// How Redis lost writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RedisLoss {
    /// Redis came back empty (s02): every reserve of the SKU answers 503 until
    /// `stockd warmup` rebuilds it from MySQL, so the only acknowledged write
    /// it can lose is one that was not in the broker yet: a 202 (outbox only),
    /// or any 201 with `durability: redis`.
    Emptied,
    /// Redis serves on from an older state (a snapshot rollback, a failover to
    /// a stale replica: s03, s03b, s14). Besides what `Emptied` allows: an id
    /// whose record was lost may be admitted again (readmitted) or refused by
    /// a retry (refused after ok), and what the stale state over-admitted ends
    /// `REJECTED` with `OVER_ADMITTED` or `LIMIT_EXCEEDED` (rejected after ok).
    Stale,
}

/// One declared loss.
#[derive(Debug, Clone)]
pub struct Declared {
    pub kind: RedisLoss,
    /// What the scenario did, for the report.
    pub what: String,
    /// When the fault that lost the writes began, in ms since the scenario
    /// began: only operations that completed after it can have been admitted
    /// by the stale state.
    pub from_ms: u64,
    /// When it was over: only operations invoked before it can have been
    /// lost by it.
    pub to_ms: u64,
}

/// The scenario's declarations and the durability its api runs with.
#[derive(Debug, Clone, Default)]
pub struct Allowances {
    pub declared: Vec<Declared>,
    /// `reservation.durability: redis`: a 201 is answered before the broker
    /// has the deduction.
    pub durability_redis: bool,
}

impl Allowances {
    /// An acknowledged reservation answered by `status`, invoked at
    /// `invoked_ms`, may be missing from the ledger: a declared loss came
    /// after it and the answer did not promise the deduction was in the
    /// broker (only a 201 with `durability: queue` does; a 200 replay
    /// promises what the unseen first admission did).
    pub fn may_lose(&self, status: u16, invoked_ms: u64) -> bool {
        let unpublished = status != 201 || self.durability_redis;
        unpublished && self.declared.iter().any(|d| invoked_ms < d.to_ms)
    }

    /// An id whose first attempt that may have written its Redis record (an
    /// ok, or an unanswered one) was invoked at `first_effect_ms` may have
    /// lost that record to a stale state: a later attempt may be admitted
    /// again or refused.
    pub fn may_forget(&self, first_effect_ms: u64) -> bool {
        self.stale().any(|d| first_effect_ms < d.to_ms)
    }

    /// A reservation acknowledged at `completed_ms` may have been admitted by
    /// a stale state, so MySQL may refuse it (OVER_ADMITTED, LIMIT_EXCEEDED).
    pub fn may_reject(&self, completed_ms: u64) -> bool {
        self.stale().any(|d| completed_ms > d.from_ms)
    }

    fn stale(&self) -> impl Iterator<Item = &Declared> {
        self.declared.iter().filter(|d| d.kind == RedisLoss::Stale)
    }

    /// `Stale: Redis restored from a snapshot, +12.3..13.1 s; …` for the report.
    pub fn describe(&self) -> String {
        self.declared
            .iter()
            .map(|d| {
                format!(
                    "{:?}: {}, +{:.1}..{:.1} s",
                    d.kind,
                    d.what,
                    d.from_ms as f64 / 1000.0,
                    d.to_ms as f64 / 1000.0
                )
            })
            .collect::<Vec<_>>()
            .join("; ")
    }
}
