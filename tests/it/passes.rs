//! Admission passes (contract, "Passes"): a pass sent with a hold verifies in
//! memory (HS256 and EdDSA, keys by `kid`, several at once), buys once, is
//! given back when the hold is refused, and a refused pass writes nothing and
//! costs no Redis script; `POST /v1/passes` issues them to a credential only.
//! The keys are made here, in Rust (ring), so a fresh machine needs nothing.
//!
//! Every SKU of these tests requires a pass (`requires_pass`, contract §19):
//! a pass sent for a SKU that requires none is ignored.

use std::path::PathBuf;
use std::sync::Arc;

use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{json, Value};
use stockd::config::{PassKeySettings, Scope, Settings};
use stockd::roles::api::auth::sha256_hex;

use crate::auth::stores_snapshot;
use crate::helpers::http::order_body;
use crate::helpers::{send_for_json, PrivateRedis, TestApp, TestOptions, ADMIN_TOKEN};

/// An HS256 secret of this test (32 bytes and more).
const SECRET: &[u8] = b"waiting-room-shared-secret-0123456789";

/// The DER header of an Ed25519 public key (SPKI, RFC 8410).
const SPKI_PREFIX: [u8; 12] = [
    0x30, 0x2a, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x03, 0x21, 0x00,
];

/// An Ed25519 key pair made here: the PKCS#8 DER and the SPKI PEM of its
/// public half.
struct Ed25519 {
    pkcs8: Vec<u8>,
    public_pem: String,
}

impl Ed25519 {
    fn generate() -> Self {
        use ring::signature::KeyPair;
        let rng = ring::rand::SystemRandom::new();
        let doc = ring::signature::Ed25519KeyPair::generate_pkcs8(&rng).unwrap();
        let pair = ring::signature::Ed25519KeyPair::from_pkcs8(doc.as_ref()).unwrap();
        let mut spki = SPKI_PREFIX.to_vec();
        spki.extend_from_slice(pair.public_key().as_ref());
        Self {
            pkcs8: doc.as_ref().to_vec(),
            public_pem: pem::encode(&pem::Pem::new("PUBLIC KEY", spki)),
        }
    }

    fn private_pem(&self) -> String {
        pem::encode(&pem::Pem::new("PRIVATE KEY", self.pkcs8.clone()))
    }

    fn signing_key(&self) -> EncodingKey {
        EncodingKey::from_ed_der(&self.pkcs8)
    }
}

/// A key file of this test run.
fn key_file(name: &str, content: &[u8]) -> PathBuf {
    let unique = uuid::Uuid::new_v4().simple().to_string();
    let path = std::env::temp_dir().join(format!("stockd-it-pass-{unique}-{name}"));
    std::fs::write(&path, content).unwrap();
    path
}

fn hs_key(id: &str) -> PassKeySettings {
    PassKeySettings {
        id: id.into(),
        // One trailing newline, as `echo` leaves it: trimmed by stockd.
        hs256_secret_file: Some(key_file(id, &[SECRET, b"\n"].concat())),
        ed25519_public_key_file: None,
        ed25519_private_key_file: None,
    }
}

fn ed_public_key(id: &str, key: &Ed25519) -> PassKeySettings {
    PassKeySettings {
        id: id.into(),
        hs256_secret_file: None,
        ed25519_public_key_file: Some(key_file(id, key.public_pem.as_bytes())),
        ed25519_private_key_file: None,
    }
}

fn ed_private_key(id: &str, key: &Ed25519) -> PassKeySettings {
    PassKeySettings {
        id: id.into(),
        hs256_secret_file: None,
        ed25519_public_key_file: None,
        ed25519_private_key_file: Some(key_file(id, key.private_pem().as_bytes())),
    }
}

/// Options with `keys` and `issuer`, then `more`.
fn with_passes(
    keys: Vec<PassKeySettings>,
    issuer: Option<&str>,
    more: impl Fn(&mut Settings) + Send + Sync + 'static,
) -> TestOptions {
    let issuer = issuer.map(str::to_string);
    TestOptions {
        tweak: Some(Arc::new(move |s: &mut Settings| {
            s.passes.keys = keys.clone();
            s.passes.issuer_key = issuer.clone();
            more(s);
        })),
        ..TestOptions::default()
    }
}

