//! The actix-web floor of `scripts/bench-instructions.sh`: the least an
//! HTTP server of stockd's build can do for one reservation, so stockd's own
//! instructions per reservation have something to be judged against.
//!
//! It is built in stockd's crate on purpose: the same actix-web features, the
//! same release profile and the same global allocator (mimalloc, as
//! `src/main.rs`), so what it costs is what actix-web and serde cost stockd
//! before any of stockd's work. It answers `POST /v1/skus/{sku_id}/reservations`
//! with a body of the reservation's JSON shape (serde both ways) and the 201
//! answer's `Location` header, and stores nothing.
//!
//! `cargo run --release --example actix_floor -- 127.0.0.1:18080`

use std::process::ExitCode;

use actix_web::http::header;
use actix_web::{web, App, HttpResponse, HttpServer};
use serde::{Deserialize, Serialize};

/// As `src/main.rs`: the allocator is part of what a request costs.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The body stockd's reserve route reads (`roles::api::views::ReserveBody`).
#[derive(Deserialize)]
struct ReserveBody {
    request_id: String,
    user_id: u64,
    count: i64,
}

/// The fields of stockd's 201 answer (`roles::api::views::ReservationView`),
/// so the answer has its size.
#[derive(Serialize)]
struct ReservationView<'a> {
    request_id: &'a str,
    sku_id: u64,
    user_id: u64,
    count: i64,
    status: &'static str,
    expires_at: &'static str,
}

/// An RFC 3339 time of stockd's length (`rfc3339_ms`): the floor keeps no clock.
const EXPIRES_AT: &str = "2026-12-06T20:00:00.000Z";

async fn reserve(sku_id: web::Path<u64>, body: web::Json<ReserveBody>) -> HttpResponse {
    let sku_id = sku_id.into_inner();
    let location = format!("/v1/skus/{sku_id}/reservations/{}", body.request_id);
    HttpResponse::Created()
        .insert_header((header::LOCATION, location))
        .json(ReservationView {
            request_id: &body.request_id,
            sku_id,
            user_id: body.user_id,
            count: body.count,
            status: "RESERVED",
            expires_at: EXPIRES_AT,
        })
}

fn main() -> ExitCode {
    let Some(bind) = std::env::args().nth(1) else {
        eprintln!("usage: actix_floor <address:port>");
        return ExitCode::from(2);
    };
    let served = actix_web::rt::System::new().block_on(async move {
        HttpServer::new(|| {
            App::new().route("/v1/skus/{sku_id}/reservations", web::post().to(reserve))
        })
        .bind(&bind)?
        .run()
        .await
    });
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("actix_floor: {err}");
            ExitCode::FAILURE
        }
    }
}
