//! Request count and latency per route pattern and status. The label is the
//! matched pattern (`/v1/skus/{sku_id}/reservations`), never the raw path, so
//! the number of series stays bounded whatever clients send.

use std::future::Future;
use std::time::Instant;

use actix_web::body::BoxBody;
use actix_web::dev::{Service, ServiceRequest, ServiceResponse};
use actix_web::Error;

/// `wrap_fn` middleware body.
pub fn record<S>(
    req: ServiceRequest,
    srv: &S,
) -> impl Future<Output = Result<ServiceResponse<BoxBody>, Error>>
where
    S: Service<ServiceRequest, Response = ServiceResponse<BoxBody>, Error = Error>,
{
    let started = Instant::now();
    let call = srv.call(req);
    async move {
        let response = call.await?;
        let route = response
            .request()
            .match_pattern()
            .unwrap_or_else(|| "unmatched".to_string());
        let status = response.status().as_u16().to_string();
        metrics::counter!("stockd_http_requests_total", "route" => route.clone(), "status" => status).increment(1);
        metrics::histogram!("stockd_http_request_duration_seconds", "route" => route)
            .record(started.elapsed().as_secs_f64());
        Ok(response)
    }
}
