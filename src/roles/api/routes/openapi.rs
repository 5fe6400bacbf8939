//! `GET /openapi.json`: the OpenAPI 3.1 description of the HTTP API (contract §6),
//! generated from the handlers' `#[utoipa::path]` attributes, the body types
//! of `views` and the markers of `contract`. Every problem response names the
//! `code` values it can carry, so a client generator gets the full error contract.
//!
//! The document is built once and served as is; `tests/it/openapi.rs` runs
//! schemathesis against a live api to keep it honest. With `admin.bind` set
//! the public listener serves [`public_document`] instead: the same without
//! the admin routes, the admin security scheme and what only they use, so the
//! public surface does not describe the operator one.

use std::collections::BTreeSet;
use std::sync::OnceLock;

use actix_web::{web, HttpResponse};
use serde_json::Value;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi};

use super::contract::{
    problem_response, problem_schema, Liveness, Readiness, ReconcileReport, SkuReconcileLine,
    StuckWhere, Verdict, ADMIN_SECURITY, CLIENT_SECURITY, PROBLEMS,
};
use super::{adjustments, admin, asyncapi, console, dlq, health, holds, lifecycle, passes, skus};
use crate::roles::api::ApiState;

#[derive(OpenApi)]
#[openapi(
    info(
        title = "stockd",
        description = "Flash-sale inventory: reserve, confirm and cancel units of a SKU.\n\n\
            Every error is an RFC 9457 `application/problem+json` body whose stable `code` \
            a client switches on (never on `detail`). Unknown routes answer 404 `NOT_FOUND`; \
            a method a route does not serve answers 405 `METHOD_NOT_ALLOWED` with `Allow`.\n\n\
            With `auth.required` (production) every route but the probes, `/metrics` and this \
            document needs `Authorization: Bearer <client token>` of a client with the scope \
            its `security` requirement names: 401 `UNAUTHENTICATED` without a known client, \
            403 `FORBIDDEN` without the scope, both before anything is read or written."
    ),
    paths(
        holds::reservation::reserve,
        holds::reservation::get,
        lifecycle::confirm_reservation,
        lifecycle::cancel_reservation,
        lifecycle::extend_reservation,
        holds::order::place,
        holds::order::get,
        lifecycle::confirm_order,
        lifecycle::cancel_order,
        lifecycle::extend_order,
        skus::get,
        passes::issue,
        admin::put_sku,
        admin::warmup,
        adjustments::adjust,
        adjustments::list,
        admin::reconcile_now,
        admin::last_reconcile,
        dlq::list,
        dlq::replay,
        console::overview,
        health::livez,
        health::readyz,
        asyncapi::serve,
        health::metrics,
        serve,
    ),
    components(schemas(
        Liveness,
        Readiness,
        ReconcileReport,
        SkuReconcileLine,
        Verdict,
        StuckWhere
    )),
    modifiers(&ProblemsAndSecurity),
    tags(
        (name = "reservations", description = "Reserve units and move reservations through their lifecycle"),
        (name = "orders", description = "Reserve several SKUs all-or-nothing and move the whole order through its lifecycle"),
        (name = "skus", description = "The buyer-facing stock view"),
        (name = "passes", description = "Admission passes a waiting room hands the buyers it lets through"),
        (name = "admin", description = "Operator routes; need the admin bearer token"),
        (name = "operations", description = "Probes, metrics and this document"),
    )
)]
pub struct ApiDoc;

/// The document as served (built on first use).
pub fn document() -> &'static str {
    static DOC: OnceLock<String> = OnceLock::new();
    DOC.get_or_init(|| {
        ApiDoc::openapi()
            .to_json()
            .expect("the OpenAPI document serializes")
    })
}

/// Paths of the admin surface (contract §13): served on the admin listener
/// alone when `admin.bind` is set.
const ADMIN_PATHS: [&str; 3] = ["/v1/admin/", "/metrics", "/console"];

/// [`document`] without the admin surface: no path under [`ADMIN_PATHS`], no
/// admin security scheme, no `admin` tag, and no component only they refer
/// to (built on first use).
pub fn public_document() -> &'static str {
    static DOC: OnceLock<String> = OnceLock::new();
    DOC.get_or_init(|| {
        let mut doc: Value = serde_json::from_str(document()).expect("the document is JSON");
        without_admin(&mut doc);
        serde_json::to_string(&doc).expect("the public document serializes")
    })
}

