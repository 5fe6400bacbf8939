//! The api role's front door: where it listens (`http`), who may use the admin
//! routes (`admin`) and how fast one buyer, one address or one client may knock (`limits`).

use anyhow::bail;
use serde::{Deserialize, Serialize};

use super::check;
use super::Cidr;
use super::ListenerTls;

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct HttpSettings {
    /// Listen address of the api role.
    pub bind: String,
    /// Worker threads; 0 means one per core.
    pub workers: usize,
    /// Largest JSON body accepted; larger ones are a 400.
    pub max_body_bytes: usize,
    /// Time in-flight requests get on shutdown.
    pub shutdown_grace_secs: u64,
    /// CIDRs of proxies whose `X-Forwarded-For` is believed (client IP for
    /// the per-IP limit and the audit trail); empty: the peer address counts.
    pub trusted_proxies: Vec<String>,
    /// TLS on the public and the admin listener (`listener_tls.rs`).
    pub tls: ListenerTls,
    /// A proxy in front (an ingress, a load balancer) terminates TLS, so the
    /// listeners may speak plain HTTP on a non-loopback address: without this
    /// or `tls`, the production check (`production.rs`) refuses such a bind.
    #[serde(default)]
    pub tls_terminated_by_proxy: bool,
}

impl HttpSettings {
    /// A body limit too small for any request, a bad CIDR, a bad listen
    /// address or unusable TLS files.
    pub fn validate(&self) -> anyhow::Result<()> {
        self.tls.validate()?;
        check::all(&[(
            self.max_body_bytes >= 64,
            "http.max_body_bytes",
            "must be >= 64",
        )])?;
        for cidr in &self.trusted_proxies {
            if let Err(why) = Cidr::parse(cidr) {
                bail!("invalid configuration key `http.trusted_proxies`: {why}");
            }
        }
        check::socket_addr("http.bind", &self.bind)
    }
}

/// `Debug` is written by hand in `redact.rs`: the token never shows.
#[derive(Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct AdminSettings {
    /// Bearer token of the admin routes; `None` locks them (401).
    pub token: Option<String>,
    /// Listener of the admin routes (and `/metrics`, `/console`); `None`: they
    /// are served on `http.bind` with everything else.
    pub bind: Option<String>,
}

impl AdminSettings {
    /// The separate listener, when there is one, must be a socket address.
    /// (The token's strength is a production rule: `production.rs`.)
    pub fn validate(&self) -> anyhow::Result<()> {
        match &self.bind {
            Some(bind) => check::socket_addr("admin.bind", bind),
            None => Ok(()),
        }
    }
}

/// Rate limits against scalpers and bots (0 = off).
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct LimitSettings {
    /// Reservation attempts one buyer may make per second per SKU (refill rate).
    pub per_user_rps: f64,
    /// Attempts one buyer may make at once (bucket size).
    pub per_user_burst: u32,
    /// Requests one client IP may make per second to the public routes.
    pub per_ip_rps: f64,
    /// Requests one client IP may make at once.
    pub per_ip_burst: u32,
    /// Requests one authenticated client (`auth.clients`) may make per second
    /// to the public routes, per api process.
    pub per_client_rps: f64,
    /// Requests one authenticated client may make at once.
    pub per_client_burst: u32,
    /// Holds of one buyer on one SKU that may lapse unpaid (expire) within
    /// the replay window before the buyer is refused new ones there
    /// (409 `LAPSE_LIMIT`); 0 = off. Against denial of inventory by cycling
    /// holds (OWASP OAT-021).
    pub max_lapsed_holds: u32,
    /// Live units one buyer may hold at once across every SKU, single
    /// reservations and order lines together (409 `HOLD_BUDGET_EXCEEDED`);
    /// 0 = off. Against one buyer holding a unit of every SKU (OWASP
    /// OAT-021); `redis/budget.rs`.
    pub buyer_max_live_units: u32,
}

/// The most `limits.max_lapsed_holds` may be: beyond it the cap stops
/// nothing a sale would notice.
pub const MAX_LAPSED_HOLDS_MAX: u32 = 1000;

/// The most `limits.buyer_max_live_units` may be: a bound that keeps a
/// buyer's budget hash (one field per held line) small to scan.
pub const BUYER_MAX_LIVE_UNITS_MAX: u32 = 1_000_000;

impl LimitSettings {
    /// Each rate is a finite number >= 0, and a limit that is on has room for
    /// at least one request. Errors name the burst key of the pair at fault.
    pub fn validate(&self) -> anyhow::Result<()> {
        let pairs = [
            (
                self.per_user_rps,
                self.per_user_burst,
                "limits.per_user_burst",
            ),
            (self.per_ip_rps, self.per_ip_burst, "limits.per_ip_burst"),
            (
                self.per_client_rps,
                self.per_client_burst,
                "limits.per_client_burst",
            ),
        ];
        for (rate, burst, key) in pairs {
            if !(rate >= 0.0 && rate.is_finite()) {
                bail!("invalid configuration key `{key}`: the rate must be a number >= 0");
            }
            if rate > 0.0 && burst < 1 {
                bail!("invalid configuration key `{key}`: must be >= 1 when the rate is on");
            }
        }
        if self.max_lapsed_holds > MAX_LAPSED_HOLDS_MAX {
            bail!(
                "invalid configuration key `limits.max_lapsed_holds`: must be 0 (off) to {MAX_LAPSED_HOLDS_MAX}"
            );
        }
        if self.buyer_max_live_units > BUYER_MAX_LIVE_UNITS_MAX {
            bail!(
                "invalid configuration key `limits.buyer_max_live_units`: must be 0 (off) to {BUYER_MAX_LIVE_UNITS_MAX}"
            );
        }
        Ok(())
    }
}
