//! Verifying a pass, in memory and without I/O: what the hold handlers ask
//! before the sold-out board and before any Redis call, so a forged, stolen
//! or stale pass costs stockd no round trip.
//!
//! In order: the header names a known `kid` and the `alg` of that key's kind;
//! the signature holds; the claims are all there and well formed (`sub` the
//! buyer's decimal id, `jti` 1–64 of the request-id alphabet, `nbf` and `exp`
//! integer seconds, `stockd_skus` an array of SKU ids as JSON integers); the
//! pass is the hold's buyer's and names every SKU of the hold that needs a
//! pass. Any of those failing is `PASS_INVALID`. Then the time: before `nbf`
//! or from `exp` on, each with a leeway of [`LEEWAY_SECS`], `PASS_EXPIRED`.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use serde::{Deserialize, Serialize};

use super::KeyRing;
use crate::domain::{RequestId, SkuId, UserId};

/// Seconds a pass is still taken after its `exp` (and before its `nbf`):
/// the clocks of the signer and of the api nodes differ a little; at most
/// 1 s (contract, "Passes").
pub const LEEWAY_SECS: i64 = 1;

/// The claims of a pass. Other claims (`iss`, `iat`, `aud` …) may be there
/// and are not read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PassClaims {
    /// The buyer: the `user_id` of the holds it admits, as a decimal string.
    pub sub: String,
    /// The pass id: 1–64 of `[A-Za-z0-9_.:-]`; what "buys once" is kept by.
    pub jti: String,
    /// Not before (Unix seconds).
    pub nbf: i64,
    /// Not from (Unix seconds).
    pub exp: i64,
    /// The SKUs it admits.
    pub stockd_skus: Vec<u64>,
}

/// A pass that verified.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifiedPass {
    /// Its `jti`.
    pub pass_id: RequestId,
    /// Its `exp` (Unix seconds): how long its claim must be kept.
    pub expires_at_s: i64,
}

