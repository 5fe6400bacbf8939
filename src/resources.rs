//! The shared resources every role uses: settings, the MySQL pool, the Redis
//! store, a broker publisher and the trace exporter. Built once per process, checked at start-up so
//! an unreachable store is named ([`Unreachable`]): a one-shot job fails with it,
//! a role waits for the store and tries again (`roles::startup`). Each role builds its
//! worker from these (`from_resources`); nothing here knows a role or an
//! operation, so `resources` depends only on the adapters.

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
    pub async fn connect(settings: Settings, name: &str) -> Result<Self, Unreachable> {
        let mysql = |e: anyhow::Error| Unreachable::new("mysql", e);
        let db = Db::new(&settings.mysql)
            .context("mysql.url")
            .map_err(mysql)?
            .with_events(crate::events::EventPolicy::from_settings(&settings.events));
        db.ping()
            .await
            .context("connecting to MySQL (mysql.url)")
            .map_err(mysql)?;
        let redis = |e: anyhow::Error| Unreachable::new("redis", e);
        let store = RedisStore::new(&settings.redis, settings.reservation.ttl_secs)
            .context("redis.url")
            .map_err(redis)?
            .with_buyer_rate(settings.limits.per_user_rps, settings.limits.per_user_burst)
            .with_lapse_limit(settings.limits.max_lapsed_holds)
            .with_hold_budget(
                settings.limits.buyer_max_live_units,
                crate::redis::budget::claim_life_ms(
                    settings.reservation.ttl_secs,
                    settings.reservation.extend_secs,
                    settings.reservation.max_extensions,
                ),
            );
        store
            .ping()
            .await
            .context("connecting to Redis (redis.url)")
            .map_err(redis)?;
        store
            .load_scripts()
            .await
            .context("loading Lua scripts into Redis")
            .map_err(redis)?;
        let topology = Topology::new(&settings.amqp, &settings.reservation);
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
            .context("connecting to RabbitMQ (amqp.url / amqp.urls)")
            .map_err(|e| Unreachable::new("amqp", e))?;
        // Builds the exporter only (no connection): a collector that is down
        // drops spans later, it never holds a role back.
        let tracing = Tracing::from_settings(&settings.telemetry.otlp, name)
            .context("telemetry.otlp")
            .map_err(|e| Unreachable::new("otlp_collector", e))?;
        Ok(Self {
            tracing,
            settings: Arc::new(settings),
            db,
            redis: Arc::new(store),
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

/// The store [`Resources::connect`] could not reach, and why.
#[derive(Debug)]
pub struct Unreachable {
    /// `mysql`, `redis` or `amqp`: the names of the outage log
    /// (`health::outage`) and of `stockd_dependency_failures_total`.
    pub dependency: &'static str,
    /// The failed step with its cause ("connecting to MySQL (mysql.url): …").
    pub error: anyhow::Error,
}

impl Unreachable {
    fn new(dependency: &'static str, error: anyhow::Error) -> Self {
        Self { dependency, error }
    }
}

impl std::fmt::Display for Unreachable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:#}", self.error)
    }
}

impl std::error::Error for Unreachable {}
