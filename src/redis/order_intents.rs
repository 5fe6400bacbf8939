//! The durable intent of an order held line by line (a Redis Cluster, or a
//! line on a split SKU: docs/architecture.md, "Orders"), on the order's
//! shard slot: its start (`order_intent.lua`), its commit
//! (`order_commit.lua`: the point of no return, with the order's one outbox
//! entry), its abort (`order_abort.lua`) and the index the sweeper reads.
//! The lines' holds are `order_holds.rs`; the protocol is `ops/order_saga.rs`.

use deadpool_redis::redis;

use super::keys::order_shard;
use super::order_holds::{Attempt, TOMBSTONE_MARGIN_MS};
use super::orders::{OrderOutcome, Orders};
use super::reply_fields::Fields;
use super::RedisError;
use crate::domain::{OrderLines, RequestId, UserId};

/// What the intent script decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IntentOutcome {
    /// Hold the lines as this attempt.
    Hold(Attempt),
    /// No attempt: the order's answer as is — held before (`Replayed`, its
    /// record as stored), `Mismatch`, `Taken` (another client's order id,
    /// contract §6.2), `Backpressure` (the shard's order outbox is full), or
    /// `Retry` (an attempt is holding or being undone).
    Answered(OrderOutcome),
}

/// What the commit decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CommitOutcome {
    /// Committed; the order outbox entry's id.
    Committed { entry_id: String },
    /// The deadline passed before the commit: undo the attempt.
    Late,
    /// This attempt is committed already (a re-sent call: the first one ran
    /// and its reply was lost); its entry is in the outbox for the relay.
    AlreadyCommitted,
    /// The attempt is no longer holding (the sweeper undid it).
    Lost,
}

/// One step of an abort (`order_abort.lua`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AbortStep {
    /// The api gives up its own attempt.
    Own,
    /// The sweeper takes an intent past its deadline.
    Sweep,
    /// Every line is undone.
    Done,
}

/// What an abort step found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AbortOutcome {
    /// Undo these lines of this attempt.
    Undo {
        attempt: Attempt,
        lines: OrderLines,
    },
    Done,
    /// The sweeper's intent is not past its deadline yet.
    NotDue,
    /// Nothing to undo by this step: the record's status (`MISSING` when
    /// there is none) and attempt. That attempt `ABORTED`: undone already;
    /// that attempt in any other state but `HOLDING`/`ABORTING`: a committed
    /// order, whose lines must never be released by an undo.
    Nothing {
        status: String,
        attempt: Option<u64>,
    },
}

impl Orders {
    /// Starts an attempt (or answers the order as stored), asked by
    /// `requester`: the record names its client, and another client's order
    /// id is [`IntentOutcome::Taken`].
    pub async fn intent(
        &self,
        order_id: &RequestId,
        user_id: UserId,
        lines: &OrderLines,
        hold_timeout_ms: u64,
        requester: &crate::domain::Requester,
    ) -> Result<IntentOutcome, RedisError> {
        let keys = &self.core.keys;
        let shard = order_shard(order_id);
        let mut invocation = super::scripts::ORDER_INTENT.prepare_invoke();
        invocation
            .key(keys.order(order_id))
            .key(keys.order_intents(shard))
            .key(keys.order_outbox(shard))
            .arg(order_id.as_str())
            .arg(user_id.get())
            .arg(lines.encode())
            .arg(self.args.ttl_ms)
            .arg(self.args.retention_ms)
            .arg(hold_timeout_ms)
            .arg(self.args.outbox_max_len)
            .arg(requester.script_arg());
        let reply: Vec<String> = self
            .core
            .run(|mut c| async move { invocation.invoke_async(&mut c).await })
            .await?;
        let fields = Fields::new("order intent", &reply);
        let (bad, num) = (|| fields.bad(), |i| fields.num(i));
        Ok(match reply.first().map(String::as_str) {
            Some("HOLD") => IntentOutcome::Hold(Attempt {
                order_id: order_id.clone(),
                user_id,
                number: num(1)?,
                created_ms: num(2)?,
                expires_ms: num(3)?,
                deadline_ms: num(4)?,
                requester: requester.clone(),
                carries_pass: false,
            }),
            Some("REPLAY") => IntentOutcome::Answered(OrderOutcome::Replayed {
                status: fields.status(1)?,
                created_ms: num(2)?,
                expires_ms: num(3)?,
            }),
            Some("MISMATCH") => IntentOutcome::Answered(OrderOutcome::Mismatch),
            Some("TAKEN") => IntentOutcome::Answered(OrderOutcome::Taken),
            Some("BUSY") => IntentOutcome::Answered(OrderOutcome::Retry(format!(
                "order {order_id} is being held or undone by another request; retry shortly"
            ))),
            Some("BACKPRESSURE") => IntentOutcome::Answered(OrderOutcome::Backpressure),
            _ => return Err(bad()),
        })
    }

