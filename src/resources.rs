//! The shared resources every role uses: settings, the MySQL pool, the Redis
//! store, a broker publisher and the trace exporter. Built once per process,
//! checked at start-up so a wrong URL fails fast with the dependency named.
//! Each role builds its worker from these (`from_resources`); nothing here
//! knows a role or an operation, so `resources` depends only on the adapters.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;

use crate::config::Settings;
use crate::db::Db;
use crate::health::Breaker;
use crate::mq::{Publisher, Topology};
use crate::otel::Tracing;
use crate::redis::RedisStore;

#[derive(Clone)]
pub struct Resources {
    pub settings: Arc<Settings>,
    pub db: Db,
    pub redis: Arc<RedisStore>,
    pub publisher: Arc<Publisher>,
    /// The workers' MySQL circuit breaker (consumer and closer), shown by `/readyz`.
    pub mysql_breaker: Arc<Breaker>,
    /// Distributed traces (`telemetry.otlp`); off without an endpoint.
    pub tracing: Tracing,
}

impl Resources {
    /// Connects to MySQL, Redis and RabbitMQ and declares the broker topology.
    pub async fn connect(settings: Settings, name: &str) -> anyhow::Result<Self> {
        let db = Db::new(&settings.mysql).context("mysql.url")?;
        db.ping().await.context("connecting to MySQL (mysql.url)")?;
        let redis = RedisStore::new(&settings.redis, settings.reservation.ttl_secs)
            .context("redis.url")?
            .with_buyer_rate(settings.limits.per_user_rps, settings.limits.per_user_burst);
        redis
            .ping()
            .await
            .context("connecting to Redis (redis.url)")?;
        redis
            .load_scripts()
            .await
            .context("loading Lua scripts into Redis")?;
        let topology = Topology::new(&settings.amqp, settings.reservation.ttl_secs);
        let publisher = Publisher::new(
            settings.amqp.broker_urls(),
            name,
            topology,
            Duration::from_millis(settings.amqp.publish_timeout_ms),
            settings.amqp.publish_channels,
        )
        .with_tls(settings.amqp.tls.clone());
        publisher
            .ensure_connected()
            .await
            .context("connecting to RabbitMQ (amqp.url / amqp.urls)")?;
        let tracing = Tracing::from_settings(&settings.telemetry.otlp, name)?;
        Ok(Self {
            tracing,
            settings: Arc::new(settings),
            db,
            redis: Arc::new(redis),
            publisher: Arc::new(publisher),
            mysql_breaker: Arc::new(Breaker::new("mysql")),
        })
    }

    /// Closes pools and connections (last step of shutdown).
    pub async fn close(self) {
        self.publisher.close().await;
        self.db.disconnect().await;
        self.tracing.shutdown().await;
    }
}
