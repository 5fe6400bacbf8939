//! Dead letters made visible and recoverable (`stockd dlq list|replay|drop`,
//! `GET /v1/admin/dlq`, `POST /v1/admin/dlq/replay`).
//!
//! A valid deduction in `<p>deduct.dlq` is a reservation the client was told
//! succeeded that MySQL never applied: stock Redis took and the ledger lacks.
//! Replaying it is safe at any time once its cause is fixed, because the
//! consumer is idempotent per `(sku_id, request_id)`: a deduction already in the
//! ledger is skipped as a duplicate. One broker message may carry several
//! deductions (the outbox's group commit); a `--sku` filter republishes only that
//! SKU's deductions and puts the others back into the DLQ, with their headers,
//! before the original is acknowledged — nothing is ever only in memory.
//!
//! Every run is bounded (`max` messages) and non-destructive for what it does
//! not settle: see [`crate::mq::dlq`] for how browsing returns messages.

use serde::{Deserialize, Serialize};

use crate::domain::Deduction;
use crate::domain::SkuId;
use crate::mq::dlq::{DeadLetter, DlqSession};
use crate::mq::{message, MqError, PublishError, Publisher, Topology};

/// Default bound on messages one CLI run reads (`--max`).
pub const DEFAULT_MAX_MESSAGES: usize = 10_000;
/// Bytes of a poison body shown to the operator.
const POISON_PREVIEW_BYTES: usize = 200;
/// Shown when a dead letter carries no reason at all.
const UNKNOWN_REASON: &str = "unknown";

/// Which dead-letter queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum DlqKind {
    /// `<p>deduct.dlq`: deductions the consumer could not apply.
    Deduct,
    /// `<p>expiry.dlq`: expiry messages the closer could not handle.
    Expiry,
}

impl DlqKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Deduct => "deduct",
            Self::Expiry => "expiry",
        }
    }

    /// The dead-letter queue's name.
    pub fn dlq(self, topology: &Topology) -> &str {
        match self {
            Self::Deduct => &topology.deduct_dlq,
            Self::Expiry => &topology.expiry_dlq,
        }
    }

    /// The queue a replay sends its deductions to.
    pub fn work_queue(self, topology: &Topology) -> &str {
        match self {
            Self::Deduct => &topology.deduct_queue,
            Self::Expiry => &topology.expiry_queue,
        }
    }
}

/// Which dead letters one run looks at.
#[derive(Debug, Clone, Copy)]
pub struct DlqFilter {
    pub kind: DlqKind,
    /// Only this SKU's deductions (poison messages have no SKU: left alone).
    pub sku: Option<SkuId>,
    /// Most messages read in this run.
    pub max_messages: usize,
}

/// One dead-lettered deduction.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DeadDeduction {
    pub queue: DlqKind,
    pub sku_id: u64,
    pub request_id: String,
    pub user_id: u64,
    pub count: u32,
    /// Reservation time (Redis clock), ms since the Unix epoch.
    pub created_ms: u64,
    pub expires_ms: u64,
    /// `x-stockd-reason`, else the broker's `x-death` reason, else `unknown`.
    pub reason: String,
    /// `x-stockd-attempt`: trips through the retry queue; `null` when unset.
    pub attempts: Option<u32>,
    pub message_id: Option<String>,
    /// Set when the deduction is one line of an order (`request_id` is the
    /// order id): every line of that order. The message names the whole
    /// order, and a replay applies it whole, whichever line it carries.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub order_lines: Option<Vec<DeadOrderLine>>,
}

/// One line of a dead-lettered order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DeadOrderLine {
    pub sku_id: u64,
    pub count: u32,
}

/// A dead letter that is not a valid deduction message: it can never apply.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PoisonLetter {
    pub queue: DlqKind,
    pub reason: String,
    /// Why it does not decode.
    pub error: String,
    /// The first bytes of its body (lossy UTF-8).
    pub body_preview: String,
    pub message_id: Option<String>,
}

/// `stockd dlq list` / `GET /v1/admin/dlq`.
#[derive(Debug, Clone, Serialize)]
pub struct DlqListing {
    pub queue: DlqKind,
    /// The broker queue read.
    pub queue_name: String,
    /// Messages read (a message may carry several deductions).
    pub messages_read: usize,
    /// Messages left unread because the run's bound was reached.
    pub messages_unread: u32,
    pub deductions: Vec<DeadDeduction>,
    /// Poison messages (listed only without a SKU filter).
    pub poison: Vec<PoisonLetter>,
}

