//! A request id Redis admitted twice (it lost the first record): `readmit.lua`
//! aligns the record with the ledger row and returns a doubly held unit.

use super::{scripts, RedisError, Reservations};
use crate::domain::Readmission;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadmitOutcome {
    /// The second admission's unit went back to `available`.
    Returned,
    /// Only the record's times were aligned: the second admission re-did a lost write.
    Retimed,
    /// Already settled (a redelivery), or the record is another one.
    Noop,
}

impl Reservations {
    pub async fn settle_readmission(&self, r: &Readmission) -> Result<ReadmitOutcome, RedisError> {
        let keys = &self.core.keys;
        let layout = self.buckets.layout(r.msg.sku_id).await?;
        let bucket = layout.bucket_of(r.msg.user_id);
        let tag = layout.tag(bucket);
        let mut invocation = scripts::READMIT.prepare_invoke();
        invocation
            .key(keys.sku_at(tag))
            .key(keys.reservation_at(tag, &r.msg.request_id))
            .arg(r.msg.created_ms)
            .arg(r.msg.count)
            .arg(r.row_created_ms)
            .arg(r.row_expires_ms)
            .arg(keys.soldout_channel())
            .arg(layout.event_subject(bucket));
        let reply: Vec<String> = self
            .core
            .run(|mut c| async move { invocation.invoke_async(&mut c).await })
            .await?;
        match reply.first().map(String::as_str) {
            Some("RETURNED") => Ok(ReadmitOutcome::Returned),
            Some("RETIMED") => Ok(ReadmitOutcome::Retimed),
            Some("NOOP") => Ok(ReadmitOutcome::Noop),
            _ => Err(RedisError::BadReply(format!("readmit {reply:?}"))),
        }
    }
}
