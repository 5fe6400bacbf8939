//! A stock movement (`GET /v1/admin/skus/{sku_id}/movements`, and the answer
//! of an adjustment), described: a mirror of `db::movements::Movement` (why
//! a mirror: `mirrors/mod.rs`).

use utoipa::ToSchema;

/// A recorded movement, as the movements endpoint lists it.
#[derive(ToSchema)]
#[allow(dead_code)] // the schema of `db::movements::Movement`, which the route serializes
pub struct Movement {
    /// Position in the SKU's history; pass the last one seen as `after`.
    id: u64,
    sku_id: u64,
    /// `create`, `restock`, `adjustment` (MySQL and Redis moved by `delta`),
    /// or `repair`, `warmup` (Redis corrected to MySQL's count: `delta` 0).
    kind: String,
    /// Units added (positive) or removed (negative), from total and available alike.
    delta: i64,
    total_before: i64,
    total_after: i64,
    /// MySQL's available before and after (what the ledger has not promised).
    available_before: i64,
    available_after: i64,
    reason: Option<String>,
    reference: Option<String>,
    /// Who made the change: a client's name (`auth.clients`) or `admin-token`.
    actor: String,
    adjustment_id: Option<String>,
    /// When it was committed, milliseconds since the Unix epoch.
    created_at_ms: u64,
    /// `repair` and `warmup`: Redis' available before (null: Redis held
    /// nothing) and after the correction; null for the other kinds.
    redis_available_before: Option<i64>,
    redis_available_after: Option<i64>,
}

#[cfg(test)]
mod tests {
    use super::super::keys_of;

    #[test]
    fn the_movement_mirror_matches_what_is_served() {
        let movement = crate::db::movements::Movement {
            id: 1,
            sku_id: 1,
            kind: "create".into(),
            delta: 10,
            total_before: 0,
            total_after: 10,
            available_before: 0,
            available_after: 10,
            reason: None,
            reference: None,
            actor: "admin-token".into(),
            adjustment_id: None,
            created_at_ms: 0,
            redis_available_before: None,
            redis_available_after: None,
        };
        let shown = serde_json::to_value(&movement).unwrap();
        let (described, served) = keys_of::<super::Movement>(&shown);
        assert_eq!(described, served);
    }
}
