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

use std::borrow::Cow;

use serde::{Deserialize, Serialize};

use super::base64url::{self, NotBase64Url};

use super::KeyRing;
use crate::domain::{RequestId, SkuId, UserId};

/// Seconds a pass is still taken after its `exp` (and before its `nbf`):
/// the clocks of the signer and of the api nodes differ a little; at most
/// 1 s (contract, "Passes").
pub const LEEWAY_SECS: i64 = 1;

/// The claims of a pass. Other claims (`iss`, `iat`, `aud` …) may be there
/// and are not read. Their text is borrowed from the decoded token while one
/// is checked (no copy), owned where the JSON escapes a character, and when
/// a pass is signed (`issue.rs`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PassClaims<'a> {
    /// The buyer: the `user_id` of the holds it admits, as a decimal string.
    #[serde(borrow)]
    pub sub: Cow<'a, str>,
    /// The pass id: 1–64 of `[A-Za-z0-9_.:-]`; what "buys once" is kept by.
    #[serde(borrow)]
    pub jti: Cow<'a, str>,
    /// Not before (Unix seconds).
    pub nbf: i64,
    /// Not from (Unix seconds).
    pub exp: i64,
    /// The SKUs it admits.
    pub stockd_skus: Vec<u64>,
}

/// The two fields of a pass's header the check reads; the others are not.
#[derive(Deserialize)]
struct PassHeader<'a> {
    #[serde(borrow)]
    alg: Cow<'a, str>,
    #[serde(borrow)]
    kid: Option<Cow<'a, str>>,
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

/// A token part decoded onto the stack when it is at most this long
/// decoded (a header, a signature, the claims of a pass naming a few dozen
/// SKUs); a longer one onto the heap.
const DECODE_ON_STACK: usize = 1024;

const NOT_A_JWT: PassRefusal = PassRefusal::Invalid("the pass is not a JWT");
const MALFORMED: PassRefusal = PassRefusal::Invalid("the pass is malformed");
const MALFORMED_CLAIMS: PassRefusal =
    PassRefusal::Invalid("the pass's claims are malformed (sub, jti, nbf, exp, stockd_skus)");

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
        let mut stack = [0u8; DECODE_ON_STACK];
        let json = self.signed_payload(token, &mut stack)?;
        // UTF-8 checked once here, not once per string by `from_slice`.
        let json = std::str::from_utf8(&json).map_err(|_| MALFORMED_CLAIMS)?;
        let claims: PassClaims = serde_json::from_str(json).map_err(|_| MALFORMED_CLAIMS)?;
        check_claims(&claims, buyer, needing, now_ms)
    }

    /// The decoded claims (JSON) of `token` once its header names a key of
    /// the ring with that key's algorithm and that key verifies its
    /// signature. One pass over the token, each part decoded once and onto
    /// `stack` when it fits, a header seen before not at all
    /// (`known_headers.rs`): `jsonwebtoken::decode` reads the header twice
    /// and the claims twice, each into owned strings, and builds a
    /// `Validation` per call — checks this module makes itself (the times,
    /// with its own leeway).
    fn signed_payload<'s>(
        &self,
        token: &str,
        stack: &'s mut [u8; DECODE_ON_STACK],
    ) -> Result<Cow<'s, [u8]>, PassRefusal> {
        // The signature from the end, the header from the start: neither
        // search crosses the claims, the token's longest part.
        let (message, signature) = token.rsplit_once('.').ok_or(NOT_A_JWT)?;
        let (header, payload) = message.split_once('.').ok_or(NOT_A_JWT)?;
        let known = self.known_headers.key_of(header);
        let key = match known {
            Some(key) => key,
            None => self.key_of_header(header, stack)?,
        };
        match self.verifiers[key].signs(message.as_bytes(), signature) {
            Ok(true) => {}
            Ok(false) => return Err(PassRefusal::Invalid("the pass's signature does not verify")),
            Err(_) => return Err(MALFORMED),
        }
        if known.is_none() {
            self.known_headers.remember(header, key);
        }
        decode_part(payload, stack).map_err(|_| MALFORMED)
    }

    /// The index of the key a header (base64url text) names, if its `alg`
    /// is that key's.
    fn key_of_header(&self, header: &str, stack: &mut [u8]) -> Result<usize, PassRefusal> {
        let header = decode_part(header, stack).map_err(|_| NOT_A_JWT)?;
        let header = std::str::from_utf8(&header).map_err(|_| NOT_A_JWT)?;
        let header: PassHeader = serde_json::from_str(header).map_err(|_| NOT_A_JWT)?;
        self.key_named(&header)
    }

    /// The index of the key a read header names, if its `alg` is that key's.
    fn key_named(&self, header: &PassHeader) -> Result<usize, PassRefusal> {
        let kid = header
            .kid
            .as_deref()
            .ok_or(PassRefusal::Invalid("the pass's header names no kid"))?;
        let key = *self
            .by_kid
            .get(kid)
            .ok_or(PassRefusal::Invalid("the pass's kid names no key"))?;
        if header.alg != self.verifiers[key].alg_name() {
            return Err(PassRefusal::Invalid("the pass's alg is not its key's"));
        }
        Ok(key)
    }
}