/// Marks SKU `sku` (created with `total` and `limit`) as requiring a pass.
async fn require_pass(app: &TestApp, sku: u64, total: i64, limit: i64) {
    let body = json!({"total_stock": total, "limit_per_user": limit, "requires_pass": true});
    let (status, view) = app.put_sku_json(sku, &body).await;
    assert_eq!(status, 200, "{view}");
}

fn now_s() -> i64 {
    (stockd::clock::unix_ms() / 1000) as i64
}

/// Claims of a pass of `user` for `skus`, valid for five minutes.
fn claims(jti: &str, user: u64, skus: &[u64]) -> Value {
    json!({"sub": user.to_string(), "jti": jti, "nbf": now_s() - 5,
           "exp": now_s() + 300, "stockd_skus": skus})
}

fn sign(alg: Algorithm, kid: &str, claims: &Value, key: &EncodingKey) -> String {
    let mut header = Header::new(alg);
    header.kid = Some(kid.into());
    jsonwebtoken::encode(&header, claims, key).unwrap()
}

fn hs(kid: &str, claims: &Value) -> String {
    sign(
        Algorithm::HS256,
        kid,
        claims,
        &EncodingKey::from_secret(SECRET),
    )
}

impl TestApp {
    /// `POST /v1/skus/{sku}/reservations` with `pass`.
    async fn reserve_with(
        &self,
        sku: u64,
        rid: &str,
        user: u64,
        count: u32,
        pass: &str,
    ) -> (u16, Value) {
        let body = json!({"request_id": rid, "user_id": user, "count": count, "pass": pass});
        let url = self.url(&format!("/v1/skus/{sku}/reservations"));
        send_for_json(self.client.post(url).json(&body)).await
    }

    /// `POST /v1/passes` with `body` and `token` (none: no credential).
    async fn issue_pass(&self, body: &Value, token: Option<&str>) -> (u16, Value) {
        let mut req = self.client.post(self.url("/v1/passes")).json(body);
        if let Some(token) = token {
            req = req.bearer_auth(token);
        }
        send_for_json(req).await
    }
}

/// An order body with a pass.
fn order_with(order_id: &str, user: u64, lines: &[(u64, u32)], pass: &str) -> Value {
    let mut body = order_body(order_id, user, lines);
    body["pass"] = json!(pass);
    body
}

