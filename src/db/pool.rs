//! The MySQL pool. mysql_async's pool is lazy, so start-up pings it to fail fast,
//! and shutdown disconnects it so the server sees clean closes.

use std::sync::Arc;
use std::time::Duration;

use mysql_async::prelude::Queryable;
use mysql_async::SslOpts;
use mysql_async::{ClientIdentity, Conn, Opts, OptsBuilder, Pool, PoolConstraints, PoolOpts};

use super::DbError;
use crate::config::{MysqlSettings, MysqlTls};
use crate::events::EventPolicy;

#[derive(Clone)]
pub struct Db {
    pool: Pool,
    connect_timeout: Duration,
    query_timeout: Duration,
    /// The events a transaction stages in `event_outbox` (`events.*`); off
    /// until [`Db::with_events`] turns them on.
    events: Arc<EventPolicy>,
}

impl Db {
    pub fn new(settings: &MysqlSettings) -> Result<Self, DbError> {
        let opts = Opts::from_url(&settings.url)?;
        let constraints = PoolConstraints::new(settings.pool_min, settings.pool_max)
            .expect("config validation keeps pool_min <= pool_max");
        // mysql_async's defaults close every connection returned beyond
        // `pool_min` (no idle TTL) and reset each returned one, which also
        // drops its prepared statements: under load that was a new connection
        // (TCP, handshake, auth) dozens of times a second and a re-prepare of
        // every statement per checkout. Idle connections now stay up to
        // `pool_max` until IDLE_TTL passes unused; nothing of ours keeps
        // session state (a transaction's isolation and access mode are set
        // per transaction, and a connection returned inside a transaction is
        // rolled back by the pool).
        let pool_opts = PoolOpts::default()
            .with_constraints(constraints)
            .with_inactive_connection_ttl(IDLE_TTL)
            .with_reset_connection(false);
        let builder = with_tls(OptsBuilder::from_opts(opts), settings)
            .pool_opts(pool_opts)
            .stmt_cache_size(Some(STATEMENT_CACHE))
            .wait_timeout(Some(SERVER_IDLE_TIMEOUT_SECS))
            .init(vec![session_setup(settings.query_timeout_ms)]);
        Ok(Self {
            pool: Pool::new(builder),
            connect_timeout: Duration::from_secs(settings.connect_timeout_secs),
            query_timeout: Duration::from_millis(settings.query_timeout_ms),
            events: Arc::new(EventPolicy::off()),
        })
    }

    /// Stages events per `policy` in the transactions that change stock.
    pub fn with_events(mut self, policy: EventPolicy) -> Self {
        self.events = Arc::new(policy);
        self
    }

    /// Which events this process publishes.
    pub fn events(&self) -> &EventPolicy {
        &self.events
    }

    /// A collector of one transaction's events, keeping what
    /// [`Db::events`] wants (`db::event_outbox::stage` writes it).
    pub fn outgoing(&self) -> crate::events::Outgoing {
        crate::events::Outgoing::new(self.events.clone())
    }

    /// A connection, or [`DbError::Timeout`] when none comes in time.
    pub async fn conn(&self) -> Result<Conn, DbError> {
        tokio::time::timeout(self.connect_timeout, self.pool.get_conn())
            .await
            .map_err(|_| DbError::Timeout)?
            .map_err(DbError::from)
    }

    /// Runs one MySQL operation — taking a connection and its statements, or one
    /// transaction — under `mysql.query_timeout_ms`. mysql_async has no
    /// statement timeout and a frozen server or a partition without RST would
    /// otherwise hold the caller for the TCP timeout. An abandoned operation's
    /// connection is dropped: the pool rolls back or discards it, and a commit
    /// that timed out may or may not have landed — every writer is idempotent.
    pub async fn bounded<T, F>(&self, op: F) -> Result<T, DbError>
    where
        F: std::future::Future<Output = Result<T, DbError>>,
    {
        tokio::time::timeout(self.query_timeout, op)
            .await
            .map_err(|_| DbError::QueryTimeout)?
    }

