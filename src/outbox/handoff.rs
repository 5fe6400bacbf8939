//! Publish one outbox entry with a confirm (through the group commit); on the
//! confirm, its removal from the outbox is queued.

use std::sync::Arc;

use super::GroupCommit;
use crate::domain::SkuId;
use crate::mq::{DeductionMessage, PublishError, Publisher};

#[derive(Clone)]
pub struct Handoff {
    publisher: Arc<Publisher>,
    group: GroupCommit,
}

impl Handoff {
    pub fn new(publisher: Arc<Publisher>, group: GroupCommit) -> Self {
        Self { publisher, group }
    }

    pub fn publisher(&self) -> &Arc<Publisher> {
        &self.publisher
    }

    /// Publishes the deduction; on an ack, the entry leaves the outbox. On any
    /// failure the entry stays, and the relay publishes it later.
    pub async fn publish(
        &self,
        sku: SkuId,
        entry_id: String,
        msg: &DeductionMessage,
    ) -> Result<(), PublishError> {
        self.group.publish(sku, entry_id, msg.clone()).await
    }
}
