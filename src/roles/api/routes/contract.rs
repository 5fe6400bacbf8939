//! The API's documented contract as types: path parameters, problem markers
//! (status + `code` values) and the bodies written by hand elsewhere. Handlers
//! name these in `#[utoipa::path]`; `openapi` collects them into the document.
//! Keeping them here lets `routes/*` and `openapi` both depend on this module
//! instead of on each other.

use std::borrow::Cow;
use std::collections::BTreeMap;

use utoipa::openapi::header::HeaderBuilder;
use utoipa::openapi::schema::{ObjectBuilder, Schema, Type};
use utoipa::openapi::{ContentBuilder, Ref, RefOr, Response, ResponseBuilder};
use utoipa::{IntoParams, PartialSchema, ToResponse, ToSchema};

/// Media type of every error body (RFC 9457).
pub const PROBLEM_JSON: &str = "application/problem+json";

/// Name of the admin bearer-token security scheme.
pub const ADMIN_SECURITY: &str = "admin_token";

/// Name of the client bearer-token security scheme (`auth.clients`); each
/// public route's requirement lists the scope it needs.
pub const CLIENT_SECURITY: &str = "client_token";

// ---- path parameters --------------------------------------------------------

/// `{sku_id}` of the SKU routes.
#[derive(IntoParams)]
#[into_params(parameter_in = Path)]
#[allow(dead_code)] // documentation only: handlers parse with `routes::sku_from`
pub struct SkuPath {
    /// The SKU: a positive 64-bit integer, decimal, no sign.
    #[param(minimum = 1, maximum = 9223372036854775807_i64, example = 1)]
    sku_id: u64,
}

/// `{sku_id}` and `{request_id}` of the reservation routes.
#[derive(IntoParams)]
#[into_params(parameter_in = Path)]
#[allow(dead_code)] // documentation only: handlers parse with `routes::request_from`
pub struct ReservationPath {
    /// The SKU: a positive 64-bit integer, decimal, no sign.
    #[param(minimum = 1, maximum = 9223372036854775807_i64, example = 1)]
    sku_id: u64,
    /// The `request_id` the reservation was made with. An id made of dots only
    /// (`.`, `..`) must be sent percent-encoded (`%2E`): HTTP clients remove such
    /// path segments (RFC 3986 §5.2.4).
    #[param(
        min_length = 1,
        max_length = 64,
        pattern = "^[A-Za-z0-9_.:-]{1,64}$",
        example = "order-4711:1"
    )]
    request_id: String,
}

/// `{order_id}` of the order routes.
#[derive(IntoParams)]
#[into_params(parameter_in = Path)]
#[allow(dead_code)] // documentation only: handlers parse with `routes::order_from`
pub struct OrderPath {
    /// The `order_id` the order was placed with (the `request_id` format).
    #[param(
        min_length = 1,
        max_length = 64,
        pattern = "^[A-Za-z0-9_.:-]{1,64}$",
        example = "order-4711"
    )]
    order_id: String,
}

// ---- problem responses ------------------------------------------------------

/// One kind of problem response: its status and the `code` values it carries.
pub struct ProblemKind {
    pub name: &'static str,
    pub status: u16,
    pub codes: &'static [&'static str],
    pub description: &'static str,
}

