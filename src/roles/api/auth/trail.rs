//! The public API's part of the audit trail (tracing target `audit`, as the
//! admin surface's in `roles/api/audit.rs`):
//! - every confirm and cancel, with the client that asked (`anonymous` when
//!   `auth.required` is false and no token was sent), the path and the status:
//!   who marked a reservation paid or gave its units back;
//! - refused client logins (401 and 403), counted in
//!   `stockd_client_auth_refused_total{reason}` and logged at most once per
//!   `REFUSED_LOG_EVERY_MS` with the number since the last line.
//!
//! The client is named by its configured `name`, never by its token.

use actix_web::http::Method;

use crate::roles::api::audit::Throttle;

/// Refused client logins since the last line about them.
static CLIENT_REFUSALS: Throttle = Throttle::new();

/// Why a caller was refused (the metric's `reason` label).
#[derive(Debug, Clone, Copy)]
pub enum Refusal {
    /// No `Authorization: Bearer` header and no verified client certificate.
    Missing,
    /// A token (or certificate subject) no client has.
    Unknown,
    /// A known client without the route's scope (403).
    Scope,
}

impl Refusal {
    fn as_str(self) -> &'static str {
        match self {
            Self::Missing => "missing",
            Self::Unknown => "unknown",
            Self::Scope => "scope",
        }
    }
}

/// What a refused request was; `client` is the known client's name (403 only).
pub struct Refused<'a> {
    pub reason: Refusal,
    pub client: Option<&'a str>,
    pub client_ip: &'a str,
    pub method: &'a Method,
    pub path: &'a str,
}

/// Counts a refused login and logs it unless a line was written less than a
/// second ago.
pub fn refused(what: &Refused<'_>) {
    metrics::counter!("stockd_client_auth_refused_total", "reason" => what.reason.as_str())
        .increment(1);
    let Some(refusals) = CLIENT_REFUSALS.tick() else {
        return;
    };
    tracing::warn!(target: "audit", event = "client.auth_refused",
        reason = what.reason.as_str(), client = what.client.unwrap_or("none"),
        client.ip = %what.client_ip, http.method = %what.method, http.path = %what.path,
        refusals, "client authentication refused");
}

/// One confirm or cancel and how it ended.
pub fn lifecycle(client: &str, client_ip: &str, path: &str, status: u16) {
    tracing::info!(target: "audit", event = "reservation.lifecycle", client,
        client.ip = %client_ip, http.path = %path, http.status = status,
        "reservation lifecycle call");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::roles::api::audit::capture;

    #[test]
    fn a_lifecycle_call_and_a_burst_of_refusals_leave_named_audit_events() {
        let (captured, _guard) = capture::audit_log();
        lifecycle(
            "orders",
            "198.51.100.7",
            "/v1/skus/1/reservations/a/confirm",
            200,
        );
        for _ in 0..50 {
            refused(&Refused {
                reason: Refusal::Scope,
                client: Some("reader"),
                client_ip: "198.51.100.8",
                method: &Method::POST,
                path: "/v1/skus/1/reservations/a/cancel",
            });
        }
        let (log, events) = captured.audit_events();
        let call = &events[0]["fields"];
        assert_eq!(call["event"], "reservation.lifecycle");
        assert_eq!(call["client"], "orders");
        assert_eq!(call["http.status"], 200);
        let refusals: Vec<_> = events
            .iter()
            .filter(|e| e["fields"]["event"] == "client.auth_refused")
            .collect();
        assert_eq!(refusals.len(), 1, "at most one line a second: {log}");
        assert_eq!(refusals[0]["fields"]["client"], "reader");
        assert_eq!(refusals[0]["fields"]["reason"], "scope");
    }
}
