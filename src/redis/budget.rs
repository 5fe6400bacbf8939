//! The hold budget per buyer (`limits.buyer_max_live_units`, contract
//! §12): at most that many live units per buyer across every SKU and both
//! URL families, against one buyer holding a unit of every SKU of a shop
//! (OWASP OAT-021, denial of inventory).
//!
//! Why a key and a call of its own: the per-SKU buyer counter lives in the
//! SKU's slot, but a budget across SKUs cannot live in all of them. The
//! buyer's budget hash (`Keys::budget`, tag `{u<user_id>}`) has its own
//! slot, so a hold takes it in a separate call before the admission script
//! ([`HoldBudget::claim`], `budget_claim.lua`) and gives it back when the
//! admission refuses or when the hold ends ([`HoldBudget::give_back`],
//! `budget_give_back.lua`; every final mirror goes through
//! `Reservations::finish_many`, which calls it). Both name the hold's lines
//! (`<sku>:<hold_id>`), so a retry of the same id claims nothing twice and a
//! second give-back is a no-op; a claim whose give-back was lost to a crash
//! is dropped past its deadline (the longest a hold can live plus
//! [`CLAIM_MARGIN_MS`]), and a warm-up rebuilds the claims of MySQL's live
//! holds ([`HoldBudget::restore`]).
//!
//! Off (0, the default): no call at all, no key written.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::core::Core;
use super::{scripts, RedisError};
use crate::domain::{RequestId, SkuId, UserId};

/// How long past the longest life of a hold (time to pay and every
/// extension) its claim stays when no give-back came: the closer releases a
/// due hold within seconds, and a lost give-back should cost the buyer
/// little, so a few minutes' slack for a closer that is behind.
pub const CLAIM_MARGIN_MS: u64 = 5 * 60 * 1000;

/// Give-back calls of one batch in flight at once (`give_back_held`):
/// enough to hide the round trip, few next to the Redis pool.
const GIVE_BACKS_AT_ONCE: usize = 16;

/// The longest a claim may wait for its give-back: the time to pay, every
/// extension, and [`CLAIM_MARGIN_MS`].
pub fn claim_life_ms(ttl_secs: u64, extend_secs: u64, max_extensions: u32) -> u64 {
    (ttl_secs + extend_secs * u64::from(max_extensions)) * 1000 + CLAIM_MARGIN_MS
}

/// One line of a hold as the budget counts it: a single reservation is one
/// line (its SKU, its request id), an order one per SKU under its order id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BudgetLine {
    pub sku_id: SkuId,
    pub hold_id: RequestId,
    pub units: u32,
}

impl BudgetLine {
    /// The line's field in the buyer's budget hash.
    fn field(&self) -> String {
        line_field(self.sku_id, &self.hold_id)
    }
}

/// `<sku>:<hold_id>`: a request id names a reservation within its SKU only,
/// so the SKU is part of the name.
fn line_field(sku_id: SkuId, hold_id: &RequestId) -> String {
    format!("{sku_id}:{hold_id}")
}

/// What a claim found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClaimOutcome {
    /// Claimed: `fresh` are the lines this call claimed (none for a retry
    /// whose lines were claimed before), the ones to give back when the
    /// admission refuses. `live` is the buyer's live units now.
    Claimed { live: u64, fresh: Vec<BudgetLine> },
    /// The lines do not fit: nothing written.
    Over { live: u64, budget: u64 },
}

/// The budget's settings and calls; cheap to clone (one per `RedisStore`,
/// shared with `Reservations` for the give-back of every finish).
#[derive(Clone)]
pub struct HoldBudget {
    core: Arc<Core>,
    /// `limits.buyer_max_live_units`; 0 = off.
    max_units: u32,
    /// [`claim_life_ms`] of the configured hold.
    claim_life_ms: u64,
}

impl HoldBudget {
    /// An off budget until [`super::RedisStore::with_hold_budget`].
    pub(super) fn off(core: Arc<Core>) -> Self {
        Self {
            core,
            max_units: 0,
            claim_life_ms: CLAIM_MARGIN_MS,
        }
    }

    pub(super) fn on(&self, max_units: u32, claim_life_ms: u64) -> Self {
        Self {
            core: self.core.clone(),
            max_units,
            claim_life_ms,
        }
    }

    /// Whether the budget is on (`limits.buyer_max_live_units` > 0).
    pub fn is_on(&self) -> bool {
        self.max_units > 0
    }

    /// The budget in units (0 = off).
    pub fn max_units(&self) -> u32 {
        self.max_units
    }

