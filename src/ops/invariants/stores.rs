//! The invariant check's SKU-level comparison of the stores (invariants 3 and
//! 7): `redis_loaded` and `stores_agree`, read from the one comparison of
//! the stores ([`crate::ops::compare`]) that the reconciler judges by, so the
//! audit and the reconciler read a SKU under the same snapshot discipline.
//! The audit runs after the drain, so it reads the verdict as read (its
//! `gap`): work still in flight shows here on purpose.

use super::{Checks, InvariantCheckError, REDIS_LOADED, STORES_AGREE};
use crate::domain::SkuId;
use crate::ops::compare::{compare, CompareError};
use crate::resources::Resources;

/// Counters only: the drained question needs no winner listed, and the
/// audit runs no long script on a primary.
const COUNTERS_ONLY: usize = 0;

/// Checks that Redis holds `sku` and that its `available` equals MySQL's.
pub(super) async fn check_sku(
    res: &Resources,
    sku: SkuId,
    checks: &mut Checks,
) -> Result<(), InvariantCheckError> {
    let compared = match compare(&res.db, &res.redis, sku, COUNTERS_ONLY).await {
        Ok(compared) => compared,
        Err(CompareError::Db(e)) => return Err(e.into()),
        Err(CompareError::Redis(e)) => return Err(e.into()),
        // The stock row went away after the MySQL checks read it (the
        // comparison re-publishes nothing): nothing to compare.
        Err(CompareError::UnknownSku(_) | CompareError::Republish(_)) => return Ok(()),
    };
    let mysql = compared.mysql_available;
    match compared.verdict().gap {
        None => {
            checks.one(REDIS_LOADED, || format!("sku {sku}: no Redis hash"));
            checks.one(STORES_AGREE, || {
                format!("sku {sku}: not loaded in Redis, MySQL available_stock {mysql}")
            });
        }
        Some(0) => {}
        Some(gap) => checks.one(STORES_AGREE, || {
            format!(
                "sku {sku}: Redis available {} != MySQL available_stock {mysql}",
                mysql + gap
            )
        }),
    }
    Ok(())
}