/// A pass issued by `POST /v1/passes` buys a reservation, its replay still
/// answers 200, and a second hold with it (a reservation or an order) is 409
/// PASS_USED with nothing held; an order takes a pass naming its SKUs, once;
/// the replay of a hold whose pass expired since still answers 200.
#[tokio::test]
async fn an_issued_pass_buys_once_and_a_replay_of_its_hold_still_answers() {
    let app = TestApp::with(with_passes(vec![hs_key("room-1")], Some("room-1"), |_| {})).await;
    app.create_sku(1, 10, 5).await;
    require_pass(&app, 1, 10, 5).await;
    app.create_sku(2, 10, 5).await;
    require_pass(&app, 2, 10, 5).await;
    let ask = json!({"user_id": 42, "sku_ids": [1], "ttl_secs": 60});
    let (status, issued) = app.issue_pass(&ask, Some(ADMIN_TOKEN)).await;
    assert_eq!(status, 201, "{issued}");
    let pass = issued["pass"].as_str().unwrap();
    let expires_at = issued["expires_at"].as_str().unwrap();
    assert!(
        expires_at.ends_with("Z") && expires_at.as_bytes()[expires_at.len() - 5] == b'.',
        "RFC 3339 with milliseconds: {expires_at}"
    );
    assert_eq!(issued["pass_id"].as_str().unwrap().len(), 32, "{issued}");

    let (status, held) = app.reserve_with(1, "r1", 42, 1, pass).await;
    assert_eq!(status, 201, "{held}");
    let (status, replay) = app.reserve_with(1, "r1", 42, 1, pass).await;
    assert_eq!(
        status, 200,
        "a replay of the hold answers as today: {replay}"
    );
    let (status, used) = app.reserve_with(1, "r2", 42, 1, pass).await;
    assert_eq!((status, used["code"].as_str()), (409, Some("PASS_USED")));
    let (status, used) = app
        .place_order(&order_with("o-used", 42, &[(1, 1)], pass))
        .await;
    assert_eq!((status, used["code"].as_str()), (409, Some("PASS_USED")));
    assert_eq!(app.redis_available(1).await, Some(9), "one unit held");

    let both = claims("order-pass", 42, &[1, 2]);
    let order_pass = hs("room-1", &both);
    let body = order_with("o1", 42, &[(1, 1), (2, 2)], &order_pass);
    let (status, order) = app.place_order(&body).await;
    assert_eq!(status, 201, "{order}");
    let (status, replay) = app.place_order(&body).await;
    assert_eq!(status, 200, "{replay}");
    let (status, used) = app
        .place_order(&order_with("o2", 42, &[(2, 1)], &order_pass))
        .await;
    assert_eq!((status, used["code"].as_str()), (409, Some("PASS_USED")));
    assert_eq!(app.redis_available(2).await, Some(8));

    // A pass that expired since its hold was made: the hold's replay still
    // answers 200 (looked up), a new hold with it is PASS_EXPIRED.
    let mut brief = claims("brief", 42, &[2]);
    brief["exp"] = json!(now_s() + 1);
    let brief = hs("room-1", &brief);
    let (status, body) = app.reserve_with(2, "r-brief", 42, 1, &brief).await;
    assert_eq!(status, 201, "{body}");
    tokio::time::sleep(std::time::Duration::from_millis(3100)).await;
    let (status, body) = app.reserve_with(2, "r-brief", 42, 1, &brief).await;
    assert_eq!(status, 200, "the replay of an expired pass's hold: {body}");
    let (status, body) = app.reserve_with(2, "r-late", 42, 1, &brief).await;
    assert_eq!((status, body["code"].as_str()), (403, Some("PASS_EXPIRED")));
    app.wait_drained(2).await;
    app.assert_conserved(2).await;
    app.finish_drained_and_conserved(1).await;
}

