//! `stockd migrate`: forward-only, numbered migrations from `sql/`, embedded in
//! the binary so a deployed stockd needs no source tree. Re-running is a no-op.

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Opts, OptsBuilder};

use super::DbError;
use crate::config::MysqlSettings;

/// (version, name, SQL). Append only; never edit an applied migration.
pub const MIGRATIONS: &[(u32, &str, &str)] = &[
    (1, "0001_init", include_str!("../../sql/0001_init.sql")),
    (
        2,
        "0002_buyer_limit",
        include_str!("../../sql/0002_buyer_limit.sql"),
    ),
    (
        3,
        "0003_buckets",
        include_str!("../../sql/0003_buckets.sql"),
    ),
    (
        4,
        "0004_stock_movements",
        include_str!("../../sql/0004_stock_movements.sql"),
    ),
    (
        5,
        "0005_event_outbox",
        include_str!("../../sql/0005_event_outbox.sql"),
    ),
    (
        6,
        "0006_extensions",
        include_str!("../../sql/0006_extensions.sql"),
    ),
    (7, "0007_orders", include_str!("../../sql/0007_orders.sql")),
    (
        8,
        "0008_told_available",
        include_str!("../../sql/0008_told_available.sql"),
    ),
    (
        9,
        "0009_movement_redis_step",
        include_str!("../../sql/0009_movement_redis_step.sql"),
    ),
    (
        10,
        "0010_hold_client",
        include_str!("../../sql/0010_hold_client.sql"),
    ),
    (
        11,
        "0011_sale_terms",
        include_str!("../../sql/0011_sale_terms.sql"),
    ),
    (
        12,
        "0012_sale_schedule",
        include_str!("../../sql/0012_sale_schedule.sql"),
    ),
];

/// Creates the database named in `url` if needed, then applies what is missing.
/// Returns the names of the migrations applied now.
pub async fn migrate(url: &str) -> Result<Vec<&'static str>, DbError> {
    migrate_opts(Opts::from_url(url)?).await
}

/// [`migrate`] with the whole `mysql` section: `mysql.url` and `mysql.tls`.
pub async fn migrate_with(settings: &MysqlSettings) -> Result<Vec<&'static str>, DbError> {
    let builder = super::pool::with_tls(
        OptsBuilder::from_opts(Opts::from_url(&settings.url)?),
        settings,
    );
    migrate_opts(builder.into()).await
}

async fn migrate_opts(opts: Opts) -> Result<Vec<&'static str>, DbError> {
    let db_name = opts.db_name().unwrap_or("stockd").to_string();
    assert!(
        db_name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_'),
        "database name must be [A-Za-z0-9_]"
    );
    let server_opts = OptsBuilder::from_opts(opts.clone()).db_name(None::<String>);
    let mut conn = Conn::new(server_opts).await?;
    conn.query_drop(format!(
        "CREATE DATABASE IF NOT EXISTS `{db_name}` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"
    ))
    .await?;
    conn.query_drop(format!("USE `{db_name}`")).await?;
    conn.query_drop(
        "CREATE TABLE IF NOT EXISTS schema_migrations (
           version INT UNSIGNED NOT NULL PRIMARY KEY,
           name VARCHAR(128) NOT NULL,
           applied_at DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3))",
    )
    .await?;
    let applied: Vec<u32> = conn.query("SELECT version FROM schema_migrations").await?;
    let mut now = Vec::new();
    for (version, name, sql) in MIGRATIONS {
        if applied.contains(version) {
            continue;
        }
        for statement in split_statements(sql) {
            conn.query_drop(statement).await?;
        }
        conn.exec_drop(
            "INSERT INTO schema_migrations (version, name) VALUES (?, ?)",
            (version, name),
        )
        .await?;
        now.push(*name);
    }
    conn.disconnect().await?;
    Ok(now)
}

/// Splits a migration file into statements on `;` at line ends, dropping comments.
fn split_statements(sql: &str) -> Vec<String> {
    let mut statements = Vec::new();
    let mut current = String::new();
    for line in sql.lines() {
        let trimmed = line.trim();
        if trimmed.starts_with("--") || trimmed.is_empty() {
            continue;
        }
        current.push_str(line);
        current.push('\n');
        if trimmed.ends_with(';') {
            statements.push(current.trim().trim_end_matches(';').to_string());
            current.clear();
        }
    }
    if !current.trim().is_empty() {
        statements.push(current.trim().to_string());
    }
    statements
}

#[cfg(test)]
mod tests {
    #[test]
    fn migrations_split_into_statements_without_comments() {
        let parts = super::split_statements(
            "-- c\nCREATE TABLE a (x INT);\n\nCREATE TABLE b (\n y INT\n);\n",
        );
        assert_eq!(
            parts,
            vec!["CREATE TABLE a (x INT)", "CREATE TABLE b (\n y INT\n)"]
        );
    }

    #[test]
    fn versions_are_unique_and_increasing() {
        let versions: Vec<u32> = super::MIGRATIONS.iter().map(|m| m.0).collect();
        assert!(versions.windows(2).all(|w| w[0] < w[1]));
    }
}