    /// Longest time [`Db::bounded`] lets an operation run.
    pub fn operation_bound(&self) -> Duration {
        self.query_timeout
    }

    pub async fn ping(&self) -> Result<(), DbError> {
        self.bounded(async {
            let mut conn = self.conn().await?;
            conn.ping().await?;
            Ok(())
        })
        .await
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

/// Applies `mysql.tls`: with `require` every connection is TLS over TCP.
/// mysql_async would otherwise move a loopback connection to the server's Unix
/// socket and skip TLS there, so `prefer_socket` is turned off.
pub fn with_tls(builder: OptsBuilder, settings: &MysqlSettings) -> OptsBuilder {
    match ssl_opts(&settings.tls) {
        Some(ssl) => builder.ssl_opts(ssl).prefer_socket(false),
        None => builder,
    }
}

/// The driver's TLS options, or `None` when `mysql.tls.require` is off (the
/// URL's own `require_ssl` parameter still applies then).
fn ssl_opts(tls: &MysqlTls) -> Option<SslOpts> {
    if !tls.require {
        return None;
    }
    crate::tls::install_crypto_provider();
    let mut opts = SslOpts::default();
    if let Some(ca) = &tls.ca_file {
        // A private CA is the only root trusted: a public CA must not be able
        // to vouch for the database.
        opts = opts
            .with_root_certs(vec![ca.clone().into()])
            .with_disable_built_in_roots(true);
    }
    if let (Some(cert), Some(key)) = (&tls.cert_file, &tls.key_file) {
        let identity = ClientIdentity::new(cert.clone().into(), key.clone().into());
        opts = opts.with_client_identity(Some(identity));
    }
    Some(opts)
}

/// Longest wait for checked-out connections on shutdown.
const DISCONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Prepared statements kept per connection (the fixed ones; statements shaped by
/// a batch go as text, `sql_text`).
const STATEMENT_CACHE: usize = 64;
/// An idle pooled connection beyond `mysql.pool_min` is closed after this long unused.
const IDLE_TTL: Duration = Duration::from_secs(60);
/// Server-side idle timeout of a pooled connection (seconds).
const SERVER_IDLE_TIMEOUT_SECS: usize = 3600;

/// Every write transaction of stockd sends its statements back to back, each
/// bounded by `mysql.query_timeout_ms`: one left idle longer than twice that
/// was abandoned by a client the server can no longer hear (a partition: no
/// FIN, no RST). Without a bound MariaDB keeps it open — and the SKU row lock
/// it holds, which stalls every writer of that SKU — until `wait_timeout` or
/// TCP keepalive, hours by default (chaos s20). MariaDB (10.3+) closes such a
/// connection and rolls back after `idle_write_transaction_timeout`; the
/// `/*M!` comment is run by MariaDB only, so MySQL runs a plain
/// `SET @stockd_session = 1` instead.
fn session_setup(query_timeout_ms: u64) -> String {
    let idle_secs = idle_write_transaction_timeout_secs(query_timeout_ms);
    format!(
        "SET @stockd_session = 1 /*M!100300 , SESSION idle_write_transaction_timeout = {idle_secs} */"
    )
}

/// The session's `idle_write_transaction_timeout` for `query_timeout_ms`:
/// twice the statement bound, in whole seconds, at least 1.
pub fn idle_write_transaction_timeout_secs(query_timeout_ms: u64) -> u64 {
    (2 * query_timeout_ms).div_ceil(1000).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mysql_tls_is_off_unless_required() {
        assert!(ssl_opts(&MysqlTls::default()).is_none());
        let on = MysqlTls {
            require: true,
            ca_file: Some("/ca.pem".into()),
            ..MysqlTls::default()
        };
        let opts = ssl_opts(&on).expect("TLS options");
        assert!(
            opts.disable_built_in_roots(),
            "a private CA is the only root"
        );
    }
}
