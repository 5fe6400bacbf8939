//! JSON bodies of the SKU and admin routes: what an operator sends to put a
//! SKU on sale and what clients and operators are shown of a SKU. The holds'
//! bodies are in `hold_views`.
//!
//! The `#[schema(...)]` attributes are the OpenAPI contract (`GET /openapi.json`);
//! the `validate` methods enforce the same ranges at run time.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::problem::ApiError;

/// `PUT /v1/admin/skus/{sku_id}`
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SkuBody {
    /// Units ever put on sale, sold ones included.
    #[schema(minimum = 0, maximum = 1_000_000_000_000_i64, example = 100)]
    pub total_stock: i64,
    #[schema(minimum = 1, maximum = 1_000_000, example = 2)]
    pub limit_per_user: i64,
    /// Stock buckets the SKU is split into (see docs/architecture.md, "Stock
    /// buckets"): 1 (not split) up to `redis.max_buckets`. Absent: the SKU's
    /// current count (1 for a new SKU). Fixed while buyer state lives.
    #[serde(default)]
    #[schema(minimum = 1, maximum = 1024, example = 1)]
    pub buckets: Option<i64>,
    /// `stockd.sku.low_stock` is published when available falls to or below
    /// this many units (docs/operations.md, "Events"); 0 clears it. Absent:
    /// the SKU's current threshold (none for a new SKU).
    #[serde(default)]
    #[schema(minimum = 0, maximum = 1_000_000_000, example = 10)]
    pub low_stock_threshold: Option<i64>,
    /// The sale window (docs/contract.md §19): holds are admitted
    /// from `opens_at`, by Redis's clock, until `closes_at`. `null` removes
    /// a window that has not opened; absent: the SKU's current window (none
    /// for a new SKU). An opened sale's `opens_at` cannot move (409
    /// `SALE_OPEN`); its `closes_at` may.
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<SaleBody>)]
    pub sale: Option<Option<SaleBody>>,
    /// A hold of this SKU must carry a pass (403 `PASS_REQUIRED` without
    /// one). Absent: the SKU's current flag (false for a new SKU).
    #[serde(default)]
    pub requires_pass: Option<bool>,
}

/// A sale window as sent: RFC 3339 times, any offset.
#[derive(Debug, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = SaleWindow)]
pub struct SaleBody {
    /// The first instant a hold is admitted.
    #[schema(example = "2026-11-11T00:00:00Z")]
    pub opens_at: String,
    /// The first instant no hold is admitted any more, after `opens_at`;
    /// null or absent: the sale does not close.
    #[serde(default)]
    #[schema(example = "2026-11-11T02:00:00Z")]
    pub closes_at: Option<String>,
}

/// A key that is present deserializes to `Some(value)`, `null` included
/// (`Some(None)`); with `#[serde(default)]` an absent key stays `None`.
fn present<'de, D, T>(deserializer: D) -> Result<Option<Option<T>>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(deserializer).map(Some)
}

/// The sale as the SKU views show it: RFC 3339, milliseconds.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = SaleWindowView)]
pub struct SaleView {
    /// The first instant a hold is admitted; null: from the start.
    #[schema(required = true)]
    pub opens_at: Option<String>,
    /// The first instant no hold is admitted; null: never.
    #[schema(required = true)]
    pub closes_at: Option<String>,
}

impl SaleView {
    /// `null` for a SKU without a window.
    pub fn of(terms: &crate::domain::SaleTerms) -> Option<Self> {
        if terms.opens_at_ms.is_none() && terms.closes_at_ms.is_none() {
            return None;
        }
        let text = |ms: Option<i64>| ms.map(|ms| crate::clock::rfc3339_ms(ms as u64));
        Some(Self {
            opens_at: text(terms.opens_at_ms),
            closes_at: text(terms.closes_at_ms),
        })
    }
}

/// Largest stock one SKU may hold (`domain/stock.rs`).
pub use crate::domain::TOTAL_STOCK_MAX;
/// Largest low-stock threshold (fits the column's INT UNSIGNED with room).
pub const LOW_STOCK_THRESHOLD_MAX: i64 = 1_000_000_000;
/// Largest per-user limit (a reservation takes at most 1,000 units).
pub const LIMIT_PER_USER_MAX: i64 = 1_000_000;

impl SkuBody {
    /// The bucket count asked for, within `1..=max`.
    pub fn buckets(&self, max: u16) -> Result<Option<u16>, ApiError> {
        match self.buckets {
            None => Ok(None),
            Some(n) if (1..=i64::from(max)).contains(&n) => Ok(Some(n as u16)),
            Some(_) => Err(ApiError::InvalidRequest(format!(
                "buckets must be in 1..={max} (redis.max_buckets)"
            ))),
        }
    }

    /// The low-stock threshold asked for, within `0..=LOW_STOCK_THRESHOLD_MAX`.
    pub fn low_stock_threshold(&self) -> Result<Option<u32>, ApiError> {
        match self.low_stock_threshold {
            None => Ok(None),
            Some(n) if (0..=LOW_STOCK_THRESHOLD_MAX).contains(&n) => Ok(Some(n as u32)),
            Some(_) => Err(ApiError::InvalidRequest(format!(
                "low_stock_threshold must be in 0..={LOW_STOCK_THRESHOLD_MAX}"
            ))),
        }
    }

