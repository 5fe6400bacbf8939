//! The per-IP limit as a middleware on the public routes (`/v1/skus/...`): a
//! refused request is answered 429 before any extractor or handler runs, so it
//! costs neither a body parse nor a Redis call. Admin routes, probes and
//! `/metrics` are not limited (the admin surface has its token and listener).

use std::future::Future;
use std::time::Instant;

use actix_web::body::BoxBody;
use actix_web::dev::{Service, ServiceRequest, ServiceResponse};
use actix_web::{web, Error, ResponseError};
use futures_util::future::Either;

use super::problem::ApiError;
use super::ApiState;

/// `wrap_fn` middleware body.
pub fn guard<S>(
    req: ServiceRequest,
    srv: &S,
) -> impl Future<Output = Result<ServiceResponse<BoxBody>, Error>>
where
    S: Service<ServiceRequest, Response = ServiceResponse<BoxBody>, Error = Error>,
{
    match refusal(&req) {
        Some(refused) => {
            let response = req.into_response(refused.error_response());
            Either::Left(std::future::ready(Ok(response)))
        }
        None => Either::Right(srv.call(req)),
    }
}

fn refusal(req: &ServiceRequest) -> Option<ApiError> {
    let path = req.path();
    if !path.starts_with("/v1/skus/") && path != "/v1/orders" && !path.starts_with("/v1/orders/") {
        return None;
    }
    let state = req.app_data::<web::Data<ApiState>>()?;
    if !state.ip_limiter.is_on() {
        return None;
    }
    let ip = state.trusted.client_ip(req.request())?;
    let wait = state.ip_limiter.check(ip, Instant::now()).err()?;
    Some(ApiError::rate_limited(
        "ip",
        u64::try_from(wait.as_millis()).unwrap_or(u64::MAX),
    ))
}
