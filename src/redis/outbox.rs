//! Outbox stream entries: the deductions the reserve script recorded, waiting for
//! the broker's confirm. Parsing lives here so the api's publish path and the
//! relay read entries the same way.

use std::collections::HashMap;

use crate::domain::Deduction;
use crate::domain::{RequestId, SkuId, UserId};

use super::RedisError;

/// One outbox entry: the stream id and the deduction it carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutboxEntry {
    pub id: String,
    pub message: Deduction,
}

impl OutboxEntry {
    /// Builds an entry from the field/value pairs of `XRANGE`.
    pub fn from_fields(id: String, fields: &HashMap<String, String>) -> Result<Self, RedisError> {
        let get = |name: &str| {
            fields
                .get(name)
                .ok_or_else(|| RedisError::BadReply(format!("outbox entry {id} lacks {name}")))
        };
        let bad = |name: &str| RedisError::BadReply(format!("outbox entry {id}: bad {name}"));
        let num = |name: &str| -> Result<u64, RedisError> {
            get(name)?.parse::<u64>().map_err(|_| bad(name))
        };
        let message = Deduction {
            request_id: RequestId::parse(get("request_id")?).map_err(|_| bad("request_id"))?,
            sku_id: SkuId::new(num("sku_id")?).map_err(|_| bad("sku_id"))?,
            user_id: UserId::new(num("user_id")?).map_err(|_| bad("user_id"))?,
            count: u32::try_from(num("count")?).map_err(|_| bad("count"))?,
            created_ms: num("created_ms")?,
            expires_ms: num("expires_ms")?,
        };
        Ok(Self { id, message })
    }
}
