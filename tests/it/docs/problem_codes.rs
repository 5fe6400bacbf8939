//! docs/errors.md's table of problem codes is the API's: one row per code the
//! code can answer, with the HTTP status it answers it with, and no row for a
//! code that no longer exists. Clients switch on these codes.
//!
//! The codes come from `ApiError` itself: one value of every variant, kept
//! complete by an exhaustive `match` (a new variant does not compile here until
//! it is listed, and then its code must be documented).

use std::collections::BTreeMap;

use actix_web::ResponseError;
use stockd::roles::api::problem::ApiError;

use super::{at, code_spans, read, tables};

const ERRORS: &str = "docs/errors.md";

/// One value of every variant of `ApiError`.
fn every_error() -> Vec<ApiError> {
    use ApiError::*;
    let all = vec![
        InvalidRequest(String::new()),
        Unauthorized,
        Unauthenticated,
        Forbidden("read"),
        SkuNotFound(1),
        ReservationNotFound,
        OrderNotFound,
        SoldOut,
        InsufficientStock { available: 1 },
        LimitExceeded {
            bought: 1,
            limit: 1,
        },
        LapseLimit { lapsed: 1, max: 1 },
        IdempotencyMismatch,
        ReservationReleased,
        ReservationConfirmed,
        ReservationRejected,
        OrderLine,
        ExtensionLimit(1),
        OrderRefused {
            sku_id: 1,
            refusal: Box::new(SoldOut),
        },
        BelowReserved(String::new()),
        BucketsLocked(String::new()),
        Stale {
            expected: 1,
            current: 0,
        },
        AdjustmentMismatch(String::new()),
        Conflict(String::new()),
        Unavailable(String::new()),
        RateLimited {
            retry_after_secs: 1,
        },
        RouteNotFound,
        MethodNotAllowed("GET"),
        UnsupportedMediaType,
        IdTaken,
        HoldBudgetExceeded { live: 4, budget: 5 },
        SaleNotStarted {
            opens_at_ms: 1,
            retry_after_secs: 1,
        },
        SaleEnded,
        PassRequired,
        SaleOpen(String::new()),
        PassInvalid(""),
        PassExpired(""),
        PassUsed,
        PassesNotConfigured,
    ];
    all.iter().for_each(listed);
    all
}

/// Compiles only while every variant is named: the list above stays whole.
fn listed(e: &ApiError) {
    use ApiError::*;
    match e {
        InvalidRequest(_) | Unauthorized | Unauthenticated | Forbidden(_) | SkuNotFound(_) => {}
        ReservationNotFound | OrderNotFound | SoldOut | InsufficientStock { .. } => {}
        LimitExceeded { .. } | LapseLimit { .. } | IdempotencyMismatch => {}
        ReservationReleased | ReservationConfirmed | ReservationRejected | OrderLine => {}
        ExtensionLimit(_) | OrderRefused { .. } | BelowReserved(_) | BucketsLocked(_) => {}
        Stale { .. } | AdjustmentMismatch(_) | Conflict(_) | Unavailable(_) => {}
        RateLimited { .. } | RouteNotFound | MethodNotAllowed(_) | UnsupportedMediaType => {}
        IdTaken | HoldBudgetExceeded { .. } => {}
        SaleNotStarted { .. } | SaleEnded | PassRequired | SaleOpen(_) => {}
        PassInvalid(_) | PassExpired(_) | PassUsed | PassesNotConfigured => {}
    }
}

#[test]
fn the_error_table_lists_every_problem_code_with_its_status() {
    let code: BTreeMap<String, u16> = every_error()
        .iter()
        .map(|e| (e.code().to_string(), e.status_code().as_u16()))
        .collect();
    let text = read(ERRORS);
    let table = tables(&text)
        .into_iter()
        .find(|t| t.first_header_is("code"))
        .expect("docs/errors.md has a table headed `code`");
    let mut bad = Vec::new();
    let mut documented = BTreeMap::new();
    for (line, cells) in &table.rows {
        let name = code_spans(&cells[0]).concat();
        let status: u16 = cells[1].parse().unwrap_or(0);
        match code.get(&name) {
            None => bad.push(format!(
                "{}: `{name}` is no code of ApiError",
                at(ERRORS, *line)
            )),
            Some(s) if *s != status => bad.push(format!(
                "{}: `{name}` is answered with {s}, the table says {}",
                at(ERRORS, *line),
                cells[1]
            )),
            Some(_) => {}
        }
        documented.insert(name, status);
    }
    for name in code.keys().filter(|c| !documented.contains_key(*c)) {
        bad.push(format!("{ERRORS}: no row for code `{name}`"));
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}
