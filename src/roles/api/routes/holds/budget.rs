//! The hold budget per buyer at admission (`limits.buyer_max_live_units`,
//! contract §12): both URL families claim a hold's lines on the buyer's
//! budget after the checks from memory and the sold-out board and before the
//! admission script, and give back what they claimed when the admission did
//! not leave the hold live. The claim and its give-back are Redis calls of
//! their own (`redis/budget.rs` says why); off, neither is made.
//!
//! Which refusal wins (contract §12): a replay of an id whose hold exists
//! answers 200 whatever the budget says, so a claim refused for a hold that
//! exists goes on to the admission script unclaimed, which replays it; and
//! the per-SKU limit (`LIMIT_EXCEEDED`) comes before the budget, so a hold
//! refused by the budget is first read against its SKUs' limits (reads on
//! the refusal's path only).

use crate::domain::{SkuId, UserId};
use crate::redis::{BudgetLine, ClaimOutcome};
use crate::roles::api::problem::ApiError;
use crate::roles::api::ApiState;

use super::{in_redis, HoldRef};

/// The lines a hold claimed with this request, until the admission
/// answered: [`Claim::settle`] keeps them when the hold is live, else gives
/// them back.
#[must_use = "a claim is settled once the admission answered"]
pub(super) struct Claim {
    user_id: UserId,
    /// Claimed by this request (empty: the budget is off, a retry's lines
    /// were claimed before, or the hold exists and replays).
    fresh: Vec<BudgetLine>,
}

/// Claims `lines` of the buyer's hold; when they do not fit and no hold of
/// `hold` exists in Redis (asked only then), 409 `LIMIT_EXCEEDED` of the
/// first line over its SKU's limit (as `on_line` words a line's refusal),
/// else 409 `HOLD_BUDGET_EXCEEDED`.
pub(super) async fn claim(
    state: &ApiState,
    user_id: UserId,
    lines: Vec<BudgetLine>,
    hold: &HoldRef<'_>,
    on_line: fn(SkuId, ApiError) -> ApiError,
) -> Result<Claim, ApiError> {
    let budget = state.res.redis.budget();
    let unclaimed = Claim {
        user_id,
        fresh: Vec::new(),
    };
    if !budget.is_on() {
        return Ok(unclaimed);
    }
    let outcome = budget.claim(user_id, &lines).await;
    match outcome.map_err(|e| ApiError::unavailable("redis", e))? {
        ClaimOutcome::Claimed { fresh, .. } => Ok(Claim { user_id, fresh }),
        ClaimOutcome::Over { live, budget } => {
            if in_redis(state, hold).await? {
                return Ok(unclaimed);
            }
            if let Some((sku_id, err)) = over_a_sku_limit(state, user_id, &lines).await? {
                return Err(on_line(sku_id, err));
            }
            Err(ApiError::HoldBudgetExceeded { live, budget })
        }
    }
}

/// The first line (in SKU order) whose SKU's `limit_per_user` the buyer's
/// live units there and the line's would exceed, as `LIMIT_EXCEEDED`.
async fn over_a_sku_limit(
    state: &ApiState,
    user_id: UserId,
    lines: &[BudgetLine],
) -> Result<Option<(SkuId, ApiError)>, ApiError> {
    let redis = &state.res.redis;
    let unavailable = |e| ApiError::unavailable("redis", e);
    let mut lines: Vec<&BudgetLine> = lines.iter().collect();
    lines.sort_by_key(|line| line.sku_id);
    for line in lines {
        let Some(sku) = redis.skus().sku(line.sku_id).await.map_err(unavailable)? else {
            continue; // not loaded: the admission script says so
        };
        let buyer = [user_id];
        let held = redis.inspect().user_counters(line.sku_id, &buyer);
        let bought = held.await.map_err(unavailable)?[0].unwrap_or(0).max(0) as u64;
        let limit = sku.limit_per_user;
        if bought + u64::from(line.units) > limit {
            return Ok(Some((
                line.sku_id,
                ApiError::LimitExceeded { bought, limit },
            )));
        }
    }
    Ok(None)
}

impl Claim {
    /// The admission answered: `live` when the hold now exists and is held
    /// (held now, or a replay of a hold still `RESERVED`), and also when the
    /// answer is unknown (Redis failed mid-call: the hold may exist; a retry
    /// of the id completes it, and an orphan claim lapses at its deadline).
    /// Otherwise what this request claimed goes back; a give-back that fails
    /// is left to that deadline.
    pub(super) async fn settle(self, state: &ApiState, live: bool) {
        if live || self.fresh.is_empty() {
            return;
        }
        let budget = state.res.redis.budget();
        if let Err(err) = budget.give_back(self.user_id, &self.fresh).await {
            tracing::warn!(user.id = %self.user_id, error = %err,
                "budget: a refused hold's claim was not given back; it lapses at its deadline");
        }
    }
}
