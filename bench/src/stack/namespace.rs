//! The benchmark's own corner of the shared services: database `stockd_<name>`,
//! Redis key prefix `<name>:`, queue prefix `<name>.`. Tests and a local stockd
//! keep their data; the bench removes everything under its names before a run
//! (leftovers of an interrupted run) and after it.

use std::path::PathBuf;

use anyhow::Context;
use deadpool_redis::redis;
use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Opts, OptsBuilder};

use stockd::config::{Durability, Settings};
use stockd::db::Db;
use stockd::mq::Topology;
use stockd::redis::{RedisLink, RedisStore};

/// Keys removed per SCAN step; big enough to be quick, small enough not to
/// block Redis for other clients.
const SCAN_COUNT: usize = 1_000;
/// `reservation.ttl_secs` of the expiry storm's child
/// ([`crate::phases::expiry_storm`]): its delay queue carries this TTL
/// in its name, so [`Namespace::cleanup`] removes that delay level too.
pub const STORM_TTL_SECS: u64 = 10;
/// Upper bound on SCAN steps: the bench writes at most a few hundred thousand keys.
const SCAN_STEPS_MAX: usize = 100_000;

/// Settings pointed at the benchmark's database, key prefix and queue names.
pub struct Namespace {
    pub settings: Settings,
    /// Admin token the child stockd is started with (random per run).
    pub admin_token: String,
    /// `admin.token` of the loaded configuration (for `--target`).
    pub base_admin_token: Option<String>,
    /// The `stockd` binary a child runs (`BenchArgs::stockd_exe`).
    pub stockd_exe: PathBuf,
}

impl Namespace {
    /// `name` is `bench` or `demo`: `[a-z]+`, so every name derived from it is
    /// valid. `stockd_exe` is what its children run.
    pub fn new(base: &Settings, name: &str, stockd_exe: PathBuf) -> anyhow::Result<Self> {
        assert!(
            name.bytes().all(|b| b.is_ascii_lowercase()),
            "bad namespace"
        );
        let mut settings = base.clone();
        settings.mysql.url = with_database(&base.mysql.url, &format!("stockd_{name}"))?;
        settings.redis.key_prefix = format!("{name}:");
        settings.amqp.queue_prefix = format!("{name}.");
        let admin_token = format!("{name}-{}", uuid::Uuid::new_v4().simple());
        settings.admin.token = Some(admin_token.clone());
        settings.validate()?;
        Ok(Self {
            settings,
            admin_token,
            base_admin_token: base.admin.token.clone(),
            stockd_exe,
        })
    }

