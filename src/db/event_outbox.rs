//! The `event_outbox` table: events staged by the transaction of their change
//! and read back by the event relay (`outbox::event_relay`). Staging is one
//! multi-row INSERT per transaction, as SQL text with hex literals (an event's
//! JSON is text stockd did not fully choose: reasons, references).

use mysql_async::prelude::Queryable;
use mysql_async::Transaction;

use super::sql_text::SqlText;
use super::DbError;
use crate::events::{Event, EventType, Outgoing};

/// Rows per INSERT: an event row is ~1 KB of hex, far below `max_allowed_packet`.
const STAGE_CHUNK_ROWS: usize = 200;

/// Writes the events of `outgoing` (those its policy wants) inside `tx`
/// (before its commit: they commit or vanish with the change). Returns how many.
pub async fn stage(
    tx: &mut Transaction<'_>,
    outgoing: Outgoing,
    time_ms: u64,
) -> Result<usize, DbError> {
    if outgoing.is_empty() {
        return Ok(0);
    }
    let events = outgoing.into_events(time_ms);
    for chunk in events.chunks(STAGE_CHUNK_ROWS) {
        let mut sql = SqlText::new(
            "INSERT INTO event_outbox (event_id, type, subject, time_ms, data) VALUES ",
        );
        sql.list(chunk, ",", |s, e| {
            let data = serde_json::to_vec(&e.data).expect("JSON values serialize");
            s.raw("(")
                .hex(e.id.as_bytes())
                .raw(",")
                .hex(e.kind.as_str().as_bytes())
                .raw(",")
                .hex(e.subject.as_bytes())
                .raw(",")
                .int(e.time_ms)
                .raw(",")
                .hex(&data)
                .raw(")");
        });
        tx.query_drop(sql.finish()).await?;
    }
    Ok(events.len())
}

/// Stages events that belong to no other write (the reconciler's findings)
/// in a transaction of their own.
pub async fn stage_alone(
    db: &super::Db,
    outgoing: Outgoing,
    time_ms: u64,
) -> Result<usize, DbError> {
    if outgoing.is_empty() {
        return Ok(0);
    }
    db.bounded(async {
        let mut conn = db.conn().await?;
        let mut tx = conn.start_transaction(super::ledger::tx_opts()).await?;
        let staged = stage(&mut tx, outgoing, time_ms).await?;
        tx.commit().await?;
        Ok(staged)
    })
    .await
}

/// An event as the outbox holds it.
#[derive(Debug, Clone)]
pub struct StagedEvent {
    pub seq: u64,
    pub event: Event,
}

type RawRow = (u64, Vec<u8>, Vec<u8>, Vec<u8>, u64, Vec<u8>);

/// Up to `limit` unpublished events, oldest first, locked for this relay;
/// rows another relay holds are skipped (`SKIP LOCKED`), so relays in every
/// role share the work without waiting on each other.
pub async fn claim(tx: &mut Transaction<'_>, limit: usize) -> Result<Vec<StagedEvent>, DbError> {
    let rows: Vec<RawRow> = tx
        .query(format!(
            "SELECT seq, event_id, type, subject, time_ms, data FROM event_outbox
             WHERE published_at_ms IS NULL ORDER BY seq LIMIT {limit} FOR UPDATE SKIP LOCKED"
        ))
        .await?;
    let mut staged = Vec::with_capacity(rows.len());
    for (seq, id, kind, subject, time_ms, data) in rows {
        let text = |bytes: Vec<u8>| String::from_utf8_lossy(&bytes).into_owned();
        let kind = text(kind);
        let Some(kind) = EventType::parse(&kind) else {
            // Written by a newer stockd: leave it to a relay that knows the type.
            tracing::warn!(event.seq = seq, event.type = %kind, "events.relay: unknown type left for a newer stockd");
            continue;
        };
        let data = serde_json::from_slice(&data)
            .unwrap_or(serde_json::Value::Null)
            .into();
        staged.push(StagedEvent {
            seq,
            event: Event {
                kind,
                id: text(id),
                subject: text(subject),
                time_ms,
                data,
            },
        });
    }
    Ok(staged)
}

/// Stamps `seqs` as published at `now_ms`.
pub async fn mark_published(
    tx: &mut Transaction<'_>,
    seqs: &[u64],
    now_ms: u64,
) -> Result<(), DbError> {
    if seqs.is_empty() {
        return Ok(());
    }
    let mut sql = SqlText::new("UPDATE event_outbox SET published_at_ms = ");
    sql.int(now_ms)
        .raw(" WHERE seq IN (")
        .list(seqs, ",", |s, seq| {
            s.int(*seq);
        })
        .raw(")");
    tx.query_drop(sql.finish()).await?;
    Ok(())
}

/// Events staged and not yet published (the `stockd_events_outbox_pending` gauge).
pub async fn pending<Q: Queryable>(q: &mut Q) -> Result<u64, DbError> {
    let n: Option<u64> = q
        .query_first("SELECT COUNT(*) FROM event_outbox WHERE published_at_ms IS NULL")
        .await?;
    Ok(n.unwrap_or(0))
}
