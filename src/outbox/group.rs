//! Group commit of the outbox: deductions waiting to be published are carried
//! several to one broker message, and several such messages are in flight at
//! once, each awaiting its own confirm.
//!
//! Why: the broker, not Redis, bounds a flash sale in `durability: queue` — a
//! durable publish with a confirm costs RabbitMQ far more than the Lua script
//! costs Redis, and most of that cost is per message. Batches fill up while
//! earlier ones await their confirms; once a slot is free, a batch that is not
//! full lingers `amqp.group_linger_ms` for more (on the bench box, a
//! millisecond of latency for messages four times as full). The consumer's idempotency
//! makes a batch as safe as single messages (a redelivered batch is skipped row
//! by row). With events on, the batch's `reserved` events are published beside
//! it, and its entries leave the outbox only when both are confirmed.

use std::sync::Arc;

use tokio::sync::{mpsc, oneshot, Semaphore};
use tokio_util::sync::CancellationToken;

use super::OutboxAcker;
use crate::domain::{Deduction, OutboxPlace, SkuId};
use crate::events::{cloud, Event, EventPolicy, EventType, OrderFacts};
use crate::mq::trace_context::TraceContext;
use crate::mq::{message, PublishError, Publisher};
use crate::redis::outbox::OutboxStream;

/// Deductions waiting for a batch; when full, callers get a failure at once
/// (their entries stay in the outbox for the relay) instead of queueing forever.
const PENDING_CAPACITY: usize = 65_536;

struct Pending {
    stream: OutboxStream,
    /// The outbox entry and this deduction's place in it.
    entry: OutboxPlace,
    msg: Deduction,
    /// The publishing request's trace context, carried in the message headers.
    trace: Option<TraceContext>,
    /// The bucket's available after the script (the `reserved` event's
    /// `available`); `None` when republished from the outbox.
    available: Option<i64>,
    /// The other lines of an order whose first line `msg` is: not published
    /// (`msg` names the whole order), but told in `reserved` events and
    /// removed from the outbox with it.
    siblings: Vec<OrderLineEntry>,
    /// What the outbox entry kept of its `reserved` event (a republish):
    /// each SKU's available as the api told it.
    told: Vec<(SkuId, i64)>,
    done: oneshot::Sender<Result<(), PublishError>>,
}

/// One line of an order as its script held it: its outbox entry, its
/// deduction and its SKU's available after the script.
#[derive(Debug, Clone)]
pub struct OrderLineEntry {
    pub stream: OutboxStream,
    pub entry_id: String,
    pub msg: Deduction,
    pub available: Option<i64>,
}

/// How batches form: at most `max` deductions per message, at most
/// `in_flight` messages awaiting confirms, and a batch that is not full once a
/// slot is free waits up to `linger` for more.
#[derive(Clone, Copy)]
pub struct GroupShape {
    pub max: usize,
    pub in_flight: usize,
    pub linger: std::time::Duration,
}

#[derive(Clone)]
pub struct GroupCommit {
    tx: mpsc::Sender<Pending>,
    /// `amqp.publish_timeout_ms`: the caller's whole wait, slot included.
    caller_wait: std::time::Duration,
}

impl GroupCommit {
    /// Starts the batching task.
    pub fn spawn(
        publisher: Arc<Publisher>,
        acker: OutboxAcker,
        shape: GroupShape,
        reserved_events: ReservedEvents,
        cancel: CancellationToken,
    ) -> (Self, tokio::task::JoinHandle<()>) {
        let (tx, rx) = mpsc::channel(PENDING_CAPACITY);
        let shape = GroupShape {
            max: shape.max.clamp(1, message::BATCH_MAX),
            in_flight: shape.in_flight.max(1),
            linger: shape.linger,
        };
        let caller_wait = publisher.confirm_timeout();
        let task = tokio::spawn(run(publisher, acker, rx, shape, reserved_events, cancel));
        (Self { tx, caller_wait }, task)
    }

    /// Publishes one outbox entry as part of the next batch; fails at once with
    /// `QueueFull` when the queue of waiting entries is full, and otherwise
    /// resolves with the batch's confirm, or with a timeout once `amqp.publish_timeout_ms` has
    /// passed since the call — waiting for a free slot included, so a 202 never
    /// comes later than that bound. The entry stays in the outbox either way:
    /// a late confirm still removes it, and otherwise the relay republishes.
    pub async fn publish(
        &self,
        stream: OutboxStream,
        entry: OutboxPlace,
        msg: Deduction,
    ) -> Result<(), PublishError> {
        self.publish_traced(stream, entry, msg, None, None).await
    }