    /// Commits `attempt` once every line is held; `availables` are the
    /// lines' SKU availables after their holds, in line order (kept with the
    /// outbox entry for the `reserved` event of a republish).
    pub async fn commit(
        &self,
        attempt: &Attempt,
        lines: &OrderLines,
        availables: &[Option<i64>],
    ) -> Result<CommitOutcome, RedisError> {
        let keys = &self.core.keys;
        let shard = order_shard(&attempt.order_id);
        let first = lines.lines()[0];
        let mut invocation = super::scripts::ORDER_COMMIT.prepare_invoke();
        invocation
            .key(keys.order(&attempt.order_id))
            .key(keys.order_intents(shard))
            .key(keys.order_outbox(shard))
            .arg(attempt.order_id.as_str())
            .arg(attempt.number)
            .arg(first.sku_id.get())
            .arg(first.count)
            .arg(super::outbox::availables_text(availables));
        let reply: Vec<String> = self
            .core
            .run(|mut c| async move { invocation.invoke_async(&mut c).await })
            .await?;
        Ok(match reply.first().map(String::as_str) {
            Some("OK") => CommitOutcome::Committed {
                entry_id: reply
                    .get(1)
                    .cloned()
                    .ok_or_else(|| RedisError::BadReply(format!("order commit: {reply:?}")))?,
            },
            Some("LATE") => CommitOutcome::Late,
            Some("DONE") => CommitOutcome::AlreadyCommitted,
            Some("LOST") => CommitOutcome::Lost,
            _ => return Err(RedisError::BadReply(format!("order commit: {reply:?}"))),
        })
    }

    /// One step of an abort; `attempt` is `None` for the sweeper (the
    /// record's attempt, whatever it is).
    pub async fn abort(
        &self,
        order_id: &RequestId,
        attempt: Option<u64>,
        step: AbortStep,
    ) -> Result<AbortOutcome, RedisError> {
        let keys = &self.core.keys;
        let mut invocation = super::scripts::ORDER_ABORT.prepare_invoke();
        invocation
            .key(keys.order(order_id))
            .key(keys.order_intents(order_shard(order_id)))
            .arg(order_id.as_str())
            .arg(attempt.map(|a| a.to_string()).unwrap_or_default())
            .arg(match step {
                AbortStep::Own => "own",
                AbortStep::Sweep => "sweep",
                AbortStep::Done => "done",
            })
            .arg(TOMBSTONE_MARGIN_MS);
        let reply: Vec<String> = self
            .core
            .run(|mut c| async move { invocation.invoke_async(&mut c).await })
            .await?;
        let bad = || RedisError::BadReply(format!("order abort: {reply:?}"));
        Ok(match reply.first().map(String::as_str) {
            Some("ABORTING") => {
                let field = |i: usize| reply.get(i).ok_or_else(bad);
                let number = field(1)?.parse().map_err(|_| bad())?;
                let user_id = field(2)?
                    .parse::<u64>()
                    .ok()
                    .and_then(|u| UserId::new(u).ok())
                    .ok_or_else(bad)?;
                AbortOutcome::Undo {
                    // The undo needs the attempt's buyer, number and
                    // deadline (its tombstones' life); its times are the
                    // lines' own.
                    attempt: Attempt {
                        order_id: order_id.clone(),
                        user_id,
                        number,
                        created_ms: 0,
                        expires_ms: 0,
                        deadline_ms: field(4)?.parse().map_err(|_| bad())?,
                        requester: crate::domain::Requester::Anyone,
                        carries_pass: false,
                    },
                    lines: OrderLines::decode(field(3)?).map_err(|_| bad())?,
                }
            }
            Some("DONE") => AbortOutcome::Done,
            Some("NOT_DUE") => AbortOutcome::NotDue,
            Some("NO") => AbortOutcome::Nothing {
                status: reply.get(1).cloned().unwrap_or_default(),
                attempt: reply.get(2).and_then(|a| a.parse().ok()),
            },
            _ => return Err(bad()),
        })
    }

    /// The status and attempt of the order's record as Redis holds it —
    /// an intent (`HOLDING`, `ABORTING`, `ABORTED`) or a committed order —
    /// or none when the record is gone. The reconciler tells a line of an
    /// attempt in flight (the sweeper's) from a stranded one by it.
    pub async fn intent_state(
        &self,
        order_id: &RequestId,
    ) -> Result<Option<(String, Option<u64>)>, RedisError> {
        let key = self.core.keys.order(order_id);
        let (status, attempt): (Option<String>, Option<String>) = self
            .core
            .run(|mut c| async move {
                redis::cmd("HMGET")
                    .arg(&key)
                    .arg("status")
                    .arg("attempt")
                    .query_async(&mut c)
                    .await
            })
            .await?;
        Ok(status.map(|s| (s, attempt.and_then(|a| a.parse().ok()))))
    }

    /// Up to `limit` order ids of `shard` whose intent deadline passed more
    /// than `overdue_ms` ago (by the clock of the shard's node, which wrote
    /// the deadlines): 0 for the sweeper, a margin for the audit.
    pub async fn due_intents(
        &self,
        shard: u8,
        overdue_ms: u64,
        limit: usize,
    ) -> Result<Vec<RequestId>, RedisError> {
        let key = self.core.keys.order_intents(shard);
        let now_ms = self.core.now_ms_at(&key).await?.saturating_sub(overdue_ms);
        let ids: Vec<String> = self
            .core
            .run(|mut c| async move {
                redis::cmd("ZRANGEBYSCORE")
                    .arg(&key)
                    .arg("-inf")
                    .arg(now_ms)
                    .arg("LIMIT")
                    .arg(0)
                    .arg(limit)
                    .query_async(&mut c)
                    .await
            })
            .await?;
        Ok(ids
            .iter()
            .filter_map(|id| RequestId::parse(id).ok())
            .collect())
    }

    /// Intents of every shard still holding or being undone (the audit and
    /// the tests).
    pub async fn open_intents(&self) -> Result<u64, RedisError> {
        let mut open = 0;
        for shard in 0..super::keys::ORDER_SHARDS {
            let key = self.core.keys.order_intents(shard);
            open += self
                .core
                .run(|mut c| async move {
                    redis::cmd("ZCARD")
                        .arg(&key)
                        .query_async::<u64>(&mut c)
                        .await
                })
                .await?;
        }
        Ok(open)
    }
}