fn without_admin(doc: &mut Value) {
    let is_admin = |path: &str| ADMIN_PATHS.iter().any(|admin| path.starts_with(admin));
    let mut admin_refs = Vec::new();
    if let Some(paths) = doc["paths"].as_object_mut() {
        for (_, item) in paths.iter().filter(|(path, _)| is_admin(path)) {
            refs(item, &mut admin_refs);
        }
        paths.retain(|path, _| !is_admin(path));
        // No operation left names the admin scheme; make sure of it.
        for op in paths.values_mut().filter_map(Value::as_object_mut) {
            for op in op.values_mut() {
                if let Some(security) = op.get_mut("security").and_then(Value::as_array_mut) {
                    security.retain(|req| req.get(ADMIN_SECURITY).is_none());
                }
            }
        }
    }
    if let Some(tags) = doc["tags"].as_array_mut() {
        tags.retain(|tag| tag["name"] != "admin");
    }
    if let Some(schemes) = doc["components"]["securitySchemes"].as_object_mut() {
        schemes.remove(ADMIN_SECURITY);
    }
    // Drop the components the admin routes reached and nothing else does
    // (components no operation names, such as the 404 and 405 problems, stay).
    let mut public_refs = Vec::new();
    for (key, value) in doc.as_object().into_iter().flatten() {
        if key != "components" {
            refs(value, &mut public_refs);
        }
    }
    let admin_only: BTreeSet<String> = reach(doc, admin_refs)
        .difference(&reach(doc, public_refs))
        .cloned()
        .collect();
    for kind in ["schemas", "responses"] {
        if let Some(components) = doc["components"][kind].as_object_mut() {
            components
                .retain(|name, _| !admin_only.contains(&format!("/components/{kind}/{name}")));
        }
    }
}

/// The JSON pointers of `todo`, those their targets refer to, and so on.
fn reach(doc: &Value, mut todo: Vec<String>) -> BTreeSet<String> {
    let mut reached = BTreeSet::new();
    while let Some(pointer) = todo.pop() {
        if reached.insert(pointer.clone()) {
            if let Some(target) = doc.pointer(&pointer) {
                refs(target, &mut todo);
            }
        }
    }
    reached
}

/// Every `"$ref": "#/..."` under `value`, as a JSON pointer.
fn refs(value: &Value, into: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for (key, value) in map {
                match (key.as_str(), value.as_str()) {
                    ("$ref", Some(target)) => {
                        if let Some(pointer) = target.strip_prefix('#') {
                            into.push(pointer.to_string());
                        }
                    }
                    _ => refs(value, into),
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|item| refs(item, into)),
        _ => {}
    }
}

/// `GET /openapi.json`
#[utoipa::path(
    get,
    path = "/openapi.json",
    tag = "operations",
    operation_id = "openapi",
    responses(
        (status = 200, description = "This OpenAPI 3.1 document; with a separate admin \
         listener (`admin.bind`) the public one leaves the admin routes out",
         content_type = "application/json", body = Object),
    )
)]
pub async fn serve(state: web::Data<ApiState>) -> HttpResponse {
    // With `admin.bind` set this is the public listener (`RouteSet::Public`):
    // the admin one serves no document.
    let doc = match state.res.settings.admin.bind {
        Some(_) => public_document(),
        None => document(),
    };
    HttpResponse::Ok()
        .content_type("application/json")
        .body(doc)
}

/// Adds every problem schema and response, and the admin security scheme.
struct ProblemsAndSecurity;

impl Modify for ProblemsAndSecurity {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        for kind in PROBLEMS {
            components
                .schemas
                .insert(kind.name.to_string(), problem_schema(kind));
            components
                .responses
                .insert(kind.name.to_string(), problem_response(kind));
        }
        let bearer = HttpBuilder::new()
            .scheme(HttpAuthScheme::Bearer)
            .description(Some(
                "`Authorization: Bearer <admin token>` (config `admin.token`); \
                 with no token configured every admin call is 401",
            ))
            .build();
        components.add_security_scheme(ADMIN_SECURITY, SecurityScheme::Http(bearer));
        let client = HttpBuilder::new()
            .scheme(HttpAuthScheme::Bearer)
            .description(Some(
                "`Authorization: Bearer <client token>` of a client in `auth.clients` (the \
                 config holds the token's SHA-256); the requirement lists the scope the route \
                 needs: `reserve`, `read`, `lifecycle`, `passes` or `admin`. Enforced when \
                 `auth.required` is true (`POST /v1/passes` always needs a credential)",
            ))
            .build();
        components.add_security_scheme(CLIENT_SECURITY, SecurityScheme::Http(client));
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use actix_web::ResponseError;
    use serde_json::Value;