/// Every refusal of a pass — a forged signature, an unknown `kid`, an `alg`
/// that is not its key's, another buyer's, a SKU it does not name, garbage,
/// expired, not yet valid — is 403 with its code and leaves Redis (keys,
/// script calls) and the ledger as they were; a hold the stock refuses gives
/// its pass back; and a good pass, HS256 or EdDSA, still buys after all that.
#[tokio::test]
async fn every_refused_pass_writes_nothing_and_a_good_pass_still_buys() {
    let redis = PrivateRedis::start().await;
    let room = Ed25519::generate();
    let keys = vec![hs_key("hs-1"), ed_public_key("ed-1", &room)];
    let mut opts = with_passes(keys, None, |_| {});
    opts.redis_url = Some(redis.url.clone());
    let app = TestApp::with(opts).await;
    app.create_sku(1, 10, 50).await;
    app.reserve_ok(1, "before", 7, 1).await;
    app.wait_ledger_rows(1).await;
    app.wait_drained(1).await;
    require_pass(&app, 1, 10, 50).await;
    let before = stores_snapshot(&app, &redis).await;

    let good = claims("p-1", 42, &[1]);
    let other_secret = EncodingKey::from_secret(b"not-the-waiting-room-secret-0123456");
    let mut expired = good.clone();
    expired["exp"] = json!(now_s() - 5);
    expired["nbf"] = json!(now_s() - 60);
    let mut early = good.clone();
    early["nbf"] = json!(now_s() + 60);
    let mut no_jti = good.clone();
    no_jti.as_object_mut().unwrap().remove("jti");
    let refusals = [
        (
            "forged",
            sign(Algorithm::HS256, "hs-1", &good, &other_secret),
            "PASS_INVALID",
        ),
        ("unknown kid", hs("hs-9", &good), "PASS_INVALID"),
        (
            "EdDSA naming the HS256 key",
            sign(Algorithm::EdDSA, "hs-1", &good, &room.signing_key()),
            "PASS_INVALID",
        ),
        (
            "HS256 naming the Ed25519 key",
            hs("ed-1", &good),
            "PASS_INVALID",
        ),
        (
            "another buyer's",
            hs("hs-1", &claims("p-1", 43, &[1])),
            "PASS_INVALID",
        ),
        (
            "another SKU's",
            hs("hs-1", &claims("p-1", 42, &[2])),
            "PASS_INVALID",
        ),
        ("no jti", hs("hs-1", &no_jti), "PASS_INVALID"),
        ("garbage", "not.a.jwt".to_string(), "PASS_INVALID"),
        ("expired", hs("hs-1", &expired), "PASS_EXPIRED"),
        ("not yet valid", hs("hs-1", &early), "PASS_EXPIRED"),
    ];
    for (what, pass, code) in &refusals {
        let (status, body) = app.reserve_with(1, "r-refused", 42, 1, pass).await;
        assert_eq!(
            (status, body["code"].as_str()),
            (403, Some(*code)),
            "{what}: {body}"
        );
        let order = order_with("o-refused", 42, &[(1, 1)], pass);
        let (status, body) = app.place_order(&order).await;
        assert_eq!(
            (status, body["code"].as_str()),
            (403, Some(*code)),
            "order, {what}: {body}"
        );
    }
    assert_eq!(
        stores_snapshot(&app, &redis).await,
        before,
        "a refused pass wrote something or ran a script"
    );

    // The stock refuses the hold: its pass is given back.
    let pass = hs("hs-1", &good);
    let (status, body) = app.reserve_with(1, "r-big", 42, 50, &pass).await;
    assert_eq!(
        (status, body["code"].as_str()),
        (409, Some("INSUFFICIENT_STOCK"))
    );
    let (status, body) = app.reserve_with(1, "r-ok", 42, 1, &pass).await;
    assert_eq!(status, 201, "the refused hold's pass still buys: {body}");
    let ed_pass = sign(
        Algorithm::EdDSA,
        "ed-1",
        &claims("p-2", 42, &[1]),
        &room.signing_key(),
    );
    let (status, body) = app.reserve_with(1, "r-ed", 42, 1, &ed_pass).await;
    assert_eq!(status, 201, "EdDSA: {body}");
    let (status, body) = app.reserve_with(1, "r-ed-2", 42, 1, &ed_pass).await;
    assert_eq!((status, body["code"].as_str()), (409, Some("PASS_USED")));
    assert_eq!(app.redis_available(1).await, Some(7));
    app.finish_drained_and_conserved(1).await;
}

/// Key rotation: with the old key (HS256) and the new one (Ed25519, the
/// issuer) both listed, passes of either `kid` buy; once the old key is
/// removed its passes are PASS_INVALID while the new key's still buy.
#[tokio::test]
async fn during_a_rotation_both_keys_verify_and_a_removed_key_refuses() {
    let new = Ed25519::generate();
    let both = vec![hs_key("old"), ed_private_key("new", &new)];
    let app = TestApp::with(with_passes(both, Some("new"), |_| {})).await;
    app.create_sku(1, 10, 5).await;
    require_pass(&app, 1, 10, 5).await;
    let old_pass = hs("old", &claims("p-old", 42, &[1]));
    let (status, body) = app.reserve_with(1, "r-old", 42, 1, &old_pass).await;
    assert_eq!(status, 201, "{body}");
    let ask = json!({"user_id": 42, "sku_ids": [1]});
    let (status, issued) = app.issue_pass(&ask, Some(ADMIN_TOKEN)).await;
    assert_eq!(status, 201, "{issued}");
    let new_pass = issued["pass"].as_str().unwrap().to_string();
    let header = jsonwebtoken::decode_header(&new_pass).unwrap();
    assert_eq!(
        (header.alg, header.kid.as_deref()),
        (Algorithm::EdDSA, Some("new"))
    );
    let (status, body) = app.reserve_with(1, "r-new", 42, 1, &new_pass).await;
    assert_eq!(status, 201, "{body}");
    app.finish_drained_and_conserved(1).await;

    let rotated = TestApp::with(with_passes(
        vec![ed_private_key("new", &new)],
        Some("new"),
        |_| {},
    ))
    .await;
    rotated.create_sku(1, 10, 5).await;
    require_pass(&rotated, 1, 10, 5).await;
    let later_old = hs("old", &claims("p-old-2", 42, &[1]));
    let (status, body) = rotated.reserve_with(1, "r-old", 42, 1, &later_old).await;
    assert_eq!((status, body["code"].as_str()), (403, Some("PASS_INVALID")));
    let (status, body) = rotated.reserve_with(1, "r-new", 42, 1, &new_pass).await;
    assert_eq!(status, 201, "{body}");
    rotated.finish_drained_and_conserved(1).await;
}

