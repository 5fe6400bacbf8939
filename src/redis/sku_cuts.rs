//! Cuts Redis took before their MySQL commit (`ops/stock_step.rs`): each is
//! recorded in `<p>{sku}:cuts` by `load_sku.lua` and settled once by
//! `cut_settle.lua`, kept when the movement committed, given back when it
//! never will. Beside `sku.rs`, whose loads record them.

use deadpool_redis::redis;

use super::sku::Skus;
use super::RedisError;
use crate::domain::SkuId;

/// What settling a cut did (`cut_settle.lua`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Settled {
    /// Nothing was left to settle.
    Already,
    Kept,
    Given,
    /// Redis lost the SKU; warm-up copies MySQL, which never had the cut.
    Gone,
}

impl Skus {
    /// Settles the cut `op` Redis took before its commit: keeps it, or gives
    /// its units back, once. A split SKU's buckets are primed
    /// again after a give-back, as after a restock.
    /// `kept`: the committed movement's id when it is kept (it raises the
    /// last movement Redis holds, which warm-up does not overwrite).
    pub async fn settle_cut(
        &self,
        sku_id: SkuId,
        op: &str,
        kept: Option<u64>,
    ) -> Result<Settled, RedisError> {
        let mut invocation = super::scripts::CUT_SETTLE.prepare_invoke();
        invocation
            .key(self.core.keys.sku(sku_id))
            .key(self.core.keys.cuts(sku_id))
            .arg(op)
            .arg(if kept.is_some() { "keep" } else { "give" })
            .arg(self.core.keys.soldout_channel())
            .arg(sku_id.get())
            .arg(kept.unwrap_or(0));
        let reply: Vec<String> = self
            .core
            .run(|mut c| async move { invocation.invoke_async(&mut c).await })
            .await?;
        let settled = match reply.first().map(String::as_str) {
            Some("SETTLED") => Settled::Already,
            Some("KEPT") => Settled::Kept,
            Some("GONE") => Settled::Gone,
            Some("GIVEN") => Settled::Given,
            _ => return Err(RedisError::BadReply(format!("{reply:?}"))),
        };
        if settled == Settled::Given {
            let layout = self.buckets.layout(sku_id).await?;
            if layout.is_split() {
                self.buckets.undrain_all(&layout).await?;
                self.buckets.prime(&layout).await?;
            }
        }
        Ok(settled)
    }

    /// The SKU's cuts not yet settled: step id and when it was taken (ms).
    pub async fn unsettled_cuts(&self, sku_id: SkuId) -> Result<Vec<(String, u64)>, RedisError> {
        let key = self.core.keys.cuts(sku_id);
        let raw: Vec<(String, String)> = self
            .core
            .run(|mut c| async move { redis::cmd("HGETALL").arg(&key).query_async(&mut c).await })
            .await?;
        Ok(raw
            .into_iter()
            .map(|(op, entry)| {
                let ms = entry.rsplit(':').next().and_then(|m| m.parse().ok());
                (op, ms.unwrap_or(0))
            })
            .collect())
    }
}
