//! What every `wrap_fn` middleware of the api wraps and answers (the auth
//! gate, the per-IP guard, the audit trail, the request telemetry:
//! `mod.rs` stacks them), spelled once so each states only its own work;
//! and the answer of a request a guard refuses before any handler runs.

use actix_web::body::BoxBody;
use actix_web::dev::{Service, ServiceRequest, ServiceResponse};
use actix_web::{Error, ResponseError};
use futures_util::future::Either;
use std::future::Ready;

/// A middleware's answer: the response, or actix's error.
pub type Answer = Result<ServiceResponse<BoxBody>, Error>;

/// The service a middleware wraps: the rest of the stack and the handler.
pub trait Inner:
    Service<ServiceRequest, Response = ServiceResponse<BoxBody>, Error = Error>
{
}

impl<S> Inner for S where
    S: Service<ServiceRequest, Response = ServiceResponse<BoxBody>, Error = Error>
{
}

/// `req` answered with `error` at once: the inner service never sees it.
pub fn refuse_now<F>(req: ServiceRequest, error: &impl ResponseError) -> Either<Ready<Answer>, F> {
    let response = req.into_response(error.error_response());
    Either::Left(std::future::ready(Ok(response)))
}
