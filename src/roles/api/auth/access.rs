//! Which credential each route needs (contract §6, "Who may call"): the one
//! table the gate, the OpenAPI test and the docs agree on. Decided from the
//! method and the matched route pattern, before any extractor runs.

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
    /// A known client, any scope: a path or method no route serves (it then
    /// answers 404 or 405, never to an anonymous caller).
    AnyClient,
}

/// Paths that never need a client.
const OPEN_PATHS: [&str; 5] = [
    "/livez",
    "/readyz",
    "/openapi.json",
    "/asyncapi.json",
    "/metrics",
];

/// The scope of each public route, by method and pattern.
pub const SCOPED_ROUTES: [(&str, &str, Scope); 11] = [
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
];

/// What `method path` (matched as `pattern`, when a route matches) needs.
pub fn access(method: &Method, path: &str, pattern: Option<&str>) -> Access {
    if OPEN_PATHS.contains(&path) || path == "/console" || path.starts_with("/console/") {
        return Access::Open;
    }
    if path.starts_with("/v1/admin/") {
        return Access::Admin;
    }
    let Some(pattern) = pattern else {
        return Access::AnyClient;
    };
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
            (Method::GET, "/nope", None, Access::AnyClient),
            (Method::GET, "/livez", Some("/livez"), Access::Open),
            (Method::GET, "/readyz", Some("/readyz"), Access::Open),
            (
                Method::GET,
                "/openapi.json",
                Some("/openapi.json"),
                Access::Open,
            ),
            (Method::GET, "/console/console.js", None, Access::Open),
            (Method::PUT, "/v1/admin/skus/1", None, Access::Admin),
        ];
        for (method, path, pattern, want) in cases {
            assert_eq!(access(&method, path, pattern), want, "{method} {path}");
        }
        let lifecycle = "/v1/skus/{sku_id}/reservations/{request_id}/confirm";
        assert_eq!(
            access(
                &Method::POST,
                "/v1/skus/1/reservations/a/confirm",
                Some(lifecycle)
            ),
            Access::Client(Scope::Lifecycle)
        );
    }
}
