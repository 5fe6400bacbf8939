//! The per-IP limit as a middleware on every public path (contract §12): a
//! refused request is answered 429 before any extractor or handler runs, so it
//! costs neither a body parse nor a Redis call. Only the probes (`/livez`,
//! `/readyz`) and the admin surface (`/v1/admin/*`, `/metrics`, the console:
//! its token and its listener) are not limited. A request is classified by
//! the route the router runs (`routing.rs`), so no spelling of a public path
//! escapes the limit; a path with no route is limited too.

use std::future::Future;
use std::net::{IpAddr, Ipv6Addr};
use std::time::Instant;

use actix_web::dev::ServiceRequest;
use actix_web::web;
use futures_util::future::Either;

use super::auth;
use super::middleware::{refuse_now, Answer, Inner};
use super::problem::ApiError;
use super::ApiState;

/// `wrap_fn` middleware body.
pub fn guard<S: Inner>(req: ServiceRequest, srv: &S) -> impl Future<Output = Answer> {
    match refusal(&req) {
        Some(refused) => refuse_now(req, &refused),
        None => Either::Right(srv.call(req)),
    }
}

/// Bits of an IPv6 address one host is assumed to own: a /64 is what an ISP
/// hands one subscriber (RFC 6177), so a host that rotates through its
/// 2^64 addresses still has one bucket.
const IPV6_HOST_PREFIX_BITS: u32 = 64;

/// What one bucket counts: an IPv4 address, or an IPv6 address's /64.
fn limit_key(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(_) => ip,
        IpAddr::V6(v6) => {
            let mask = u128::MAX << (128 - IPV6_HOST_PREFIX_BITS);
            IpAddr::V6(Ipv6Addr::from(u128::from(v6) & mask))
        }
    }
}

fn limited(route: Option<&str>) -> bool {
    route.is_none_or(|route| !auth::PROBE_ROUTES.contains(&route) && !auth::is_admin_surface(route))
}

fn refusal(req: &ServiceRequest) -> Option<ApiError> {
    if !limited(super::http_metrics::matched_route(req.request())) {
        return None;
    }
    let state = req.app_data::<web::Data<ApiState>>()?;
    if !state.ip_limiter.is_on() {
        return None;
    }
    let ip = state.trusted.client_ip(req.request())?;
    let wait = state
        .ip_limiter
        .check(limit_key(ip), Instant::now())
        .err()?;
    Some(ApiError::rate_limited(
        "ip",
        u64::try_from(wait.as_millis()).unwrap_or(u64::MAX),
    ))
}

#[cfg(test)]
mod tests {
    use super::{limit_key, limited};

    #[test]
    fn every_public_path_is_limited_but_the_probes_and_the_admin_surface() {
        for route in [
            Some("/v1/skus/{sku_id}/reservations"),
            Some("/v1/orders"),
            Some("/openapi.json"),
            Some("/asyncapi.json"),
            None,
        ] {
            assert!(limited(route), "{route:?}");
        }
        for route in ["/livez", "/readyz", "/metrics", "/v1/admin/skus/{sku_id}"] {
            assert!(!limited(Some(route)), "{route}");
        }
    }

    #[test]
    fn an_ipv6_host_is_limited_by_its_slash_64() {
        let a = limit_key("2001:db8:1:2:aaaa::1".parse().unwrap());
        let b = limit_key("2001:db8:1:2:ffff:1:2:3".parse().unwrap());
        let other = limit_key("2001:db8:1:3::1".parse().unwrap());
        assert_eq!(a, b);
        assert_ne!(a, other);
        let v4 = "203.0.113.9".parse().unwrap();
        assert_eq!(limit_key(v4), v4);
    }
}
