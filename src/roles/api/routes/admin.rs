//! Admin routes. Each needs `Authorization: Bearer <admin.token>`, compared in
//! constant time, or the token of a client with scope `admin`; with neither
//! configured every admin call is 401.

use std::sync::Arc;

use actix_web::http::header;
use actix_web::{web, HttpRequest, HttpResponse};
use subtle::ConstantTimeEq;

use super::contract::{
    BelowReserved, InvalidRequest, ReconcileReport, SkuNotFound, SkuPath, Unauthorized,
    Unavailable, UnsupportedMediaType, WarmupConflict,
};
use super::sku_from;
use crate::ops::compare::CompareError;
use crate::ops::sku_admin::{self, SkuOptions};
use crate::ops::sku_admin_error::SkuAdminError;
use crate::ops::warmup::{self as warm, WarmupOutcome};
use crate::roles::api::problem::ApiError;
use crate::roles::api::views::{AdminSkuView, SaleView, SkuBody, SplitView, WarmupView};
use crate::roles::api::ApiState;

/// The actor of a change made with `admin.token` (not a named client).
pub const ADMIN_TOKEN_ACTOR: &str = "admin-token";

/// Extractor that refuses the request unless it carries the admin bearer
/// token. It is the first argument of every admin handler, so the token is
/// checked before the body is read: an anonymous caller gets 401, never a
/// body validation error. It keeps who was admitted, for the records of
/// the changes the call makes.
pub struct Admin {
    actor: Arc<str>,
}

impl Admin {
    /// The client's name (`auth.clients`), or [`ADMIN_TOKEN_ACTOR`].
    pub fn actor(&self) -> &str {
        &self.actor
    }
}

impl actix_web::FromRequest for Admin {
    type Error = ApiError;
    type Future = std::future::Ready<Result<Self, ApiError>>;

    fn from_request(req: &HttpRequest, _: &mut actix_web::dev::Payload) -> Self::Future {
        let verdict = match req.app_data::<web::Data<ApiState>>() {
            Some(state) => admitted(req, state).map(|actor| Admin { actor }),
            None => Err(ApiError::Unauthorized),
        };
        std::future::ready(verdict)
    }
}

/// Refuses the request unless it carries the admin bearer token or the token
/// of a client with scope `admin` (`auth.clients`).
pub fn require_admin(req: &HttpRequest, state: &ApiState) -> Result<(), ApiError> {
    admitted(req, state).map(drop)
}

/// Who [`require_admin`] admits: the admin-scoped client's name, or
/// [`ADMIN_TOKEN_ACTOR`] for the admin token.
fn admitted(req: &HttpRequest, state: &ApiState) -> Result<Arc<str>, ApiError> {
    if let Some(client) = state.auth.admin_client(req) {
        return Ok(client);
    }
    let Some(expected) = state.res.settings.admin.token.as_deref() else {
        return Err(ApiError::Unauthorized);
    };
    let presented = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or("");
    // Digests, not the tokens: both are 64 hex digits whatever was presented,
    // so the comparison's time tells nothing of the token's length or content.
    let presented = crate::roles::api::auth::sha256_hex(presented.as_bytes());
    let expected = crate::roles::api::auth::sha256_hex(expected.as_bytes());
    if bool::from(presented.as_bytes().ct_eq(expected.as_bytes())) {
        Ok(Arc::from(ADMIN_TOKEN_ACTOR))
    } else {
        Err(ApiError::Unauthorized)
    }
}

/// Create or restock a SKU, in MySQL and Redis.
///
/// `total_stock` counts every unit ever put on sale; lowering it below what is
/// already reserved or sold is refused.
#[utoipa::path(
    put,
    path = "/v1/admin/skus/{sku_id}",
    tag = "admin",
    operation_id = "put_sku",
    params(SkuPath),
    request_body(content = SkuBody, content_type = "application/json"),
    security(("admin_token" = []), ("client_token" = ["admin"])),
    responses(
        (status = 200, description = "Stored in MySQL and loaded into Redis", body = AdminSkuView),
        (status = 400, response = InvalidRequest),
        (status = 415, response = UnsupportedMediaType),
        (status = 401, response = Unauthorized),
        (status = 409, response = BelowReserved),
        (status = 503, response = Unavailable),
    )
)]
pub async fn put_sku(
    admin: Admin,
    req: HttpRequest,
    state: web::Data<ApiState>,
    body: web::Json<SkuBody>,
) -> Result<HttpResponse, ApiError> {
    let sku_id = sku_from(&req)?;
    let (total, limit) = body.validate()?;
    let options = SkuOptions {
        buckets: body.buckets(state.res.settings.redis.max_buckets)?,
        low_stock_threshold: body.low_stock_threshold()?,
        terms: body.terms()?,
    };
    let redis = &state.res.redis;
    let actor = admin.actor();
    let result =
        sku_admin::upsert(&state.res.db, redis, sku_id, total, limit, options, actor).await;
    let sku = result.map_err(|err| match err {
        SkuAdminError::BelowReserved { .. } => ApiError::BelowReserved(err.to_string()),
        SkuAdminError::BucketsLocked(_) => ApiError::BucketsLocked(err.to_string()),
        SkuAdminError::Db(e) => ApiError::unavailable("mysql", e),
        SkuAdminError::Redis(e) => ApiError::unavailable("redis", e),
        SkuAdminError::NotLoaded(_) => ApiError::Unavailable(err.to_string()),
        SkuAdminError::SaleOpen(why) => ApiError::SaleOpen(why),
    })?;
    tracing::info!(sku.id = %sku_id, total_stock = total, limit_per_user = limit,
        buckets = sku.buckets, "admin.sku: stored and loaded");
    // This node's board at once; the others by the notice (`crate::sale`).
    state.sale.set(sku_id, sku.terms);
    let snapshot = redis
        .skus()
        .sku(sku_id)
        .await
        .map_err(|e| ApiError::unavailable("redis", e))?
        .ok_or_else(|| ApiError::Unavailable(format!("SKU {sku_id} vanished from Redis")))?;
    Ok(HttpResponse::Ok().json(AdminSkuView {
        sku_id: sku_id.get(),
        total_stock: sku.total_stock,
        available: snapshot.available.max(0),
        mysql_available: sku.available_mysql,
        sold_out: snapshot.sold_out,
        limit_per_user: u64::from(sku.limit_per_user),
        low_stock_threshold: sku.low_stock_threshold,
        sale: SaleView::of(&sku.terms),
        requires_pass: sku.terms.requires_pass,
        split: SplitView::of(&snapshot),
    }))
}

