//! The admission pass of a hold (contract, "Passes"), in the two places the
//! hold handlers ask it, both families alike:
//!
//! 1. [`admit`], after the body and the caller were checked and before the
//!    sold-out board: which of the hold's SKUs need a pass; none — any pass
//!    sent is ignored (not verified, not claimed); some — the pass must
//!    verify, in memory (`passes::KeyRing::verify`): a refusal is 403
//!    `PASS_INVALID` / `PASS_EXPIRED` with no Redis call and nothing written.
//!    A replay of a hold that exists answers as today whatever its pass now
//!    says: a pass that has since expired is looked up (the hold's record in
//!    Redis) before it is refused, as the sold-out board looks up its winners.
//! 2. [`claim`], after the sold-out board and just before the admission
//!    script: the pass is claimed for the hold in Redis (`redis/pass_claims.rs`);
//!    another hold's claim is 409 `PASS_USED`, this hold's own (a retry, a
//!    replay) passes. [`give_back`] releases it when the script then held
//!    nothing, so a refused hold never uses a pass up. A reservation's pass
//!    is claimed by the admission script itself where it can reach the
//!    claim ([`claim_for_reservation`]): one call, atomic with the hold.
//!
//! A hold is claimed by its kind and id (`r:<sku>:<request_id>`,
//! `o:<order_id>`): a `request_id` names one reservation per SKU.

use crate::domain::{RequestId, SkuId, UserId};
use crate::passes::{PassRefusal, VerifiedPass};
use crate::redis::admission::PassArg;
use crate::redis::{keep_until_ms, Claim};
use crate::roles::api::problem::ApiError;
use crate::roles::api::ApiState;
use crate::telemetry::kept_counter::KeptCounter;

use super::{in_redis, HoldRef};

impl HoldRef<'_> {
    /// What the pass's claim records: the hold, by kind and id.
    fn claim_id(&self) -> String {
        match self {
            Self::Reservation { sku_id, request_id } => format!("r:{sku_id}:{request_id}"),
            Self::Order { order_id } => format!("o:{order_id}"),
        }
    }
}

/// `stockd_passes_total` by `result`: counted on every reservation that
/// carries a pass, so each series is bound once (`telemetry::kept_counter`).
static PASSES_VERIFIED: KeptCounter =
    KeptCounter::new(|| metrics::counter!("stockd_passes_total", "result" => "verified"));
static PASSES_REPLAY: KeptCounter =
    KeptCounter::new(|| metrics::counter!("stockd_passes_total", "result" => "replay"));
static PASSES_INVALID: KeptCounter =
    KeptCounter::new(|| metrics::counter!("stockd_passes_total", "result" => "invalid"));
static PASSES_EXPIRED: KeptCounter =
    KeptCounter::new(|| metrics::counter!("stockd_passes_total", "result" => "expired"));
static PASSES_USED: KeptCounter =
    KeptCounter::new(|| metrics::counter!("stockd_passes_total", "result" => "used"));

/// What [`admit`] decided.
#[derive(Debug)]
pub(super) enum Admitted {
    /// No SKU of the hold needs a pass: go on without one.
    NoPassNeeded,
    /// The pass verified: claim it before the admission script.
    Verified(VerifiedPass),
    /// The pass has expired but the hold exists: its replay, no claim.
    Replay,
}

/// The SKUs of the hold that require a pass, by this node's board of sale
/// terms (`crate::sale`). A board that has not heard of a SKU's
/// `requires_pass` yet lets the hold on without a claim; the admission
/// script, which reads the SKU hash's terms, then refuses `PASS_REQUIRED`.
fn skus_needing_pass(state: &ApiState, skus: &[SkuId]) -> Vec<SkuId> {
    state.sale.needing_pass(skus)
}

impl Admitted {
    /// Whether the hold carries a verified pass: the flag the admission
    /// scripts judge `requires_pass` by. A replay's expired pass does not
    /// (the script's replay check answers it first).
    pub(super) fn carries_pass(&self) -> bool {
        matches!(self, Self::Verified(_))
    }
}

