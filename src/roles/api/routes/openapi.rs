//! `GET /openapi.json`: the OpenAPI 3.1 description of the HTTP API (contract §6),
//! generated from the handlers' `#[utoipa::path]` attributes, the body types
//! of `views` and the markers of `contract`. Every problem response names the
//! `code` values it can carry, so a client generator gets the full error contract.
//!
//! The document is built once and served as is; `tests/it/openapi.rs` runs
//! schemathesis against a live api to keep it honest.

use std::sync::OnceLock;

use actix_web::HttpResponse;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi};

use super::contract::{
    problem_response, problem_schema, Liveness, Readiness, ReconcileReport, SkuReconcileLine,
    StuckWhere, Verdict, ADMIN_SECURITY, CLIENT_SECURITY, PROBLEMS,
};
use super::{
    adjustments, admin, asyncapi, console, dlq, extend, health, lifecycle, order_lifecycle, orders,
    reservations, skus,
};

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
        reservations::reserve,
        reservations::get,
        lifecycle::confirm,
        lifecycle::cancel,
        extend::extend,
        orders::place,
        orders::get,
        order_lifecycle::confirm,
        order_lifecycle::cancel,
        order_lifecycle::extend,
        skus::get,
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

/// `GET /openapi.json`
#[utoipa::path(
    get,
    path = "/openapi.json",
    tag = "operations",
    operation_id = "openapi",
    responses(
        (status = 200, description = "This OpenAPI 3.1 document", content_type = "application/json",
         body = Object),
    )
)]
pub async fn serve() -> HttpResponse {
    HttpResponse::Ok()
        .content_type("application/json")
        .body(document())
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
                 needs: `reserve`, `read`, `lifecycle` or `admin`. Enforced when `auth.required` \
                 is true",
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
            ApiError::IdempotencyMismatch,
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
            crate::roles::api::views::REQUEST_ID_PATTERN
        );
        let params =
            &doc["paths"]["/v1/skus/{sku_id}/reservations/{request_id}"]["get"]["parameters"];
        assert_eq!(params[0]["name"], "sku_id");
        assert_eq!(params[0]["schema"]["minimum"], 1);
        assert_eq!(params[0]["schema"]["maximum"], i64::MAX);
        assert_eq!(
            params[1]["schema"]["pattern"],
            crate::roles::api::views::REQUEST_ID_PATTERN
        );
        let scheme = &doc["components"]["securitySchemes"][ADMIN_SECURITY];
        assert_eq!(scheme["scheme"], "bearer");
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
