//! A private MariaDB primary with an asynchronous replica, behind a TCP proxy
//! stockd connects through (s17, a MySQL failover). What an operator runs:
//! row-based binlog with GTIDs on both (`gtid_strict_mode`), the replica
//! `read_only` and following the primary with `MASTER_USE_GTID=slave_pos`.
//!
//! The fault is the one asynchronous replication allows: the replica's SQL
//! thread stops (its I/O thread keeps receiving into the relay log, as when
//! the applier falls behind under load), the primary dies, and the replica is
//! promoted the usual way — `STOP SLAVE; RESET SLAVE ALL` (which deletes the
//! relay log) and `read_only=0` — so every transaction it had received but not
//! applied is gone. The proxy is then re-pointed to it, cutting every open
//! connection, as a VIP move or ProxySQL would.

use std::path::Path;
use std::time::Duration;

use mysql_async::prelude::Queryable;

use super::mariadb::{timed, Mariadb};
use super::wait_ready;
use crate::place::Place;
use crate::proxy::FaultProxy;

/// The replica applies a few migrations and SKU rows: seconds at most, even
/// while cargo builds next to the suite.
const CATCH_UP_LIMIT: Duration = Duration::from_secs(30);

/// `rpl_semi_sync_master_timeout` once semi-sync is on: longer than any
/// scenario, so the primary holds commits instead of falling back to
/// asynchronous replication while the replica is cut off.
const SEMI_SYNC_TIMEOUT_MS: u64 = 600_000;

/// Options of both servers: row-based binlog with GTIDs, strict, so a gap or a
/// fork in the GTID sequence stops replication instead of passing silently.
fn replication_args(server_id: u32) -> Vec<String> {
    vec![
        format!("--server-id={server_id}"),
        "--log-bin=mysql-bin".into(),
        "--binlog-format=ROW".into(),
        "--gtid-strict-mode=1".into(),
        "--relay-log=relay-bin".into(),
    ]
}

/// The replica's replication threads, from `SHOW SLAVE STATUS`.
#[derive(Debug, Clone, Default)]
pub struct ReplicaStatus {
    pub io_running: bool,
    pub sql_running: bool,
    /// Last GTID the I/O thread received (`Gtid_IO_Pos`).
    pub received: String,
    /// `Last_IO_Error` and `Last_SQL_Error`, when either is set.
    pub last_error: String,
}

/// Where each server stands in the GTID sequence (domain 0).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GtidPositions {
    /// Last transaction the primary wrote to its binlog (`gtid_binlog_pos`).
    pub primary_written: String,
    /// Last one the replica's I/O thread received (`Gtid_IO_Pos`).
    pub replica_received: String,
    /// Last one the replica's SQL thread applied (`gtid_slave_pos`).
    pub replica_applied: String,
}

impl GtidPositions {
    /// Transactions written on the primary that the replica has not applied.
    pub fn not_applied(&self) -> u64 {
        gtid_seq(&self.primary_written).saturating_sub(gtid_seq(&self.replica_applied))
    }

    /// Of those, the ones the replica has not even received.
    pub fn not_received(&self) -> u64 {
        gtid_seq(&self.primary_written).saturating_sub(gtid_seq(&self.replica_received))
    }
}

/// Sequence number of domain 0 in a GTID position ("0-1-42" → 42; 0 if none).
fn gtid_seq(position: &str) -> u64 {
    position
        .split(',')
        .filter_map(|gtid| {
            let mut parts = gtid.trim().split('-');
            let domain = parts.next()?;
            let _server = parts.next()?;
            let seq = parts.next()?.parse().ok()?;
            (domain == "0").then_some(seq)
        })
        .max()
        .unwrap_or(0)
}

pub struct MysqlPair {
    pub primary: Mariadb,
    pub replica: Mariadb,
    /// The address stockd connects to; forwards to the primary of the moment.
    pub proxy: FaultProxy,
    /// Set once the replica was promoted (the harness reads from it then).
    promoted: bool,
}

impl MysqlPair {
    /// Starts both servers (in parallel, on loopback) and the proxy, pointed at the
    /// primary. Replication starts with [`Self::replicate`], once the schema
    /// is in place.
    pub async fn start(root: &Path) -> Self {
        let primary_args = replication_args(1);
        let mut replica_args = replication_args(2);
        replica_args.push("--read-only=1".into());
        let (primary, replica) = tokio::join!(
            Mariadb::start_named(root, "mariadb", &primary_args, Place::loopback()),
            Mariadb::start_named(root, "replica", &replica_args, Place::loopback()),
        );
        let proxy = FaultProxy::start(&primary.addr()).await;
        println!(
            "  mysql proxy :{} -> primary :{} (replica :{})",
            proxy.port, primary.port, replica.port
        );
        Self {
            primary,
            replica,
            proxy,
            promoted: false,
        }
    }