/// What a `replay` or `drop` run did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct SettleReport {
    /// Dead letters acknowledged (removed from the DLQ).
    pub messages_settled: usize,
    /// Deductions replayed (or dropped).
    pub deductions: Vec<DeadDeduction>,
    /// Poison messages dropped.
    pub poison_dropped: Vec<PoisonLetter>,
    /// Deductions of other SKUs put back into the DLQ.
    pub returned: usize,
    /// Dead letters left in the DLQ because a republish failed.
    pub failed: usize,
    /// Poison messages left in place (a replay never moves them).
    pub poison_skipped: usize,
    /// Messages not read because the run's bound was reached.
    pub messages_unread: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Action {
    Replay,
    Drop,
}

/// Lists every dead-lettered deduction without removing anything.
pub async fn list(
    publisher: &Publisher,
    filter: DlqFilter,
    progress: &mut (dyn FnMut(usize) + Send),
) -> Result<DlqListing, MqError> {
    let queue_name = filter.kind.dlq(publisher.topology()).to_string();
    let session = DlqSession::open(publisher, &queue_name).await?;
    let fetched = session.fetch(filter.max_messages, progress).await;
    session.close().await; // every message returns to the queue
    let fetched = fetched?;
    let mut listing = DlqListing {
        queue: filter.kind,
        queue_name,
        messages_read: fetched.letters.len(),
        messages_unread: fetched.left_unread,
        deductions: Vec::new(),
        poison: Vec::new(),
    };
    for letter in &fetched.letters {
        match letter.deductions() {
            Ok(deductions) => listing.deductions.extend(
                deductions
                    .iter()
                    .filter(|d| matches(filter.sku, d))
                    .map(|d| dead_deduction(filter.kind, letter, d)),
            ),
            Err(error) if filter.sku.is_none() => {
                listing.poison.push(poison(filter.kind, letter, error))
            }
            Err(_) => {}
        }
    }
    Ok(listing)
}

/// Republishes the chosen deductions to the work queue (expiry queue for
/// `DlqKind::Expiry`), acknowledging each dead letter after its confirms.
pub async fn replay(
    publisher: &Publisher,
    filter: DlqFilter,
    progress: &mut (dyn FnMut(usize) + Send),
) -> Result<SettleReport, MqError> {
    settle(publisher, filter, Action::Replay, progress).await
}

/// Deletes the chosen dead letters (and, without a SKU filter, poison ones).
pub async fn drop_letters(
    publisher: &Publisher,
    filter: DlqFilter,
    progress: &mut (dyn FnMut(usize) + Send),
) -> Result<SettleReport, MqError> {
    settle(publisher, filter, Action::Drop, progress).await
}

async fn settle(
    publisher: &Publisher,
    filter: DlqFilter,
    action: Action,
    progress: &mut (dyn FnMut(usize) + Send),
) -> Result<SettleReport, MqError> {
    let topology = publisher.topology();
    let session = DlqSession::open(publisher, filter.kind.dlq(topology)).await?;
    let result = settle_in(&session, topology, filter, action, progress).await;
    session.close().await; // what was not acknowledged returns to the DLQ
    result
}

async fn settle_in(
    session: &DlqSession,
    topology: &Topology,
    filter: DlqFilter,
    action: Action,
    progress: &mut (dyn FnMut(usize) + Send),
) -> Result<SettleReport, MqError> {
    let fetched = session.fetch(filter.max_messages, progress).await?;
    let mut report = SettleReport {
        messages_unread: fetched.left_unread,
        ..SettleReport::default()
    };
    for letter in &fetched.letters {
        let deductions = match letter.deductions() {
            Ok(deductions) => deductions,
            Err(error) if action == Action::Drop && filter.sku.is_none() => {
                session.ack(letter).await?;
                report.messages_settled += 1;
                report
                    .poison_dropped
                    .push(poison(filter.kind, letter, error));
                continue;
            }
            Err(_) => {
                report.poison_skipped += 1;
                continue;
            }
        };
        let (chosen, others): (Vec<_>, Vec<_>) =
            deductions.into_iter().partition(|d| matches(filter.sku, d));
        if chosen.is_empty() {
            continue;
        }
        if !settle_one(
            session,
            topology,
            filter.kind,
            action,
            letter,
            &chosen,
            &others,
        )
        .await?
        {
            report.failed += 1;
            continue;
        }
        report.messages_settled += 1;
        report.returned += others.len();
        report.deductions.extend(
            chosen
                .iter()
                .map(|d| dead_deduction(filter.kind, letter, d)),
        );
    }
    Ok(report)
}

