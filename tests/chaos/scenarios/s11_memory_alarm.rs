//! Scenario 11: the broker raises its memory alarm (every publisher blocked)
//! while reservations keep coming. Confirms stop, so deductions pile up in the
//! Redis outbox and are answered 202; once a SKU's outbox holds
//! `redis.outbox_max_len` (50 here) entries, reservations answer 503
//! (backpressure). After the alarm clears nothing is lost.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::{plan, Scenario};
use crate::load::Op;
use crate::stores;

const OUTBOX_MAX: u64 = 50;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "chaos suite: make chaos"]
async fn s11_broker_memory_alarm_fills_outbox_to_its_bound_then_drains() {
    let extra = [
        ("STOCKD__REDIS__OUTBOX_MAX_LEN", OUTBOX_MAX.to_string()),
        ("STOCKD__AMQP__PUBLISH_TIMEOUT_MS", "500".to_string()),
    ];
    let mut sc = Scenario::begin("s11", "broker memory alarm, outbox bounded at 50", &extra).await;
    sc.stack.start_roles(&["api", "consumer", "closer"]).await;
    sc.stack.create_sku(111, 1_000, 2).await;
    sc.note("inject: memory alarm on (vm_memory_high_watermark 0.000001)");
    sc.stack.rabbit.memory_alarm(true).await;
    let mut p = plan("s11", &[111], 800, 400, 40);
    p.concurrency = 16;
    p.confirm_share = 0.0;
    p.cancel_share = 0.0;
    let load = sc.load(p);
    let max_outbox = Arc::new(AtomicU64::new(0));
    let sampler = {
        let (url, key, max) = (
            sc.stack.redis().url(),
            sc.stack.keys.outbox(stores::sku_id(111)),
            max_outbox.clone(),
        );
        tokio::spawn(async move { sample_xlen(url, key, max).await })
    };
    let report = load.finish().await;
    sampler.abort();
    let max_seen = max_outbox.load(Ordering::SeqCst);
    sc.note("alarm off (vm_memory_high_watermark 0.4)");
    sc.stack.rabbit.memory_alarm(false).await;
    let reserve_503 = report
        .answers
        .iter()
        .filter(|a| a.op == Op::Reserve && a.status == 503)
        .count();
    let reserve_202 = report.count(Op::Reserve, 202);
    sc.expect(
        reserve_202 > 0,
        format!("reservations answered 202 during the alarm ({reserve_202})"),
    );
    sc.expect(
        reserve_503 > 0,
        format!("reservations answered 503 once the outbox was full ({reserve_503})"),
    );
    sc.expect(
        max_seen <= OUTBOX_MAX,
        format!("outbox never above redis.outbox_max_len: max seen {max_seen} <= {OUTBOX_MAX}"),
    );
    sc.finish(&report).await;
}

/// How often the outbox's XLEN is sampled: the sampler's period, not a wait.
const XLEN_SAMPLE_EVERY: Duration = Duration::from_millis(100);

/// Samples XLEN of the outbox every [`XLEN_SAMPLE_EVERY`], keeping the maximum.
async fn sample_xlen(url: String, key: String, max: Arc<AtomicU64>) {
    use deadpool_redis::redis;
    let client = redis::Client::open(url).unwrap();
    let Ok(mut conn) = client.get_multiplexed_async_connection().await else {
        return;
    };
    loop {
        if let Ok(n) = redis::cmd("XLEN")
            .arg(&key)
            .query_async::<u64>(&mut conn)
            .await
        {
            max.fetch_max(n, Ordering::SeqCst);
        }
        tokio::time::sleep(XLEN_SAMPLE_EVERY).await;
    }
}