macro_rules! problems {
    ($( $(#[doc = $doc:literal])+ $name:ident = $status:literal [$($code:literal),+ $(,)?]; )+) => {
        $(
            $(#[doc = $doc])+
            pub struct $name;

            impl $name {
                pub const KIND: ProblemKind = ProblemKind {
                    name: stringify!($name),
                    status: $status,
                    codes: &[$($code),+],
                    description: concat!($($doc),+),
                };
            }

            impl PartialSchema for $name {
                fn schema() -> RefOr<Schema> {
                    problem_schema(&Self::KIND)
                }
            }

            impl ToSchema for $name {
                fn name() -> Cow<'static, str> {
                    Cow::Borrowed(stringify!($name))
                }
            }

            impl<'r> ToResponse<'r> for $name {
                fn response() -> (&'r str, RefOr<Response>) {
                    (stringify!($name), problem_response(&Self::KIND))
                }
            }
        )+

        /// Every problem response of the API.
        pub const PROBLEMS: &[ProblemKind] = &[$($name::KIND),+];
    };
}

problems! {
    /// The path, query or body is malformed: bad JSON, unknown field, wrong
    /// type, out-of-range id or count, oversize body. Nothing was written.
    InvalidRequest = 400 ["INVALID_REQUEST"];
    /// Missing or wrong `Authorization: Bearer <admin token>`.
    Unauthorized = 401 ["UNAUTHORIZED"];
    /// `auth.required` is true and the call names no known client: no
    /// `Authorization: Bearer <client token>`, or a token no client has.
    /// Nothing was read or written.
    Unauthenticated = 401 ["UNAUTHENTICATED"];
    /// The client is known but lacks the route's scope (`detail` names it).
    /// Nothing was read or written.
    Forbidden = 403 ["FORBIDDEN"];
    /// The client is known but lacks the route's scope (`FORBIDDEN`), or
    /// the SKU requires a pass and the hold carries none (`PASS_REQUIRED`;
    /// docs/contract.md §19), or the hold's admission pass is refused
    /// (contract §20): `PASS_INVALID` (bad signature, unknown `kid`, `alg`
    /// not its key's, another buyer's, a SKU of the hold it does not name,
    /// malformed) or `PASS_EXPIRED` (past its `exp`, or before its `nbf`).
    /// Nothing was written; a refused pass is not used up.
    HoldForbidden = 403 ["FORBIDDEN", "PASS_REQUIRED", "PASS_INVALID", "PASS_EXPIRED"];
    /// As [`HoldForbidden`] for an order: `PASS_REQUIRED` names the line
    /// whose SKU requires a pass in the `line` member.
    OrderForbidden = 403 ["FORBIDDEN", "PASS_REQUIRED", "PASS_INVALID", "PASS_EXPIRED"];
    /// No SKU with this id.
    SkuNotFound = 404 ["SKU_NOT_FOUND"];
    /// No reservation with this `request_id` for this SKU.
    ReservationNotFound = 404 ["RESERVATION_NOT_FOUND"];
    /// No order with this `order_id`.
    OrderNotFound = 404 ["ORDER_NOT_FOUND"];
    /// A line of the order names a SKU that does not exist; the `line`
    /// member names it. Nothing was held.
    OrderSkuNotFound = 404 ["SKU_NOT_FOUND"];
    /// The order was not held: its first line (by `sku_id`) that could not
    /// be held is named by the `line` member with why (`SOLD_OUT`,
    /// `INSUFFICIENT_STOCK`, `LIMIT_EXCEEDED`, `LAPSE_LIMIT`: the buyer's
    /// holds on that SKU lapsed unpaid `limits.max_lapsed_holds` times,
    /// `SALE_NOT_STARTED` with `opens_at` and `Retry-After`, `SALE_ENDED`:
    /// the SKU's sale window); or, without `line`, `ID_TAKEN`: the
    /// `order_id` names another client's order (nothing of it is told), or
    /// `HOLD_BUDGET_EXCEEDED`: the buyer's live units across every SKU and
    /// the order's would exceed `limits.buyer_max_live_units` (the body's
    /// `live_units` and `budget` say how many), or `PASS_USED`: the
    /// admission pass was used by another hold (a pass buys once). Nothing
    /// is held.
    OrderRefused = 409 ["SOLD_OUT", "INSUFFICIENT_STOCK", "LIMIT_EXCEEDED", "LAPSE_LIMIT", "ID_TAKEN", "SALE_NOT_STARTED", "SALE_ENDED", "HOLD_BUDGET_EXCEEDED", "PASS_USED"];
    /// Not confirmed: the order was released (expired or cancelled; refund
    /// the buyer) or rejected by the ledger.
    OrderConfirmConflict = 409 ["RESERVATION_RELEASED", "RESERVATION_REJECTED"];
    /// Not cancelled: the order is confirmed (paid; run the refund flow) or
    /// was rejected by the ledger.
    OrderCancelConflict = 409 ["RESERVATION_CONFIRMED", "RESERVATION_REJECTED"];
    /// Not extended: the order is final, or it was extended
    /// `reservation.max_extensions` times already (`EXTENSION_LIMIT`).
    OrderExtendConflict = 409 ["RESERVATION_RELEASED", "RESERVATION_CONFIRMED", "RESERVATION_REJECTED", "EXTENSION_LIMIT"];
    /// No route matches the path.
    RouteNotFound = 404 ["NOT_FOUND"];
    /// The route exists but does not serve this method (see `Allow`).
    MethodNotAllowed = 405 ["METHOD_NOT_ALLOWED"];
    /// A body sent without `Content-Type: application/json` (or a `+json`
    /// type). Nothing was read or written.
    UnsupportedMediaType = 415 ["UNSUPPORTED_MEDIA_TYPE"];
    /// Not reserved: `SOLD_OUT` (nothing left), `INSUFFICIENT_STOCK` (fewer
    /// units left than asked for), `LIMIT_EXCEEDED` (the user's per-SKU limit)
    /// or `LAPSE_LIMIT` (the user's holds on this SKU lapsed unpaid
    /// `limits.max_lapsed_holds` times), `HOLD_BUDGET_EXCEEDED` (the user's
    /// live units across every SKU and these would exceed
    /// `limits.buyer_max_live_units`; the body's `live_units` and `budget`
    /// say how many), or `ID_TAKEN` (the `request_id` names another
    /// client's reservation; nothing of it is told), or the SKU's sale
    /// window: `SALE_NOT_STARTED` (`opens_at` says when; retry after
    /// `Retry-After`), `SALE_ENDED`, or `PASS_USED` (the admission pass was
    /// used by another hold: a pass buys once). Nothing is held.
    ReserveConflict = 409 ["SOLD_OUT", "INSUFFICIENT_STOCK", "LIMIT_EXCEEDED", "LAPSE_LIMIT", "HOLD_BUDGET_EXCEEDED", "ID_TAKEN", "SALE_NOT_STARTED", "SALE_ENDED", "PASS_USED"];
    /// This `request_id` was already used with another user or count.
    IdempotencyMismatch = 422 ["IDEMPOTENCY_MISMATCH"];
    /// Not confirmed: the reservation was released (expired or cancelled;
    /// refund the buyer) or rejected by the ledger, or it is a line of an
    /// order (`ORDER_LINE`: only the whole order is confirmed).
    ConfirmConflict = 409 ["RESERVATION_RELEASED", "RESERVATION_REJECTED", "ORDER_LINE"];
    /// Not cancelled: the reservation is confirmed (paid; run the refund flow)
    /// or was rejected by the ledger, or it is a line of an order.
    CancelConflict = 409 ["RESERVATION_CONFIRMED", "RESERVATION_REJECTED", "ORDER_LINE"];
    /// Not extended: the reservation is final (`RESERVATION_RELEASED`,
    /// `RESERVATION_CONFIRMED`, `RESERVATION_REJECTED`), or it was extended
    /// `reservation.max_extensions` times already (`EXTENSION_LIMIT`), or it
    /// is a line of an order (`ORDER_LINE`).
    ExtendConflict = 409 ["RESERVATION_RELEASED", "RESERVATION_CONFIRMED", "RESERVATION_REJECTED", "EXTENSION_LIMIT", "ORDER_LINE"];
    /// The new `total_stock` is below what is already reserved or sold
    /// (`BELOW_RESERVED`), or `buckets` changes while buyer state of the SKU
    /// still lives in Redis (`BUCKETS_LOCKED`: reservation records within
    /// their retention, outbox entries or stock transfers), or the sale has
    /// opened and the change would move its `opens_at` or remove its window
    /// (`SALE_OPEN`; `closes_at` may move). Nothing was changed.
    BelowReserved = 409 ["BELOW_RESERVED", "BUCKETS_LOCKED", "SALE_OPEN"];
    /// Not adjusted: `expected_available` is not MySQL's available any more
    /// (`STALE`; the body's `current_available` has the value now), or the
    /// cut would take the total below what is reserved or sold, or Redis
    /// below what it already promised (`BELOW_RESERVED`). Nothing was changed.
    AdjustConflict = 409 ["STALE", "BELOW_RESERVED"];
    /// This `adjustment_id` was already applied with another delta, reason or
    /// reference. Nothing was changed.
    AdjustmentMismatch = 422 ["IDEMPOTENCY_MISMATCH"];
    /// Deductions are in flight between Redis and MySQL; retry when drained or
    /// use `?force=true`.
    WarmupConflict = 409 ["CONFLICT"];
    /// A dependency (Redis, MySQL, RabbitMQ) is unavailable, the outbox is
    /// full, or the SKU is not loaded into Redis yet. Retry after `Retry-After`.
    Unavailable = 503 ["UNAVAILABLE"];
    /// `passes.issuer_key` is not set: this node signs no pass
    /// (`PASSES_NOT_CONFIGURED`); or the pass could not be signed
    /// (`UNAVAILABLE`).
    IssuerUnavailable = 503 ["PASSES_NOT_CONFIGURED", "UNAVAILABLE"];
    /// Too many requests from this buyer (`limits.per_user_*`, reserve only),
    /// this client IP (`limits.per_ip_*`) or this client (`limits.per_client_*`).
    /// Nothing was written; retry after `Retry-After` seconds.
    RateLimited = 429 ["RATE_LIMITED"];
}

fn string_schema(description: &str) -> ObjectBuilder {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .description(Some(description))
}

/// The problems of an order that name the line they are about.
const LINE_PROBLEMS: &[&str] = &["OrderSkuNotFound", "OrderRefused"];

/// Problems whose `line` member is there for some codes only.
const OPTIONAL_LINE_PROBLEMS: &[&str] = &["OrderForbidden"];

/// Whether the problem may be `SALE_NOT_STARTED` (an `opens_at` member and
/// a `Retry-After` header).
fn tells_opening(kind: &ProblemKind) -> bool {
    kind.codes.contains(&"SALE_NOT_STARTED")
}

/// The `line` member of an order's refusal.
fn line_schema() -> ObjectBuilder {
    ObjectBuilder::new()
        .schema_type(Type::Object)
        .description(Some("The first line that failed, and why"))
        .property(
            "sku_id",
            ObjectBuilder::new()
                .schema_type(Type::Integer)
                .minimum(Some(1)),
        )
        .property(
            "code",
            ObjectBuilder::new()
                .schema_type(Type::String)
                .enum_values(Some([
                    "SOLD_OUT",
                    "INSUFFICIENT_STOCK",
                    "LIMIT_EXCEEDED",
                    "LAPSE_LIMIT",
                    "SKU_NOT_FOUND",
                    "SALE_NOT_STARTED",
                    "SALE_ENDED",
                    "PASS_REQUIRED",
                ])),
        )
        .required("sku_id")
        .required("code")
}

pub fn problem_schema(kind: &ProblemKind) -> RefOr<Schema> {
    let mut schema = problem_object(kind);
    if tells_opening(kind) {
        schema = schema.property(
            "opens_at",
            string_schema("`SALE_NOT_STARTED`: when the sale opens (RFC 3339)").format(Some(
                utoipa::openapi::SchemaFormat::KnownFormat(utoipa::openapi::KnownFormat::DateTime),
            )),
        );
    }
    if OPTIONAL_LINE_PROBLEMS.contains(&kind.name) {
        return schema.property("line", line_schema()).into();
    }
    if LINE_PROBLEMS.contains(&kind.name) {
        return schema
            .property("line", line_schema())
            .required("line")
            .into();
    }
    schema.into()
}

fn problem_object(kind: &ProblemKind) -> ObjectBuilder {
    ObjectBuilder::new()
        .title(Some(kind.name))
        .description(Some(kind.description.trim()))
        .property("type", string_schema("Always `about:blank`"))
        .property("title", string_schema("The HTTP reason phrase"))
        .property(
            "status",
            ObjectBuilder::new()
                .schema_type(Type::Integer)
                .enum_values(Some([kind.status])),
        )
        .property(
            "detail",
            string_schema("Human-readable; never switch on it"),
        )
        .property(
            "code",
            ObjectBuilder::new()
                .schema_type(Type::String)
                .description(Some("Stable machine-readable code"))
                .enum_values(Some(kind.codes.iter().copied())),
        )
        .required("type")
        .required("title")
        .required("status")
        .required("detail")
        .required("code")
}

pub fn problem_response(kind: &ProblemKind) -> RefOr<Response> {
    let content = ContentBuilder::new()
        .schema(Some(Ref::from_schema_name(kind.name)))
        .build();
    let mut response = ResponseBuilder::new()
        .description(kind.description.trim())
        .content(PROBLEM_JSON, content);
    let header = |description: &str, schema: Schema| {
        HeaderBuilder::new()
            .schema(schema)
            .description(Some(description))
            .build()
    };
    match kind.status {
        401 => {
            let schema = string_schema("")
                .description(None::<String>)
                .enum_values(Some(["Bearer"]));
            response = response.header(
                "WWW-Authenticate",
                header("The route takes a bearer token", schema.into()),
            );
        }
        405 => {
            response = response.header(
                "Allow",
                header(
                    "The methods this route serves",
                    string_schema("").description(None::<String>).into(),
                ),
            );
        }
        409 if tells_opening(kind) => {
            let schema = ObjectBuilder::new()
                .schema_type(Type::Integer)
                .minimum(Some(1));
            response = response.header(
                "Retry-After",
                header(
                    "`SALE_NOT_STARTED`: seconds until the opening",
                    schema.into(),
                ),
            );
        }
        503 => {
            let schema = ObjectBuilder::new()
                .schema_type(Type::Integer)
                .minimum(Some(0));
            response = response.header(
                "Retry-After",
                header("Seconds to wait before retrying", schema.into()),
            );
        }
        _ => {}
    }
    response.build().into()
}

// ---- bodies defined outside the api module -----------------------------------

/// `GET /livez`
#[derive(ToSchema)]
#[allow(dead_code)] // documentation of `health::livez`'s JSON
pub struct Liveness {
    #[schema(value_type = String, pattern = "^ok$")]
    status: String,
}

/// `GET /readyz`
#[derive(ToSchema)]
#[allow(dead_code)] // documentation of `health::readyz`'s JSON
pub struct Readiness {
    status: ReadinessStatus,
    /// Only with `?verbose` and the admin credential: each check and whether it passed.
    #[schema(nullable = false)]
    checks: Option<BTreeMap<String, bool>>,
}

#[derive(ToSchema, serde::Serialize)]
#[serde(rename_all = "snake_case")]
#[allow(dead_code)]
pub enum ReadinessStatus {
    Ready,
    NotReady,
}

/// `GET|POST /v1/admin/reconcile`: mirrors `ops::reconcile::Report` (a unit
/// test checks the two agree).
#[derive(ToSchema)]
#[allow(dead_code)]
pub struct ReconcileReport {
    #[schema(format = DateTime)]
    checked_at: String,
    skus: Vec<SkuReconcileLine>,
}

/// One SKU of a reconcile report: mirrors `ops::reconcile::SkuReport`.
#[derive(ToSchema)]
#[allow(dead_code)]
pub struct SkuReconcileLine {
    #[schema(minimum = 1, maximum = 9223372036854775807_i64)]
    sku_id: u64,
    verdict: Verdict,
    /// `null` when the SKU is not loaded into Redis.
    #[schema(required = true)]
    redis_available: Option<i64>,
    mysql_available: i64,
    ledger_units: i64,
    in_flight: i64,
    repaired: bool,
    /// Redis `available` minus what it should hold.
    drift: i64,
    /// Redis' own conservation check; `null` when not loaded.
    #[schema(required = true)]
    redis_conserved: Option<bool>,
    /// Live ledger rows whose Redis record is missing (Redis lost writes).
    missing_in_redis: i64,
    /// Buyers holding more than `limit_per_user` live units in MySQL.
    buyers_over_limit: i64,
    /// Units of STUCK work: dead-lettered, or in flight past
    /// `reconcile.stuck_after_ms`.
    #[schema(minimum = 0)]
    stuck_units: i64,
    /// Where the stuck units sit; `null` when nothing is stuck.
    #[schema(required = true)]
    stuck_where: Option<StuckWhere>,
    /// Reservations MySQL lost that Redis proves (MYSQL_BEHIND): deductions the
    /// ledger lacks with the pipeline drained, and confirms or releases it no
    /// longer has, each seen on two looks.
    #[schema(minimum = 0)]
    lost_reservations: i64,
    /// Units of the lost deductions.
    #[schema(minimum = 0)]
    lost_units: i64,
    /// Lost deductions this check's repair published again.
    #[schema(minimum = 0)]
    republished: usize,
    /// Lost confirms, cancels and expiries this check's repair applied again.
    #[schema(minimum = 0)]
    reapplied: usize,
}

/// Where STUCK units sit (see `ops::stuck`).
#[derive(ToSchema, serde::Serialize)]
#[allow(dead_code)]
pub enum StuckWhere {
    #[serde(rename = "dlq")]
    Dlq,
    #[serde(rename = "in_flight")]
    InFlight,
    #[serde(rename = "dlq+in_flight")]
    Both,
}

/// The schema of `ops::reconcile::Verdict`: the names the report writes
/// (`Verdict::as_str`, the serde names), read from the type itself.
pub struct Verdict;

impl PartialSchema for Verdict {
    fn schema() -> RefOr<Schema> {
        let names = crate::ops::reconcile::Verdict::ALL.map(|v| v.as_str());
        (ObjectBuilder::new().schema_type(Type::String))
            .description(Some("Mirrors `ops::reconcile::Verdict`."))
            .enum_values(Some(names))
            .into()
    }
}

impl ToSchema for Verdict {
    fn name() -> Cow<'static, str> {
        Cow::Borrowed("Verdict")
    }
}
