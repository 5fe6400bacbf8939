//! Each public handler states the scope it needs, as the first argument
//! `Granted<Reserve>` (as admin handlers take `Admin`): the gate has decided
//! before, from the route table (`access.rs`), and this checks the decision
//! again where the work is done. Should a route ever be classified wrongly,
//! the handler refuses instead of running: the gate fails open only if both
//! disagree with the router in the same way.
//!
//! With `auth.required` false every caller passes (contract §6.2). With it
//! true the gate has put the request's [`Known`] client in its extensions;
//! without one the handler answers 401, with one lacking the scope 403.
//!
//! The proof also says who asks, for ownership ([`Requester`], contract
//! §6.2 "Holds belong to their client"): with `auth.required` false anyone
//! (one anonymous client, even when a known token was sent); with it true the
//! client, or an operator when the client has scope `admin`.

use std::marker::PhantomData;

use actix_web::{web, FromRequest, HttpMessage, HttpRequest};

use super::Known;
use crate::config::Scope;
use crate::domain::Requester;
use crate::roles::api::problem::ApiError;
use crate::roles::api::ApiState;

/// A scope a handler can name as a type.
pub trait NeedsScope {
    const SCOPE: Scope;
}

/// Scope `reserve`.
pub struct Reserve;
/// Scope `read`.
pub struct Read;
/// Scope `lifecycle`.
pub struct Lifecycle;

impl NeedsScope for Reserve {
    const SCOPE: Scope = Scope::Reserve;
}
impl NeedsScope for Read {
    const SCOPE: Scope = Scope::Read;
}
impl NeedsScope for Lifecycle {
    const SCOPE: Scope = Scope::Lifecycle;
}

/// Proof, for the handler, that the caller may use scope `S`.
pub struct Granted<S: NeedsScope> {
    scope: PhantomData<S>,
    requester: Requester,
}

impl<S: NeedsScope> Granted<S> {
    /// Who asks, as holds are owned.
    pub fn requester(&self) -> &Requester {
        &self.requester
    }
}

impl<S: NeedsScope> FromRequest for Granted<S> {
    type Error = ApiError;
    type Future = std::future::Ready<Result<Self, ApiError>>;

    fn from_request(req: &HttpRequest, _: &mut actix_web::dev::Payload) -> Self::Future {
        std::future::ready(check(req, S::SCOPE).map(|requester| Granted {
            scope: PhantomData,
            requester,
        }))
    }
}

/// Whether the gate let a client with `scope` through (or clients are not
/// required), and who it is; refuses when the app has no gate at all.
fn check(req: &HttpRequest, scope: Scope) -> Result<Requester, ApiError> {
    let Some(state) = req.app_data::<web::Data<ApiState>>() else {
        return Err(ApiError::Unauthenticated);
    };
    if !state.auth.required {
        return Ok(Requester::Anyone);
    }
    match req.extensions().get::<Known>() {
        Some(known) if known.may(scope) && known.may(Scope::Admin) => {
            Ok(Requester::Operator(known.name.to_string()))
        }
        Some(known) if known.may(scope) => Ok(Requester::Client(known.name.to_string())),
        Some(_) => Err(ApiError::Forbidden(scope.as_str())),
        None => Err(ApiError::Unauthenticated),
    }
}
