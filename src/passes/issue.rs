//! Issuing a pass (`POST /v1/passes`): for a queue in front of stockd that
//! does not sign passes itself. The pass is signed with `passes.issuer_key`
//! and valid from now for `ttl_secs`; its id is new (a UUID, in the
//! request-id alphabet), so two passes never share one.

use jsonwebtoken::Header;

use super::{KeyRing, PassClaims};
use crate::domain::{SkuId, UserId};

/// A pass's life when the request names none.
pub const PASS_TTL_DEFAULT_SECS: u64 = 300;
/// The longest life a pass may be issued with: a pass is a ticket through
/// the queue for the moment it lets the buyer in, not a standing permission.
pub const PASS_TTL_MAX_SECS: u64 = 3600;

/// A signed pass and what the caller hands on with it.
#[derive(Debug, Clone)]
pub struct IssuedPass {
    /// The compact JWT.
    pub token: String,
    /// Its `jti`.
    pub pass_id: String,
    /// Its `exp`, in Unix milliseconds.
    pub expires_at_ms: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum IssueError {
    /// No `passes.issuer_key`: 503 `PASSES_NOT_CONFIGURED`.
    #[error("passes.issuer_key is not set: this node signs no pass")]
    NotConfigured,
    /// The signature could not be made (a key ring programming error).
    #[error("the pass could not be signed: {0}")]
    Signing(String),
}

impl KeyRing {
    /// Signs a pass for `user` admitting `skus`, valid from `now_ms` (whole
    /// seconds, rounded down) for `ttl_secs`.
    pub fn issue(
        &self,
        user: UserId,
        skus: &[SkuId],
        ttl_secs: u64,
        now_ms: u64,
    ) -> Result<IssuedPass, IssueError> {
        let signer = self.signer.as_ref().ok_or(IssueError::NotConfigured)?;
        let now_s = (now_ms / 1000) as i64;
        let exp = now_s + ttl_secs.min(PASS_TTL_MAX_SECS) as i64;
        let pass_id = uuid::Uuid::new_v4().simple().to_string();
        let claims = PassClaims {
            sub: user.to_string().into(),
            jti: pass_id.as_str().into(),
            nbf: now_s,
            exp,
            stockd_skus: skus.iter().map(|s| s.get()).collect(),
        };
        let mut header = Header::new(signer.alg);
        header.kid = Some(signer.kid.clone());
        let token = jsonwebtoken::encode(&header, &claims, &signer.key)
            .map_err(|e| IssueError::Signing(e.to_string()))?;
        Ok(IssuedPass {
            token,
            pass_id,
            expires_at_ms: exp as u64 * 1000,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{KeyMaterial, PassKeyMaterial};

    #[test]
    fn an_issued_pass_verifies_for_its_buyer_and_skus_only() {
        let keys = [PassKeyMaterial {
            id: "k1".into(),
            material: KeyMaterial::Hs256 {
                secret: vec![7; 32],
            },
        }];
        let ring = KeyRing::new(&keys, Some("k1"));
        let user = UserId::new(9).unwrap();
        let sku = SkuId::new(5).unwrap();
        let now_ms = 1_800_000_000_123;
        let issued = ring.issue(user, &[sku], 60, now_ms).unwrap();
        assert_eq!(issued.expires_at_ms, 1_800_000_060_000);
        let verified = ring.verify(&issued.token, user, &[sku], now_ms).unwrap();
        assert_eq!(verified.pass_id.as_str(), issued.pass_id);
        let other = SkuId::new(6).unwrap();
        assert!(ring.verify(&issued.token, user, &[other], now_ms).is_err());
        assert!(KeyRing::new(&keys, None)
            .issue(user, &[sku], 60, now_ms)
            .is_err());
    }
}
