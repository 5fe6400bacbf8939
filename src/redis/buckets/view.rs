//! The stock of a split SKU as the API shows it: the pool and each bucket.
//! One pipelined read per bucket; not atomic across buckets (a transfer in
//! flight is counted where its pending entry says it is still missing).

use deadpool_redis::redis;

use super::Buckets;
use super::Layout;
use crate::redis::RedisError;

/// One bucket's stock (`redis/buckets`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BucketStock {
    pub bucket: u16,
    pub available: i64,
    /// The pool had nothing more for this bucket.
    pub drained: bool,
    /// Drained and empty: its buyers are refused SOLD_OUT.
    pub sold_out: bool,
}

/// Pool, buckets, and the units in pending transfers.
pub struct SplitStock {
    pub pool: i64,
    pub buckets: Vec<BucketStock>,
    pub in_transfer: bool,
    pub limit_per_user: u64,
    pub total: u64,
}

type BucketFields = (
    Option<i64>,
    Option<String>,
    Option<String>,
    Option<i64>,
    Option<u64>,
    Option<u64>,
);

impl Buckets {
    /// `None` when the home hash is missing (the SKU is not loaded).
    pub async fn split_stock(&self, layout: &Layout) -> Result<Option<SplitStock>, RedisError> {
        let mut stock = SplitStock {
            pool: 0,
            buckets: Vec::new(),
            in_transfer: false,
            limit_per_user: 0,
            total: 0,
        };
        for bucket in layout.buckets() {
            let tag = layout.tag(bucket);
            let hash = self.core.keys.sku_at(tag);
            let xout = self.core.keys.transfers_out_at(tag);
            let ((available, drained, soldout, pool, limit, total), pending): (BucketFields, u64) =
                self.core
                    .run(|mut c| async move {
                        redis::pipe()
                            .cmd("HMGET")
                            .arg(&hash)
                            .arg("available")
                            .arg("drained")
                            .arg("soldout")
                            .arg("pool")
                            .arg("limit")
                            .arg("total")
                            .cmd("HLEN")
                            .arg(&xout)
                            .query_async(&mut c)
                            .await
                    })
                    .await?;
            if bucket == 0 {
                let Some(limit) = limit else { return Ok(None) };
                stock.pool = pool.unwrap_or(0);
                stock.limit_per_user = limit;
                stock.total = total.unwrap_or(0);
            }
            stock.in_transfer |= pending > 0;
            stock.buckets.push(BucketStock {
                bucket,
                available: available.unwrap_or(0),
                drained: drained.is_some(),
                sold_out: soldout.is_some(),
            });
        }
        Ok(Some(stock))
    }
}