    /// Claims `lines` of one hold of `user_id` (`budget_claim.lua`). Off:
    /// claimed, with no call.
    pub async fn claim(
        &self,
        user_id: UserId,
        lines: &[BudgetLine],
    ) -> Result<ClaimOutcome, RedisError> {
        if !self.is_on() {
            let fresh = Vec::new();
            return Ok(ClaimOutcome::Claimed { live: 0, fresh });
        }
        let reply = self.claim_call(user_id, self.max_units, lines).await?;
        let number = |i: usize| -> Result<u64, RedisError> {
            (reply.get(i).and_then(|w| w.parse().ok()))
                .ok_or_else(|| RedisError::BadReply(format!("{reply:?}")))
        };
        match reply.first().map(String::as_str) {
            Some("CLAIMED") => {
                let fields = &reply[2..];
                let fresh = (lines.iter())
                    .filter(|line| fields.contains(&line.field()))
                    .cloned()
                    .collect();
                Ok(ClaimOutcome::Claimed {
                    live: number(1)?,
                    fresh,
                })
            }
            Some("OVER") => Ok(ClaimOutcome::Over {
                live: number(1)?,
                budget: number(2)?,
            }),
            _ => Err(RedisError::BadReply(format!("{reply:?}"))),
        }
    }

    /// Writes the claims of live holds MySQL knows and Redis lost (a
    /// warm-up or repair): a line claimed already is left as it is, none is
    /// refused. One call per buyer (each buyer's key is in its own slot).
    pub async fn restore(
        &self,
        by_buyer: &BTreeMap<UserId, Vec<BudgetLine>>,
    ) -> Result<u64, RedisError> {
        let mut restored = 0;
        if !self.is_on() {
            return Ok(restored);
        }
        for (&user_id, lines) in by_buyer {
            let reply = self.claim_call(user_id, 0, lines).await?;
            restored += reply.len().saturating_sub(2) as u64;
        }
        Ok(restored)
    }

    /// Gives back `lines` of `user_id` (`budget_give_back.lua`): the units
    /// given back, 0 for lines not claimed (given back before). Off: no call.
    pub async fn give_back(
        &self,
        user_id: UserId,
        lines: &[BudgetLine],
    ) -> Result<u64, RedisError> {
        let fields: Vec<String> = lines.iter().map(BudgetLine::field).collect();
        self.give_back_fields(user_id, &fields).await
    }

    /// [`Self::give_back`] of lines named by their SKU and hold id (the
    /// finish of a batch, `finish.rs`): one call per buyer.
    pub(super) async fn give_back_held(
        &self,
        sku_id: SkuId,
        holds: &[(UserId, &RequestId)],
    ) -> Result<(), RedisError> {
        if !self.is_on() {
            return Ok(());
        }
        let mut by_buyer: BTreeMap<UserId, Vec<String>> = BTreeMap::new();
        for &(user_id, hold_id) in holds {
            let field = line_field(sku_id, hold_id);
            by_buyer.entry(user_id).or_default().push(field);
        }
        // One call per buyer (each key its own slot), several in flight: a
        // storm's batch of expiries names hundreds of buyers.
        let calls: Vec<(UserId, Vec<String>)> = by_buyer.into_iter().collect();
        for window in calls.chunks(GIVE_BACKS_AT_ONCE) {
            let backs =
                (window.iter()).map(|(user_id, fields)| self.give_back_fields(*user_id, fields));
            futures_util::future::try_join_all(backs).await?;
        }
        Ok(())
    }

    async fn give_back_fields(
        &self,
        user_id: UserId,
        fields: &[String],
    ) -> Result<u64, RedisError> {
        if !self.is_on() || fields.is_empty() {
            return Ok(0);
        }
        let mut invocation = scripts::BUDGET_GIVE_BACK.prepare_invoke();
        invocation.key(self.core.keys.budget(user_id));
        for field in fields {
            invocation.arg(field);
        }
        let back: String = self
            .core
            .run(|mut c| async move { invocation.invoke_async(&mut c).await })
            .await?;
        back.parse().map_err(|_| RedisError::BadReply(back))
    }

    /// One `budget_claim.lua` call with `budget` (0: restore).
    async fn claim_call(
        &self,
        user_id: UserId,
        budget: u32,
        lines: &[BudgetLine],
    ) -> Result<Vec<String>, RedisError> {
        let mut invocation = scripts::BUDGET_CLAIM.prepare_invoke();
        invocation
            .key(self.core.keys.budget(user_id))
            .arg(budget)
            .arg(self.claim_life_ms);
        for line in lines {
            invocation.arg(line.field()).arg(line.units);
        }
        self.core
            .run(|mut c| async move { invocation.invoke_async(&mut c).await })
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_claim_waits_past_the_longest_life_of_a_hold() {
        assert_eq!(claim_life_ms(900, 300, 2), 1_500_000 + CLAIM_MARGIN_MS);
        assert_eq!(claim_life_ms(3, 60, 0), 3_000 + CLAIM_MARGIN_MS);
    }

    #[test]
    fn a_line_is_named_by_its_sku_and_its_hold() {
        let id = RequestId::parse("o-1").unwrap();
        assert_eq!(line_field(SkuId::new(12).unwrap(), &id), "12:o-1");
    }
}