#[derive(Debug, serde::Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct WarmupQuery {
    /// Load even while deductions are in flight between Redis and MySQL.
    #[serde(default)]
    #[param(required = false)]
    pub force: bool,
}

fn observe_failed(err: CompareError) -> ApiError {
    match err {
        CompareError::UnknownSku(sku) => ApiError::SkuNotFound(sku.get()),
        CompareError::Db(e) => ApiError::unavailable("mysql", e),
        CompareError::Redis(e) => ApiError::unavailable("redis", e),
        CompareError::Republish(e) => ApiError::unavailable("amqp", e),
    }
}

/// Load a SKU from MySQL into Redis (after a Redis loss or failover).
#[utoipa::path(
    post,
    path = "/v1/admin/skus/{sku_id}/warmup",
    tag = "admin",
    operation_id = "warmup_sku",
    params(SkuPath, WarmupQuery),
    security(("admin_token" = []), ("client_token" = ["admin"])),
    responses(
        (status = 200, description = "Loaded into Redis", body = WarmupView),
        (status = 400, response = InvalidRequest),
        (status = 401, response = Unauthorized),
        (status = 404, response = SkuNotFound),
        (status = 409, response = WarmupConflict),
        (status = 503, response = Unavailable),
    )
)]
pub async fn warmup(
    _admin: Admin,
    req: HttpRequest,
    state: web::Data<ApiState>,
    query: web::Query<WarmupQuery>,
) -> Result<HttpResponse, ApiError> {
    let sku_id = sku_from(&req)?;
    let res = &state.res;
    let outcome = warm::warmup(
        &res.db,
        &res.redis,
        &res.publisher,
        sku_id,
        query.force,
        &res.settings.reconcile,
    )
    .await
    .map_err(observe_failed)?;
    match outcome {
        WarmupOutcome::Warmed {
            available,
            limit_per_user,
        } => {
            if let Some(board) = &state.soldout {
                let _ = board.refresh_sku(sku_id).await;
            }
            Ok(HttpResponse::Ok().json(WarmupView {
                sku_id: sku_id.get(),
                available,
                limit_per_user: u64::from(limit_per_user),
                forced: query.force,
            }))
        }
        WarmupOutcome::Refused(reason) => Err(ApiError::Conflict(format!(
            "deductions in flight: {reason}; retry when drained or use ?force=true"
        ))),
        WarmupOutcome::NotFound => Err(ApiError::SkuNotFound(sku_id.get())),
    }
}

/// Reconcile every SKU now (repairing drift when `reconcile.repair` is on).
#[utoipa::path(
    post,
    path = "/v1/admin/reconcile",
    tag = "admin",
    operation_id = "reconcile_now",
    security(("admin_token" = []), ("client_token" = ["admin"])),
    responses(
        (status = 200, description = "The report, one line per SKU", body = ReconcileReport),
        (status = 401, response = Unauthorized),
        (status = 503, response = Unavailable),
    )
)]
pub async fn reconcile_now(
    req: HttpRequest,
    state: web::Data<ApiState>,
) -> Result<HttpResponse, ApiError> {
    require_admin(&req, &state)?;
    let repair = state.res.settings.reconcile.repair;
    let report = state
        .reconciler
        .run_once(&[], repair)
        .await
        .map_err(observe_failed)?;
    Ok(HttpResponse::Ok().json(report))
}

/// The latest reconcile report (a fresh check without repair when none ran yet
/// in this process).
#[utoipa::path(
    get,
    path = "/v1/admin/reconcile",
    tag = "admin",
    operation_id = "last_reconcile",
    security(("admin_token" = []), ("client_token" = ["admin"])),
    responses(
        (status = 200, description = "The report, one line per SKU", body = ReconcileReport),
        (status = 401, response = Unauthorized),
        (status = 503, response = Unavailable),
    )
)]
pub async fn last_reconcile(
    req: HttpRequest,
    state: web::Data<ApiState>,
) -> Result<HttpResponse, ApiError> {
    require_admin(&req, &state)?;
    let report = match state.reconciler.last_report() {
        Some(report) => report,
        None => state
            .reconciler
            .run_once(&[], false)
            .await
            .map_err(observe_failed)?,
    };
    Ok(HttpResponse::Ok().json(report))
}
