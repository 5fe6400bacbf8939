//! The event relay: publishes the events that committed transactions staged
//! in `event_outbox`, with confirms, and stamps them published. Every role runs
//! one (`roles::run`); `SKIP LOCKED` lets them share the table without waiting
//! on each other.
//!
//! One pass is one transaction: claim up to `events.relay_batch` rows, publish
//! them (grouped by type, `cloud::messages`), stamp them, commit. A failed
//! publish rolls back, so the rows stay for the next pass; a commit lost after
//! the broker confirmed publishes them again — at least once, and with the
//! same ids, which subscribers deduplicate.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::clock::unix_ms;
use crate::db::{event_outbox, ledger, Db, DbError};
use crate::events::{cloud, Event, EventPolicy};
use crate::mq::{PublishError, Publisher};

#[derive(Debug, thiserror::Error)]
pub enum RelayError {
    #[error(transparent)]
    Db(#[from] DbError),
    #[error(transparent)]
    Publish(#[from] PublishError),
}

pub struct EventRelay {
    db: Db,
    publisher: Arc<Publisher>,
    policy: EventPolicy,
    batch: usize,
    interval: Duration,
}

impl EventRelay {
    pub fn new(db: Db, publisher: Arc<Publisher>, settings: &crate::config::EventSettings) -> Self {
        Self {
            db,
            publisher,
            policy: EventPolicy::from_settings(settings),
            batch: settings.relay_batch,
            interval: Duration::from_millis(settings.relay_interval_ms),
        }
    }

    /// Passes until cancelled; no sleep after a full pass. A failure is
    /// logged once per outage by the outage log (`outage.start`, dependency
    /// `amqp` or `mysql`) and retried next pass.
    pub async fn run_until_stopped(self, cancel: CancellationToken) {
        while !cancel.is_cancelled() {
            let full = match self.run_once().await {
                Ok(published) => published >= self.batch,
                // Once per outage (the outage log), not once per pass.
                Err(RelayError::Db(err)) => {
                    crate::health::outage::failed("mysql", &err);
                    false
                }
                Err(RelayError::Publish(err)) => {
                    crate::health::outage::failed("amqp", &err);
                    false
                }
            };
            if !full {
                crate::shutdown::sleep_or_cancel(self.interval, &cancel).await;
            }
        }
    }

    /// One pass; returns how many events were published.
    pub async fn run_once(&self) -> Result<usize, RelayError> {
        let mut conn = self.db.bounded(self.db.conn()).await?;
        let mut tx = self
            .db
            .bounded(async {
                (conn.start_transaction(ledger::tx_opts()).await).map_err(DbError::from)
            })
            .await?;
        let staged = self
            .db
            .bounded(event_outbox::claim(&mut tx, self.batch))
            .await?;
        if staged.is_empty() {
            return Ok(0);
        }
        let with_ids: Vec<(String, &Event)> = (staged.iter())
            .map(|s| (cloud::final_id(&s.event.id, s.seq), &s.event))
            .collect();
        let messages = cloud::messages(&with_ids, self.policy.source());
        let sends = messages.iter().map(|m| self.publisher.publish_events(m));
        for sent in futures_util::future::join_all(sends).await {
            sent?;
        }
        let seqs: Vec<u64> = staged.iter().map(|s| s.seq).collect();
        self.db
            .bounded(async {
                event_outbox::mark_published(&mut tx, &seqs, unix_ms()).await?;
                tx.commit().await.map_err(DbError::from)
            })
            .await?;
        crate::health::outage::answered("amqp");
        for m in &messages {
            metrics::counter!("stockd_events_published_total", "type" => m.routing_key)
                .increment(m.events as u64);
        }
        Ok(staged.len())
    }
}
