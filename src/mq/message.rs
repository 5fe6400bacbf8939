//! The deduction message: the full content of one reservation, so the consumer
//! can apply it without asking Redis anything.

use serde::{Deserialize, Serialize};

use crate::domain::{RequestId, SkuId, UserId};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeductionMessage {
    pub request_id: RequestId,
    pub sku_id: SkuId,
    pub user_id: UserId,
    pub count: u32,
    /// Reservation time, Redis clock, ms since epoch.
    pub created_ms: u64,
    /// Time after which an unpaid reservation is released, ms since epoch.
    pub expires_ms: u64,
}

impl DeductionMessage {
    pub fn to_bytes(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("a deduction always serializes")
    }

    /// Parses and validates a delivery body; `Err` means a poison message.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, String> {
        let msg: Self = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
        if msg.count == 0 || msg.count > 1000 {
            return Err(format!("count {} out of 1..=1000", msg.count));
        }
        Ok(msg)
    }

    /// The AMQP `message_id`: unique per SKU as the idempotency key is.
    pub fn message_id(&self) -> String {
        self.request_id.to_string()
    }
}

/// Several deductions in one broker message (the outbox's group commit).
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct DeductionBatch {
    deductions: Vec<DeductionMessage>,
}

/// Most deductions one message may carry (a bound for the consumer's memory).
pub const BATCH_MAX: usize = 1000;

/// Encodes deductions for one message: a single one as the plain object (its
/// `message_id` is its request id), several as `{"deductions": [...]}`.
pub fn encode(msgs: &[DeductionMessage]) -> Vec<u8> {
    assert!(
        !msgs.is_empty() && msgs.len() <= BATCH_MAX,
        "batch size out of range"
    );
    if msgs.len() == 1 {
        return msgs[0].to_bytes();
    }
    serde_json::to_vec(&DeductionBatch {
        deductions: msgs.to_vec(),
    })
    .expect("a batch always serializes")
}

/// The AMQP `message_id` of a message carrying `msgs`: the request id of a
/// single deduction, and for a batch the first request id with the batch size
/// (`<id>+<n>`).
pub fn message_id_of(msgs: &[DeductionMessage]) -> Option<String> {
    match msgs {
        [] => None,
        [one] => Some(one.message_id()),
        [first, ..] => Some(format!("{}+{}", first.message_id(), msgs.len())),
    }
}

/// Decodes a delivery into its deductions; `Err` means a poison message.
pub fn decode(bytes: &[u8]) -> Result<Vec<DeductionMessage>, String> {
    if let Ok(single) = DeductionMessage::from_bytes(bytes) {
        return Ok(vec![single]);
    }
    let batch: DeductionBatch = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
    if batch.deductions.is_empty() || batch.deductions.len() > BATCH_MAX {
        return Err(format!("batch of {} deductions", batch.deductions.len()));
    }
    for msg in &batch.deductions {
        if msg.count == 0 || msg.count > 1000 {
            return Err(format!("count {} out of 1..=1000", msg.count));
        }
    }
    Ok(batch.deductions)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_round_trips_and_poison_is_refused() {
        let msg = DeductionMessage {
            request_id: RequestId::parse("r-1").unwrap(),
            sku_id: SkuId::new(1).unwrap(),
            user_id: UserId::new(2).unwrap(),
            count: 3,
            created_ms: 10,
            expires_ms: 20,
        };
        assert_eq!(DeductionMessage::from_bytes(&msg.to_bytes()).unwrap(), msg);
        assert_eq!(
            decode(&encode(std::slice::from_ref(&msg))).unwrap(),
            vec![msg.clone()]
        );
        let two = vec![msg.clone(), msg.clone()];
        assert_eq!(decode(&encode(&two)).unwrap(), two);
        assert!(decode(br#"{"deductions":[]}"#).is_err());
        assert_eq!(message_id_of(&two).as_deref(), Some("r-1+2"));
        assert_eq!(message_id_of(&two[..1]).as_deref(), Some("r-1"));
        assert_eq!(message_id_of(&[]), None);
        for poison in [
            &b"not json"[..],
            br#"{"request_id":"a b","sku_id":1,"user_id":2,"count":3,"created_ms":1,"expires_ms":2}"#,
            br#"{"request_id":"a","sku_id":0,"user_id":2,"count":3,"created_ms":1,"expires_ms":2}"#,
            br#"{"request_id":"a","sku_id":1,"user_id":2,"count":0,"created_ms":1,"expires_ms":2}"#,
        ] {
            assert!(DeductionMessage::from_bytes(poison).is_err());
        }
    }
}
