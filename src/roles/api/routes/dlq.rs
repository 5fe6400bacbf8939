//! Admin routes over the dead-letter queues: `GET /v1/admin/dlq` lists what is
//! dead-lettered, `POST /v1/admin/dlq/replay` sends it back to its work queue
//! (see `ops::dlq`; the same operations as `stockd dlq list|replay`). Each call
//! reads at most [`ADMIN_MAX_MESSAGES`] messages so a request stays short; call
//! again (or use the CLI's `--max`) for a deeper queue.

use actix_web::{web, HttpResponse};
use serde::{Deserialize, Serialize};

use super::admin::Admin;
use super::contract::{InvalidRequest, Unauthorized, Unavailable};
use super::mirrors;
use crate::domain::SkuId;
use crate::ops::dlq::{self, DlqFilter, DlqKind};
use crate::roles::api::problem::ApiError;
use crate::roles::api::ApiState;

/// Most dead letters one admin call reads.
pub const ADMIN_MAX_MESSAGES: usize = 1_000;

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct DlqQuery {
    /// Which dead-letter queue; `deduct` when absent.
    #[param(required = false, inline, value_type = Option<mirrors::DlqKind>)]
    pub queue: Option<DlqKind>,
    /// Only this SKU's deductions (the others stay untouched).
    #[param(required = false, minimum = 1, maximum = 9223372036854775807_i64)]
    pub sku: Option<u64>,
}

impl DlqQuery {
    fn filter(&self) -> Result<DlqFilter, ApiError> {
        let sku = self
            .sku
            .map(SkuId::new)
            .transpose()
            .map_err(|e| ApiError::InvalidRequest(format!("sku: {e}")))?;
        Ok(DlqFilter {
            kind: self.queue.unwrap_or(DlqKind::Deduct),
            sku,
            max_messages: ADMIN_MAX_MESSAGES,
        })
    }
}

/// `POST /v1/admin/dlq/replay`
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct ReplayView {
    /// Deductions republished to the work queue (and removed from the DLQ).
    pub replayed: usize,
}

/// Dead-lettered deductions, without removing them.
///
/// Messages are read with `basic.get` and returned to the queue at the end
/// (they only gain the `redelivered` flag).
#[utoipa::path(
    get,
    path = "/v1/admin/dlq",
    tag = "admin",
    operation_id = "list_dlq",
    params(DlqQuery),
    security(("admin_token" = []), ("client_token" = ["admin"])),
    responses(
        (status = 200, description = "What the dead-letter queue holds", body = mirrors::DlqListing),
        (status = 400, response = InvalidRequest),
        (status = 401, response = Unauthorized),
        (status = 503, response = Unavailable),
    )
)]
pub async fn list(
    _admin: Admin,
    state: web::Data<ApiState>,
    query: web::Query<DlqQuery>,
) -> Result<HttpResponse, ApiError> {
    let filter = query.filter()?;
    let listing = dlq::list(&state.res.publisher, filter, &mut |_| {})
        .await
        .map_err(|e| ApiError::unavailable("amqp", e))?;
    Ok(HttpResponse::Ok().json(listing))
}

/// Replay dead-lettered deductions to their work queue.
///
/// Each is republished with publisher confirms (message id kept) and only then
/// removed from the DLQ; deductions of other SKUs in the same message go back
/// into the DLQ first. Safe to repeat: the consumer skips what it already
/// applied.
#[utoipa::path(
    post,
    path = "/v1/admin/dlq/replay",
    tag = "admin",
    operation_id = "replay_dlq",
    params(DlqQuery),
    security(("admin_token" = []), ("client_token" = ["admin"])),
    responses(
        (status = 200, description = "How many deductions were replayed", body = ReplayView),
        (status = 400, response = InvalidRequest),
        (status = 401, response = Unauthorized),
        (status = 503, response = Unavailable),
    )
)]
pub async fn replay(
    _admin: Admin,
    state: web::Data<ApiState>,
    query: web::Query<DlqQuery>,
) -> Result<HttpResponse, ApiError> {
    let filter = query.filter()?;
    let report = dlq::replay(&state.res.publisher, filter, &mut |_| {})
        .await
        .map_err(|e| ApiError::unavailable("amqp", e))?;
    tracing::info!(
        dlq.queue = filter.kind.as_str(),
        replayed = report.deductions.len(),
        failed = report.failed,
        "admin.dlq: replayed dead letters"
    );
    Ok(HttpResponse::Ok().json(ReplayView {
        replayed: report.deductions.len(),
    }))
}