/// `POST /v1/passes` always needs a credential: with clients not required,
/// no token or an unknown one is 401, the admin token issues; bad bodies are
/// 400; without `passes.issuer_key` 503. With clients required, a client
/// without scope `passes` is 403, one with it issues.
#[tokio::test]
async fn issuing_a_pass_needs_a_credential_even_with_auth_off() {
    let app = TestApp::with(with_passes(vec![hs_key("k")], Some("k"), |_| {})).await;
    let ask = json!({"user_id": 5, "sku_ids": [1, 2]});
    let resp = app
        .client
        .post(app.url("/v1/passes"))
        .json(&ask)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 401);
    assert_eq!(resp.headers()["www-authenticate"], "Bearer");
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["code"], "UNAUTHENTICATED");
    let (status, _) = app.issue_pass(&ask, Some("not-a-token")).await;
    assert_eq!(status, 401);
    for bad in [
        json!({"user_id": 5, "sku_ids": []}),
        json!({"user_id": 5, "sku_ids": [1, 1]}),
        json!({"user_id": 0, "sku_ids": [1]}),
        json!({"user_id": 5, "sku_ids": [1], "ttl_secs": 0}),
        json!({"user_id": 5, "sku_ids": [1], "ttl_secs": 3601}),
        json!({"user_id": 5, "sku_ids": [1], "extra": 1}),
        json!({"user_id": 5, "sku_ids": ["1"]}),
    ] {
        let (status, body) = app.issue_pass(&bad, Some(ADMIN_TOKEN)).await;
        assert_eq!(
            (status, body["code"].as_str()),
            (400, Some("INVALID_REQUEST")),
            "{bad}"
        );
    }
    let (status, issued) = app.issue_pass(&ask, Some(ADMIN_TOKEN)).await;
    assert_eq!(status, 201, "{issued}");
    app.cleanup().await;

    let unsigned = TestApp::with(with_passes(vec![hs_key("k")], None, |_| {})).await;
    let (status, body) = unsigned.issue_pass(&ask, Some(ADMIN_TOKEN)).await;
    assert_eq!(
        (status, body["code"].as_str()),
        (503, Some("PASSES_NOT_CONFIGURED"))
    );
    unsigned.cleanup().await;

    let closed = TestApp::with(with_passes(vec![hs_key("k")], Some("k"), |s| {
        s.auth.required = true;
        let client = |name: &str, token: &str, scope: Scope| stockd::config::ClientSettings {
            name: name.into(),
            token_sha256: Some(sha256_hex(token.as_bytes())),
            cert_subject: None,
            scopes: vec![scope],
        };
        s.auth.clients = vec![
            client("queue", "tok-queue-51a0", Scope::Passes),
            client("shop", "tok-shop-0b7e", Scope::Reserve),
        ];
    }))
    .await;
    let (status, body) = closed.issue_pass(&ask, Some("tok-shop-0b7e")).await;
    assert_eq!(
        (status, body["code"].as_str()),
        (403, Some("FORBIDDEN")),
        "{body}"
    );
    let (status, _) = closed.issue_pass(&ask, None).await;
    assert_eq!(status, 401);
    let (status, body) = closed.issue_pass(&ask, Some("tok-queue-51a0")).await;
    assert_eq!(status, 201, "{body}");
    let (status, body) = closed.issue_pass(&ask, Some(ADMIN_TOKEN)).await;
    assert_eq!(status, 201, "the admin token issues too: {body}");
    closed.cleanup().await;
}
