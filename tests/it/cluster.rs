//! What Redis Cluster and RabbitMQ cluster support needs from the code paths
//! every run exercises (`make test` and `make test-cluster` alike): a re-sent
//! restock script applies its delta once, and queues created before
//! `amqp.quorum_initial_group_size` existed are still accepted.

use deadpool_redis::redis;
use lapin::options::QueueDeclareOptions;
use lapin::types::{AMQPValue, FieldTable, LongString};

use crate::helpers::TestApp;

/// One run of `load_sku.lua` for SKU 1 under operation `op`: add `delta`
/// (limit 5, the given total), as stockd's restock does.
async fn restock(app: &TestApp, op: &str, delta: i64, total: i64) -> Vec<String> {
    let keys = app.res.redis.keys();
    let sku = TestApp::sku(1);
    let mut conn = app.redis_conn().await;
    stockd::redis::scripts::LOAD_SKU
        .key(keys.sku(sku))
        .key(keys.load_op(sku, op))
        .arg(delta)
        .arg(0) // available when not loaded: it is loaded
        .arg(5)
        .arg(total)
        .arg(keys.soldout_channel())
        .arg(1)
        .arg(60_000)
        .invoke_async(&mut conn)
        .await
        .unwrap()
}

/// A cluster client re-sends a script whose connection dropped: the second run
/// of the same restock (same operation marker) must not add its units again.
#[tokio::test]
async fn a_restock_script_run_twice_applies_its_delta_once() {
    let app = TestApp::spawn_with_sku(1, 10, 5).await;
    let first = restock(&app, "op-resent", 5, 15).await;
    let resent = restock(&app, "op-resent", 5, 15).await;
    assert_eq!(first, vec!["OK".to_string(), "15".to_string()]);
    assert_eq!(resent, first, "the re-sent run answers as the first");
    assert_eq!(app.redis_available(1).await, Some(15));
    // A different operation is applied.
    let next = restock(&app, "op-next", 2, 17).await;
    assert_eq!(next[1], "17");
    app.cleanup().await;
}

/// A work queue declared by an older build (no initial group size) is
/// redeclared by this one without PRECONDITION_FAILED: upgrades need no
/// queue migration.
#[tokio::test]
async fn queues_of_an_older_build_are_still_accepted() {
    let app = TestApp::spawn().await;
    let mut settings = (*app.res.settings).clone();
    settings.amqp.queue_prefix = format!("{}old.", settings.amqp.queue_prefix);
    let old = stockd::mq::Topology::new(&settings.amqp, &settings.reservation);
    let conn = crate::helpers::broker(&settings, "upgrade").await.unwrap();
    let ch = conn.create_channel().await.unwrap();
    let mut args = FieldTable::default();
    args.insert(
        "x-queue-type".into(),
        AMQPValue::LongString(LongString::from("quorum")),
    );
    ch.queue_declare(
        old.deduct_dlq.as_str().into(),
        QueueDeclareOptions {
            durable: true,
            ..QueueDeclareOptions::default()
        },
        args,
    )
    .await
    .unwrap();
    assert!(settings.amqp.quorum_initial_group_size > 0);
    let redeclared = old.declare(&conn).await;
    let _ = old.delete(&ch).await;
    let _ = conn.close(200, "".into()).await;
    redeclared.unwrap();
    app.cleanup().await;
}

/// Node-wide commands reach every primary: `INFO` through each link of
/// `primaries()` answers that node's own text (the bench reads the version
/// and the SLOWLOG this way, clean-up SCANs every primary).
#[tokio::test]
async fn every_primary_answers_node_wide_commands() {
    let app = TestApp::spawn().await;
    let admin = stockd::redis::RedisStore::new(&app.direct_settings.redis, 1).unwrap();
    let primaries = admin.primaries().await.unwrap();
    let expected = if app.direct_settings.redis.mode == stockd::config::RedisMode::Cluster {
        3
    } else {
        1
    };
    assert_eq!(primaries.len(), expected, "one link per primary");
    for (name, mut link) in primaries {
        let info: String = redis::cmd("INFO")
            .arg("server")
            .query_async(&mut link)
            .await
            .unwrap_or_else(|e| panic!("INFO on {name}: {e}"));
        assert!(info.contains("redis_version:"), "{name}: {info}");
    }
    app.cleanup().await;
}