    use super::*;
    use crate::roles::api::auth::SCOPED_ROUTES;
    use crate::roles::api::problem::ApiError;
    use crate::roles::api::routes::contract::*;

    fn doc() -> Value {
        serde_json::from_str(document()).unwrap()
    }

    /// One value of every `ApiError` variant.
    fn every_error() -> Vec<ApiError> {
        vec![
            ApiError::InvalidRequest("x".into()),
            ApiError::Unauthorized,
            ApiError::Unauthenticated,
            ApiError::Forbidden("read"),
            ApiError::SkuNotFound(1),
            ApiError::ReservationNotFound,
            ApiError::OrderNotFound,
            ApiError::SoldOut,
            ApiError::InsufficientStock { available: 1 },
            ApiError::LimitExceeded {
                bought: 1,
                limit: 1,
            },
            ApiError::LapseLimit { lapsed: 2, max: 2 },
            ApiError::HoldBudgetExceeded { live: 4, budget: 5 },
            ApiError::IdempotencyMismatch,
            ApiError::IdTaken,
            ApiError::SaleNotStarted {
                opens_at_ms: 1,
                retry_after_secs: 1,
            },
            ApiError::SaleEnded,
            ApiError::PassRequired,
            ApiError::SaleOpen("x".into()),
            ApiError::ReservationReleased,
            ApiError::ReservationConfirmed,
            ApiError::ReservationRejected,
            ApiError::ExtensionLimit(1),
            ApiError::OrderLine,
            ApiError::BelowReserved("x".into()),
            ApiError::BucketsLocked("x".into()),
            ApiError::Stale {
                expected: 1,
                current: 2,
            },
            ApiError::AdjustmentMismatch("x".into()),
            ApiError::Conflict("x".into()),
            ApiError::Unavailable("x".into()),
            ApiError::RateLimited {
                retry_after_secs: 1,
            },
            ApiError::RouteNotFound,
            ApiError::MethodNotAllowed("GET"),
            ApiError::UnsupportedMediaType,
            ApiError::PassInvalid("x"),
            ApiError::PassExpired("x"),
            ApiError::PassUsed,
            ApiError::PassesNotConfigured,
        ]
    }

    #[test]
    fn every_route_of_the_spec_is_described() {
        let doc = doc();
        assert_eq!(doc["openapi"], "3.1.0");
        let expected = [
            ("/v1/skus/{sku_id}/reservations", "post"),
            ("/v1/skus/{sku_id}/reservations/{request_id}", "get"),
            (
                "/v1/skus/{sku_id}/reservations/{request_id}/confirm",
                "post",
            ),
            ("/v1/skus/{sku_id}/reservations/{request_id}/cancel", "post"),
            ("/v1/skus/{sku_id}/reservations/{request_id}/extend", "post"),
            ("/v1/orders", "post"),
            ("/v1/orders/{order_id}", "get"),
            ("/v1/orders/{order_id}/confirm", "post"),
            ("/v1/orders/{order_id}/cancel", "post"),
            ("/v1/orders/{order_id}/extend", "post"),
            ("/v1/skus/{sku_id}", "get"),
            ("/v1/passes", "post"),
            ("/v1/admin/skus/{sku_id}", "put"),
            ("/v1/admin/skus/{sku_id}/warmup", "post"),
            ("/v1/admin/skus/{sku_id}/adjustments", "post"),
            ("/v1/admin/skus/{sku_id}/movements", "get"),
            ("/v1/admin/reconcile", "post"),
            ("/v1/admin/reconcile", "get"),
            ("/v1/admin/dlq", "get"),
            ("/v1/admin/dlq/replay", "post"),
            ("/v1/admin/overview", "get"),
            ("/livez", "get"),
            ("/readyz", "get"),
            ("/metrics", "get"),
            ("/openapi.json", "get"),
            ("/asyncapi.json", "get"),
        ];
        let mut described = 0;
        for (path, ops) in doc["paths"].as_object().unwrap() {
            described += ops.as_object().unwrap().len();
            for method in ops.as_object().unwrap().keys() {
                assert!(
                    expected.contains(&(path.as_str(), method.as_str())),
                    "{method} {path} is not in contract §6"
                );
            }
        }
        for (path, method) in expected {
            let op = &doc["paths"][path][method];
            assert!(op.is_object(), "{method} {path} missing");
            let admin = path.starts_with("/v1/admin/");
            assert_eq!(
                op["security"][0][ADMIN_SECURITY].is_array(),
                admin,
                "{method} {path}"
            );
            if admin {
                assert_eq!(op["security"][1][CLIENT_SECURITY][0], "admin", "{path}");
            }
            let scoped = SCOPED_ROUTES
                .iter()
                .find(|(m, p, _)| *p == path && m.eq_ignore_ascii_case(method));
            match scoped {
                Some((_, _, scope)) => {
                    let requirement = &op["security"][0][CLIENT_SECURITY];
                    assert_eq!(requirement[0], scope.as_str(), "{method} {path}");
                    let description = op["description"].as_str().unwrap_or_default();
                    assert!(description.contains(scope.as_str()), "{method} {path}");
                    assert!(op["responses"]["401"].is_object(), "{method} {path}");
                    assert!(op["responses"]["403"].is_object(), "{method} {path}");
                }
                None => assert_eq!(op["security"].is_array(), admin, "{method} {path}"),
            }
        }
        assert_eq!(described, expected.len());
    }

