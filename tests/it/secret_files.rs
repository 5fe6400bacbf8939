//! Secrets from files (`admin.token_file`, `mysql.url_file`, `redis.url_file`,
//! `amqp.url_file`, …): a `stockd --role api` child whose every dependency URL
//! and admin token come from files serves reservations and the admin routes;
//! a secret set both ways is refused naming both keys; a file-read secret is
//! never printed.

use serde_json::json;

use std::time::Duration;

use crate::helpers::{TestApp, TestOptions, ADMIN_TOKEN};
use crate::listener_tls::child::ApiChild;
use crate::servers::process::TempDir;

/// A started stockd answers /readyz within a second; a busy machine takes longer.
const READY_LIMIT: Duration = Duration::from_secs(30);

/// The variables the files replace in [`TestApp::cli_env`].
const FROM_FILES: [&str; 3] = [
    "STOCKD__MYSQL__URL",
    "STOCKD__REDIS__URL",
    "STOCKD__AMQP__URL",
];

/// The admin token the files hold (the decoy layer has another).
const FILE_TOKEN: &str = "admin-token-from-a-file-4b1d";

/// A config dir under `dir`: the shipped base.yaml and an environment layer
/// of decoys (named `test`, which the production check leaves alone, as it
/// does the shipped test.yaml) whose URLs point at a closed port and whose
/// admin token is [`ADMIN_TOKEN`]: a stockd that ignored the files could reach
/// nothing (open public routes, as `local.yaml` has them: the reservation needs no client).
fn decoy_config(dir: &std::path::Path) -> std::path::PathBuf {
    let config = dir.join("config");
    std::fs::create_dir_all(&config).unwrap();
    let shipped = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("config/base.yaml");
    std::fs::copy(shipped, config.join("base.yaml")).unwrap();
    let decoys = format!(
        "admin: {{token: {ADMIN_TOKEN}}}\n\
         auth: {{required: false}}\n\
         mysql: {{url: \"mysql://root@127.0.0.1:9/nothing\"}}\n\
         redis: {{url: \"redis://127.0.0.1:9\"}}\n\
         amqp: {{url: \"amqp://guest:guest@127.0.0.1:9/%2f\"}}\n"
    );
    std::fs::write(config.join("test.yaml"), decoys).unwrap();
    config
}

/// `STOCKD__…_FILE` variables pointing at files under `dir` that hold this
/// app's MySQL, Redis and RabbitMQ URLs and [`FILE_TOKEN`] (each with the
/// trailing newline `echo` leaves), plus the decoy config around them.
fn secret_files(app: &TestApp, dir: &std::path::Path) -> Vec<(String, String)> {
    let s = &app.res.settings;
    let secrets = [
        ("STOCKD__MYSQL__URL_FILE", "mysql-url", s.mysql.url.as_str()),
        ("STOCKD__REDIS__URL_FILE", "redis-url", s.redis.url.as_str()),
        ("STOCKD__AMQP__URL_FILE", "amqp-url", s.amqp.url.as_str()),
        ("STOCKD__ADMIN__TOKEN_FILE", "admin-token", FILE_TOKEN),
    ];
    let mut env: Vec<(String, String)> = secrets
        .iter()
        .map(|(var, name, value)| {
            let path = dir.join(name);
            std::fs::write(&path, format!("{value}\n")).unwrap();
            (var.to_string(), path.display().to_string())
        })
        .collect();
    let config = decoy_config(dir).display().to_string();
    env.push(("STOCKD_CONFIG_DIR".into(), config));
    env.push(("STOCKD_ENV".into(), "test".into()));
    env
}

/// Every dependency reached through a URL read from a file, and the admin
/// token read from one, over a config layer of decoys: /readyz is 200
/// (MySQL, Redis and RabbitMQ answer), the admin route takes the file's token
/// and not the decoy's, a reservation goes through.
#[tokio::test]
async fn every_dependency_and_the_admin_token_work_from_files() {
    let dir = TempDir::new("secrets");
    // A consumer takes the reservation's deduction, so the queues end drained.
    let app = TestApp::with(TestOptions {
        consumer: true,
        ..TestOptions::default()
    })
    .await;
    let env = secret_files(&app, &dir.path);
    let api = ApiChild::start(&app, &dir.path, &env, &FROM_FILES).await;
    let http = reqwest::Client::new();
    let base = format!("http://127.0.0.1:{}", api.port);
    let admin = format!("http://127.0.0.1:{}", api.admin_port);
    app.eventually("/readyz 200 from the child", READY_LIMIT, || async {
        let answer = http.get(format!("{base}/readyz")).send().await;
        answer.is_ok_and(|r| r.status() == 200)
    })
    .await;
    let put = |token: &'static str| {
        http.put(format!("{admin}/v1/admin/skus/71"))
            .bearer_auth(token)
            .json(&json!({"total_stock": 3, "limit_per_user": 1}))
            .send()
    };
    assert_eq!(
        put(ADMIN_TOKEN).await.unwrap().status(),
        401,
        "the decoy token got in"
    );
    assert_eq!(put(FILE_TOKEN).await.unwrap().status(), 200);
    let reserved = http
        .post(format!("{base}/v1/skus/71/reservations"))
        .json(&json!({"request_id": "file-1", "user_id": 5, "count": 1}))
        .send()
        .await
        .unwrap();
    assert_eq!(reserved.status(), 201, "{}", reserved.text().await.unwrap());
    // Drained while the child lives: killed before its acker deleted the
    // outbox entry, the entry would be republished by this app's relay after
    // cleanup's drain check, and found in the queue (a CI failure seen once).
    app.wait_drained(71).await;
    drop(api);
    app.cleanup().await;
}

/// A secret given both ways in one layer is refused naming both keys, and
/// `config print` never shows a secret read from a file.
#[tokio::test]
async fn a_secret_set_both_ways_is_refused_and_a_file_secret_never_printed() {
    let dir = TempDir::new("secrets-cli");
    let token_file = dir.path.join("token");
    std::fs::write(&token_file, "file-token-5f2e9c\n").unwrap();
    let token_path = token_file.display().to_string();
    let run = |env: Vec<(&'static str, String)>, action: &'static str| async move {
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_stockd"));
        cmd.args(["config", action])
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .env("STOCKD_ENV", "test");
        for (k, v) in env {
            cmd.env(k, v);
        }
        crate::listener_tls::child::run(cmd).await
    };
    let both = vec![
        ("STOCKD__ADMIN__TOKEN", "x".repeat(40)),
        ("STOCKD__ADMIN__TOKEN_FILE", token_path.clone()),
    ];
    let (ok, text) = run(both, "check").await;
    assert!(!ok, "{text}");
    assert!(
        text.contains("`admin.token`") && text.contains("`admin.token_file`"),
        "{text}"
    );
    let (ok, text) = run(vec![("STOCKD__ADMIN__TOKEN_FILE", token_path)], "print").await;
    assert!(ok, "{text}");
    assert!(!text.contains("file-token-5f2e9c"), "{text}");
    assert!(text.contains("token: <redacted>"), "{text}");
}