    /// The change of the sale terms asked for: each time RFC 3339, and
    /// `opens_at` before `closes_at`.
    pub fn terms(&self) -> Result<crate::domain::TermsChange, ApiError> {
        let window = match &self.sale {
            None => None,
            Some(None) => Some(None),
            Some(Some(sale)) => {
                let time = |key: &str, text: &str| {
                    crate::clock::parse_rfc3339_ms(text).ok_or_else(|| {
                        ApiError::InvalidRequest(format!(
                            "sale.{key} must be an RFC 3339 time (e.g. 2026-11-11T00:00:00Z)"
                        ))
                    })
                };
                let opens_at_ms = time("opens_at", &sale.opens_at)?;
                let closes_at_ms = match &sale.closes_at {
                    Some(text) => Some(time("closes_at", text)?),
                    None => None,
                };
                if closes_at_ms.is_some_and(|closes| closes <= opens_at_ms) {
                    return Err(ApiError::InvalidRequest(
                        "sale.closes_at must be after sale.opens_at".into(),
                    ));
                }
                Some(Some(crate::domain::Window {
                    opens_at_ms,
                    closes_at_ms,
                }))
            }
        };
        Ok(crate::domain::TermsChange {
            window,
            requires_pass: self.requires_pass,
        })
    }

    pub fn validate(&self) -> Result<(i64, u32), ApiError> {
        if !(0..=TOTAL_STOCK_MAX).contains(&self.total_stock) {
            return Err(ApiError::InvalidRequest(format!(
                "total_stock must be in 0..={TOTAL_STOCK_MAX}"
            )));
        }
        if !(1..=LIMIT_PER_USER_MAX).contains(&self.limit_per_user) {
            return Err(ApiError::InvalidRequest(format!(
                "limit_per_user must be in 1..={LIMIT_PER_USER_MAX}"
            )));
        }
        Ok((self.total_stock, self.limit_per_user as u32))
    }
}

/// `GET /v1/skus/{sku_id}`
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = Sku)]
pub struct SkuView {
    #[schema(minimum = 1, maximum = 9223372036854775807_i64)]
    pub sku_id: u64,
    /// Units still on sale (never negative).
    #[schema(minimum = 0)]
    pub available: i64,
    pub sold_out: bool,
    #[schema(minimum = 1)]
    pub limit_per_user: u64,
    /// The sale window; null: none (always on sale).
    #[schema(required = true)]
    pub sale: Option<SaleView>,
    /// A hold of this SKU must carry a pass.
    pub requires_pass: bool,
    #[serde(flatten)]
    pub split: SplitView,
}

/// How a SKU's stock is split over stock buckets. Every field is absent for
/// a SKU in one bucket, whose view stays as in contract §6.
#[derive(Debug, Default, Serialize, ToSchema)]
pub struct SplitView {
    /// Stock buckets the SKU is split into.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 2)]
    pub buckets: Option<u16>,
    /// Units not yet leased to a bucket.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pool: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bucket_stock: Option<Vec<BucketView>>,
}

/// One bucket's stock.
#[derive(Debug, Serialize, ToSchema)]
pub struct BucketView {
    pub bucket: u16,
    pub available: i64,
    /// The pool had nothing more for this bucket.
    pub drained: bool,
    /// This bucket's buyers are refused `SOLD_OUT`.
    pub sold_out: bool,
}

impl SplitView {
    /// Empty (every field absent) for a SKU in one bucket.
    pub fn of(snapshot: &crate::redis::SkuSnapshot) -> Self {
        if snapshot.buckets.len() <= 1 {
            return Self::default();
        }
        Self {
            buckets: Some(snapshot.buckets.len() as u16),
            pool: Some(snapshot.pool),
            bucket_stock: Some(
                snapshot
                    .buckets
                    .iter()
                    .map(|b| BucketView {
                        bucket: b.bucket,
                        available: b.available.max(0),
                        drained: b.drained,
                        sold_out: b.sold_out,
                    })
                    .collect(),
            ),
        }
    }
}

/// `PUT /v1/admin/skus/{sku_id}`: the SKU as stored in MySQL and loaded into Redis.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = AdminSku)]
pub struct AdminSkuView {
    #[schema(minimum = 1, maximum = 9223372036854775807_i64)]
    pub sku_id: u64,
    #[schema(minimum = 0)]
    pub total_stock: i64,
    /// Units on sale in Redis (never negative).
    #[schema(minimum = 0)]
    pub available: i64,
    /// Units on sale according to the MySQL ledger (lags Redis while in flight).
    pub mysql_available: i64,
    pub sold_out: bool,
    #[schema(minimum = 1)]
    pub limit_per_user: u64,
    /// The low-stock threshold of `stockd.sku.low_stock`; null: none.
    #[schema(minimum = 1)]
    pub low_stock_threshold: Option<u32>,
    /// The sale window; null: none (always on sale).
    #[schema(required = true)]
    pub sale: Option<SaleView>,
    /// A hold of this SKU must carry a pass.
    pub requires_pass: bool,
    #[serde(flatten)]
    pub split: SplitView,
}

/// `POST /v1/admin/skus/{sku_id}/warmup`: what was loaded into Redis.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = Warmup)]
pub struct WarmupView {
    #[schema(minimum = 1, maximum = 9223372036854775807_i64)]
    pub sku_id: u64,
    #[schema(minimum = 0)]
    pub available: i64,
    #[schema(minimum = 1)]
    pub limit_per_user: u64,
    /// Whether `?force=true` overrode the in-flight check.
    pub forced: bool,
}
