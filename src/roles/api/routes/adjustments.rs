//! Stock adjustments during a live sale and the SKU's movement history
//! (`ops/adjustment.rs`, `db/movements.rs`; docs/operations.md, "Adjusting
//! stock during a sale"). Admin routes: the admin token or a client with
//! scope `admin`.

use actix_web::{web, HttpRequest, HttpResponse};

use super::admin::Admin;
use super::contract::{
    AdjustConflict, AdjustmentMismatch, InvalidRequest, SkuNotFound, SkuPath, Unauthorized,
    Unavailable, UnsupportedMediaType,
};
use super::mirrors;
use super::sku_from;
use crate::db::movements::{self, Movement};
use crate::db::sku;
use crate::ops::adjustment::{self, AdjustError, Adjusted, Adjustment};
use crate::ops::sku_admin_error::SkuAdminError;
use crate::roles::api::problem::ApiError;
use crate::roles::api::views::TOTAL_STOCK_MAX;
use crate::roles::api::ApiState;

/// Longest `reason` and `reference`.
const TEXT_MAX_CHARS: usize = 200;
/// Longest `adjustment_id`.
const ADJUSTMENT_ID_MAX: usize = 64;
/// Movements per page when `limit` is absent, and the most one page holds.
const PAGE_DEFAULT: u32 = 100;
const PAGE_MAX: u32 = 1_000;

/// `POST /v1/admin/skus/{sku_id}/adjustments`.
#[derive(Debug, serde::Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AdjustmentBody {
    /// Units to add (positive) or remove (negative); never 0.
    #[schema(minimum = -1_000_000_000_000_i64, maximum = 1_000_000_000_000_i64, example = 50)]
    pub delta: i64,
    /// Why (kept with the movement): "late delivery", "damaged", …
    #[schema(
        min_length = 1,
        max_length = 200,
        example = "late delivery from the warehouse"
    )]
    pub reason: String,
    /// The caller's own reference (a purchase order, a ticket).
    #[serde(default)]
    #[schema(max_length = 200, example = "PO-2026-1187")]
    pub reference: Option<String>,
    /// Compare-and-set: apply only if MySQL's available (`mysql_available`
    /// of `PUT /v1/admin/skus/{sku_id}`) is still this; else 409 `STALE`.
    #[serde(default)]
    #[schema(minimum = 0, example = 120)]
    pub expected_available: Option<i64>,
    /// Makes the call idempotent: the same id answers the first movement again.
    #[serde(default)]
    #[schema(
        min_length = 1,
        max_length = 64,
        pattern = "^[A-Za-z0-9._:-]+$",
        example = "restock-7"
    )]
    pub adjustment_id: Option<String>,
}

impl AdjustmentBody {
    fn validate(&self) -> Result<(), ApiError> {
        let invalid = |what: String| Err(ApiError::InvalidRequest(what));
        if self.delta == 0 || self.delta.abs() > TOTAL_STOCK_MAX {
            return invalid(format!(
                "delta must be non-zero and within ±{TOTAL_STOCK_MAX}"
            ));
        }
        let reason = self.reason.trim();
        if reason.is_empty() || self.reason.chars().count() > TEXT_MAX_CHARS {
            return invalid(format!("reason must be 1..={TEXT_MAX_CHARS} characters"));
        }
        if self
            .reference
            .as_ref()
            .is_some_and(|r| r.chars().count() > TEXT_MAX_CHARS)
        {
            return invalid(format!(
                "reference must be at most {TEXT_MAX_CHARS} characters"
            ));
        }
        if self.expected_available.is_some_and(|v| v < 0) {
            return invalid("expected_available must be 0 or more".into());
        }
        if let Some(id) = &self.adjustment_id {
            let charset = |c: char| c.is_ascii_alphanumeric() || "._:-".contains(c);
            if id.is_empty() || id.len() > ADJUSTMENT_ID_MAX || !id.chars().all(charset) {
                return invalid(format!(
                    "adjustment_id must be 1..={ADJUSTMENT_ID_MAX} characters of [A-Za-z0-9._:-]"
                ));
            }
        }
        Ok(())
    }
}

/// Add or remove stock while the sale runs, in MySQL and Redis.
///
/// The delta is applied to what the stores hold at that moment: reservations
/// admitted meanwhile are neither refused nor overwritten. 201 with the new
/// movement; a repeated `adjustment_id` answers 200 with the first one and
/// `Idempotent-Replayed: true`.
#[utoipa::path(
    post,
    path = "/v1/admin/skus/{sku_id}/adjustments",
    tag = "admin",
    operation_id = "adjust_stock",
    params(SkuPath),
    request_body(content = AdjustmentBody, content_type = "application/json"),
    security(("admin_token" = []), ("client_token" = ["admin"])),
    responses(
        (status = 201, description = "Applied in MySQL and Redis", body = mirrors::Movement),
        (status = 200, description = "This adjustment_id was applied before: its movement",
         body = mirrors::Movement,
         headers(("Idempotent-Replayed" = String, description = "Always `true`"))),
        (status = 400, response = InvalidRequest),
        (status = 415, response = UnsupportedMediaType),
        (status = 401, response = Unauthorized),
        (status = 404, response = SkuNotFound),
        (status = 409, response = AdjustConflict),
        (status = 422, response = AdjustmentMismatch),
        (status = 503, response = Unavailable),
    )
)]
pub async fn adjust(
    admin: Admin,
    req: HttpRequest,
    state: web::Data<ApiState>,
    body: web::Json<AdjustmentBody>,
) -> Result<HttpResponse, ApiError> {
    let sku_id = sku_from(&req)?;
    body.validate()?;
    let asked = Adjustment {
        delta: body.delta,
        reason: body.reason.trim(),
        reference: body.reference.as_deref(),
        expected_available: body.expected_available,
        adjustment_id: body.adjustment_id.as_deref(),
        actor: admin.actor(),
    };
    let res = &state.res;
    let outcome = adjustment::adjust(&res.db, &res.redis, sku_id, &asked)
        .await
        .map_err(adjust_failed)?;
    if let Some(board) = &state.soldout {
        let _ = board.refresh_sku(sku_id).await;
    }
    Ok(match outcome {
        Adjusted::Applied(movement) => HttpResponse::Created().json(movement),
        Adjusted::Replayed(movement) => HttpResponse::Ok()
            .insert_header(("Idempotent-Replayed", "true"))
            .json(movement),
    })
}

