//! Admin routes. Each needs `Authorization: Bearer <admin.token>`, compared in
//! constant time; with no token configured every admin call is 401.

use actix_web::http::header;
use actix_web::{web, HttpRequest, HttpResponse};
use serde_json::json;
use subtle::ConstantTimeEq;

use super::sku_from;
use crate::ops::sku_admin::{self, SkuAdminError};
use crate::roles::api::problem::ApiError;
use crate::roles::api::views::SkuBody;
use crate::roles::api::ApiState;

/// Refuses the request unless it carries the admin bearer token.
pub fn require_admin(req: &HttpRequest, state: &ApiState) -> Result<(), ApiError> {
    let Some(expected) = state.res.settings.admin.token.as_deref() else {
        return Err(ApiError::Unauthorized);
    };
    let presented = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or("");
    if bool::from(presented.as_bytes().ct_eq(expected.as_bytes())) {
        Ok(())
    } else {
        Err(ApiError::Unauthorized)
    }
}

/// `PUT /v1/admin/skus/{sku_id}`: create or restock, in MySQL and Redis.
pub async fn put_sku(
    req: HttpRequest,
    state: web::Data<ApiState>,
    body: web::Json<SkuBody>,
) -> Result<HttpResponse, ApiError> {
    require_admin(&req, &state)?;
    let sku_id = sku_from(&req)?;
    let (total, limit) = body.validate()?;
    let result = sku_admin::upsert(&state.res.db, &state.res.redis, sku_id, total, limit).await;
    let sku = result.map_err(|err| match err {
        SkuAdminError::BelowReserved { .. } => ApiError::BelowReserved(err.to_string()),
        SkuAdminError::Db(e) => ApiError::unavailable("mysql", e),
        SkuAdminError::Redis(e) => ApiError::unavailable("redis", e),
    })?;
    tracing::info!(sku.id = %sku_id, total_stock = total, limit_per_user = limit, "admin.sku: stored and loaded");
    Ok(HttpResponse::Ok().json(json!({
        "sku_id": sku_id.get(),
        "total_stock": sku.total_stock,
        "available": sku.available_redis.max(0),
        "mysql_available": sku.available_mysql,
        "sold_out": sku.available_redis <= 0,
        "limit_per_user": sku.limit_per_user,
    })))
}
