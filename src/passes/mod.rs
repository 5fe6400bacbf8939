//! Admission passes (contract, "Passes"): the signed tokens a waiting room
//! (Queue-it, Cloudflare Waiting Room, one of your own, or stockd's
//! `POST /v1/passes`) hands the buyers it lets through. A SKU that requires a
//! pass admits a hold only with one that names the buyer and the SKU and is
//! within its time, so a bot that skips the queue and posts straight to the
//! stock service is refused at the last place every purchase passes.
//!
//! A pass is a JWT (RFC 7519, compact form) signed HS256 or EdDSA, its key
//! named by the header's `kid`. Verification is in memory, no I/O: a refused
//! pass costs no Redis call (`verify.rs`). That a pass buys once is Redis's
//! part (`redis/pass_claims.rs`): the api claims the pass for the hold just
//! before the admission script.
//!
//! - `keys.rs`: the key ring built from `passes.keys` (by `kid`, each with the
//!   one algorithm its kind allows) and the issuer key;
//! - `verify.rs`: a token, the buyer and the SKUs that need a pass → the
//!   verified pass or why not; with `base64url.rs` (its parts decoded) and
//!   `known_headers.rs` (a header seen before, by its text);
//! - `issue.rs`: a new pass signed with `passes.issuer_key`.

mod base64url;
mod issue;
mod keys;
mod known_headers;
mod verify;

pub use issue::{IssueError, IssuedPass, PASS_TTL_DEFAULT_SECS, PASS_TTL_MAX_SECS};
pub use keys::KeyRing;
pub use verify::{PassClaims, PassRefusal, VerifiedPass, LEEWAY_SECS};
