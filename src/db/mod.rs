//! Stage 3: MySQL/MariaDB. The pool, migrations, and one file per aggregate.

pub mod codes;
pub mod console;
pub mod due;
pub mod event_outbox;
pub mod holds;
pub mod invariants;
pub mod ledger;
pub mod migrate;
pub mod movement_steps;
pub mod movements;
pub mod orders;
pub mod pool;
pub mod sale;
pub mod sale_schedule;
pub mod sku;
pub mod sql_text;
pub mod url;

pub use pool::Db;

/// The driver's connection and transaction, for the callers that hold one
/// across several of this module's functions (a lifecycle decision under the
/// ledger lock protocol, a restock): they name the handles, never the driver,
/// and every statement stays in here.
pub use mysql_async::{Conn, Transaction};

/// Failures talking to MySQL.
#[derive(Debug, thiserror::Error)]
pub enum DbError {
    #[error("mysql: {0}")]
    Mysql(#[from] mysql_async::Error),
    #[error("mysql url: {0}")]
    Url(#[from] mysql_async::UrlError),
    #[error("mysql connection not obtained within the timeout")]
    Timeout,
    #[error("mysql operation did not finish within mysql.query_timeout_ms")]
    QueryTimeout,
}

impl DbError {
    /// Deadlocks and lock wait timeouts: the transaction may simply be retried.
    pub fn is_retryable(&self) -> bool {
        matches!(
            self.server_code(),
            Some(codes::ER_LOCK_DEADLOCK | codes::ER_LOCK_WAIT_TIMEOUT)
        )
    }

    /// Whether the error says something about the message being applied (bad
    /// data, a constraint it breaks) rather than about MySQL being down, slow,
    /// read-only or out of connections. Only these may use up a message's
    /// attempts; every other error is a dependency failure (circuit breaker).
    pub fn is_caused_by_data(&self) -> bool {
        matches!(
            self.server_code(),
            Some(code) if codes::DATA_ERRORS.contains(&code)
        )
    }

    pub fn server_code(&self) -> Option<u16> {
        match self {
            DbError::Mysql(mysql_async::Error::Server(e)) => Some(e.code),
            _ => None,
        }
    }
}