    /// URL of database `name` through the proxy. `prefer_socket=false`:
    /// mysql_async would otherwise move a loopback connection to the server's
    /// Unix socket and bypass the proxy.
    pub fn url(&self, name: &str) -> String {
        format!(
            "mysql://root@127.0.0.1:{}/{name}?prefer_socket=false",
            self.proxy.port
        )
    }

    /// The server that takes writes now: the primary, or the replica once
    /// promoted. The harness reads it directly, never through the proxy.
    pub fn current(&self) -> &Mariadb {
        if self.promoted {
            &self.replica
        } else {
            &self.primary
        }
    }

    /// `CHANGE MASTER TO … MASTER_USE_GTID=slave_pos` and `START SLAVE` on the
    /// replica. Its GTID position is empty, so it starts from the primary's
    /// first binlog event: the schema comes with the stream.
    pub async fn replicate(&self) {
        let mut replica = self.replica.conn("mysql").await;
        let change = format!(
            "CHANGE MASTER TO MASTER_HOST='127.0.0.1', MASTER_PORT={}, MASTER_USER='root', \
             MASTER_PASSWORD='', MASTER_CONNECT_RETRY=1, MASTER_USE_GTID=slave_pos",
            self.primary.port
        );
        timed(replica.query_drop(change)).await;
        timed(replica.query_drop("START SLAVE")).await;
        let _ = replica.disconnect().await;
    }

    /// Waits until the replica applied everything the primary wrote, with both
    /// replication threads running; panics with the replica's own errors
    /// after [`CATCH_UP_LIMIT`].
    pub async fn wait_caught_up(&self) {
        let what = format!("replica :{} catching up", self.replica.port);
        let errors = std::sync::Mutex::new(String::new());
        wait_ready(
            &what,
            CATCH_UP_LIMIT,
            || async {
                let status = self.replica_status().await;
                let at = self.positions().await;
                *errors.lock().unwrap() = format!(
                    "replica I/O thread running {}, SQL thread running {}, errors: {:?}; {at:?}",
                    status.io_running, status.sql_running, status.last_error
                );
                status.io_running && status.sql_running && at.replica_applied == at.primary_written
            },
            || errors.lock().unwrap().clone(),
        )
        .await;
        let at = self.positions().await;
        println!(
            "  replica :{} caught up at GTID {}",
            self.replica.port, at.replica_applied
        );
    }

    /// `SHOW SLAVE STATUS` of the replica, the columns the harness needs.
    pub async fn replica_status(&self) -> ReplicaStatus {
        let mut replica = self.replica.conn("mysql").await;
        let row: Option<mysql_async::Row> = timed(replica.query_first("SHOW SLAVE STATUS")).await;
        let _ = replica.disconnect().await;
        let Some(row) = row else {
            return ReplicaStatus::default();
        };
        let text = |column: &str| {
            row.get_opt::<Option<String>, _>(column)
                .and_then(Result::ok)
                .flatten()
                .unwrap_or_default()
        };
        ReplicaStatus {
            io_running: text("Slave_IO_Running") == "Yes",
            sql_running: text("Slave_SQL_Running") == "Yes",
            received: text("Gtid_IO_Pos"),
            last_error: format!("{} {}", text("Last_IO_Error"), text("Last_SQL_Error"))
                .trim()
                .to_string(),
        }
    }

    /// GTID positions of both servers (while both run and the replica still
    /// replicates).
    pub async fn positions(&self) -> GtidPositions {
        let mut primary = self.primary.conn("mysql").await;
        let written: Option<String> = timed(primary.query_first("SELECT @@gtid_binlog_pos")).await;
        let _ = primary.disconnect().await;
        let (received, applied) = self.replica_positions().await;
        GtidPositions {
            primary_written: written.unwrap_or_default(),
            replica_received: received,
            replica_applied: applied,
        }
    }

    /// (received, applied) GTID positions of the replica: they can still be
    /// read once the primary is gone, until the replica is promoted.
    pub async fn replica_positions(&self) -> (String, String) {
        let mut replica = self.replica.conn("mysql").await;
        let applied: Option<String> = timed(replica.query_first("SELECT @@gtid_slave_pos")).await;
        let _ = replica.disconnect().await;
        let received = self.replica_status().await.received;
        (received, applied.unwrap_or_default())
    }