/// Republishes `chosen` (replay), puts `others` back into the DLQ, then acks the
/// dead letter. False when a republish failed: the dead letter stays.
async fn settle_one(
    session: &DlqSession,
    topology: &Topology,
    kind: DlqKind,
    action: Action,
    letter: &DeadLetter,
    chosen: &[Deduction],
    others: &[Deduction],
) -> Result<bool, MqError> {
    if action == Action::Replay {
        // A whole message goes back byte for byte, under its own message id.
        let (payload, id) = if others.is_empty() {
            (letter.body.clone(), letter.message_id())
        } else {
            (message::encode(chosen), message::message_id_of(chosen))
        };
        let props = letter.properties_for_replay(id);
        let sent = session
            .publish_to_queue(kind.work_queue(topology), &payload, props)
            .await;
        if !published(sent, "replay to the work queue")? {
            return Ok(false);
        }
    }
    if !others.is_empty() {
        let props = letter.properties_for_return(message::message_id_of(others));
        let sent = session
            .publish_to_queue(kind.dlq(topology), &message::encode(others), props)
            .await;
        if !published(sent, "return of other SKUs' deductions to the DLQ")? {
            return Ok(false);
        }
    }
    session.ack(letter).await?;
    Ok(true)
}

/// Ok(true) when confirmed; a lost connection is an error (nothing more can be
/// done in this run); a refusal or a timeout only fails this dead letter.
fn published(result: Result<(), PublishError>, what: &str) -> Result<bool, MqError> {
    match result {
        Ok(()) => Ok(true),
        Err(PublishError::Broker(err)) => Err(err),
        Err(err) => {
            tracing::warn!(error = %err, "dlq: {what} failed; the dead letter stays");
            Ok(false)
        }
    }
}

/// Whether `deduction` is of `sku` (any, when `None`): its own SKU, or for
/// an order's deduction any line's (it stands for the whole order, so a
/// `--sku` of any of the order's SKUs lists and replays it).
fn matches(sku: Option<SkuId>, deduction: &Deduction) -> bool {
    sku.is_none_or(|sku| {
        deduction.sku_id == sku
            || (deduction.order.as_ref())
                .is_some_and(|order| order.lines().iter().any(|line| line.sku_id == sku))
    })
}

fn dead_deduction(kind: DlqKind, letter: &DeadLetter, d: &Deduction) -> DeadDeduction {
    DeadDeduction {
        queue: kind,
        sku_id: d.sku_id.get(),
        request_id: d.request_id.to_string(),
        user_id: d.user_id.get(),
        count: d.count,
        created_ms: d.created_ms,
        expires_ms: d.expires_ms,
        reason: letter.reason().unwrap_or_else(|| UNKNOWN_REASON.into()),
        attempts: letter.attempt(),
        message_id: letter.message_id(),
        order_lines: d.order.as_ref().map(|order| {
            order
                .lines()
                .iter()
                .map(|line| DeadOrderLine {
                    sku_id: line.sku_id.get(),
                    count: line.count,
                })
                .collect()
        }),
    }
}

fn poison(kind: DlqKind, letter: &DeadLetter, error: String) -> PoisonLetter {
    let shown = &letter.body[..letter.body.len().min(POISON_PREVIEW_BYTES)];
    PoisonLetter {
        queue: kind,
        reason: letter.reason().unwrap_or_else(|| UNKNOWN_REASON.into()),
        error,
        body_preview: String::from_utf8_lossy(shown).into_owned(),
        message_id: letter.message_id(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{OrderLine, OrderLines, RequestId, UserId};

    fn sku(n: u64) -> SkuId {
        SkuId::new(n).unwrap()
    }

    #[test]
    fn an_order_deduction_is_of_every_sku_of_its_order() {
        let lines = OrderLines::new(
            vec![
                OrderLine {
                    sku_id: sku(1),
                    count: 1,
                },
                OrderLine {
                    sku_id: sku(2),
                    count: 3,
                },
            ],
            20,
        )
        .unwrap();
        let id = RequestId::parse("o-1").unwrap();
        let user = UserId::new(7).unwrap();
        let first_line = Deduction::of_order(&id, user, &lines, 1, 2).swap_remove(0);
        assert_eq!(first_line.sku_id, sku(1));
        assert!(matches(None, &first_line));
        assert!(matches(Some(sku(1)), &first_line));
        assert!(matches(Some(sku(2)), &first_line), "the order's other SKU");
        assert!(!matches(Some(sku(3)), &first_line));
        let single = Deduction {
            order: None,
            ..first_line
        };
        assert!(!matches(Some(sku(2)), &single));
    }
}