fn adjust_failed(err: AdjustError) -> ApiError {
    match err {
        AdjustError::UnknownSku(sku) => ApiError::SkuNotFound(sku),
        AdjustError::Stale { expected, current } => ApiError::Stale { expected, current },
        AdjustError::Mismatch(_) => ApiError::AdjustmentMismatch(err.to_string()),
        // The same answer `PUT` gives a total past the cap.
        AdjustError::AboveCap { .. } => ApiError::InvalidRequest(err.to_string()),
        AdjustError::Admin(SkuAdminError::BelowReserved { .. }) => {
            ApiError::BelowReserved(err.to_string())
        }
        AdjustError::Admin(SkuAdminError::SaleOpen(why)) => ApiError::SaleOpen(why),
        AdjustError::Admin(SkuAdminError::BucketsLocked(_)) => {
            ApiError::Unavailable("the SKU's bucket layout changed meanwhile; retry shortly".into())
        }
        AdjustError::Admin(SkuAdminError::Db(e)) | AdjustError::Db(e) => {
            ApiError::unavailable("mysql", e)
        }
        AdjustError::Admin(SkuAdminError::Redis(e)) => ApiError::unavailable("redis", e),
        AdjustError::Admin(SkuAdminError::NotLoaded(_)) => ApiError::Unavailable(err.to_string()),
    }
}

/// `GET /v1/admin/skus/{sku_id}/movements`.
#[derive(Debug, serde::Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct MovementsQuery {
    /// Only movements after this one (the previous page's `next`).
    #[serde(default)]
    #[param(required = false, minimum = 0)]
    pub after: Option<u64>,
    /// Movements per page, 1..=1000 (default 100).
    #[serde(default)]
    #[param(required = false, minimum = 1, maximum = 1000)]
    pub limit: Option<u32>,
}

/// One page of a SKU's movements, oldest first.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub struct MovementsPage {
    #[schema(value_type = Vec<mirrors::Movement>)]
    pub movements: Vec<Movement>,
    /// Pass as `after` for the next page; null on the last one.
    pub next: Option<u64>,
}

/// Page through a SKU's stock movements: creation, restocks and adjustments,
/// each with its delta, before/after, reason, reference and actor. Sales and
/// releases are in the reservation ledger.
#[utoipa::path(
    get,
    path = "/v1/admin/skus/{sku_id}/movements",
    tag = "admin",
    operation_id = "list_movements",
    params(SkuPath, MovementsQuery),
    security(("admin_token" = []), ("client_token" = ["admin"])),
    responses(
        (status = 200, description = "One page, oldest first", body = MovementsPage),
        (status = 400, response = InvalidRequest),
        (status = 401, response = Unauthorized),
        (status = 404, response = SkuNotFound),
        (status = 503, response = Unavailable),
    )
)]
pub async fn list(
    _admin: Admin,
    req: HttpRequest,
    state: web::Data<ApiState>,
    query: web::Query<MovementsQuery>,
) -> Result<HttpResponse, ApiError> {
    let sku_id = sku_from(&req)?;
    let limit = query.limit.unwrap_or(PAGE_DEFAULT);
    if !(1..=PAGE_MAX).contains(&limit) {
        return Err(ApiError::InvalidRequest(format!(
            "limit must be in 1..={PAGE_MAX}"
        )));
    }
    let db = &state.res.db;
    let mut conn = db
        .conn()
        .await
        .map_err(|e| ApiError::unavailable("mysql", e))?;
    let page = movements::page(&mut conn, sku_id, query.after.unwrap_or(0), limit)
        .await
        .map_err(|e| ApiError::unavailable("mysql", e))?;
    if page.is_empty() {
        let known = sku::get(&mut conn, sku_id)
            .await
            .map_err(|e| ApiError::unavailable("mysql", e))?;
        if known.is_none() {
            return Err(ApiError::SkuNotFound(sku_id.get()));
        }
    }
    let next = (page.len() == limit as usize)
        .then(|| page.last().map(|m| m.id))
        .flatten();
    Ok(HttpResponse::Ok().json(MovementsPage {
        movements: page,
        next,
    }))
}
