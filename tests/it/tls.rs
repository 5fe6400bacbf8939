//! TLS to every dependency (config `redis.tls`, `amqp.tls`, `mysql.tls`),
//! proven end to end against private TLS-only servers on free loopback ports
//! with a PKI generated at test time (`certs`; servers: tests/support/servers). A test whose
//! server cannot run here prints `SKIPPED: <why>` and returns.

pub(crate) mod certs;

use std::cell::RefCell;
use std::time::Duration;

use mysql_async::prelude::Queryable;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use stockd::config::{MysqlTls, Settings, TlsFiles};
use stockd::ops::reconcile::Reconciler;
use stockd::resources::Resources;

use crate::helpers::{poll_until, success_and_output, test_settings, TestOptions, ADMIN_TOKEN};
use crate::servers;
use crate::servers::mariadb::Mariadb;
use crate::servers::process::TempDir;
use crate::servers::rabbitmq::Rabbit;
use crate::servers::redis::Redis;
use crate::servers::tls::ServerTls;
use certs::Pki;

/// A reservation takes milliseconds to reach the ledger; a busy CI machine
/// gets far more.
const LEDGER_WAIT: Duration = Duration::from_secs(30);

/// Says why the test cannot run, visibly, and lets it return.
fn skip(why: &str) {
    eprintln!("SKIPPED: {why}");
}

/// What the private servers show and trust of `pki`.
fn server_side(pki: &Pki) -> ServerTls {
    ServerTls {
        ca: pki.ca.clone(),
        cert: pki.server_cert.clone(),
        key: pki.server_key.clone(),
    }
}

/// Client settings of `pki` for one dependency (CA + client certificate).
fn files(pki: &Pki) -> TlsFiles {
    TlsFiles {
        ca_file: Some(pki.ca.clone()),
        cert_file: Some(pki.client_cert.clone()),
        key_file: Some(pki.client_key.clone()),
    }
}

/// Test settings pointed at the three private TLS servers, as `stockd` would
/// read them from `STOCKD__…` variables.
fn tls_settings(id: &str, pki: &Pki, redis: u16, mysql: u16, amqp: u16) -> Settings {
    let mut s = test_settings(id, &TestOptions::default());
    crate::helpers::standalone_redis(&mut s);
    s.amqp.urls.clear();
    s.redis.url = format!("rediss://127.0.0.1:{redis}");
    s.redis.tls = files(pki);
    s.mysql.url = format!("mysql://root@127.0.0.1:{mysql}/stockd_{id}");
    s.mysql.tls = MysqlTls {
        require: true,
        ca_file: Some(pki.ca.clone()),
        cert_file: Some(pki.client_cert.clone()),
        key_file: Some(pki.client_key.clone()),
    };
    s.amqp.url = format!("amqps://guest:guest@127.0.0.1:{amqp}/%2f");
    s.amqp.tls = files(pki);
    s.validate().expect("TLS settings validate");
    s
}

/// The `STOCKD__…` variables of [`tls_settings`] for a `stockd` child.
fn tls_env(s: &Settings) -> Vec<(String, String)> {
    let path = |p: &Option<std::path::PathBuf>| p.as_ref().unwrap().display().to_string();
    let mut env = vec![
        ("STOCKD_ENV".into(), "test".into()),
        ("STOCKD__MYSQL__URL".into(), s.mysql.url.clone()),
        ("STOCKD__MYSQL__TLS__REQUIRE".into(), "true".into()),
        (
            "STOCKD__MYSQL__TLS__CA_FILE".into(),
            path(&s.mysql.tls.ca_file),
        ),
    ];
    env.push((
        "STOCKD__MYSQL__TLS__CERT_FILE".into(),
        path(&s.mysql.tls.cert_file),
    ));
    env.push((
        "STOCKD__MYSQL__TLS__KEY_FILE".into(),
        path(&s.mysql.tls.key_file),
    ));
    env
}

