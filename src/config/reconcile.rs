//! The `reconcile` section: how often Redis and MySQL are compared, which
//! ages tell work in flight from stuck or lost work, and the alert webhook.

use anyhow::bail;
use serde::{Deserialize, Serialize};

use super::check;

/// Body format of the alert webhook.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum WebhookFormat {
    /// The finding as a JSON object.
    Json,
    /// DingTalk robot text message: `{"msgtype":"text","text":{"content":...}}`.
    Dingtalk,
}

/// `Debug` is written in `redact.rs`: only the webhook's scheme and host show.
#[derive(Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ReconcileSettings {
    /// Time between checks of the reconciler role.
    pub interval_ms: u64,
    /// Repair drift (REDIS_AHEAD at once, REDIS_BEHIND once stable).
    pub repair: bool,
    /// Winning reservations listed per SKU for the exact in-flight count.
    pub max_winners: usize,
    /// Age past which a reservation Redis took and MySQL still lacks counts as
    /// STUCK rather than IN_FLIGHT (contract §8).
    pub stuck_after_ms: u64,
    /// Youngest age of a reservation Redis took and MySQL lacks that may be
    /// judged lost by MySQL (MYSQL_BEHIND), with the pipeline drained.
    pub lost_after_ms: u64,
    /// Longest wait of a warm-up for its probe to come through the deduct
    /// queue when deductions are queued (contract §8.1).
    pub warmup_probe_wait_ms: u64,
    /// Optional alert webhook (plain `http://`).
    pub webhook_url: Option<String>,
    pub webhook_format: WebhookFormat,
    /// Attempts per alert before it is given up (logged).
    pub webhook_attempts: u32,
    pub webhook_timeout_ms: u64,
}

impl ReconcileSettings {
    /// The age bounds are ordered: in flight (younger than `relay_idle_ms`, the
    /// relay's retry age, from `relay.idle_ms`) < lost < stuck; an order
    /// attempt's lines are the order sweeper's until `orders.hold_timeout_ms +
    /// orders.sweep_interval_ms` (`order_sweep_ms`), below lost; the webhook is
    /// plain `http://`.
    pub fn validate(&self, relay_idle_ms: u64, order_sweep_ms: u64) -> anyhow::Result<()> {
        check::all(&[
            (
                self.stuck_after_ms > relay_idle_ms,
                "reconcile.stuck_after_ms",
                "must be > relay.idle_ms (the relay's normal retry would look stuck)",
            ),
            (
                self.lost_after_ms <= self.stuck_after_ms,
                "reconcile.lost_after_ms",
                "must be <= reconcile.stuck_after_ms (lost work is told apart before it could look stuck)",
            ),
            (
                (1..=60_000).contains(&self.warmup_probe_wait_ms),
                "reconcile.warmup_probe_wait_ms",
                "must be between 1 and 60000 (a warm-up waits this long for the deduct queue)",
            ),
            (
                order_sweep_ms < self.lost_after_ms,
                "reconcile.lost_after_ms",
                "must be > orders.hold_timeout_ms + orders.sweep_interval_ms (a line of an order attempt the sweeper has not undone yet must not look lost)",
            ),
        ])?;
        if let Some(url) = &self.webhook_url {
            if !url.starts_with("http://") || url.len() <= "http://".len() {
                bail!("invalid configuration key `reconcile.webhook_url`: must be an http:// URL");
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::config::{repo_config, Settings};

    #[test]
    fn a_lost_bound_above_the_stuck_bound_is_refused() {
        let s = Settings::load_with_vars(&repo_config(), "local", &[]).unwrap();
        assert_eq!(s.reconcile.lost_after_ms, 10_000);
        let vars = vec![(
            "STOCKD__RECONCILE__LOST_AFTER_MS".to_string(),
            "60001".to_string(),
        )];
        let err = Settings::load_with_vars(&repo_config(), "local", &vars).unwrap_err();
        assert!(err.to_string().contains("reconcile.lost_after_ms"), "{err}");
    }

    /// A line of an order attempt is the order sweeper's until
    /// `orders.hold_timeout_ms + orders.sweep_interval_ms`; a lost bound at
    /// or below it would judge such a line lost (issue 50 D1).
    #[test]
    fn a_lost_bound_not_above_the_order_sweep_bound_is_refused() {
        let vars = |pairs: &[(&str, &str)]| -> Vec<(String, String)> {
            (pairs.iter())
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        let lost = "STOCKD__RECONCILE__LOST_AFTER_MS";
        let hold = "STOCKD__ORDERS__HOLD_TIMEOUT_MS";
        for refused in [vec![(lost, "6000")], vec![(hold, "9500")]] {
            let err = Settings::load_with_vars(&repo_config(), "local", &vars(&refused))
                .unwrap_err()
                .to_string();
            for key in [
                "reconcile.lost_after_ms",
                "orders.hold_timeout_ms",
                "orders.sweep_interval_ms",
            ] {
                assert!(err.contains(key), "{refused:?}: {err}");
            }
        }
        Settings::load_with_vars(&repo_config(), "local", &vars(&[(lost, "6001")])).unwrap();
        Settings::load_with_vars(&repo_config(), "test", &[]).unwrap();
    }

    #[test]
    fn a_stuck_bound_below_the_relay_retry_age_is_refused() {
        let s = Settings::load_with_vars(&repo_config(), "local", &[]).unwrap();
        assert_eq!(s.reconcile.stuck_after_ms, 60_000);
        let vars = vec![(
            "STOCKD__RECONCILE__STUCK_AFTER_MS".to_string(),
            "100".to_string(),
        )];
        let err = Settings::load_with_vars(&repo_config(), "local", &vars).unwrap_err();
        assert!(
            err.to_string().contains("reconcile.stuck_after_ms"),
            "{err}"
        );
    }
}