    /// `STOP SLAVE SQL_THREAD`: the replica keeps receiving the binlog into
    /// its relay log but applies nothing (replication lag).
    pub async fn stop_applier(&self) {
        let mut replica = self.replica.conn("mysql").await;
        timed(replica.query_drop("STOP SLAVE SQL_THREAD")).await;
        let _ = replica.disconnect().await;
    }

    /// `STOP SLAVE IO_THREAD`: the replica receives nothing more (a broken
    /// replication link); what it has is applied.
    pub async fn stop_receiver(&self) {
        let mut replica = self.replica.conn("mysql").await;
        timed(replica.query_drop("STOP SLAVE IO_THREAD")).await;
        let _ = replica.disconnect().await;
    }

    /// Turns semi-synchronous replication on (built into MariaDB since 10.3):
    /// the primary first (`AFTER_SYNC`: no session sees a commit before the
    /// replica has it; a timeout longer than any scenario, so it never falls
    /// back to asynchronous while one runs), then the replica, whose I/O
    /// thread reconnects to register as a semi-sync replica. Waits until the
    /// primary counts it. Done at run time, after the schema is in place: a
    /// primary with semi-sync on and no replica yet would hold every commit
    /// of the migration for the whole timeout.
    pub async fn enable_semi_sync(&self) {
        let mut primary = self.primary.conn("mysql").await;
        for statement in [
            "SET GLOBAL rpl_semi_sync_master_wait_point = 'AFTER_SYNC'".to_string(),
            format!("SET GLOBAL rpl_semi_sync_master_timeout = {SEMI_SYNC_TIMEOUT_MS}"),
            "SET GLOBAL rpl_semi_sync_master_enabled = ON".to_string(),
        ] {
            timed(primary.query_drop(statement)).await;
        }
        let _ = primary.disconnect().await;
        let mut replica = self.replica.conn("mysql").await;
        for statement in [
            "SET GLOBAL rpl_semi_sync_slave_enabled = ON",
            "STOP SLAVE IO_THREAD",
            "START SLAVE IO_THREAD",
        ] {
            timed(replica.query_drop(statement)).await;
        }
        let _ = replica.disconnect().await;
        let what = format!(
            "primary :{} counting a semi-sync replica",
            self.primary.port
        );
        wait_ready(
            &what,
            CATCH_UP_LIMIT,
            || async { self.semi_sync_clients().await == Some(1) },
            String::new,
        )
        .await;
        println!("  semi-synchronous replication on (AFTER_SYNC, 1 replica)");
    }

    /// `Rpl_semi_sync_master_clients` of the primary, while it runs.
    async fn semi_sync_clients(&self) -> Option<u64> {
        let mut primary = self.primary.conn("mysql").await;
        let row: Option<(String, String)> =
            timed(primary.query_first("SHOW GLOBAL STATUS LIKE 'Rpl_semi_sync_master_clients'"))
                .await;
        let _ = primary.disconnect().await;
        row.and_then(|(_, value)| value.parse().ok())
    }

    /// Waits until the replica applied everything it received (its relay
    /// log): what a careful promotion does before `RESET SLAVE ALL`.
    pub async fn wait_relay_log_applied(&self) {
        let what = format!("replica :{} applying its relay log", self.replica.port);
        wait_ready(
            &what,
            CATCH_UP_LIMIT,
            || async {
                let (received, applied) = self.replica_positions().await;
                received == applied
            },
            String::new,
        )
        .await;
    }

    /// kill -9 of the primary (it is not restarted: the replica takes over).
    pub fn kill_primary(&mut self) {
        self.primary.kill9();
    }

    /// Promotes the replica as an operator does: `STOP SLAVE; RESET SLAVE ALL`
    /// (the relay log with every unapplied transaction is deleted) and
    /// `SET GLOBAL read_only=0`.
    pub async fn promote(&mut self) {
        let mut replica = self.replica.conn("mysql").await;
        for statement in ["STOP SLAVE", "RESET SLAVE ALL", "SET GLOBAL read_only=0"] {
            timed(replica.query_drop(statement)).await;
        }
        let _ = replica.disconnect().await;
        self.promoted = true;
    }

    /// Re-points the proxy to the promoted replica; open connections are cut.
    pub fn repoint(&self) {
        self.proxy.retarget(&self.replica.addr());
    }
}

#[cfg(test)]
mod tests {
    use super::gtid_seq;

    #[test]
    fn gtid_sequence_is_read_from_domain_zero() {
        assert_eq!(gtid_seq("0-1-42"), 42);
        assert_eq!(gtid_seq("1-3-7,0-1-42"), 42);
        assert_eq!(gtid_seq(""), 0);
    }
}
