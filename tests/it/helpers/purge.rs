//! The test's settings (own database, key prefix, queue prefix) and the
//! removal of everything a test created, also after a panic.

use std::path::PathBuf;

use deadpool_redis::redis;
use mysql_async::prelude::Queryable;

use stockd::config::Settings;

use super::TestOptions;

/// Removes everything a test created: its Redis keys, queues, exchanges and
/// database. Used by `cleanup()` and, after a panic, by `Drop`.
pub async fn purge(settings: &Settings) {
    let prefix = settings.redis.key_prefix.clone();
    if let Ok(keys) = scan_keys(settings, &format!("{prefix}*")).await {
        if let Ok(mut conn) = admin_link(settings).await {
            for key in keys {
                let _: redis::RedisResult<()> =
                    redis::cmd("DEL").arg(&key).query_async(&mut conn).await;
            }
        }
    }
    if let Ok(amqp) = broker(settings, "cleanup").await {
        if let Ok(ch) = amqp.create_channel().await {
            let topology = stockd::mq::Topology::new(&settings.amqp, &settings.reservation);
            let _ = topology.delete(&ch).await;
        }
        let _ = amqp.close(200, "".into()).await;
    }
    if let Ok(opts) = mysql_async::Opts::from_url(&settings.mysql.url) {
        let db_name = opts.db_name().unwrap_or_default().to_string();
        let server = mysql_async::OptsBuilder::from_opts(opts).db_name(None::<String>);
        if let Ok(mut conn) = mysql_async::Conn::new(server).await {
            let _ = conn
                .query_drop(format!("DROP DATABASE IF EXISTS `{db_name}`"))
                .await;
            let _ = conn.disconnect().await;
        }
    }
}

/// A connection to the test's Redis (server or cluster) as `settings` say.
pub async fn admin_link(settings: &Settings) -> anyhow::Result<stockd::redis::RedisLink> {
    let store = stockd::redis::RedisStore::new(&settings.redis, 1)?;
    Ok(store.side_link().await?)
}

/// Every key matching `pattern`, SCANned on every primary.
pub async fn scan_keys(settings: &Settings, pattern: &str) -> anyhow::Result<Vec<String>> {
    let store = stockd::redis::RedisStore::new(&settings.redis, 1)?;
    let mut keys = Vec::new();
    for (_, mut node) in store.primaries().await? {
        let mut cursor: u64 = 0;
        loop {
            let (next, batch): (u64, Vec<String>) = redis::cmd("SCAN")
                .arg(cursor)
                .arg("MATCH")
                .arg(pattern)
                .arg("COUNT")
                .arg(1000)
                .query_async(&mut node)
                .await?;
            keys.extend(batch);
            if next == 0 {
                break;
            }
            cursor = next;
        }
    }
    Ok(keys)
}

/// `make test-cluster` points the suite at the local clusters with the lines
/// `scripts/services.sh cluster env` prints, the variables stockd itself
/// reads (STOCKD__REDIS__MODE, STOCKD__REDIS__URLS, STOCKD__AMQP__URLS).
fn apply_cluster_env(s: &mut Settings) {
    let list = |name: &str| -> Vec<String> {
        std::env::var(name)
            .unwrap_or_default()
            .split(',')
            .map(str::trim)
            .filter(|u| !u.is_empty())
            .map(String::from)
            .collect()
    };
    if std::env::var("STOCKD__REDIS__MODE").as_deref() == Ok("cluster") {
        s.redis.mode = stockd::config::RedisMode::Cluster;
        s.redis.urls = list("STOCKD__REDIS__URLS");
    }
    let brokers = list("STOCKD__AMQP__URLS");
    if !brokers.is_empty() {
        s.amqp.urls = brokers;
    }
}

/// Points `s` at one standalone Redis again (`redis.url`), also in a
/// cluster run: for tests of a private or proxied server.
pub fn standalone_redis(s: &mut Settings) {
    s.redis.mode = stockd::config::RedisMode::Standalone;
    s.redis.urls.clear();
}

/// The settings stockd runs with in test `id`: its own database, key prefix
/// and queue names, as the runtime users (see [`super::users`]).
pub fn test_settings(id: &str, opts: &TestOptions) -> Settings {
    use super::users;
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("config");
    let mut s = Settings::load_with_vars(&dir, "test", &[]).expect("test config loads");
    s.mysql.url = format!(
        "mysql://{}@127.0.0.1:3306/stockd_{id}",
        users::MYSQL_RUNTIME
    );
    s.redis.url = format!("redis://{}@127.0.0.1:6379", users::REDIS_RUNTIME);
    s.amqp.url = format!("amqp://{}@127.0.0.1:5672/%2f", users::AMQP_RUNTIME);
    s.redis.key_prefix = format!("{id}:");
    s.amqp.queue_prefix = format!("{id}.");
    s.reservation.durability = opts.durability;
    s.reservation.ttl_secs = opts.ttl_secs;
    s.http.bind = "127.0.0.1:0".into();
    s.http.workers = 2;
    s.reconcile.webhook_url = opts.webhook_url.clone();
    apply_cluster_env(&mut s);
    if let Some(url) = &opts.redis_url {
        // A private standalone server, also in a cluster run.
        standalone_redis(&mut s);
        s.redis.url = url.clone();
    }
    s
}

/// The work queues a finished test must leave empty — deductions nobody
/// applied — with the messages still in them (ready, and unacked ones once
/// their consumer stopped). Not counted: dead-letter, retry and delay queues
/// (they hold messages by design) and the expiry queue, which the delay queue
/// fills on its own clock (TTL) whether or not a test runs a closer.
pub async fn undrained(settings: &Settings) -> Vec<(String, u32)> {
    let topology = stockd::mq::Topology::new(&settings.amqp, &settings.reservation);
    let Ok(amqp) = broker(settings, "drain-check").await else {
        return Vec::new();
    };
    let mut left = Vec::new();
    for queue in [&topology.deduct_queue] {
        // A passive declare of a missing queue closes its channel: one each.
        let Ok(ch) = amqp.create_channel().await else {
            continue;
        };
        let declared = ch
            .queue_declare(
                queue.as_str().into(),
                lapin::options::QueueDeclareOptions {
                    passive: true,
                    ..Default::default()
                },
                lapin::types::FieldTable::default(),
            )
            .await;
        if let Ok(q) = declared {
            if q.message_count() > 0 {
                left.push((queue.clone(), q.message_count()));
            }
        }
    }
    let _ = amqp.close(200, "".into()).await;
    left
}

/// A connection to the first broker of `amqp.urls` (or `amqp.url`) that answers,
/// as the roles connect.
pub async fn broker(
    settings: &Settings,
    name: &str,
) -> Result<lapin::Connection, stockd::mq::MqError> {
    stockd::mq::connect_any(&settings.amqp.broker_urls(), &settings.amqp.tls, name).await
}
