//! Which credential each route needs (contract §6, "Who may call"): the one
//! table the gate, the OpenAPI test and the docs agree on. Decided from the
//! method and the route pattern alone (`routing.rs`: the route the router
//! runs), never from the raw path, before any extractor runs.

use actix_web::http::Method;

use crate::config::Scope;

/// What a request needs to pass the gate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Probes, this document, `/metrics` and the console's static files: no
    /// credential (the metrics and console are the admin surface: `admin.bind`).
    Open,
    /// `/v1/admin/*`: checked by the admin routes themselves (`admin.token`, or
    /// a client with scope `admin`).
    Admin,
    /// A known client with this scope.
    Client(Scope),
    /// `POST /v1/passes`: always a credential, also with `auth.required`
    /// false — a client with scope `passes` or `admin`, or `admin.token` —
    /// checked by the route itself (`routes/passes.rs`); the gate names and
    /// rate-limits a known client.
    Issuer,
    /// A known client, any scope: a method the route does not serve (the
    /// router answers 405, never to an anonymous caller).
    AnyClient,
    /// No route: the gate itself answers 404 (401 to an anonymous caller when
    /// clients are required); the router never sees the request.
    NoRoute,
}

/// The probes: open, and never rate limited (load balancers and kubelets).
pub const PROBE_ROUTES: [&str; 2] = ["/livez", "/readyz"];

/// The documents of the API and its events: open to anyone.
const DOCUMENT_ROUTES: [&str; 2] = ["/openapi.json", "/asyncapi.json"];

/// The admin surface besides `/v1/admin/*`: no client needed (it lives on
/// `admin.bind` in production), and not rate limited.
const ADMIN_SURFACE_ROUTES: [&str; 4] = [
    "/metrics",
    "/console",
    "/console/console.js",
    "/console/console.css",
];

/// Whether `pattern` is the admin surface: `/v1/admin/*` (checked by the
/// admin routes themselves), `/metrics` and the console.
pub fn is_admin_surface(pattern: &str) -> bool {
    pattern.starts_with(ADMIN_PREFIX) || ADMIN_SURFACE_ROUTES.contains(&pattern)
}

/// The prefix of the admin routes' patterns.
pub const ADMIN_PREFIX: &str = "/v1/admin/";

/// The route that issues admission passes: [`Access::Issuer`].
pub const ISSUER_ROUTE: (&str, &str) = ("POST", "/v1/passes");

/// The scope of each public route, by method and pattern.
pub const SCOPED_ROUTES: [(&str, &str, Scope); 12] = [
    ("POST", "/v1/skus/{sku_id}/reservations", Scope::Reserve),
    (
        "GET",
        "/v1/skus/{sku_id}/reservations/{request_id}",
        Scope::Read,
    ),
    (
        "POST",
        "/v1/skus/{sku_id}/reservations/{request_id}/confirm",
        Scope::Lifecycle,
    ),
    (
        "POST",
        "/v1/skus/{sku_id}/reservations/{request_id}/cancel",
        Scope::Lifecycle,
    ),
    (
        "POST",
        "/v1/skus/{sku_id}/reservations/{request_id}/extend",
        Scope::Lifecycle,
    ),
    ("POST", "/v1/orders", Scope::Reserve),
    ("GET", "/v1/orders/{order_id}", Scope::Read),
    ("POST", "/v1/orders/{order_id}/confirm", Scope::Lifecycle),
    ("POST", "/v1/orders/{order_id}/cancel", Scope::Lifecycle),
    ("POST", "/v1/orders/{order_id}/extend", Scope::Lifecycle),
    ("GET", "/v1/skus/{sku_id}", Scope::Read),
    ("POST", "/v1/passes", Scope::Passes),
];

/// What a `method` call of the route `pattern` (`None`: no route) needs.
pub fn access(method: &Method, pattern: Option<&str>) -> Access {
    let Some(pattern) = pattern else {
        return Access::NoRoute;
    };
    if pattern.starts_with(ADMIN_PREFIX) {
        return Access::Admin;
    }
    if PROBE_ROUTES.contains(&pattern)
        || DOCUMENT_ROUTES.contains(&pattern)
        || is_admin_surface(pattern)
    {
        return Access::Open;
    }
    if (method.as_str(), pattern) == ISSUER_ROUTE {
        return Access::Issuer;
    }
    SCOPED_ROUTES
        .iter()
        .find(|(m, p, _)| *p == pattern && method.as_str() == *m)
        .map_or(Access::AnyClient, |(_, _, scope)| Access::Client(*scope))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_route_needs_its_scope() {
        let reservation = "/v1/skus/{sku_id}/reservations/{request_id}";
        let cases = [
            (
                Method::POST,
                "/v1/skus/1/reservations",
                Some("/v1/skus/{sku_id}/reservations"),
                Access::Client(Scope::Reserve),
            ),
            (
                Method::GET,
                "/v1/skus/1/reservations/a",
                Some(reservation),
                Access::Client(Scope::Read),
            ),
            (
                Method::DELETE,
                "/v1/skus/1/reservations/a",
                Some(reservation),
                Access::AnyClient,
            ),
            (
                Method::GET,
                "/v1/skus/1",
                Some("/v1/skus/{sku_id}"),
                Access::Client(Scope::Read),
            ),
            (Method::GET, "/nope", None, Access::NoRoute),
            (
                Method::POST,
                "/v1/skus/1/reservation%73",
                None,
                Access::NoRoute,
            ),
            (Method::PUT, "/v1/%61dmin/skus/1", None, Access::NoRoute),
            (
                Method::POST,
                "/v1/passes",
                Some("/v1/passes"),
                Access::Issuer,
            ),
            (
                Method::GET,
                "/v1/passes",
                Some("/v1/passes"),
                Access::AnyClient,
            ),
            (Method::GET, "/livez", Some("/livez"), Access::Open),
            (Method::GET, "/readyz", Some("/readyz"), Access::Open),
            (
                Method::GET,
                "/openapi.json",
                Some("/openapi.json"),
                Access::Open,
            ),
            (
                Method::GET,
                "/console/console.js",
                Some("/console/console.js"),
                Access::Open,
            ),
            (
                Method::PUT,
                "/v1/admin/skus/1",
                Some("/v1/admin/skus/{sku_id}"),
                Access::Admin,
            ),
        ];
        for (method, path, pattern, want) in cases {
            assert_eq!(access(&method, pattern), want, "{method} {path}");
        }
        let lifecycle = "/v1/skus/{sku_id}/reservations/{request_id}/confirm";
        assert_eq!(
            access(&Method::POST, Some(lifecycle)),
            Access::Client(Scope::Lifecycle)
        );
    }
}
