//! The audit trail of the admin surface, as structured events under the
//! tracing target `audit` (route them to their own sink by target):
//! - every admin action (any non-GET `/v1/admin/*` call that passed the token
//!   check): who (a fingerprint of the token, never the token), what (method
//!   and route), which resource (path), from which client IP, and the result
//!   (HTTP status);
//! - every refused admin authentication (401), counted in
//!   `stockd_admin_auth_refused_total` and logged at most once per
//!   [`REFUSED_LOG_EVERY_MS`] with the number of refusals since the last line,
//!   so a password-spraying bot cannot flood the log.
//!
//! The public API's own events (confirm and cancel with the client's name,
//! refused client logins) are written by its gate (`auth/trail.rs`), which
//! knows the client; they share [`Throttle`] and the target.
//!
//! It is a middleware, so a new admin route is audited without remembering to.

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};

use actix_web::dev::ServiceRequest;
use actix_web::http::{header, Method, StatusCode};
use actix_web::web;

use super::middleware::{Answer, Inner};
use super::ApiState;
use crate::clock::unix_ms;

/// Least time between two log lines about refused admin logins.
pub const REFUSED_LOG_EVERY_MS: u64 = 1000;

/// Refused admin logins since the last line about them.
static ADMIN_REFUSALS: Throttle = Throttle::new();

/// At most one log line per [`REFUSED_LOG_EVERY_MS`] about a kind of event,
/// carrying how many happened since the last line (refused logins: admin
/// here, clients in `auth`).
pub struct Throttle {
    since_log: AtomicU64,
    logged_at_ms: AtomicU64,
}

impl Default for Throttle {
    fn default() -> Self {
        Self::new()
    }
}

impl Throttle {
    pub const fn new() -> Self {
        Self {
            since_log: AtomicU64::new(0),
            logged_at_ms: AtomicU64::new(0),
        }
    }

    /// Counts one event; `Some(events since the last line)` when a line is due.
    pub fn tick(&self) -> Option<u64> {
        let pending = self.since_log.fetch_add(1, Ordering::SeqCst) + 1;
        let now = unix_ms();
        let last = self.logged_at_ms.load(Ordering::SeqCst);
        if now.saturating_sub(last) < REFUSED_LOG_EVERY_MS
            || self
                .logged_at_ms
                .compare_exchange(last, now, Ordering::SeqCst, Ordering::SeqCst)
                .is_err()
        {
            return None;
        }
        Some(self.since_log.swap(0, Ordering::SeqCst).max(pending.min(1)))
    }
}

/// A stable, non-reversible name for a token (FNV-1a 64 of it): tells tokens
/// apart in the trail without ever writing one down.
pub fn fingerprint(token: &str) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in token.bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("tok-{:08x}", hash >> 32)
}

/// `wrap_fn` middleware body.
pub fn record<S: Inner>(req: ServiceRequest, srv: &S) -> impl Future<Output = Answer> {
    // Only admin calls are audited: everything else (the hot path) passes
    // straight through. The route is the one the router runs (`routing.rs`),
    // so no spelling of an admin path escapes the trail.
    let route = super::http_metrics::matched_route(req.request());
    let admin = route.is_some_and(|route| route.starts_with(super::auth::ADMIN_PREFIX));
    let seen = admin.then(|| Seen::of(&req));
    let call = srv.call(req);
    async move {
        let response = call.await?;
        let Some(Seen {
            method,
            path,
            actor,
            client,
        }) = seen
        else {
            return Ok(response);
        };
        let status = response.status();
        let route = route.unwrap_or_default();
        if status == StatusCode::UNAUTHORIZED {
            refused(&method, &path, &client, actor.is_some());
        } else if method != Method::GET {
            tracing::info!(target: "audit", event = "admin.action",
                actor = actor.as_deref().unwrap_or("none"), client.ip = %client,
                http.method = %method, http.route = %route, http.path = %path,
                http.status = status.as_u16(), "admin action");
        }
        Ok(response)
    }
}

/// What the trail records of an admin request, taken before it is handled.
struct Seen {
    method: Method,
    path: String,
    actor: Option<String>,
    client: String,
}

