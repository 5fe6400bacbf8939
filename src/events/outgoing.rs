//! The events one MySQL transaction will stage, and the stock of each SKU it
//! moved, so the SKU-wide crossings (sold out, back in stock, low stock) are
//! decided once per transaction from where the SKU's available started and
//! where it ended — never for a dip that the same commit undid.
//!
//! It knows the process' [`EventPolicy`], so an event nobody wants is never
//! built: producers ask [`Outgoing::wants`] first, and with events off a
//! transaction does no event work beyond its stock tally.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::json;

use super::{Event, EventPolicy, EventType};
use crate::domain::SkuId;

/// One SKU's available over a transaction.
#[derive(Debug, Clone, Copy)]
struct Tally {
    total: i64,
    before: i64,
    now: i64,
    low_threshold: Option<u32>,
}

/// Collected while a transaction runs; `db::event_outbox::stage` writes it
/// before the commit.
#[derive(Debug)]
pub struct Outgoing {
    policy: Arc<EventPolicy>,
    events: Vec<Event>,
    skus: BTreeMap<SkuId, Tally>,
}

impl Outgoing {
    /// An empty collector keeping the events `policy` wants (`Db::outgoing`).
    pub fn new(policy: Arc<EventPolicy>) -> Self {
        Self {
            policy,
            events: Vec::new(),
            skus: BTreeMap::new(),
        }
    }

    /// Whether events of `kind` are kept: ask before building one.
    pub fn wants(&self, kind: EventType) -> bool {
        self.policy.wants(kind)
    }

    /// The SKU row was locked with this stock (the first lock of the
    /// transaction counts; a second lock of the same row changes nothing).
    pub fn locked(&mut self, sku: SkuId, total: i64, available: i64, low_threshold: Option<u32>) {
        self.skus.entry(sku).or_insert(Tally {
            total,
            before: available,
            now: available,
            low_threshold,
        });
    }

    /// The transaction moved the SKU's available (and total) by these deltas.
    pub fn moved(&mut self, sku: SkuId, available_delta: i64, total_delta: i64) {
        if let Some(tally) = self.skus.get_mut(&sku) {
            tally.now += available_delta;
            tally.total += total_delta;
        }
    }

    /// The SKU's available as the transaction has it now.
    pub fn available(&self, sku: SkuId) -> Option<i64> {
        self.skus.get(&sku).map(|t| t.now)
    }

    /// Keeps `event` if its kind is wanted.
    pub fn push(&mut self, event: Event) {
        if self.wants(event.kind) {
            self.events.push(event);
        }
    }

    /// The events pushed so far, taken out (the SKU tallies stay, so the
    /// crossings are still decided at [`Self::into_events`]).
    pub fn take_events(&mut self) -> Vec<Event> {
        std::mem::take(&mut self.events)
    }

    /// Nothing to stage: no event kept, and no SKU that moved (or events off).
    pub fn is_empty(&self) -> bool {
        !self.policy.is_on()
            || self.events.is_empty() && self.skus.values().all(|t| t.before == t.now)
    }

    /// Every event, the SKU crossings last (stamped `time_ms`).
    pub fn into_events(mut self, time_ms: u64) -> Vec<Event> {
        for (sku, tally) in &self.skus {
            let wanted = crossings(tally.before, tally.now, tally.low_threshold);
            for kind in wanted.into_iter().filter(|k| self.policy.wants(*k)) {
                let mut data = json!({
                    "sku_id": sku.get(),
                    "total": tally.total.max(0),
                    "available": tally.now.max(0),
                });
                if let (EventType::LowStock, Some(threshold)) = (kind, tally.low_threshold) {
                    data["threshold"] = json!(threshold);
                }
                self.events.push(Event::sku(kind, *sku, data, time_ms));
            }
        }
        self.events
    }
}

/// The SKU-wide events of available going from `before` to `after`:
/// sold out on reaching 0, back in stock on leaving 0, low stock on falling
/// to or below the threshold from above it (and not to 0, which is sold out).
pub fn crossings(before: i64, after: i64, low_threshold: Option<u32>) -> Vec<EventType> {
    let mut kinds = Vec::new();
    if before > 0 && after <= 0 {
        kinds.push(EventType::SoldOut);
    }
    if before <= 0 && after > 0 {
        kinds.push(EventType::BackInStock);
    }
    if let Some(threshold) = low_threshold.map(i64::from) {
        if before > threshold && after <= threshold && after > 0 {
            kinds.push(EventType::LowStock);
        }
    }
    kinds
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crossings_name_each_edge_once() {
        assert_eq!(crossings(3, 0, None), vec![EventType::SoldOut]);
        assert_eq!(crossings(0, 2, None), vec![EventType::BackInStock]);
        assert_eq!(crossings(5, 3, None), Vec::<EventType>::new());
        assert_eq!(crossings(11, 10, Some(10)), vec![EventType::LowStock]);
        assert_eq!(crossings(10, 9, Some(10)), Vec::<EventType>::new());
        assert_eq!(crossings(11, 0, Some(10)), vec![EventType::SoldOut]);
        assert_eq!(crossings(0, 0, Some(10)), Vec::<EventType>::new());
    }

    #[test]
    fn a_transaction_that_undoes_its_own_dip_emits_no_crossing() {
        let sku = SkuId::new(1).unwrap();
        let mut out = Outgoing::new(Arc::new(EventPolicy::everything()));
        out.locked(sku, 10, 2, None);
        out.moved(sku, -2, 0);
        out.moved(sku, 1, 0);
        assert_eq!(out.available(sku), Some(1));
        assert!(out.into_events(0).is_empty());
        let mut out = Outgoing::new(Arc::new(EventPolicy::everything()));
        out.locked(sku, 10, 2, None);
        out.locked(sku, 10, 99, None);
        out.moved(sku, -2, 0);
        let events = out.into_events(5);
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].kind, EventType::SoldOut);
        assert_eq!(events[0].data.to_json()["available"], 0);
        assert_eq!(events[0].data.to_json()["total"], 10);
    }
}
