//! The reconciler's findings as events: `stockd.reconcile.drift` for an
//! unhealthy verdict — once, until the SKU's verdict or drift changes, so a
//! standing finding does not repeat every pass — and
//! `stockd.reconcile.repaired` for every repair.

use serde_json::json;

use super::{Report, SkuReport};
use crate::domain::SkuId;
use crate::events::{Event, EventType, Outgoing};

/// The events of `report`, given the pass before it, collected in `out`.
pub fn events(
    mut out: Outgoing,
    report: &Report,
    previous: Option<&Report>,
    time_ms: u64,
) -> Outgoing {
    for line in &report.skus {
        let Ok(sku) = SkuId::new(line.sku_id) else {
            continue;
        };
        let before = previous.and_then(|p| p.skus.iter().find(|l| l.sku_id == line.sku_id));
        let repeated = before.is_some_and(|b| b.verdict == line.verdict && b.drift == line.drift);
        if !line.verdict.is_healthy() && !repeated {
            out.push(Event::sku(EventType::Drift, sku, data(line), time_ms));
        }
        if line.repaired {
            out.push(Event::sku(EventType::Repaired, sku, data(line), time_ms));
        }
    }
    out
}

fn data(line: &SkuReport) -> serde_json::Value {
    json!({
        "sku_id": line.sku_id,
        "verdict": line.verdict.as_str(),
        "drift": line.drift,
        "redis_available": line.redis_available,
        "mysql_available": line.mysql_available,
    })
}