/// `rediss://`, `amqps://` and MySQL TLS through stockd's own connection code:
/// `stockd migrate` (a child process configured by `STOCKD__…` variables)
/// creates the schema over TLS, `Resources::connect` reaches all three
/// TLS-only servers (client certificates required by Redis and RabbitMQ), and
/// a reservation travels api → Redis script → broker → consumer → MySQL
/// ledger. The MySQL session is encrypted, and plain MySQL and AMQP
/// connections are refused (Redis has no plain port at all).
#[tokio::test]
async fn a_reservation_travels_through_tls_redis_rabbitmq_and_mysql() {
    if let Err(why) = certs::openssl() {
        return skip(&why);
    }
    let needed = [
        "redis-server",
        "mariadb-install-db",
        "/usr/sbin/mariadbd",
        "epmd",
        "/usr/lib/rabbitmq/bin/rabbitmq-server",
    ];
    if let Some(why) = servers::missing(&needed) {
        return skip(&why);
    }
    let dir = TempDir::new("tls-roundtrip");
    let pki = Pki::generate(&dir.path.join("pki"), "stockd test CA");
    let tls = server_side(&pki);
    let (redis, mysql, rabbit) = tokio::join!(
        Redis::start_tls(&dir.path, &tls),
        Mariadb::start_tls(&dir.path, &tls),
        Rabbit::start_tls(&dir.path, &tls),
    );
    let id = format!("t_{}", &uuid::Uuid::new_v4().simple().to_string()[..12]);
    let settings = tls_settings(&id, &pki, redis.port, mysql.port, rabbit.port);

    let migrate = stockd_cli(&["migrate"], &tls_env(&settings)).await;
    assert!(migrate.0, "stockd migrate over TLS failed:\n{}", migrate.1);

    let res = Resources::connect(settings, &id)
        .await
        .expect("Resources::connect over TLS");
    assert_mysql_session_encrypted(&res).await;

    let cancel = CancellationToken::new();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let reconciler = std::sync::Arc::new(Reconciler::from_resources(&res));
    let api = stockd::roles::api::start(res.clone(), reconciler, listener, cancel.clone()).unwrap();
    let consumer = stockd::roles::consumer::Consumer::from_resources(&res);
    let consumer = tokio::spawn(consumer.run_until_stopped(cancel.clone()));

    reserve_one_to_the_ledger(&res, &format!("http://{}", api.addr)).await;
    assert_plain_connections_refused(&res, rabbit.port).await;

    cancel.cancel();
    api.stopped().await;
    consumer.await.unwrap();
    res.close().await;
}

/// The MySQL session of stockd's pool is encrypted (it has a cipher).
async fn assert_mysql_session_encrypted(res: &Resources) {
    let mut conn = res.db.conn().await.unwrap();
    let cipher: Option<(String, String)> = conn
        .query_first("SHOW SESSION STATUS LIKE 'Ssl_cipher'")
        .await
        .unwrap();
    let cipher = cipher.map(|(_, c)| c).unwrap_or_default();
    assert!(!cipher.is_empty(), "the MySQL session is not encrypted");
}

/// Through the api at `base`: SKU 1 created, one unit reserved (Redis shows
/// 4 left), and its RESERVED row reaches the ledger.
async fn reserve_one_to_the_ledger(res: &Resources, base: &str) {
    let http = reqwest::Client::new();
    let created = http
        .put(format!("{base}/v1/admin/skus/1"))
        .bearer_auth(ADMIN_TOKEN)
        .json(&json!({"total_stock": 5, "limit_per_user": 2}))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 200, "{}", created.text().await.unwrap());
    let reserved = http
        .post(format!("{base}/v1/skus/1/reservations"))
        .json(&json!({"request_id": "tls-1", "user_id": 7, "count": 1}))
        .send()
        .await
        .unwrap();
    assert_eq!(reserved.status(), 201, "{}", reserved.text().await.unwrap());
    let sku = stockd::domain::SkuId::new(1).unwrap();
    assert_eq!(
        res.redis.skus().sku(sku).await.unwrap().unwrap().available,
        4
    );
    wait_for_ledger_row(res, "tls-1").await;
}

