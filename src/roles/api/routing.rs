//! The route a request means: one answer, found once per request by the
//! outermost middleware, for everything that classifies a request — the auth
//! gate, the per-IP guard, the admin audit trail and the request metrics.
//!
//! Why not the raw path: actix routes the path *decoded* (every
//! percent-encoded byte but `%`, `/` and `+`), so `/v1/skus/1/reservation%73`
//! runs the reserve handler while the raw text matches no pattern. A gate that
//! classified the raw text waved such a request through whatever the client's
//! scope (issue 48). Here the pattern is looked up on the decoded path, as the
//! router does, and then the raw path must spell every literal segment of
//! that pattern exactly (`skus`, `reservations`, `admin` …): a request that
//! spells one with a percent-encoded byte matches no route ([`None`]), and
//! the gate refuses every request without a route (404), so the router never
//! sees it. Id segments (`{sku_id}`, `{request_id}` …) keep their
//! percent-encoding, as contract §6.1 allows.
//!
//! The pattern is answered as a `&'static str`, one per route for the life of
//! the process ([`interned`]): every reader of a request's route (the four
//! middlewares, the request metrics' label) then copies a pointer, not the
//! text, and the metrics bind their series to it once (`request_series.rs`).

use std::sync::RwLock;

use actix_web::HttpRequest;

/// The pattern of the route `req` is routed to (`/v1/skus/{sku_id}`), or
/// `None` when no route matches, or when the raw path spells a literal
/// segment of the matching route differently.
pub fn route_of(req: &HttpRequest) -> Option<&'static str> {
    let decoded = req.match_info().as_str();
    let pattern = req.resource_map().match_pattern(decoded)?;
    spelled_as(req.path(), &pattern).then(|| interned(&pattern))
}

/// The patterns seen so far, each kept once for the life of the process:
/// they are the route table's (a few dozen), whatever clients send.
static PATTERNS: RwLock<Vec<&'static str>> = RwLock::new(Vec::new());

/// `pattern` as the one `&'static str` kept for it.
fn interned(pattern: &str) -> &'static str {
    let known = |kept: &[&'static str]| kept.iter().copied().find(|&p| p == pattern);
    if let Some(kept) = known(&PATTERNS.read().expect("lock poisoned")) {
        return kept;
    }
    let mut kept = PATTERNS.write().expect("lock poisoned");
    known(&kept).unwrap_or_else(|| {
        let leaked: &'static str = Box::leak(pattern.into());
        kept.push(leaked);
        leaked
    })
}

/// Whether the raw `path` has the segments of `pattern`, each literal
/// segment byte for byte (a segment with a `{…}` is an id: anything goes).
fn spelled_as(path: &str, pattern: &str) -> bool {
    let mut raw = path.split('/');
    let mut wanted = pattern.split('/');
    loop {
        match (raw.next(), wanted.next()) {
            (None, None) => return true,
            (Some(segment), Some(literal)) => {
                if !literal.contains('{') && segment != literal {
                    return false;
                }
            }
            _ => return false,
        }
    }
}

#[cfg(test)]
mod tests {
    use actix_web::test as http_test;
    use actix_web::{web, App, HttpResponse};

    use super::*;

    #[test]
    fn a_pattern_is_kept_once() {
        let first = interned(&String::from("/v1/skus/{sku_id}/interned"));
        let again = interned(&String::from("/v1/skus/{sku_id}/interned"));
        assert_eq!(first, "/v1/skus/{sku_id}/interned");
        assert!(std::ptr::eq(first, again));
    }

    #[test]
    fn literal_segments_must_be_spelled_as_the_route_spells_them() {
        let route = "/v1/skus/{sku_id}/reservations/{request_id}";
        assert!(spelled_as("/v1/skus/1/reservations/a", route));
        assert!(spelled_as("/v1/skus/%31/reservations/%2E%2E", route));
        assert!(!spelled_as("/v1/skus/1/reservation%73/a", route));
        assert!(!spelled_as("/v1/sku%73/1/reservations/a", route));
        assert!(!spelled_as("/v1/skus/1/reservations/a/", route));
        assert!(!spelled_as("/v1/skus/1/reservations", route));
        assert!(!spelled_as("/%761/skus/1/reservations/a", route));
    }

    async fn routed(path: &str) -> Option<String> {
        let app = http_test::init_service(
            App::new()
                .wrap_fn(|req, srv| {
                    let route = route_of(req.request());
                    let call = actix_web::dev::Service::call(srv, req);
                    async move {
                        let mut response = call.await?;
                        let shown = route.unwrap_or("none");
                        response.headers_mut().insert(
                            actix_web::http::header::HeaderName::from_static("x-route"),
                            shown.parse().unwrap(),
                        );
                        Ok(response)
                    }
                })
                .route(
                    "/v1/skus/{sku_id}/reservations",
                    web::post().to(HttpResponse::Ok),
                )
                .route("/v1/admin/skus/{sku_id}", web::put().to(HttpResponse::Ok)),
        )
        .await;
        let req = http_test::TestRequest::post().uri(path).to_request();
        let response = http_test::call_service(&app, req).await;
        let route = response.headers().get("x-route").unwrap().to_str().unwrap();
        (route != "none").then(|| route.to_string())
    }

    /// The router runs a percent-encoded spelling of a route (it decodes
    /// before matching); the classification calls it no route, never another.
    #[actix_web::test]
    async fn an_encoded_literal_is_no_route_though_the_router_would_run_it() {
        let reserve = Some("/v1/skus/{sku_id}/reservations".to_string());
        assert_eq!(routed("/v1/skus/7/reservations").await, reserve);
        assert_eq!(routed("/v1/skus/%37/reservations").await, reserve);
        assert_eq!(routed("/v1/skus/7/reservation%73").await, None);
        assert_eq!(routed("/v1/sku%73/7/reservations").await, None);
        assert_eq!(routed("/v1/%61dmin/skus/7").await, None);
        assert_eq!(routed("/v1/skus%2F7/reservations").await, None);
        assert_eq!(routed("/v1/nothing").await, None);
    }
}
