//! Alerts of the reconciler: an error log line, a metric, and an optional
//! webhook POST — once per finding, not once per check.

pub mod webhook;

use std::collections::HashMap;
use std::sync::Mutex;

use serde_json::json;

use crate::config::{ReconcileSettings, WebhookFormat};
use crate::domain::SkuId;

/// One finding worth an alert.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    pub sku_id: SkuId,
    pub verdict: &'static str,
    pub drift: i64,
    pub redis_available: Option<i64>,
    pub mysql_available: i64,
    pub in_flight: i64,
    pub repaired: bool,
}

pub struct Alerter {
    settings: ReconcileSettings,
    /// The last finding alerted per SKU: an ongoing finding is alerted once.
    ongoing: Mutex<HashMap<SkuId, (&'static str, i64)>>,
}

impl Alerter {
    pub fn new(settings: ReconcileSettings) -> Self {
        Self {
            settings,
            ongoing: Mutex::new(HashMap::new()),
        }
    }

    /// Records a healthy check: the next finding for this SKU alerts again.
    pub fn resolved(&self, sku: SkuId) {
        self.ongoing.lock().expect("lock poisoned").remove(&sku);
    }

    /// Alerts a finding unless the same one (verdict and drift) is ongoing.
    pub async fn raise(&self, finding: &Finding) {
        let key = (finding.verdict, finding.drift);
        {
            let mut ongoing = self.ongoing.lock().expect("lock poisoned");
            if ongoing.get(&finding.sku_id) == Some(&key) {
                return;
            }
            ongoing.insert(finding.sku_id, key);
        }
        tracing::error!(
            sku.id = %finding.sku_id, verdict = finding.verdict, drift_units = finding.drift,
            redis_available = ?finding.redis_available, mysql_available = finding.mysql_available,
            in_flight_units = finding.in_flight, repaired = finding.repaired,
            "reconcile.finding: stores disagree"
        );
        metrics::counter!("stockd_reconcile_alerts_total", "verdict" => finding.verdict)
            .increment(1);
        if let Some(url) = &self.settings.webhook_url {
            let body = self.body(finding);
            webhook::post_with_retries(url, &body, &self.settings).await;
        }
    }

    fn body(&self, f: &Finding) -> String {
        match self.settings.webhook_format {
            WebhookFormat::Json => json!({
                "source": "stockd",
                "sku_id": f.sku_id.get(),
                "verdict": f.verdict,
                "drift": f.drift,
                "redis_available": f.redis_available,
                "mysql_available": f.mysql_available,
                "in_flight": f.in_flight,
                "repaired": f.repaired,
            })
            .to_string(),
            WebhookFormat::Dingtalk => json!({
                "msgtype": "text",
                "text": {"content": format!(
                    "stockd: SKU {} {} (drift {} units; redis {:?}, mysql {}, in flight {}; repaired: {})",
                    f.sku_id, f.verdict, f.drift, f.redis_available, f.mysql_available, f.in_flight, f.repaired
                )},
            })
            .to_string(),
        }
    }
}