/// Plain (no TLS) MySQL and AMQP connections to the TLS-only servers fail.
async fn assert_plain_connections_refused(res: &Resources, amqp_port: u16) {
    let plain = stockd::db::Db::new(&stockd::config::MysqlSettings {
        tls: MysqlTls::default(),
        url: format!("{}?prefer_socket=false", res.settings.mysql.url),
        ..res.settings.mysql.clone()
    })
    .unwrap();
    assert!(
        plain.ping().await.is_err(),
        "a plain MySQL connection was accepted"
    );
    let plain_amqp = format!("amqp://guest:guest@127.0.0.1:{amqp_port}/%2f");
    assert!(
        stockd::mq::connect(&plain_amqp, "plain").await.is_err(),
        "a plain AMQP connection was accepted"
    );
}

/// Polls the ledger (through stockd's TLS pool) for `request_id`.
async fn wait_for_ledger_row(res: &Resources, request_id: &str) {
    let last = RefCell::new(None);
    let reserved = poll_until(LEDGER_WAIT, || async {
        let mut conn = res.db.conn().await.unwrap();
        let status: Option<String> = conn
            .exec_first(
                "SELECT status FROM stock_deduct_idempotent WHERE deduct_request_id = ?",
                (request_id,),
            )
            .await
            .unwrap();
        let done = status.as_deref() == Some("RESERVED");
        *last.borrow_mut() = status;
        done
    })
    .await;
    let status = last.into_inner();
    assert!(
        reserved,
        "no RESERVED ledger row for {request_id} after {LEDGER_WAIT:?} (status {status:?})"
    );
}

/// Runs the `stockd` binary with `env`; (success, stdout + stderr).
async fn stockd_cli(args: &[&str], env: &[(String, String)]) -> (bool, String) {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_stockd"));
    cmd.args(args).current_dir(env!("CARGO_MANIFEST_DIR"));
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = tokio::task::spawn_blocking(move || cmd.output().unwrap())
        .await
        .unwrap();
    success_and_output(&out)
}

/// TLS is verified, not just switched on: against a TLS-only redis-server
/// that requires client certificates, stockd's Redis store works with the
/// configured CA and certificate, and fails to connect when the CA is another
/// one (the server's certificate is not trusted), when no client certificate
/// is shown, or with a plain `redis://` URL.
#[tokio::test]
async fn redis_tls_trusts_only_the_configured_ca_and_shows_the_client_certificate() {
    if let Err(why) = certs::openssl() {
        return skip(&why);
    }
    if let Some(why) = servers::missing(&["redis-server"]) {
        return skip(&why);
    }
    let dir = TempDir::new("tls-redis");
    let pki = Pki::generate(&dir.path.join("pki"), "stockd test CA");
    let other = Pki::generate(&dir.path.join("other"), "some other CA");
    let redis = Redis::start_tls(&dir.path, &server_side(&pki)).await;
    let id = format!("t_{}", &uuid::Uuid::new_v4().simple().to_string()[..12]);
    let mut s = test_settings(&id, &TestOptions::default());
    crate::helpers::standalone_redis(&mut s);
    s.redis.url = format!("rediss://127.0.0.1:{}", redis.port);
    s.redis.tls = files(&pki);
    s.redis.connect_timeout_ms = 2000;

    let store = stockd::redis::RedisStore::new(&s.redis, 900).unwrap();
    store.ping().await.expect("ping over TLS with the right CA");
    store.load_scripts().await.expect("scripts over TLS");
    let mut pubsub = store
        .subscriptions()
        .connect()
        .await
        .expect("Pub/Sub over TLS");
    pubsub.subscribe(format!("{id}:soldout")).await.unwrap();

    let refused = |tls: TlsFiles, url: String| {
        let mut r = s.redis.clone();
        r.tls = tls;
        r.url = url;
        async move {
            let store = stockd::redis::RedisStore::new(&r, 900).unwrap();
            store.ping().await.is_err()
        }
    };
    let url = s.redis.url.clone();
    assert!(
        refused(files(&other), url.clone()).await,
        "a server certificate from another CA was trusted"
    );
    let no_client_cert = TlsFiles {
        cert_file: None,
        key_file: None,
        ..files(&pki)
    };
    assert!(
        refused(no_client_cert, url).await,
        "the server took a client without certificate"
    );
    let plain = format!("redis://127.0.0.1:{}", redis.port);
    assert!(
        refused(TlsFiles::default(), plain).await,
        "plain text reached a TLS-only port"
    );
}