    #[test]
    fn problem_codes_match_the_api_errors() {
        let documented: BTreeSet<(u16, &str)> = PROBLEMS
            .iter()
            .flat_map(|k| k.codes.iter().map(move |c| (k.status, *c)))
            .collect();
        let actual: BTreeSet<(u16, &str)> = every_error()
            .iter()
            .map(|e| (e.status_code().as_u16(), e.code()))
            .collect();
        assert_eq!(documented, actual);
    }

    #[test]
    fn every_problem_response_is_problem_json_with_its_codes() {
        let doc = doc();
        let responses = doc["components"]["responses"].as_object().unwrap();
        for kind in PROBLEMS {
            let schema = &doc["components"]["schemas"][kind.name];
            assert_eq!(schema["properties"]["status"]["enum"][0], kind.status);
            let codes: Vec<&str> = schema["properties"]["code"]["enum"]
                .as_array()
                .unwrap()
                .iter()
                .map(|c| c.as_str().unwrap())
                .collect();
            assert_eq!(codes, kind.codes);
            assert!(responses[kind.name]["content"][PROBLEM_JSON].is_object());
        }
        // Each operation's problem responses sit under the status they carry.
        for (path, ops) in doc["paths"].as_object().unwrap() {
            for (method, op) in ops.as_object().unwrap() {
                for (status, response) in op["responses"].as_object().unwrap() {
                    let Some(reference) = response["$ref"].as_str() else {
                        continue;
                    };
                    let name = reference.rsplit('/').next().unwrap();
                    let kind = PROBLEMS.iter().find(|k| k.name == name).unwrap();
                    assert_eq!(status, &kind.status.to_string(), "{method} {path}");
                }
            }
        }
    }

    #[test]
    fn request_bodies_refuse_unknown_fields_and_carry_the_ranges() {
        let doc = doc();
        let schemas = &doc["components"]["schemas"];
        for name in ["ReserveBody", "SkuBody"] {
            assert_eq!(schemas[name]["additionalProperties"], false, "{name}");
        }
        let reserve = &schemas["ReserveBody"]["properties"];
        assert_eq!(reserve["count"]["minimum"], 1);
        assert_eq!(reserve["count"]["maximum"], 1000);
        assert_eq!(reserve["user_id"]["minimum"], 1);
        assert_eq!(reserve["user_id"]["maximum"], i64::MAX);
        assert_eq!(
            reserve["request_id"]["pattern"],
            crate::roles::api::hold_views::REQUEST_ID_PATTERN
        );
        let params =
            &doc["paths"]["/v1/skus/{sku_id}/reservations/{request_id}"]["get"]["parameters"];
        assert_eq!(params[0]["name"], "sku_id");
        assert_eq!(params[0]["schema"]["minimum"], 1);
        assert_eq!(params[0]["schema"]["maximum"], i64::MAX);
        assert_eq!(
            params[1]["schema"]["pattern"],
            crate::roles::api::hold_views::REQUEST_ID_PATTERN
        );
        let scheme = &doc["components"]["securitySchemes"][ADMIN_SECURITY];
        assert_eq!(scheme["scheme"], "bearer");
    }

