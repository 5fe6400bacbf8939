//! The dead-letter listing (`GET /v1/admin/dlq`), described: mirrors of
//! `ops::dlq`'s types (why mirrors: `mirrors/mod.rs`). [`DlqKind`] also
//! describes the `queue` query parameter, which the route reads as the real one.

use serde::Serialize;
use utoipa::ToSchema;

/// Which dead-letter queue.
#[derive(ToSchema, Serialize)]
#[allow(dead_code)] // the schema of `ops::dlq::DlqKind`, which the route serializes
#[serde(rename_all = "lowercase")]
pub enum DlqKind {
    /// `<p>deduct.dlq`: deductions the consumer could not apply.
    Deduct,
    /// `<p>expiry.dlq`: expiry messages the closer could not handle.
    Expiry,
}

/// `stockd dlq list` / `GET /v1/admin/dlq`.
#[derive(ToSchema)]
#[allow(dead_code)] // the schema of `ops::dlq::DlqListing`, which the route serializes
pub struct DlqListing {
    queue: DlqKind,
    /// The broker queue read.
    queue_name: String,
    /// Messages read (a message may carry several deductions).
    messages_read: usize,
    /// Messages left unread because the run's bound was reached.
    messages_unread: u32,
    deductions: Vec<DeadDeduction>,
    /// Poison messages (listed only without a SKU filter).
    poison: Vec<PoisonLetter>,
}

/// One dead-lettered deduction.
#[derive(ToSchema, Serialize)]
#[allow(dead_code)] // the schema of `ops::dlq::DeadDeduction`, which the route serializes
pub struct DeadDeduction {
    queue: DlqKind,
    #[schema(minimum = 1, maximum = 9223372036854775807_i64)]
    sku_id: u64,
    request_id: String,
    #[schema(minimum = 1, maximum = 9223372036854775807_i64)]
    user_id: u64,
    count: u32,
    /// Reservation time (Redis clock), ms since the Unix epoch.
    created_ms: u64,
    expires_ms: u64,
    /// `x-stockd-reason`, else the broker's `x-death` reason, else `unknown`.
    reason: String,
    /// `x-stockd-attempt`: trips through the retry queue; `null` when unset.
    #[schema(required = true)]
    attempts: Option<u32>,
    #[schema(required = true)]
    message_id: Option<String>,
    /// Set when the deduction is one line of an order (`request_id` is the
    /// order id): every line of that order. The message names the whole
    /// order, and a replay applies it whole, whichever line it carries.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    order_lines: Option<Vec<DeadOrderLine>>,
}

/// One line of a dead-lettered order.
#[derive(ToSchema, Serialize)]
#[allow(dead_code)] // the schema of `ops::dlq::DeadOrderLine`, which the route serializes
pub struct DeadOrderLine {
    #[schema(minimum = 1, maximum = 9223372036854775807_i64)]
    sku_id: u64,
    count: u32,
}

/// A dead letter that is not a valid deduction message: it can never apply.
#[derive(ToSchema)]
#[allow(dead_code)] // the schema of `ops::dlq::PoisonLetter`, which the route serializes
pub struct PoisonLetter {
    queue: DlqKind,
    reason: String,
    /// Why it does not decode.
    error: String,
    /// The first bytes of its body (lossy UTF-8).
    body_preview: String,
    #[schema(required = true)]
    message_id: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::super::keys_of;
    use crate::ops::dlq as real;

    #[test]
    fn the_dlq_mirrors_match_what_is_served() {
        let deduction = real::DeadDeduction {
            queue: real::DlqKind::Deduct,
            sku_id: 1,
            request_id: "r1".into(),
            user_id: 1,
            count: 1,
            created_ms: 0,
            expires_ms: 0,
            reason: "unknown".into(),
            attempts: None,
            message_id: None,
            order_lines: Some(vec![real::DeadOrderLine {
                sku_id: 1,
                count: 1,
            }]),
        };
        let listing = real::DlqListing {
            queue: real::DlqKind::Expiry,
            queue_name: "p.expiry.dlq".into(),
            messages_read: 2,
            messages_unread: 0,
            deductions: vec![deduction],
            poison: vec![real::PoisonLetter {
                queue: real::DlqKind::Deduct,
                reason: "poison".into(),
                error: "bad".into(),
                body_preview: "x".into(),
                message_id: None,
            }],
        };
        let shown = serde_json::to_value(&listing).unwrap();
        let pairs = [
            keys_of::<super::DlqListing>(&shown),
            keys_of::<super::DeadDeduction>(&shown["deductions"][0]),
            keys_of::<super::DeadOrderLine>(&shown["deductions"][0]["order_lines"][0]),
            keys_of::<super::PoisonLetter>(&shown["poison"][0]),
        ];
        for (described, served) in pairs {
            assert_eq!(described, served);
        }
        let kinds = [real::DlqKind::Deduct, real::DlqKind::Expiry];
        let described = serde_json::to_value(<super::DlqKind as utoipa::PartialSchema>::schema());
        assert_eq!(
            described.unwrap()["enum"],
            serde_json::to_value(kinds).unwrap()
        );
    }
}
