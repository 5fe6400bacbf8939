//! `stockd.sku.sale_opened` / `stockd.sku.sale_closed`: told once per
//! opening and closing, once Redis's clock reached it. The marker of each
//! (`db::sale_schedule::Marker`) is flipped in the transaction that stages
//! the event, so a second reconciler, or a pass after a restart, finds it
//! told and stages nothing. A window moved before it opens is told at its
//! new opening; a SKU without a window tells nothing.

use serde_json::json;

use crate::clock::rfc3339_ms;
use crate::db::sale_schedule::{self, Marker, Window};
use crate::db::{Db, DbError};
use crate::domain::{GateRefusal, SaleTerms, SkuId};
use crate::events::{Event, EventType};

/// Tells every opening and closing at or before `now_ms` not told yet (at
/// most `limit` SKUs); returns what this call told.
pub(super) async fn tell_due(
    db: &Db,
    now_ms: i64,
    limit: usize,
) -> Result<Vec<(SkuId, EventType)>, DbError> {
    let mut told = Vec::new();
    // The query preselects; whether a sale opened or closed is the
    // domain's to say (`SaleTerms`, one rule in one home).
    for window in sale_schedule::due_tellings(db, now_ms, limit).await? {
        let terms = SaleTerms {
            opens_at_ms: Some(window.opens_ms),
            closes_at_ms: window.closes_ms,
            requires_pass: false,
        };
        let closed = matches!(terms.window_refusal(now_ms, 0), Some(GateRefusal::Ended));
        let moments = [
            (
                EventType::SaleOpened,
                Marker::OpenedTold,
                Some(window.opens_ms),
                terms.has_opened(now_ms),
            ),
            (
                EventType::SaleClosed,
                Marker::ClosedTold,
                window.closes_ms,
                closed,
            ),
        ];
        for (kind, marker, at_ms, passed) in moments {
            let (Some(at_ms), true) = (at_ms, passed) else {
                continue;
            };
            let mut events = db.outgoing();
            // The event's time is the moment itself: every telling the same.
            events.push(Event::sale(
                kind,
                window.sku_id,
                at_ms,
                data(&window),
                at_ms.max(0) as u64,
            ));
            let time_ms = crate::clock::unix_ms();
            if sale_schedule::mark(db, window.sku_id, marker, at_ms, events, time_ms).await? {
                tracing::info!(sku.id = %window.sku_id, event.type = kind.as_str(), at_ms,
                    "sale_schedule.told: the sale's moment told");
                told.push((window.sku_id, kind));
            }
        }
    }
    Ok(told)
}

/// The window as the SKU views show it (RFC 3339, milliseconds, UTC).
pub(super) fn data(window: &Window) -> serde_json::Value {
    let at = |ms: i64| rfc3339_ms(ms.max(0) as u64);
    json!({
        "sku_id": window.sku_id.get(),
        "opens_at": at(window.opens_ms),
        "closes_at": window.closes_ms.map(at),
    })
}
