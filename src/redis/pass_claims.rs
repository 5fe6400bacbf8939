//! "A pass buys once" (contract, "Passes"): which hold claimed an admission
//! pass, kept under the buyer's hash tag (`{u<user>}:pass:<jti>`) until the
//! pass has expired plus a margin. The hold handlers claim a verified pass
//! after the sold-out board and before the admission script, and give it back
//! when the script refused the hold (nothing held), so a refused hold never
//! uses a pass up. One key per call: legal on a Redis Cluster as is; the
//! buyer's tag lets a later change claim it in the same call as the buyer's
//! other keys (the hold budget).
//!
//! Where it is a call of its own (a Redis Cluster, or the hold budget on, or
//! an order), between the claim and the script an api that dies leaves the
//! pass claimed by a hold that was never made; the buyer's retry of the same
//! request id passes the claim (it is that hold's), as a retry after a 503
//! must be. A reservation on a standalone Redis with the budget off has its
//! pass claimed inside the admission script instead (`lib/pass.lua`).

use std::sync::Arc;

use super::core::Core;
use super::RedisError;
use crate::domain::{RequestId, UserId};

/// How long a claim outlives its pass's `exp`: an api node whose clock is
/// behind Redis's still takes the pass for that long, and must still find it
/// used. Ten minutes of skew is far more than NTP lets happen.
pub const CLAIM_MARGIN_MS: u64 = 600_000;

/// Until when (Unix ms) a claim of a pass expiring at `exp_s` is kept.
pub fn keep_until_ms(exp_s: i64) -> u64 {
    u64::try_from(exp_s).unwrap_or(0) * 1000 + CLAIM_MARGIN_MS
}

/// What claiming a pass found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claim {
    /// The pass is now this hold's.
    Claimed,
    /// It already was this hold's (a retry or a replay of its id).
    Same,
    /// Another hold has it: 409 `PASS_USED`.
    Used,
}

pub struct PassClaims {
    core: Arc<Core>,
}

impl PassClaims {
    pub(super) fn new(core: Arc<Core>) -> Self {
        Self { core }
    }

    /// Claims `user`'s pass `pass_id` (expiring at `exp_s`) for `hold`.
    pub async fn claim(
        &self,
        user: UserId,
        pass_id: &RequestId,
        exp_s: i64,
        hold: &str,
    ) -> Result<Claim, RedisError> {
        let key = self.core.keys.pass(user, pass_id);
        let keep_until_ms = keep_until_ms(exp_s);
        let mut invocation = super::scripts::PASS_CLAIM.prepare_invoke();
        invocation.key(&key).arg(hold).arg(keep_until_ms);
        let reply: Vec<String> = self
            .core
            .run(|mut c| async move { invocation.invoke_async(&mut c).await })
            .await?;
        match reply.first().map(String::as_str) {
            Some("CLAIMED") => Ok(Claim::Claimed),
            Some("SAME") => Ok(Claim::Same),
            Some("USED") => Ok(Claim::Used),
            _ => Err(RedisError::BadReply(format!("pass_claim: {reply:?}"))),
        }
    }

    /// Gives the pass back if `hold` still has it; true when it did.
    pub async fn release(
        &self,
        user: UserId,
        pass_id: &RequestId,
        hold: &str,
    ) -> Result<bool, RedisError> {
        let key = self.core.keys.pass(user, pass_id);
        let mut invocation = super::scripts::PASS_RELEASE.prepare_invoke();
        invocation.key(&key).arg(hold);
        let released: i64 = self
            .core
            .run(|mut c| async move { invocation.invoke_async(&mut c).await })
            .await?;
        Ok(released == 1)
    }
}