/// Base64url `text` decoded into `stack` when it fits, else onto the heap.
pub(super) fn decode_part<'s>(
    text: &str,
    stack: &'s mut [u8],
) -> Result<Cow<'s, [u8]>, NotBase64Url> {
    let len = base64url::decoded_len(text.len())?;
    if let Some(out) = stack.get_mut(..len) {
        base64url::decode_into(text.as_bytes(), out)?;
        return Ok(Cow::Borrowed(out));
    }
    let mut out = vec![0; len];
    base64url::decode_into(text.as_bytes(), &mut out)?;
    Ok(Cow::Owned(out))
}

/// The claims' own checks, once the signature held: the buyer, the pass id,
/// the SKUs, then the time.
fn check_claims(
    claims: &PassClaims,
    buyer: UserId,
    needing: &[SkuId],
    now_ms: u64,
) -> Result<VerifiedPass, PassRefusal> {
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

#[cfg(test)]
mod tests {
    use base64::engine::general_purpose::URL_SAFE_NO_PAD;
    use base64::Engine;
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

    fn claims() -> PassClaims<'static> {
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
        // `alg: none` is not the key's alg; garbage is no JWT.
        let none = "eyJhbGciOiJub25lIiwia2lkIjoiaHMifQ.eyJzdWIiOiI0MiJ9.";
        assert!(invalid(&ring, none).contains("alg"));
        assert!(invalid(&ring, "not.a.jwt").contains("JWT"));
        assert!(invalid(&ring, "").contains("JWT"));
    }

    /// An HS256 token of the JSON texts `header` and `claims` as written.
    fn hs_raw(header: &str, claims: &str) -> String {
        let message = format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(header),
            URL_SAFE_NO_PAD.encode(claims)
        );
        let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, SECRET);
        let tag = ring::hmac::sign(&key, message.as_bytes());
        format!("{message}.{}", URL_SAFE_NO_PAD.encode(tag.as_ref()))
    }

    #[test]
    fn escaped_json_and_a_pass_too_long_for_the_stack_verify_as_any_other() {
        let (ring, _) = ring();
        let claims = |skus: &str| {
            format!(
                r#"{{"sub":"4\u0032","jti":"pass\u002d1","nbf":{},"exp":{},"stockd_skus":[{skus}]}}"#,
                NOW_S - 10,
                NOW_S + 300
            )
        };
        let expected = VerifiedPass {
            pass_id: RequestId::parse("pass-1").unwrap(),
            expires_at_s: NOW_S + 300,
        };
        // `kid` "hs", `sub` "42" and `jti` "pass-1", each with an escape.
        let escaped = hs_raw(r#"{"alg":"HS256","kid":"h\u0073"}"#, &claims("1,2"));
        assert_eq!(
            ring.verify(&escaped, buyer(), &skus(&[1]), NOW_MS),
            Ok(expected.clone())
        );
        // Claims of 1,000 SKUs: decoded onto the heap.
        let many: Vec<String> = (1..=1000).map(|s| s.to_string()).collect();
        let long = hs_raw(r#"{"alg":"HS256","kid":"hs"}"#, &claims(&many.join(",")));
        assert!(long.len() > 2 * DECODE_ON_STACK);
        assert_eq!(
            ring.verify(&long, buyer(), &skus(&[1, 1000]), NOW_MS),
            Ok(expected)
        );
        // A header too long for its part of the stack, with the key's alg.
        let padded = format!(r#"{{"alg":"HS256","kid":"hs","x":"{}"}}"#, "y".repeat(600));
        assert!(ring
            .verify(&hs_raw(&padded, &claims("1")), buyer(), &skus(&[1]), NOW_MS)
            .is_ok());
        // The escapes do not open a way around the checks.
        let wrong_alg = hs_raw(r#"{"alg":"HS\u0032\u0035\u0037","kid":"hs"}"#, &claims("1"));
        assert!(invalid(&ring, &wrong_alg).contains("alg"));
    }

    #[test]
    fn a_header_seen_before_is_not_read_again_but_every_signature_is() {
        let (ring, _) = ring();
        let header_of = |token: &str| token.split('.').next().unwrap().to_string();
        let good = hs(&claims());
        let header = header_of(&good);
        // A forged pass's header is not remembered, nor one refused before
        // its signature was checked.
        let other = EncodingKey::from_secret(b"another-secret-another-secret-0123");
        let forged = sign(Algorithm::HS256, Some("hs"), &claims(), &other);
        assert_eq!(header_of(&forged), header);
        assert!(invalid(&ring, &forged).contains("signature"));
        assert_eq!(ring.known_headers.key_of(&header), None);
        // A good one's is; the next pass with it is checked all the same.
        assert!(ring.verify(&good, buyer(), &skus(&[1]), NOW_MS).is_ok());
        assert_eq!(ring.known_headers.key_of(&header), Some(0));
        assert!(invalid(&ring, &forged).contains("signature"));
        let as_other = hs(&PassClaims {
            sub: "43".into(),
            ..claims()
        });
        assert!(invalid(&ring, &as_other).contains("another buyer"));
        assert!(ring.verify(&good, buyer(), &skus(&[1]), NOW_MS).is_ok());
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
