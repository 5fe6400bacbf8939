//! The MySQL pool. mysql_async's pool is lazy, so start-up pings it to fail fast,
//! and shutdown disconnects it so the server sees clean closes.

use std::time::Duration;

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Opts, OptsBuilder, Pool, PoolConstraints, PoolOpts};

use super::DbError;
use crate::config::MysqlSettings;

#[derive(Clone)]
pub struct Db {
    pool: Pool,
    connect_timeout: Duration,
}

impl Db {
    pub fn new(settings: &MysqlSettings) -> Result<Self, DbError> {
        let opts = Opts::from_url(&settings.url)?;
        let constraints = PoolConstraints::new(settings.pool_min, settings.pool_max)
            .expect("config validation keeps pool_min <= pool_max");
        let pool_opts = PoolOpts::default().with_constraints(constraints);
        let builder = OptsBuilder::from_opts(opts)
            .pool_opts(pool_opts)
            .stmt_cache_size(Some(STATEMENT_CACHE))
            .wait_timeout(Some(SERVER_IDLE_TIMEOUT_SECS));
        Ok(Self {
            pool: Pool::new(builder),
            connect_timeout: Duration::from_secs(settings.connect_timeout_secs),
        })
    }

    /// A connection, or [`DbError::Timeout`] when none comes in time.
    pub async fn conn(&self) -> Result<Conn, DbError> {
        tokio::time::timeout(self.connect_timeout, self.pool.get_conn())
            .await
            .map_err(|_| DbError::Timeout)?
            .map_err(DbError::from)
    }

    pub async fn ping(&self) -> Result<(), DbError> {
        let mut conn = self.conn().await?;
        conn.ping().await?;
        Ok(())
    }

    /// Closes the pool. mysql_async waits for every checked-out connection to
    /// come back first, so the wait is bounded: a leaked connection must not
    /// hang shutdown.
    pub async fn disconnect(self) {
        if tokio::time::timeout(DISCONNECT_TIMEOUT, self.pool.disconnect())
            .await
            .is_err()
        {
            tracing::warn!("mysql.pool: connections still checked out at shutdown; closing anyway");
        }
    }
}

/// Longest wait for checked-out connections on shutdown.
const DISCONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Prepared statements kept per connection; batch inserts vary in arity, so room
/// for a few dozen shapes.
const STATEMENT_CACHE: usize = 64;
/// Server-side idle timeout of a pooled connection (seconds).
const SERVER_IDLE_TIMEOUT_SECS: usize = 3600;
