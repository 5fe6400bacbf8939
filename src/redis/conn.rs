//! The hot path's connection.
//!
//! deadpool-redis PINGs a connection every time it is checked out, which would
//! double the round trips of a reservation. A `MultiplexedConnection` already
//! pipelines concurrent requests over one socket, so the hot path shares one
//! (cloning it is cheap) and only goes back to the pool when that one broke.

use std::sync::RwLock;

use deadpool_redis::redis::aio::MultiplexedConnection;
use deadpool_redis::Pool;

use super::RedisError;

pub struct HotConnection {
    pool: Pool,
    shared: RwLock<Option<MultiplexedConnection>>,
}

impl HotConnection {
    pub fn new(pool: Pool) -> Self {
        Self {
            pool,
            shared: RwLock::new(None),
        }
    }

    pub fn pool(&self) -> &Pool {
        &self.pool
    }

    /// A clone of the shared connection, creating it from the pool when absent.
    pub async fn get(&self) -> Result<MultiplexedConnection, RedisError> {
        if let Some(conn) = self.shared.read().expect("lock poisoned").as_ref() {
            return Ok(conn.clone());
        }
        let pooled = self
            .pool
            .get()
            .await
            .map_err(|e| RedisError::Pool(e.to_string()))?;
        let conn = deadpool_redis::Connection::take(pooled);
        *self.shared.write().expect("lock poisoned") = Some(conn.clone());
        Ok(conn)
    }

    /// Inspects a failed command: a broken socket or timeout drops the shared
    /// connection so the next call builds a fresh one.
    pub fn observe(&self, err: &RedisError) {
        let broken = match err {
            RedisError::Command(e) => {
                e.is_io_error() || e.is_connection_dropped() || e.is_timeout()
            }
            RedisError::Timeout => true,
            _ => false,
        };
        if broken {
            *self.shared.write().expect("lock poisoned") = None;
        }
    }
}
