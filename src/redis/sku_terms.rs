//! A SKU's sale terms in Redis: mirrored onto every hash of its layout (the
//! home hash and each bucket's), where the admission scripts read them, and
//! told to every api node's board on the sold-out channel (docs/contract.md
//! §19).

use deadpool_redis::redis;

use super::buckets::Layout;
use super::sku::Skus;
use super::RedisError;
use crate::domain::{SaleTerms, SkuId};

/// The prefix of a notice of changed sale terms on the sold-out channel.
pub const SALE_TERMS_NOTICE: &str = "T:";

impl Skus {
    /// Writes `terms` onto every hash of `layout` (`sale_terms.lua`, one
    /// call per slot). Also onto a hash not loaded yet: a creation and a
    /// warm-up write the terms before the stock, so no hold is admitted
    /// without them.
    pub async fn set_sale_terms(
        &self,
        layout: &Layout,
        terms: &SaleTerms,
    ) -> Result<(), RedisError> {
        let text = |ms: Option<i64>| ms.map_or_else(String::new, |ms| ms.to_string());
        let (opens, closes) = (text(terms.opens_at_ms), text(terms.closes_at_ms));
        let pass = if terms.requires_pass { "1" } else { "0" };
        for bucket in layout.buckets() {
            let mut invocation = super::scripts::SALE_TERMS.prepare_invoke();
            invocation
                .key(self.core.keys.sku_at(layout.tag(bucket)))
                .arg(&opens)
                .arg(&closes)
                .arg(pass);
            let _: Vec<String> = self
                .core
                .run(|mut c| async move { invocation.invoke_async(&mut c).await })
                .await?;
        }
        Ok(())
    }

    /// The terms the home hash mirrors (what a single-bucket SKU's admission
    /// judges by).
    pub async fn sale_terms(&self, sku_id: SkuId) -> Result<SaleTerms, RedisError> {
        let key = self.core.keys.sku(sku_id);
        let (opens, closes, pass): (Option<i64>, Option<i64>, Option<String>) = self
            .core
            .run(|mut c| async move {
                redis::cmd("HMGET")
                    .arg(&key)
                    .arg("so")
                    .arg("sc")
                    .arg("rp")
                    .query_async(&mut c)
                    .await
            })
            .await?;
        Ok(SaleTerms {
            opens_at_ms: opens,
            closes_at_ms: closes,
            requires_pass: pass.as_deref() == Some("1"),
        })
    }

    /// Tells every api node's board that `sku_id`'s terms changed (it reads
    /// them again from MySQL): `T:<sku>` on the sold-out channel, whose
    /// subscribers ignore a kind they do not know. A lost notice is caught
    /// by the boards' periodic re-read.
    pub async fn tell_sale_terms(&self, sku_id: SkuId) -> Result<(), RedisError> {
        let channel = self.core.keys.soldout_channel();
        self.core
            .run(|mut c| async move {
                redis::cmd("PUBLISH")
                    .arg(&channel)
                    .arg(format!("{SALE_TERMS_NOTICE}{sku_id}"))
                    .query_async::<i64>(&mut c)
                    .await
            })
            .await
            .map(|_| ())
    }
}
