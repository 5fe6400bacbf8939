//! The gate: a middleware in front of every route that decides, from the
//! headers and the matched pattern alone, whether the call may go on — before
//! any extractor reads the body and before any store is asked.
//!
//! With `auth.required` true: no client → 401 `UNAUTHENTICATED` (with
//! `WWW-Authenticate: Bearer`), a client without the route's scope → 403
//! `FORBIDDEN`. With it false, a call without a known client passes as
//! `anonymous` and scopes are not enforced (the API is open anyway). A known
//! client is then held to `limits.per_client_*` (429 `RATE_LIMITED`) and named
//! in the request's extensions ([`ClientName`]) for the metrics; confirm and
//! cancel go to the audit trail with the client's name.
//!
//! The route is the one the router runs (`routing.rs`); a request with no
//! route is refused here (404, or 401 without a client when one is required)
//! and never reaches the router. Each handler checks its scope once more
//! (`granted.rs`), so a classification slip fails closed.

use std::future::Future;
use std::sync::Arc;
use std::time::Instant;

use actix_web::dev::ServiceRequest;
use actix_web::{web, HttpMessage};
use futures_util::future::Either;

use super::trail::{self, Refusal, Refused};
use super::{access, Access, Caller, ClientName, Known};
use crate::config::Scope;
use crate::roles::api::middleware::{refuse_now, Answer, Inner};
use crate::roles::api::problem::ApiError;
use crate::roles::api::ApiState;

/// How the audit trail names a call without a known client.
pub const ANONYMOUS: &str = "anonymous";

/// The gate's answer for one request.
enum Verdict {
    /// Go on, as this client (`None`: anonymous); `lifecycle` when the call is
    /// a confirm or cancel the trail records.
    Pass {
        client: Option<Known>,
        lifecycle: bool,
    },
    /// Answer this error; `client` names a known client that was refused
    /// (403, 404, 429) for the metrics.
    Refuse {
        error: ApiError,
        client: Option<Arc<str>>,
    },
}

/// `wrap_fn` middleware body.
pub fn guard<S: Inner>(req: ServiceRequest, srv: &S) -> impl Future<Output = Answer> {
    match verdict(&req) {
        Verdict::Refuse { error, client } => {
            if let Some(name) = client {
                req.extensions_mut().insert(ClientName(name));
            }
            refuse_now(req, &error)
        }
        Verdict::Pass { client, lifecycle } => {
            let name = client.as_ref().map(|known| known.name.clone());
            if let Some(known) = client {
                req.extensions_mut().insert(ClientName(known.name.clone()));
                // What the handler's `Granted` extractor checks again.
                req.extensions_mut().insert(known);
            }
            let trail = lifecycle.then(|| (name, client_ip(&req), req.path().to_string()));
            let call = srv.call(req);
            Either::Right(async move {
                let response = call.await?;
                if let Some((client, ip, path)) = trail {
                    let name = client.as_deref().unwrap_or(ANONYMOUS);
                    trail::lifecycle(name, &ip, &path, response.status().as_u16());
                }
                Ok(response)
            })
        }
    }
}

fn verdict(req: &ServiceRequest) -> Verdict {
    let pass_anonymous = |lifecycle| Verdict::Pass {
        client: None,
        lifecycle,
    };
    let route = crate::roles::api::http_metrics::matched_route(req.request());
    let needs = access(req.method(), route);
    if matches!(needs, Access::Open | Access::Admin) {
        return pass_anonymous(false);
    }
    let no_route = |client| Verdict::Refuse {
        error: ApiError::RouteNotFound,
        client,
    };
    let Some(state) = req.app_data::<web::Data<ApiState>>() else {
        // No gate configured (a bare app): still never route a request the
        // classification found no route for; handlers check their scope.
        return match needs {
            Access::NoRoute => no_route(None),
            _ => pass_anonymous(false),
        };
    };
    let lifecycle = needs == Access::Client(Scope::Lifecycle);
    let gate = &state.auth;
    if needs == Access::Issuer {
        // The route checks the credential itself, whatever `auth.required`
        // says (`routes/passes.rs`): the admin token is no client here.
        return match gate.identify(req.request()) {
            Caller::Client(known) => within_limit(gate, known, false),
            _ => pass_anonymous(false),
        };
    }
    let known = match gate.identify(req.request()) {
        Caller::Client(known) => known,
        _ if !gate.required && needs == Access::NoRoute => return no_route(None),
        _ if !gate.required => return pass_anonymous(lifecycle),
        Caller::Anonymous => return refuse(req, Refusal::Missing, None),
        Caller::Unknown => return refuse(req, Refusal::Unknown, None),
    };
    if needs == Access::NoRoute {
        return no_route(Some(known.name));
    }
    if let Access::Client(scope) = needs {
        if gate.required && !known.may(scope) {
            return refuse(req, Refusal::Scope, Some((&known.name, scope)));
        }
    }
    within_limit(gate, known, lifecycle)
}

/// A known client goes on within `limits.per_client_*`, else 429.
fn within_limit(gate: &super::Gate, known: Known, lifecycle: bool) -> Verdict {
    if let Err(wait) = gate.limiter.check(known.index, Instant::now()) {
        let wait_ms = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX);
        return Verdict::Refuse {
            error: ApiError::rate_limited("client", wait_ms),
            client: Some(known.name),
        };
    }
    Verdict::Pass {
        client: Some(known),
        lifecycle,
    }
}

/// Records the refusal in the trail and answers 401 (or 403 for `scoped`: the
/// known client and the scope it lacks).
fn refuse(req: &ServiceRequest, reason: Refusal, scoped: Option<(&str, Scope)>) -> Verdict {
    trail::refused(&Refused {
        reason,
        client: scoped.map(|(name, _)| name),
        client_ip: &client_ip(req),
        method: req.method(),
        path: req.path(),
    });
    match scoped {
        Some((name, scope)) => Verdict::Refuse {
            error: ApiError::Forbidden(scope.as_str()),
            client: Some(Arc::from(name)),
        },
        None => Verdict::Refuse {
            error: ApiError::Unauthenticated,
            client: None,
        },
    }
}

fn client_ip(req: &ServiceRequest) -> String {
    req.app_data::<web::Data<ApiState>>()
        .and_then(|state| state.trusted.client_ip(req.request()))
        .map_or_else(|| "unknown".to_string(), |ip| ip.to_string())
}