/// Why a pass was refused; `detail` says which check failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PassRefusal {
    /// 403 `PASS_INVALID`.
    #[error("{0}")]
    Invalid(&'static str),
    /// 403 `PASS_EXPIRED` (also before `nbf`).
    #[error("{0}")]
    Expired(&'static str),
}

impl KeyRing {
    /// Verifies `token` for a hold of `buyer` whose SKUs `needing` require a
    /// pass, at `now_ms` (this node's clock).
    pub fn verify(
        &self,
        token: &str,
        buyer: UserId,
        needing: &[SkuId],
        now_ms: u64,
    ) -> Result<VerifiedPass, PassRefusal> {
        let claims = self.signed_claims(token)?;
        let sub = UserId::parse(&claims.sub)
            .map_err(|_| PassRefusal::Invalid("the pass's sub is not a user id"))?;
        let pass_id = RequestId::parse(&claims.jti).map_err(|_| {
            PassRefusal::Invalid("the pass's jti is not 1-64 characters of [A-Za-z0-9_.:-]")
        })?;
        if sub != buyer {
            return Err(PassRefusal::Invalid("the pass is another buyer's"));
        }
        if !needing
            .iter()
            .all(|s| claims.stockd_skus.contains(&s.get()))
        {
            return Err(PassRefusal::Invalid(
                "the pass does not name every SKU of the hold that requires one",
            ));
        }
        let now_ms = i128::from(now_ms);
        let secs_ms = |s: i64| i128::from(s) * 1000;
        if now_ms < secs_ms(claims.nbf) - secs_ms(LEEWAY_SECS) {
            return Err(PassRefusal::Expired("the pass is not valid yet (nbf)"));
        }
        if now_ms >= secs_ms(claims.exp) + secs_ms(LEEWAY_SECS) {
            return Err(PassRefusal::Expired("the pass has expired (exp)"));
        }
        Ok(VerifiedPass {
            pass_id,
            expires_at_s: claims.exp,
        })
    }

    /// The claims of a token whose header names a key of the ring, with that
    /// key's algorithm, and whose signature that key verifies.
    /// The claims of `token` once its key and signature hold. One pass over
    /// the token: the header is read once (`jsonwebtoken::decode_header`),
    /// the signature checked with the key its `kid` names (`keys.rs`), and
    /// the claims decoded once into [`PassClaims`] — `jsonwebtoken::decode`
    /// reads the header twice and the claims twice and builds a `Validation`
    /// per call, a quarter of a pass's cost for checks this module makes
    /// itself (the times, with its own leeway).
    fn signed_claims(&self, token: &str) -> Result<PassClaims, PassRefusal> {
        const NOT_A_JWT: PassRefusal = PassRefusal::Invalid("the pass is not a JWT");
        let (message, signature) = token.rsplit_once('.').ok_or(NOT_A_JWT)?;
        let (_, payload) = message.rsplit_once('.').ok_or(NOT_A_JWT)?;
        let header = jsonwebtoken::decode_header(token).map_err(|_| NOT_A_JWT)?;
        let kid = header
            .kid
            .ok_or(PassRefusal::Invalid("the pass's header names no kid"))?;
        let verifier = self
            .verifiers
            .get(&kid)
            .ok_or(PassRefusal::Invalid("the pass's kid names no key"))?;
        if header.alg != verifier.alg {
            return Err(PassRefusal::Invalid("the pass's alg is not its key's"));
        }
        match verifier.signs(message.as_bytes(), signature) {
            Ok(true) => {}
            Ok(false) => return Err(PassRefusal::Invalid("the pass's signature does not verify")),
            Err(_) => return Err(PassRefusal::Invalid("the pass is malformed")),
        }
        let json = URL_SAFE_NO_PAD
            .decode(payload)
            .map_err(|_| PassRefusal::Invalid("the pass is malformed"))?;
        serde_json::from_slice(&json).map_err(|_| {
            PassRefusal::Invalid(
                "the pass's claims are malformed (sub, jti, nbf, exp, stockd_skus)",
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use jsonwebtoken::{Algorithm, EncodingKey, Header};

    use super::*;
    use crate::config::{KeyMaterial, PassKeyMaterial};

    const SECRET: &[u8] = b"a-test-secret-of-at-least-32-bytes!!";
    const NOW_MS: u64 = 1_800_000_000_000;
    const NOW_S: i64 = 1_800_000_000;

    fn ed25519() -> (Vec<u8>, [u8; 32]) {
        use ring::signature::KeyPair;
        let rng = ring::rand::SystemRandom::new();
        let doc = ring::signature::Ed25519KeyPair::generate_pkcs8(&rng).unwrap();
        let pair = ring::signature::Ed25519KeyPair::from_pkcs8(doc.as_ref()).unwrap();
        let public = pair.public_key().as_ref().try_into().unwrap();
        (doc.as_ref().to_vec(), public)
    }

    /// A ring of `hs` (HS256) and `ed` (Ed25519 public), and the Ed25519 private key.
    fn ring() -> (KeyRing, Vec<u8>) {
        let (pkcs8, public) = ed25519();
        let keys = [
            PassKeyMaterial {
                id: "hs".into(),
                material: KeyMaterial::Hs256 {
                    secret: SECRET.to_vec(),
                },
            },
            PassKeyMaterial {
                id: "ed".into(),
                material: KeyMaterial::Ed25519Public { public },
            },
        ];
        (KeyRing::new(&keys, None), pkcs8)
    }

    fn claims() -> PassClaims {
        PassClaims {
            sub: "42".into(),
            jti: "pass-1".into(),
            nbf: NOW_S - 10,
            exp: NOW_S + 300,
            stockd_skus: vec![1, 2],
        }
    }

    fn sign(
        alg: Algorithm,
        kid: Option<&str>,
        claims: &impl Serialize,
        key: &EncodingKey,
    ) -> String {
        let mut header = Header::new(alg);
        header.kid = kid.map(str::to_string);
        jsonwebtoken::encode(&header, claims, key).unwrap()
    }

    fn hs(claims: &impl Serialize) -> String {
        sign(
            Algorithm::HS256,
            Some("hs"),
            claims,
            &EncodingKey::from_secret(SECRET),
        )
    }

    fn skus(ids: &[u64]) -> Vec<SkuId> {
        ids.iter().map(|&s| SkuId::new(s).unwrap()).collect()
    }

    fn buyer() -> UserId {
        UserId::new(42).unwrap()
    }

    fn invalid(ring: &KeyRing, token: &str) -> &'static str {
        match ring.verify(token, buyer(), &skus(&[1]), NOW_MS) {
            Err(PassRefusal::Invalid(why)) => why,
            other => panic!("not invalid: {other:?}"),
        }
    }

    #[test]
    fn a_good_pass_of_either_kind_verifies() {
        let (ring, pkcs8) = ring();
        let verified = ring.verify(&hs(&claims()), buyer(), &skus(&[1, 2]), NOW_MS);
        assert_eq!(
            verified.unwrap(),
            VerifiedPass {
                pass_id: RequestId::parse("pass-1").unwrap(),
                expires_at_s: NOW_S + 300
            }
        );
        let ed = sign(
            Algorithm::EdDSA,
            Some("ed"),
            &claims(),
            &EncodingKey::from_ed_der(&pkcs8),
        );
        assert!(ring.verify(&ed, buyer(), &skus(&[2]), NOW_MS).is_ok());
    }

    #[test]
    fn a_bad_signature_an_unknown_kid_and_a_foreign_alg_are_invalid() {
        let (ring, pkcs8) = ring();
        let other = EncodingKey::from_secret(b"another-secret-another-secret-0123");
        let forged = sign(Algorithm::HS256, Some("hs"), &claims(), &other);
        assert!(invalid(&ring, &forged).contains("signature"));
        let unknown = sign(
            Algorithm::HS256,
            Some("nope"),
            &claims(),
            &EncodingKey::from_secret(SECRET),
        );
        assert!(invalid(&ring, &unknown).contains("kid"));
        let no_kid = sign(
            Algorithm::HS256,
            None,
            &claims(),
            &EncodingKey::from_secret(SECRET),
        );
        assert!(invalid(&ring, &no_kid).contains("kid"));
        // An EdDSA pass naming the HS256 key, and an HS384 one: not the key's alg.
        let ed_as_hs = sign(
            Algorithm::EdDSA,
            Some("hs"),
            &claims(),
            &EncodingKey::from_ed_der(&pkcs8),
        );
        assert!(invalid(&ring, &ed_as_hs).contains("alg"));
        let hs384 = sign(
            Algorithm::HS384,
            Some("hs"),
            &claims(),
            &EncodingKey::from_secret(SECRET),
        );
        assert!(invalid(&ring, &hs384).contains("alg"));
        // An HS256 pass naming the Ed25519 key (the public key as a secret).
        let confused = sign(
            Algorithm::HS256,
            Some("ed"),
            &claims(),
            &EncodingKey::from_secret(SECRET),
        );
        assert!(invalid(&ring, &confused).contains("alg"));
        // `alg: none` and garbage are no JWT.
        let none = "eyJhbGciOiJub25lIiwia2lkIjoiaHMifQ.eyJzdWIiOiI0MiJ9.";
        assert!(invalid(&ring, none).contains("JWT"));
        assert!(invalid(&ring, "not.a.jwt").contains("JWT"));
        assert!(invalid(&ring, "").contains("JWT"));
    }

    #[test]
    fn another_buyer_or_a_sku_it_does_not_name_is_invalid() {
        let (ring, _) = ring();
        let token = hs(&claims());
        let other = UserId::new(43).unwrap();
        let why = ring.verify(&token, other, &skus(&[1]), NOW_MS).unwrap_err();
        assert_eq!(why, PassRefusal::Invalid("the pass is another buyer's"));
        let why = ring
            .verify(&token, buyer(), &skus(&[1, 3]), NOW_MS)
            .unwrap_err();
        assert!(why.to_string().contains("every SKU"), "{why}");
        // No SKU needs a pass: the SKUs it names do not matter.
        assert!(ring.verify(&token, buyer(), &[], NOW_MS).is_ok());
    }

    #[test]
    fn malformed_claims_are_invalid() {
        let (ring, _) = ring();
        let base = serde_json::to_value(claims()).unwrap();
        let with = |key: &str, value: serde_json::Value| {
            let mut c = base.clone();
            c[key] = value;
            hs(&c)
        };
        let without = |key: &str| {
            let mut c = base.clone();
            c.as_object_mut().unwrap().remove(key);
            hs(&c)
        };
        for key in ["sub", "jti", "nbf", "exp", "stockd_skus"] {
            assert!(invalid(&ring, &without(key)).contains("malformed"), "{key}");
        }
        let cases = [
            ("sub", serde_json::json!(42)),
            ("sub", serde_json::json!("042")),
            ("jti", serde_json::json!("")),
            ("jti", serde_json::json!("a b")),
            ("jti", serde_json::json!("x".repeat(65))),
            ("exp", serde_json::json!(1.5)),
            ("exp", serde_json::json!("1800000300")),
            ("nbf", serde_json::json!(null)),
            ("stockd_skus", serde_json::json!(["1"])),
            ("stockd_skus", serde_json::json!([1.0])),
            ("stockd_skus", serde_json::json!(1)),
        ];
        for (key, value) in cases {
            let token = with(key, value.clone());
            assert!(
                matches!(
                    ring.verify(&token, buyer(), &skus(&[1]), NOW_MS),
                    Err(PassRefusal::Invalid(_))
                ),
                "{key}: {value}"
            );
        }
    }

    #[test]
    fn before_nbf_and_from_exp_on_it_is_expired_with_one_second_of_leeway() {
        let (ring, _) = ring();
        let token = hs(&PassClaims {
            nbf: NOW_S,
            exp: NOW_S + 10,
            ..claims()
        });
        let at = |ms: u64| ring.verify(&token, buyer(), &skus(&[1]), ms);
        assert!(
            at(NOW_MS - 1000).is_ok(),
            "a second early is within the leeway"
        );
        assert!(matches!(at(NOW_MS - 1001), Err(PassRefusal::Expired(_))));
        assert!(at(NOW_MS + 10_999).is_ok(), "within a second after exp");
        assert!(matches!(at(NOW_MS + 11_000), Err(PassRefusal::Expired(_))));
        // A bad signature is invalid, not expired, whatever the time.
        let other = EncodingKey::from_secret(b"another-secret-another-secret-0123");
        let forged = sign(Algorithm::HS256, Some("hs"), &claims(), &other);
        let late = ring.verify(&forged, buyer(), &skus(&[1]), NOW_MS + 10_000_000);
        assert!(matches!(late, Err(PassRefusal::Invalid(_))));
    }

    /// What one verification costs on this machine (`cargo test --release
    /// --lib -- --ignored verify_costs --nocapture`): the HS256 pass of a
    /// reservation and an EdDSA one, timed over many runs. A measure, not a
    /// check; its instructions: valgrind --tool=callgrind
    /// '--toggle-collect=*KeyRing*verify*' on the test binary, one kind at a
    /// time.
    #[test]
    #[ignore]
    fn verify_costs() {
        let (ring, pkcs8) = ring();
        let hs_token = hs(&claims());
        let ed_token = sign(
            Algorithm::EdDSA,
            Some("ed"),
            &claims(),
            &EncodingKey::from_ed_der(&pkcs8),
        );
        const RUNS: u32 = 20_000;
        // `VERIFY_COSTS_ALG=HS256` times one kind alone (for callgrind's count).
        let only = std::env::var("VERIFY_COSTS_ALG").ok();
        for (name, token) in [("HS256", &hs_token), ("EdDSA", &ed_token)] {
            if only.as_deref().is_some_and(|alg| alg != name) {
                continue;
            }
            let started = std::time::Instant::now();
            for _ in 0..RUNS {
                let verified = ring.verify(token, buyer(), &skus(&[1]), NOW_MS);
                assert!(verified.is_ok());
            }
            let per = started.elapsed() / RUNS;
            println!("{name}: {per:?} per verification ({} bytes)", token.len());
        }
    }
}