/// Step 1: the pass of a hold of `user` on `skus`, verified when a SKU needs
/// one; no Redis call but for an expired pass (is it a replay?).
pub(super) async fn admit(
    state: &ApiState,
    pass: Option<&str>,
    user: UserId,
    skus: &[SkuId],
    hold: &HoldRef<'_>,
) -> Result<Admitted, ApiError> {
    let needing = skus_needing_pass(state, skus);
    if needing.is_empty() {
        return Ok(Admitted::NoPassNeeded);
    }
    // A SKU that needs a pass and none sent is the sale terms' refusal
    // (PASS_REQUIRED), decided before this.
    let Some(token) = pass else {
        return Ok(Admitted::NoPassNeeded);
    };
    let admitted = match state
        .passes
        .verify(token, user, &needing, crate::clock::unix_ms())
    {
        Ok(verified) => Ok(Admitted::Verified(verified)),
        Err(PassRefusal::Invalid(why)) => Err(ApiError::PassInvalid(why)),
        Err(PassRefusal::Expired(why)) => match in_redis(state, hold).await? {
            true => Ok(Admitted::Replay),
            false => Err(ApiError::PassExpired(why)),
        },
    };
    // Passes checked, by result (docs/operations.md, the metrics table);
    // `used` is counted by the claim.
    match &admitted {
        Ok(Admitted::Verified(_)) => &PASSES_VERIFIED,
        Ok(_) => &PASSES_REPLAY,
        Err(ApiError::PassInvalid(_)) => &PASSES_INVALID,
        Err(_) => &PASSES_EXPIRED,
    }
    .increment();
    admitted
}

/// A pass this request claimed, to give back if the hold is refused.
pub(super) struct ClaimedPass {
    user: UserId,
    pass_id: RequestId,
    holder: String,
}

/// Step 2: claims a verified pass for the hold (409 `PASS_USED` when
/// another hold has it).
pub(super) async fn claim(
    state: &ApiState,
    user: UserId,
    admitted: &Admitted,
    hold: &HoldRef<'_>,
) -> Result<Option<ClaimedPass>, ApiError> {
    let Admitted::Verified(pass) = admitted else {
        return Ok(None);
    };
    let holder = hold.claim_id();
    let claims = state.res.redis.pass_claims();
    match claims
        .claim(user, &pass.pass_id, pass.expires_at_s, &holder)
        .await
    {
        Ok(Claim::Claimed | Claim::Same) => Ok(Some(ClaimedPass {
            user,
            pass_id: pass.pass_id.clone(),
            holder,
        })),
        Ok(Claim::Used) => {
            count_used();
            Err(ApiError::PassUsed)
        }
        Err(err) => Err(ApiError::unavailable("redis", err)),
    }
}

/// Step 2 of a reservation: where the admission script can reach the pass's
/// claim — a standalone Redis, with the hold budget off (on, its claim is a
/// call of its own that must come after `PASS_USED`, §20) — the script
/// claims it together with the hold, atomically and with no call of its own
/// ([`PassArg::ClaimHere`]); elsewhere [`claim`] claims it first.
pub(super) async fn claim_for_reservation(
    state: &ApiState,
    user: UserId,
    admitted: &Admitted,
    hold: &HoldRef<'_>,
) -> Result<(Option<ClaimedPass>, PassArg), ApiError> {
    let Admitted::Verified(pass) = admitted else {
        return Ok((None, PassArg::None));
    };
    let redis = &state.res.redis;
    if !redis.is_cluster() && !redis.budget().is_on() {
        let keep_until_ms = keep_until_ms(pass.expires_at_s);
        let arg = PassArg::ClaimHere {
            user_id: user,
            pass_id: pass.pass_id.clone(),
            keep_until_ms,
        };
        return Ok((None, arg));
    }
    let claimed = claim(state, user, admitted, hold).await?;
    Ok((claimed, PassArg::Claimed))
}

/// Counts a pass the admission script found another hold's.
pub(super) fn count_used() {
    PASSES_USED.increment();
}

/// The admission held nothing: the pass is given back if this hold still
/// has it. A failure only leaves the pass used up (logged): the buyer's
/// retry of the same id passes its own claim.
pub(super) async fn give_back(state: &ApiState, claimed: Option<ClaimedPass>) {
    let Some(c) = claimed else {
        return;
    };
    let released = state
        .res
        .redis
        .pass_claims()
        .release(c.user, &c.pass_id, &c.holder)
        .await;
    if let Err(err) = released {
        tracing::warn!(pass.id = %c.pass_id, hold = %c.holder, error = %err,
            "pass.release_failed: a refused hold's pass stays claimed by it");
    }
}
