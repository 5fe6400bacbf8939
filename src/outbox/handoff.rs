//! Publish one outbox entry with a confirm; on the confirm, queue its removal.

use std::sync::Arc;

use super::OutboxAcker;
use crate::domain::SkuId;
use crate::mq::{DeductionMessage, PublishError, Publisher};

#[derive(Clone)]
pub struct Handoff {
    publisher: Arc<Publisher>,
    acker: OutboxAcker,
}

impl Handoff {
    pub fn new(publisher: Arc<Publisher>, acker: OutboxAcker) -> Self {
        Self { publisher, acker }
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
        self.publisher.publish_deduction(msg).await?;
        self.acker.ack(sku, entry_id);
        Ok(())
    }
}