    /// [`Self::publish`] of a deduction just admitted: its trace context (the
    /// request's publish span) travels with it to the consumer, and the
    /// bucket's `available` after the script goes into its `reserved` event.
    pub async fn publish_traced(
        &self,
        stream: OutboxStream,
        entry: OutboxPlace,
        msg: Deduction,
        trace: Option<TraceContext>,
        available: Option<i64>,
    ) -> Result<(), PublishError> {
        let (done, confirmed) = oneshot::channel();
        let pending = Pending {
            stream,
            entry,
            msg,
            trace,
            available,
            siblings: Vec::new(),
            told: Vec::new(),
            done,
        };
        self.send(pending, confirmed).await
    }

    /// [`Self::publish`] of an outbox entry the relay found stale: its
    /// `reserved` event tells the availables the entry kept, so it is the
    /// event the api told (or would have), byte for byte.
    pub async fn republish(
        &self,
        stream: OutboxStream,
        entry: crate::redis::outbox::OutboxEntry,
    ) -> Result<(), PublishError> {
        let (done, confirmed) = oneshot::channel();
        let sku = entry.message.sku_id;
        let available = (entry.told.iter())
            .find(|(s, _)| *s == sku)
            .map(|(_, a)| *a);
        let pending = Pending {
            stream,
            entry: entry.place,
            msg: entry.message,
            trace: None,
            available,
            siblings: Vec::new(),
            told: entry.told,
            done,
        };
        self.send(pending, confirmed).await
    }

    /// Publishes a whole order as part of the next batch: one deduction (its
    /// first line's, which names every line: the consumer applies the order
    /// whole and the closer expires it once), `reserved` events for every
    /// line, and every line's entry removed from the outbox on the confirm.
    /// Answers as [`Self::publish`] does.
    pub async fn publish_order(
        &self,
        mut lines: Vec<OrderLineEntry>,
        trace: Option<TraceContext>,
    ) -> Result<(), PublishError> {
        assert!(!lines.is_empty(), "an order has a line");
        let first = lines.remove(0);
        let (done, confirmed) = oneshot::channel();
        let pending = Pending {
            stream: first.stream,
            entry: OutboxPlace::alone(first.entry_id),
            msg: first.msg,
            trace,
            available: first.available,
            siblings: lines,
            told: Vec::new(),
            done,
        };
        self.send(pending, confirmed).await
    }

    async fn send(
        &self,
        pending: Pending,
        confirmed: oneshot::Receiver<Result<(), PublishError>>,
    ) -> Result<(), PublishError> {
        if self.tx.try_send(pending).is_err() {
            return Err(PublishError::QueueFull);
        }
        match tokio::time::timeout(self.caller_wait, confirmed).await {
            Ok(Ok(result)) => result,
            Ok(Err(_)) | Err(_) => Err(PublishError::Timeout),
        }
    }
}

async fn run(
    publisher: Arc<Publisher>,
    acker: OutboxAcker,
    mut rx: mpsc::Receiver<Pending>,
    shape: GroupShape,
    reserved_events: ReservedEvents,
    cancel: CancellationToken,
) {
    let group_max = shape.max;
    let slots = Arc::new(Semaphore::new(shape.in_flight));
    loop {
        // Wait for a free slot first: while all slots are busy, deductions pile
        // up in the channel and the next batch leaves fuller.
        let permit = tokio::select! {
            permit = slots.clone().acquire_owned() => permit.expect("semaphore never closed"),
            _ = cancel.cancelled() => return,
        };
        let mut batch = Vec::with_capacity(group_max);
        let received = tokio::select! {
            n = rx.recv_many(&mut batch, group_max) => n,
            _ = cancel.cancelled() => return,
        };
        if received == 0 {
            return;
        }
        if !shape.linger.is_zero() && batch.len() < group_max {
            tokio::select! {
                _ = tokio::time::sleep(shape.linger) => {}
                _ = cancel.cancelled() => return,
            }
            while batch.len() < group_max {
                match rx.try_recv() {
                    Ok(pending) => batch.push(pending),
                    Err(_) => break,
                }
            }
        }
        let publisher = publisher.clone();
        let acker = acker.clone();
        let events = reserved_events.clone();
        tokio::spawn(async move {
            publish_batch(&publisher, &acker, &events, batch).await;
            drop(permit);
        });
    }
}

/// Whether a batch also publishes the `reserved` events of its deductions
/// (`None`: events off, or both `stockd.reservation.reserved` and
/// `stockd.order.reserved` filtered out).
#[derive(Clone, Default)]
pub struct ReservedEvents(Option<Told>);

