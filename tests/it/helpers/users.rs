//! Who connects as whom — the one place the tests name their users.
//!
//! stockd itself (every role, and `stockd` CLI children through `cli_env`)
//! runs as the least-privilege runtime users that `scripts/services.sh up`
//! creates, so every test proves their grants sufficient. Set-up and clean-up
//! (migrations, dropping the database, deleting keys and queues) and the
//! tests' own reads and writes behind stockd's back run as the migration /
//! admin identities ([`admin_settings`]). A test on a private server
//! (`TestOptions::redis_url`) keeps that server's own auth. Passwords:
//! scripts/services.sh; grants: docs/operations.md, "Users and grants".

use stockd::config::Settings;

/// MySQL: SELECT, INSERT, UPDATE on `stockd%`.*.
pub const MYSQL_RUNTIME: &str = "stockd_app:stockd-app-local";
/// MySQL: DDL and DML on `stockd%` databases (`stockd migrate`).
pub const MYSQL_MIGRATE: &str = "stockd_migrate:stockd-migrate-local";
/// Redis ACL user: stockd's key prefixes, sold-out channel and commands.
pub const REDIS_RUNTIME: &str = "stockd_app:stockd-app-local";
/// RabbitMQ: configure/write/read on `stockd.` / `t_<hex>.` names.
pub const AMQP_RUNTIME: &str = "stockd_app:stockd-app-local";
/// RabbitMQ admin of the local broker (deletes the test's queues).
pub const AMQP_ADMIN: &str = "guest:guest";

/// `runtime` with the set-up / clean-up identities: the MySQL migration
/// user, Redis' default user, the broker's admin.
pub fn admin_settings(runtime: &Settings) -> Settings {
    let mut s = runtime.clone();
    s.mysql.url = s.mysql.url.replace(MYSQL_RUNTIME, MYSQL_MIGRATE);
    s.redis.url = s.redis.url.replace(&format!("{REDIS_RUNTIME}@"), "");
    for url in &mut s.redis.urls {
        *url = url.replace(&format!("{REDIS_RUNTIME}@"), "");
    }
    s.amqp.url = s.amqp.url.replace(AMQP_RUNTIME, AMQP_ADMIN);
    for url in &mut s.amqp.urls {
        *url = url.replace(AMQP_RUNTIME, AMQP_ADMIN);
    }
    s
}
