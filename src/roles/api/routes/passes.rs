//! `POST /v1/passes`: stockd signs an admission pass (contract, "Passes") for
//! a queue in front of it that does not sign its own — the queue lets a buyer
//! through, asks stockd for a pass for that buyer and the SKUs, and hands it
//! to the buyer's checkout (docs/waiting-room.md).
//!
//! Issuing a pass is as powerful as the queue itself, so the route always
//! needs a credential, also where `auth.required` is false: a client with
//! scope `passes` (or `admin`), or `admin.token`. The gate lets every caller
//! of this route through to [`PassIssuer`], which decides before the body is
//! read (401 `UNAUTHENTICATED` without a credential, 403 `FORBIDDEN` for a
//! client without the scope).

use std::sync::Arc;

use actix_web::{web, HttpRequest, HttpResponse};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::admin::{require_admin, ADMIN_TOKEN_ACTOR};
use super::contract::{
    Forbidden, InvalidRequest, IssuerUnavailable, RateLimited, Unauthenticated,
    UnsupportedMediaType,
};
use crate::config::Scope;
use crate::domain::{SkuId, UserId};
use crate::passes::{IssueError, PASS_TTL_DEFAULT_SECS, PASS_TTL_MAX_SECS};
use crate::roles::api::auth::Caller;
use crate::roles::api::problem::ApiError;
use crate::roles::api::ApiState;

/// Most SKUs one pass may name: an order's lines are at most 100 too.
pub const PASS_SKUS_MAX: usize = 100;

/// Proof, for the handler, that the caller may issue passes, and its name
/// for the audit trail: the client's, or `admin-token`.
pub struct PassIssuer(Arc<str>);

impl actix_web::FromRequest for PassIssuer {
    type Error = ApiError;
    type Future = std::future::Ready<Result<Self, ApiError>>;

    fn from_request(req: &HttpRequest, _: &mut actix_web::dev::Payload) -> Self::Future {
        std::future::ready(may_issue(req).map(PassIssuer))
    }
}

/// A client with scope `passes` or `admin`, or the admin token; whatever
/// `auth.required` says.
fn may_issue(req: &HttpRequest) -> Result<Arc<str>, ApiError> {
    let Some(state) = req.app_data::<web::Data<ApiState>>() else {
        return Err(ApiError::Unauthenticated);
    };
    match state.auth.identify(req) {
        Caller::Client(known) if known.may(Scope::Passes) || known.may(Scope::Admin) => {
            Ok(known.name)
        }
        Caller::Client(_) => Err(ApiError::Forbidden(Scope::Passes.as_str())),
        Caller::Unknown | Caller::Anonymous => match require_admin(req, state) {
            Ok(()) => Ok(Arc::from(ADMIN_TOKEN_ACTOR)),
            Err(_) => Err(ApiError::Unauthenticated),
        },
    }
}

/// `POST /v1/passes`
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PassRequest {
    /// The buyer the pass admits (the `user_id` of the holds).
    #[schema(minimum = 1, maximum = 9223372036854775807_i64, example = 42)]
    pub user_id: u64,
    /// The SKUs it admits: 1..=100, each once.
    #[schema(min_items = 1, max_items = 100, example = json!([1]))]
    pub sku_ids: Vec<u64>,
    /// Seconds the pass is valid from now: 1..=3600, 300 when absent.
    #[serde(default)]
    #[schema(minimum = 1, maximum = 3600, nullable = false, example = 300)]
    pub ttl_secs: Option<u64>,
}

impl PassRequest {
    /// The buyer, the SKUs and the time to live, checked.
    fn validate(&self) -> Result<(UserId, Vec<SkuId>, u64), ApiError> {
        let invalid = |why: String| ApiError::InvalidRequest(why);
        let user = UserId::new(self.user_id).map_err(|e| invalid(e.to_string()))?;
        if self.sku_ids.is_empty() || self.sku_ids.len() > PASS_SKUS_MAX {
            return Err(invalid(format!(
                "sku_ids must name 1..={PASS_SKUS_MAX} SKUs"
            )));
        }
        let mut skus = Vec::with_capacity(self.sku_ids.len());
        for &id in &self.sku_ids {
            let sku = SkuId::new(id).map_err(|e| invalid(e.to_string()))?;
            if skus.contains(&sku) {
                return Err(invalid(format!("sku_ids names {sku} twice")));
            }
            skus.push(sku);
        }
        let ttl = self.ttl_secs.unwrap_or(PASS_TTL_DEFAULT_SECS);
        if !(1..=PASS_TTL_MAX_SECS).contains(&ttl) {
            return Err(invalid(format!(
                "ttl_secs must be in 1..={PASS_TTL_MAX_SECS}"
            )));
        }
        Ok((user, skus, ttl))
    }
}

/// A pass just signed.
#[derive(Debug, Serialize, ToSchema)]
pub struct PassView {
    /// The pass: a compact JWT to send as `pass` in the reservation or
    /// order body.
    pub pass: String,
    /// Its id (`jti`): a pass buys once.
    #[schema(min_length = 1, max_length = 64, pattern = "^[A-Za-z0-9_.:-]{1,64}$")]
    pub pass_id: String,
    /// When it stops admitting (RFC 3339, UTC, milliseconds).
    #[schema(format = DateTime)]
    pub expires_at: String,
}

/// Issue an admission pass for a buyer and SKUs.
///
/// Signed with `passes.issuer_key`; valid from now for `ttl_secs`. Always
/// needs a credential, also with `auth.required` false: a client token
/// with scope `passes` (or `admin`), or the admin token.
#[utoipa::path(
    post,
    path = "/v1/passes",
    tag = "passes",
    operation_id = "issue_pass",
    security(("client_token" = ["passes"])),
    request_body(content = PassRequest, content_type = "application/json"),
    responses(
        (status = 201, description = "The pass, signed", body = PassView),
        (status = 400, response = InvalidRequest),
        (status = 415, response = UnsupportedMediaType),
        (status = 401, response = Unauthenticated),
        (status = 403, response = Forbidden),
        (status = 429, response = RateLimited),
        (status = 503, response = IssuerUnavailable),
    )
)]
pub async fn issue(
    issuer: PassIssuer,
    state: web::Data<ApiState>,
    body: web::Json<PassRequest>,
) -> Result<HttpResponse, ApiError> {
    let (user, skus, ttl) = body.validate()?;
    let issued = state
        .passes
        .issue(user, &skus, ttl, crate::clock::unix_ms())
        .map_err(|err| match err {
            IssueError::NotConfigured => ApiError::PassesNotConfigured,
            IssueError::Signing(why) => ApiError::Unavailable(why),
        })?;
    // Who let whom through, for the audit trail (never the pass itself).
    tracing::info!(target: "audit", event = "passes.issued", client = %issuer.0,
        pass.id = %issued.pass_id, user.id = %user, skus = skus.len(), ttl_secs = ttl,
        "admission pass issued");
    Ok(HttpResponse::Created().json(PassView {
        pass: issued.token,
        pass_id: issued.pass_id,
        expires_at: crate::clock::rfc3339_millis(issued.expires_at_ms),
    }))
}
