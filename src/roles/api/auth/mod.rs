//! Who may call the public API (`auth.*`, `limits.per_client_*`; contract §6,
//! "Who may call"). A request names its client by `Authorization: Bearer
//! <token>` (looked up by the token's SHA-256, `clients.rs`) or by a verified
//! TLS client certificate ([`PeerSubject`]). The gate (`gate.rs`) runs as a
//! middleware before any extractor, so a refused call reads and writes nothing.
//!
//! - `access.rs`: which scope each route needs;
//! - `clients.rs`: the client table and the constant-time token lookup;
//! - `gate.rs`: the middleware (401, 403, 404 without a route, the per-client 429);
//! - `granted.rs`: the scope each handler states and checks again;
//! - `trail.rs`: confirm/cancel and refusals in the audit log.

mod access;
mod clients;
mod gate;
mod granted;
mod trail;

pub use access::{
    access, is_admin_surface, Access, ADMIN_PREFIX, ISSUER_ROUTE, PROBE_ROUTES, SCOPED_ROUTES,
};
pub use clients::{sha256_hex, ClientName, ClientTable, Known};
pub use gate::{guard, ANONYMOUS};
pub use granted::{Granted, Lifecycle, NeedsScope, Read, Reserve};

use actix_web::http::header;
use actix_web::{HttpMessage, HttpRequest};

use super::ip_limit::RateLimiter;
use crate::config::{Scope, Settings};

/// The subject of the client certificate a TLS listener verified for this
/// connection (mutual TLS, `http.tls.client_ca_file`): its subject's Common
/// Name, kept as connection data by `tls::remember_peer_subject` only once the
/// chain was verified; a client whose `cert_subject` equals it is
/// authenticated without a token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerSubject(pub String);

/// The clients, whether one is required, and their rate limit.
pub struct Gate {
    /// `auth.required`: refuse a public call that names no known client.
    pub required: bool,
    pub clients: ClientTable,
    /// `limits.per_client_*`, keyed by the client's entry.
    limiter: RateLimiter<usize>,
}

impl Gate {
    /// Builds the gate; says once, in a WARN line, when the public API is open.
    pub fn from_settings(settings: &Settings) -> Self {
        let auth = &settings.auth;
        if !auth.required {
            tracing::warn!(
                clients = auth.clients.len(),
                "auth.required is false: anyone reaching the public API may reserve, confirm \
                 and cancel; set it true outside a laptop (docs/operations.md, \"Client tokens\")"
            );
        }
        let limits = &settings.limits;
        Self {
            required: auth.required,
            clients: ClientTable::new(&auth.clients),
            limiter: RateLimiter::new(limits.per_client_rps, limits.per_client_burst),
        }
    }

    /// Who the request says it comes from: a verified certificate first, then
    /// the bearer token.
    pub fn identify(&self, req: &HttpRequest) -> Caller {
        let subject = peer_subject(req);
        if let Some(known) = subject.as_ref().and_then(|s| self.clients.by_subject(&s.0)) {
            return Caller::Client(known);
        }
        match bearer_token(req) {
            Some(token) => self
                .clients
                .by_token(token)
                .map_or(Caller::Unknown, Caller::Client),
            None if subject.is_some() => Caller::Unknown,
            None => Caller::Anonymous,
        }
    }

    /// The name of the request's client when it is known and has scope `admin`.
    pub fn admin_client(&self, req: &HttpRequest) -> Option<std::sync::Arc<str>> {
        match self.identify(req) {
            Caller::Client(known) if known.may(Scope::Admin) => Some(known.name),
            _ => None,
        }
    }
}

/// What a request presented.
#[derive(Debug, Clone)]
pub enum Caller {
    /// No token and no client certificate.
    Anonymous,
    /// A known client.
    Client(Known),
    /// A token or certificate subject no client has.
    Unknown,
}

/// The verified certificate subject of the request's connection, if any.
fn peer_subject(req: &HttpRequest) -> Option<PeerSubject> {
    if let Some(subject) = req.conn_data::<PeerSubject>() {
        return Some(subject.clone());
    }
    req.extensions().get::<PeerSubject>().cloned()
}

/// The token of `Authorization: Bearer <token>` (the scheme in any case).
pub fn bearer_token(req: &HttpRequest) -> Option<&str> {
    let value = req.headers().get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim())
        .filter(|t| !t.is_empty())
}
