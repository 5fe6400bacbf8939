//! The operator console: `GET /console` (one page, its script and stylesheet,
//! embedded in the binary) and `GET /v1/admin/overview`, the one document the
//! page polls. Both are admin routes (the admin listener when `admin.bind` is
//! set). The page itself is public — it holds no data; every number it shows
//! comes from admin calls carrying the token the operator typed in.

use actix_web::http::header;
use actix_web::{web, HttpResponse};

use super::admin::Admin;
use super::contract::Unauthorized;
use super::mirrors::Overview;
use crate::roles::api::problem::ApiError;
use crate::roles::api::ApiState;

const PAGE: &str = include_str!("../console/index.html");
const SCRIPT: &str = include_str!("../console/console.js");
const STYLE: &str = include_str!("../console/console.css");

/// Only our own script, style and API: no inline code, no other origin, no
/// framing (the page handles a token).
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
    connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; \
    frame-ancestors 'none'";

fn asset(content_type: &str, body: &'static str) -> HttpResponse {
    HttpResponse::Ok()
        .content_type(content_type)
        .insert_header((header::CONTENT_SECURITY_POLICY, CSP))
        .insert_header((header::X_CONTENT_TYPE_OPTIONS, "nosniff"))
        .insert_header((header::REFERRER_POLICY, "no-referrer"))
        .insert_header((header::X_FRAME_OPTIONS, "DENY"))
        .insert_header((header::CACHE_CONTROL, "no-cache"))
        .body(body)
}

/// `GET /console`
pub async fn page() -> HttpResponse {
    asset("text/html; charset=utf-8", PAGE)
}

/// `GET /console/console.js`
pub async fn script() -> HttpResponse {
    asset("text/javascript; charset=utf-8", SCRIPT)
}

/// `GET /console/console.css`
pub async fn style() -> HttpResponse {
    asset("text/css; charset=utf-8", STYLE)
}

/// What the operator console shows: stock per SKU in both stores, reserve
/// counters, the pipeline, the reconciler's verdicts, dependency health and the
/// stockd nodes seen.
///
/// Gathered at most about once a second per process and served to every poller
/// from that cache; a dependency that does not answer shows as `null` or
/// unhealthy instead of failing the call.
#[utoipa::path(
    get,
    path = "/v1/admin/overview",
    tag = "admin",
    operation_id = "overview",
    security(("admin_token" = []), ("client_token" = ["admin"])),
    responses(
        (status = 200, description = "The overview", body = Overview),
        (status = 401, response = Unauthorized),
    )
)]
pub async fn overview(_admin: Admin, state: web::Data<ApiState>) -> Result<HttpResponse, ApiError> {
    let overview = state
        .console
        .get(&state.res, &state.reconciler, &state.metrics)
        .await;
    Ok(HttpResponse::Ok()
        .insert_header((header::CACHE_CONTROL, "no-store"))
        .json(overview.as_ref()))
}