    #[test]
    fn the_public_document_is_the_full_one_without_the_admin_surface() {
        let full = doc();
        let public: Value = serde_json::from_str(public_document()).unwrap();
        let paths = |d: &Value| -> BTreeSet<String> {
            d["paths"].as_object().unwrap().keys().cloned().collect()
        };
        let kept: BTreeSet<String> = paths(&full)
            .into_iter()
            .filter(|p| !ADMIN_PATHS.iter().any(|a| p.starts_with(a)))
            .collect();
        assert_eq!(paths(&public), kept);
        assert!(kept.contains("/v1/skus/{sku_id}/reservations"));
        assert!(kept.contains("/readyz") && kept.contains("/openapi.json"));
        for path in &kept {
            assert_eq!(public["paths"][path], full["paths"][path], "{path}");
        }
        let schemes = &public["components"]["securitySchemes"];
        assert!(schemes[ADMIN_SECURITY].is_null());
        assert!(schemes[CLIENT_SECURITY].is_object());
        assert!(!public.to_string().contains(ADMIN_SECURITY));
        assert!(!public["tags"].to_string().contains("\"admin\""));
        // What only the admin routes use is gone; every $ref still resolves.
        for gone in ["ReconcileReport", "AdminSku", "DlqListing", "Unauthorized"] {
            assert!(full["components"]["schemas"][gone].is_object(), "{gone}");
            assert!(public["components"]["schemas"][gone].is_null(), "{gone}");
        }
        // The problems of any route (404, 405) stay, referred to or not.
        for kept in ["RouteNotFound", "MethodNotAllowed", "InvalidRequest"] {
            assert!(
                public["components"]["responses"][kept].is_object(),
                "{kept}"
            );
        }
        let mut pointers = Vec::new();
        refs(&public, &mut pointers);
        assert!(!pointers.is_empty());
        for pointer in pointers {
            assert!(
                public.pointer(&pointer).is_some(),
                "dangling $ref {pointer}"
            );
        }
    }

    #[test]
    fn every_schema_a_dlq_route_refers_to_is_defined() {
        let doc = doc();
        let schemas = &doc["components"]["schemas"];
        for name in [
            "DlqListing",
            "DeadDeduction",
            "DeadOrderLine",
            "PoisonLetter",
            "DlqKind",
            "ReplayView",
        ] {
            assert!(schemas[name].is_object(), "{name} missing");
        }
        let text = doc.to_string();
        for reference in text.split("\"$ref\":\"#/components/schemas/").skip(1) {
            let name = reference.split('"').next().unwrap();
            assert!(schemas[name].is_object(), "dangling $ref to {name}");
        }
        assert_eq!(
            schemas["DlqKind"]["enum"],
            serde_json::json!(["deduct", "expiry"])
        );
    }

    #[test]
    fn the_reconcile_mirror_matches_the_report() {
        use crate::ops::reconcile::{Report, SkuReport, Verdict as Real};
        let verdicts = [
            Real::Ok,
            Real::InFlight,
            Real::RedisAhead,
            Real::RedisBehind,
            Real::MysqlInconsistent,
            Real::Stuck,
            Real::MysqlBehind,
        ];
        let report = Report {
            checked_at: "1970-01-01T00:00:00Z".into(),
            skus: verdicts
                .iter()
                .map(|&verdict| SkuReport {
                    sku_id: 1,
                    verdict,
                    redis_available: None,
                    mysql_available: 0,
                    ledger_units: 0,
                    in_flight: 0,
                    repaired: false,
                    drift: 0,
                    redis_conserved: None,
                    missing_in_redis: 0,
                    buyers_over_limit: 0,
                    stuck_units: 0,
                    stuck_where: None,
                    lost_reservations: 0,
                    lost_units: 0,
                    republished: 0,
                    reapplied: 0,
                    second_look_wanted: false,
                })
                .collect(),
        };
        let shown = serde_json::to_value(&report).unwrap();
        let doc = doc();
        let schemas = &doc["components"]["schemas"];
        let keys =
            |v: &Value| -> BTreeSet<String> { v.as_object().unwrap().keys().cloned().collect() };
        assert_eq!(
            keys(&shown),
            keys(&schemas["ReconcileReport"]["properties"])
        );
        assert_eq!(
            keys(&shown["skus"][0]),
            keys(&schemas["SkuReconcileLine"]["properties"])
        );
        let names: Vec<Value> = shown["skus"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| l["verdict"].clone())
            .collect();
        assert_eq!(Value::Array(names), schemas["Verdict"]["enum"]);
        let places: Vec<Value> = crate::ops::stuck::PLACES
            .iter()
            .map(|p| Value::from(*p))
            .collect();
        assert_eq!(Value::Array(places), schemas["StuckWhere"]["enum"]);
    }
}
