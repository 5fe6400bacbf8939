//! The deduction message's wire format: one [`Deduction`] as a JSON object, or
//! several as `{"deductions": [...]}`, and the AMQP `message_id` that names it.
//! The value itself is the domain's; only the bytes live here.

use serde::{Deserialize, Serialize};

use crate::domain::{Deduction, CLIENT_NAME_MAX_LEN, COUNT_MAX};

/// The body of a message carrying one deduction.
pub fn to_bytes(deduction: &Deduction) -> Vec<u8> {
    serde_json::to_vec(deduction).expect("a deduction always serializes")
}

/// Parses and validates a one-deduction body; `Err` means a poison message.
pub fn from_bytes(bytes: &[u8]) -> Result<Deduction, String> {
    let deduction: Deduction = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
    check_count(&deduction)?;
    Ok(deduction)
}

/// The AMQP `message_id` of one deduction: unique per SKU as the idempotency key is.
pub fn message_id(deduction: &Deduction) -> String {
    deduction.request_id.to_string()
}

fn check_count(deduction: &Deduction) -> Result<(), String> {
    if !deduction.client_in_range() {
        return Err(format!(
            "client: a name of 1..={CLIENT_NAME_MAX_LEN} bytes expected"
        ));
    }
    if deduction.count_in_range() {
        return Ok(());
    }
    Err(format!("count {} out of 1..={COUNT_MAX}", deduction.count))
}

/// Several deductions in one broker message (the outbox's group commit).
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct DeductionBatch {
    deductions: Vec<Deduction>,
}

/// Most deductions one message may carry (a bound for the consumer's memory).
pub const BATCH_MAX: usize = 1000;

/// Encodes deductions for one message: a single one as the plain object (its
/// `message_id` is its request id), several as `{"deductions": [...]}`.
pub fn encode(msgs: &[Deduction]) -> Vec<u8> {
    assert!(
        !msgs.is_empty() && msgs.len() <= BATCH_MAX,
        "batch size out of range"
    );
    if msgs.len() == 1 {
        return to_bytes(&msgs[0]);
    }
    serde_json::to_vec(&DeductionBatch {
        deductions: msgs.to_vec(),
    })
    .expect("a batch always serializes")
}

/// The AMQP `message_id` of a message carrying `msgs`: the request id of a
/// single deduction, and for a batch the first request id with the batch size
/// (`<id>+<n>`).
pub fn message_id_of(msgs: &[Deduction]) -> Option<String> {
    match msgs {
        [] => None,
        [one] => Some(message_id(one)),
        [first, ..] => Some(format!("{}+{}", message_id(first), msgs.len())),
    }
}

/// Decodes a delivery into its deductions; `Err` means a poison message.
pub fn decode(bytes: &[u8]) -> Result<Vec<Deduction>, String> {
    if let Ok(single) = from_bytes(bytes) {
        return Ok(vec![single]);
    }
    let batch: DeductionBatch = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
    if batch.deductions.is_empty() || batch.deductions.len() > BATCH_MAX {
        return Err(format!("batch of {} deductions", batch.deductions.len()));
    }
    for deduction in &batch.deductions {
        check_count(deduction)?;
    }
    Ok(batch.deductions)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{RequestId, SkuId, UserId};

    #[test]
    fn a_message_round_trips_and_poison_is_refused() {
        let msg = Deduction {
            request_id: RequestId::parse("r-1").unwrap(),
            sku_id: SkuId::new(1).unwrap(),
            user_id: UserId::new(2).unwrap(),
            count: 3,
            created_ms: 10,
            expires_ms: 20,
            order: None,
            client: None,
        };
        assert_eq!(from_bytes(&to_bytes(&msg)).unwrap(), msg);
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
            assert!(from_bytes(poison).is_err());
        }
    }
}