    /// Environment overrides that point a child stockd at this namespace.
    pub fn child_env(&self, bind: &str, durability: Durability) -> Vec<(String, String)> {
        let durability = match durability {
            Durability::Queue => "queue",
            Durability::Redis => "redis",
        };
        [
            ("STOCKD__HTTP__BIND", bind),
            ("STOCKD__MYSQL__URL", self.settings.mysql.url.as_str()),
            ("STOCKD__REDIS__KEY_PREFIX", &self.settings.redis.key_prefix),
            (
                "STOCKD__AMQP__QUEUE_PREFIX",
                &self.settings.amqp.queue_prefix,
            ),
            ("STOCKD__RESERVATION__DURABILITY", durability),
            ("STOCKD__ADMIN__TOKEN", &self.admin_token),
            ("STOCKD__LOGGING__LEVEL", "warn"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
    }

    /// Direct access to this namespace's MySQL and Redis (the checks' view).
    pub fn stores(&self) -> anyhow::Result<crate::stack::check::Stores> {
        Ok(crate::stack::check::Stores {
            db: self.db()?,
            redis: self.redis()?,
        })
    }

    pub fn db(&self) -> anyhow::Result<Db> {
        Db::new(&self.settings.mysql).context("bench mysql.url")
    }

    pub fn redis(&self) -> anyhow::Result<RedisStore> {
        RedisStore::new(&self.settings.redis, self.settings.reservation.ttl_secs)
            .context("bench redis.url")
    }

    pub fn topology(&self) -> Topology {
        Topology::new(&self.settings.amqp, &self.settings.reservation)
    }

    /// Takes the namespace for this run: a MySQL named lock (`GET_LOCK`) held
    /// on its own connection until the returned guard is dropped. Two benches
    /// on one MySQL would otherwise clean each other's database and keys away
    /// mid-phase; the second one is refused at once, saying why.
    pub async fn lock(&self) -> anyhow::Result<NamespaceLock> {
        let opts = Opts::from_url(&self.settings.mysql.url)?;
        let name = opts.db_name().context("bench database name")?.to_string();
        let server = OptsBuilder::from_opts(opts).db_name(None::<String>);
        let mut conn = Conn::new(server).await.context("connecting to MySQL")?;
        let taken: Option<i64> = conn
            .exec_first("SELECT GET_LOCK(?, 0)", (name.as_str(),))
            .await
            .context("GET_LOCK for the bench namespace")?;
        anyhow::ensure!(
            taken == Some(1),
            "another stockd-bench is running against this MySQL (it holds the lock \
             `{name}`, and uses the same database, key prefix and queues); wait for it to end"
        );
        Ok(NamespaceLock { _conn: conn })
    }

    /// Removes the database, every key under the prefix, and the queues.
    pub async fn cleanup(&self) -> anyhow::Result<()> {
        drop_database(&self.settings.mysql.url).await?;
        let removed = delete_keys(&self.redis()?, &self.settings.redis.key_prefix).await?;
        tracing::debug!(keys = removed, "bench.cleanup: redis keys removed");
        let conn = stockd::mq::connect_any(
            &self.settings.amqp.broker_urls(),
            &self.settings.amqp.tls,
            "stockd-bench-cleanup",
        )
        .await?;
        let channel = conn.create_channel().await?;
        self.topology().delete(&channel).await?;
        let mut storm = self.settings.reservation.clone();
        storm.ttl_secs = STORM_TTL_SECS;
        let storm = Topology::new(&self.settings.amqp, &storm);
        let queue = lapin::options::QueueDeleteOptions::default();
        channel
            .queue_delete(storm.expiry_delay_queue.as_str().into(), queue)
            .await?;
        let _ = conn.close(200, "bench cleanup".into()).await;
        Ok(())
    }
}

/// The run's hold on its namespace: the connection that holds the named lock
/// (MySQL releases it when the connection ends, also when the bench dies).
pub struct NamespaceLock {
    _conn: Conn,
}

/// `url` with its database path replaced by `db_name` (query string kept).
fn with_database(url: &str, db_name: &str) -> anyhow::Result<String> {
    let (base, query) = match url.split_once('?') {
        Some((b, q)) => (b, Some(q)),
        None => (url, None),
    };
    let scheme_end = base.find("://").context("mysql.url has no scheme")? + 3;
    let host_end = base[scheme_end..]
        .find('/')
        .map_or(base.len(), |i| scheme_end + i);
    let mut out = format!("{}/{db_name}", &base[..host_end]);
    if let Some(q) = query {
        out.push('?');
        out.push_str(q);
    }
    Ok(out)
}

async fn drop_database(url: &str) -> anyhow::Result<()> {
    let opts = Opts::from_url(url)?;
    let name = opts.db_name().context("bench database name")?.to_string();
    let server = OptsBuilder::from_opts(opts).db_name(None::<String>);
    let mut conn = Conn::new(server).await.context("connecting to MySQL")?;
    conn.query_drop(format!("DROP DATABASE IF EXISTS `{name}`"))
        .await?;
    conn.disconnect().await?;
    Ok(())
}

/// Deletes every key starting with `prefix` by SCAN (never KEYS: Redis is
/// shared), on every primary of a cluster.
pub async fn delete_keys(store: &RedisStore, prefix: &str) -> anyhow::Result<u64> {
    assert!(
        !prefix.is_empty() && !prefix.contains(['*', '?', '[', ']', '\\']),
        "prefix must be a literal"
    );
    let mut removed = 0;
    for (_, mut conn) in store.primaries().await? {
        removed += delete_on_node(&mut conn, prefix).await?;
    }
    Ok(removed)
}

/// One node's SCAN + UNLINK. Keys go one per UNLINK, pipelined: a cluster
/// node refuses one command over keys of different slots.
async fn delete_on_node(conn: &mut RedisLink, prefix: &str) -> anyhow::Result<u64> {
    let pattern = format!("{prefix}*");
    let mut cursor: u64 = 0;
    let mut removed = 0;
    for _ in 0..SCAN_STEPS_MAX {
        let (next, keys): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(&pattern)
            .arg("COUNT")
            .arg(SCAN_COUNT)
            .query_async(conn)
            .await?;
        if !keys.is_empty() {
            let mut pipe = redis::pipe();
            for key in &keys {
                pipe.cmd("UNLINK").arg(key);
            }
            let counts: Vec<u64> = pipe.query_async(conn).await?;
            removed += counts.iter().sum::<u64>();
        }
        if next == 0 {
            return Ok(removed);
        }
        cursor = next;
    }
    anyhow::bail!("SCAN over {prefix}* did not finish in {SCAN_STEPS_MAX} steps")
}

#[cfg(test)]
mod tests {
    use super::with_database;

    #[test]
    fn the_database_name_is_replaced_and_the_query_kept() {
        let cases = [
            (
                "mysql://root@127.0.0.1:3306/stockd",
                "mysql://root@127.0.0.1:3306/stockd_bench",
            ),
            ("mysql://root@h:3306", "mysql://root@h:3306/stockd_bench"),
            (
                "mysql://u:p@h/x?pool_max=3",
                "mysql://u:p@h/stockd_bench?pool_max=3",
            ),
        ];
        for (input, want) in cases {
            assert_eq!(with_database(input, "stockd_bench").unwrap(), want);
        }
    }
}