/// The `source` of the events, and which of the two `reserved` types are told.
#[derive(Clone)]
struct Told {
    source: Arc<str>,
    singles: bool,
    orders: bool,
}

impl Told {
    /// Whether the pending deduction's `reserved` event is told: an order's
    /// (`stockd.order.reserved`) or a single reservation's.
    fn wants(&self, pending: &Pending) -> bool {
        match pending.msg.order {
            Some(_) => self.orders,
            None => self.singles,
        }
    }
}

impl ReservedEvents {
    pub fn from_policy(policy: &EventPolicy) -> Self {
        let told = Told {
            source: Arc::from(policy.source()),
            singles: policy.wants(EventType::Reserved),
            orders: policy.wants(EventType::OrderReserved),
        };
        Self((told.singles || told.orders).then_some(told))
    }
}

/// Publishes a batch's deductions and, when on, their `reserved` events side
/// by side; the entries are removed from the outbox only when both are
/// confirmed, so the relay republishes whatever half is missing (a
/// duplicate deduction is skipped by the consumer, a duplicate event by its
/// id at the subscriber).
async fn publish_batch(
    publisher: &Publisher,
    acker: &OutboxAcker,
    events: &ReservedEvents,
    batch: Vec<Pending>,
) {
    let msgs: Vec<Deduction> = batch.iter().map(|p| p.msg.clone()).collect();
    metrics::histogram!("stockd_publish_batch_size").record(msgs.len() as f64);
    let traces: Vec<Option<TraceContext>> = match batch.iter().any(|p| p.trace.is_some()) {
        true => batch.iter().map(|p| p.trace.clone()).collect(),
        false => Vec::new(),
    };
    let deductions = publisher.publish_traced(&msgs, &traces);
    let result = match &events.0 {
        None => deductions.await,
        Some(told) => {
            let (sent, told) = tokio::join!(deductions, publish_reserved(publisher, told, &batch));
            sent.and(told)
        }
    };
    // The broker's outage line: publishes that time out or fail answer 202,
    // not 503, so nothing else in the api would log them.
    match &result {
        Ok(()) => crate::health::outage::answered("amqp"),
        Err(err) => crate::health::outage::failed("amqp", err),
    }
    for pending in batch {
        let outcome = match &result {
            Ok(()) => {
                acker.ack(pending.stream, pending.entry);
                // A line of an order held line by line has no entry of its own.
                for sibling in pending
                    .siblings
                    .into_iter()
                    .filter(|s| !s.entry_id.is_empty())
                {
                    acker.ack(sibling.stream, OutboxPlace::alone(sibling.entry_id));
                }
                Ok(())
            }
            Err(err) => Err(err.clone_kind()),
        };
        let _ = pending.done.send(outcome);
    }
}

/// The `reserved` events of a batch, one message (several if over the
/// per-message bound); timed by the reservation, so a republish is the same
/// event. An order is one `stockd.order.reserved` event for all its lines,
/// each with the available its hold left where this node knows it (a relay
/// republishing an order's one entry knows none).
async fn publish_reserved(
    publisher: &Publisher,
    told: &Told,
    batch: &[Pending],
) -> Result<(), PublishError> {
    let source = &*told.source;
    let events: Vec<Event> = (batch.iter())
        .filter(|p| told.wants(p))
        .map(reserved_event)
        .collect();
    let with_ids: Vec<(String, &Event)> = events.iter().map(|e| (e.id.clone(), e)).collect();
    for message in cloud::messages(&with_ids, source) {
        publisher.publish_events(&message).await?;
        metrics::counter!("stockd_events_published_total", "type" => message.routing_key)
            .increment(message.events as u64);
    }
    Ok(())
}

/// A pending deduction's `reserved` event: the reservation's, or the
/// whole order's when the deduction is an order's.
fn reserved_event(p: &Pending) -> Event {
    let time_ms = p.msg.created_ms;
    let Some(order) = OrderFacts::of_line(&p.msg) else {
        return Event::reservation(EventType::Reserved, &p.msg, p.available, None, time_ms);
    };
    let available = |sku: SkuId| {
        std::iter::once((p.msg.sku_id, p.available))
            .chain(p.siblings.iter().map(|s| (s.msg.sku_id, s.available)))
            .chain(p.told.iter().map(|(s, a)| (*s, Some(*a))))
            .find(|(line, a)| *line == sku && a.is_some())
            .and_then(|(_, a)| a)
    };
    Event::order(EventType::Reserved, &order, available, None, None, time_ms)
}
