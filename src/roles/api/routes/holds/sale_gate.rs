//! A hold's early answer from its SKUs' sale terms, from memory (the board
//! of `crate::sale`), before the sold-out board and Redis (docs/contract.md
//! §19): `SALE_NOT_STARTED` while this node's clock is more than
//! `sale.clock_margin_ms` before the opening, `SALE_ENDED` from the close
//! on (unless the id's hold exists: a replay answers 200, Redis tells it),
//! then `PASS_REQUIRED` for a hold without a `pass`. Whatever passes here
//! the admission script judges again by Redis's clock and the SKU hash's
//! terms (`lib/hold.lua`).

use crate::domain::{GateRefusal, SkuId};
use crate::roles::api::problem::ApiError;
use crate::roles::api::ApiState;

use super::{in_redis, HoldRef};

/// The first refusal the hold's SKUs' terms give from memory, with its SKU;
/// None: ask Redis. `has_pass`: the body carries a `pass`. Whether `hold`
/// exists in Redis is asked only when a SKU's sale has ended (a replay of
/// an existing hold still answers 200).
pub(super) async fn early_refusal(
    state: &ApiState,
    skus: &[SkuId],
    has_pass: bool,
    hold: &HoldRef<'_>,
) -> Result<Option<(SkuId, GateRefusal)>, ApiError> {
    let terms: Vec<_> = skus.iter().map(|&s| (s, state.sale.terms(s))).collect();
    if terms.iter().all(|(_, t)| t.is_open_to_all()) {
        return Ok(None);
    }
    let sale = &state.res.settings.sale;
    let (now_ms, margin_ms) = (sale.now_ms(), sale.clock_margin_ms as i64);
    let closed = terms
        .iter()
        .find_map(|(s, t)| t.window_refusal(now_ms, margin_ms).map(|why| (*s, why)));
    if let Some((sku_id, why)) = closed {
        if why == GateRefusal::Ended && in_redis(state, hold).await? {
            return Ok(None);
        }
        return Ok(Some((sku_id, why)));
    }
    if has_pass {
        return Ok(None);
    }
    Ok(terms
        .iter()
        .find(|(_, t)| t.requires_pass)
        .map(|(s, _)| (*s, GateRefusal::PassRequired)))
}

/// The answer to a refusal by sale terms, by this node's sale clock.
pub fn answer(state: &ApiState, why: GateRefusal) -> ApiError {
    ApiError::gated(why, state.res.settings.sale.now_ms())
}