impl Seen {
    fn of(req: &ServiceRequest) -> Self {
        Self {
            method: req.method().clone(),
            path: req.path().to_string(),
            actor: req
                .headers()
                .get(header::AUTHORIZATION)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.strip_prefix("Bearer "))
                .map(fingerprint),
            client: req
                .app_data::<web::Data<ApiState>>()
                .and_then(|state| state.trusted.client_ip(req.request()))
                .map_or_else(|| "unknown".to_string(), |ip| ip.to_string()),
        }
    }
}

fn refused(method: &Method, path: &str, client: &str, presented: bool) {
    metrics::counter!("stockd_admin_auth_refused_total").increment(1);
    let Some(refusals) = ADMIN_REFUSALS.tick() else {
        return;
    };
    tracing::warn!(target: "audit", event = "admin.auth_refused", client.ip = %client,
        http.method = %method, http.path = %path, token_presented = presented,
        refusals, "admin authentication refused");
}

/// For the tests of the audit log's writers (here and `auth/trail.rs`): the
/// JSON lines a test's events become, as they would be shipped.
#[cfg(test)]
pub(super) mod capture {
    use std::sync::{Arc, Mutex};

    use tracing::subscriber::DefaultGuard;

    /// Collects what the subscriber writes.
    #[derive(Clone, Default)]
    pub struct Captured(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Captured {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl Captured {
        /// The whole log so far, and its events of target `audit`.
        pub fn audit_events(&self) -> (String, Vec<serde_json::Value>) {
            let log = String::from_utf8(self.0.lock().unwrap().clone()).unwrap();
            let events = log
                .lines()
                .map(|l| serde_json::from_str(l).unwrap())
                .filter(|e: &serde_json::Value| e["target"] == "audit")
                .collect();
            (log, events)
        }
    }

    /// JSON logging into a [`Captured`] for as long as the guard lives.
    pub fn audit_log() -> (Captured, DefaultGuard) {
        let captured = Captured::default();
        let writer = captured.clone();
        let subscriber = tracing_subscriber::fmt()
            .json()
            .with_writer(move || writer.clone())
            .finish();
        (captured, tracing::subscriber::set_default(subscriber))
    }
}

#[cfg(test)]
mod tests {
    use actix_web::test as http_test;
    use actix_web::{web, App, HttpResponse};

    use super::capture;
    use super::{fingerprint, record};

    #[actix_web::test]
    async fn an_admin_action_and_a_refused_login_leave_audit_events() {
        let (captured, _guard) = capture::audit_log();
        let app = http_test::init_service(
            App::new()
                .wrap_fn(record)
                .route("/v1/admin/skus/1", web::put().to(HttpResponse::Ok))
                .route(
                    "/v1/admin/reconcile",
                    web::post().to(HttpResponse::Unauthorized),
                ),
        )
        .await;
        let token = "an-admin-token-that-is-32-chars-long";
        let put = http_test::TestRequest::put()
            .uri("/v1/admin/skus/1")
            .insert_header(("authorization", format!("Bearer {token}")))
            .to_request();
        assert_eq!(http_test::call_service(&app, put).await.status(), 200);
        let refused = http_test::TestRequest::post()
            .uri("/v1/admin/reconcile")
            .insert_header(("authorization", "Bearer guess"))
            .to_request();
        assert_eq!(http_test::call_service(&app, refused).await.status(), 401);
        let (log, events) = captured.audit_events();
        let action = events
            .iter()
            .find(|e| e["fields"]["event"] == "admin.action")
            .expect("an audit event for the create");
        assert_eq!(action["fields"]["actor"], fingerprint(token));
        assert_eq!(action["fields"]["http.status"], 200);
        assert!(events
            .iter()
            .any(|e| e["fields"]["event"] == "admin.auth_refused"));
        assert!(
            !log.contains(token) && !log.contains("guess"),
            "no token in the log"
        );
    }

    #[test]
    fn fingerprints_are_stable_distinct_and_never_the_token() {
        let a = fingerprint("a-very-secret-admin-token-of-32-chars!");
        assert_eq!(a, fingerprint("a-very-secret-admin-token-of-32-chars!"));
        assert_ne!(a, fingerprint("another-secret-admin-token-of-32-chars"));
        assert!(!a.contains("secret"));
        assert_eq!(a.len(), "tok-".len() + 8);
    }
}
