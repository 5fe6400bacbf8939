//! Starting while a store is down (`roles::startup`): a role whose MySQL is
//! unreachable at start-up does not exit (which a supervisor would turn into a
//! restart loop, Kubernetes into CrashLoopBackOff); it answers `/livez` 200 and
//! `/readyz` 503, both "starting", any other route 503 UNAVAILABLE, on its probe
//! port, logs the outage once, and
//! becomes ready by itself when MySQL answers.

use std::process::Command;
use std::time::Duration;

use crate::helpers::TestApp;
use crate::owned::OwnedProcess;
use crate::proxy::{FaultProxy, Mode};
use crate::servers::process::TempDir;

/// A debug stockd is listening in well under a second; a busy 2-core CI machine
/// gets far more.
const START_LIMIT: Duration = Duration::from_secs(60);
/// Long enough for several connect attempts at the back-off's first steps
/// (250 ms, 500 ms, 1 s, …): a role that exits on the first failure is gone.
const WAITING_FOR: Duration = Duration::from_secs(3);
/// After MySQL answers: at most one back-off step (5 s) plus the connect.
const READY_LIMIT: Duration = Duration::from_secs(30);

/// `(status, body)` of `GET url`; `(0, "")` while nothing answers.
async fn get(http: &reqwest::Client, url: &str) -> (u16, String) {
    match http.get(url).send().await {
        Ok(r) => (r.status().as_u16(), r.text().await.unwrap_or_default()),
        Err(_) => (0, String::new()),
    }
}

/// A consumer started with its MySQL behind a proxy that refuses every
/// connection: it stays up, `/livez` 200 and `/readyz` 503 naming mysql, for
/// several retries; once the proxy passes, `/readyz` turns 200 in the same
/// process, and the log has one outage start and its end.
#[tokio::test]
async fn a_role_started_while_mysql_is_down_waits_not_ready_then_becomes_ready() {
    let dir = TempDir::new("startup");
    let app = TestApp::spawn().await;
    let proxy = FaultProxy::start("127.0.0.1:3306").await;
    proxy.set(Mode::Down);
    let port = crate::ports::free_port();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_stockd"));
    cmd.args(["--role", "consumer"])
        .current_dir(env!("CARGO_MANIFEST_DIR"));
    for (k, v) in app.cli_env() {
        cmd.env(k, v);
    }
    let mysql = app
        .res
        .settings
        .mysql
        .url
        .replace("127.0.0.1:3306", &proxy.addr());
    cmd.env("STOCKD__MYSQL__URL", mysql)
        .env("STOCKD__METRICS__BIND", format!("127.0.0.1:{port}"));
    let log = dir.path.join("consumer.log");
    let mut child = OwnedProcess::spawn("stockd consumer (mysql down)", cmd, &log);
    let http = reqwest::Client::new();
    let base = format!("http://127.0.0.1:{port}");
    app.eventually(
        "the waiting consumer answers /livez",
        START_LIMIT,
        || async { get(&http, &format!("{base}/livez")).await.0 == 200 },
    )
    .await;
    tokio::time::sleep(WAITING_FOR).await;
    assert!(child.exited().is_none(), "exited:\n{}", child.log_tail());
    let (status, body) = get(&http, &format!("{base}/readyz")).await;
    assert_eq!(status, 503, "{body}");
    assert!(
        body.contains("\"starting\"") && body.contains("mysql"),
        "{body}"
    );
    let (status, body) = get(&http, &format!("{base}/livez")).await;
    assert!(
        status == 200 && body.contains("\"starting\""),
        "{status} {body}"
    );
    let (status, body) = get(&http, &format!("{base}/metrics")).await;
    assert!(
        status == 503 && body.contains("UNAVAILABLE"),
        "{status} {body}"
    );
    proxy.set(Mode::Pass);
    app.eventually("ready once MySQL answers", READY_LIMIT, || async {
        get(&http, &format!("{base}/readyz")).await.0 == 200
    })
    .await;
    assert!(child.exited().is_none(), "{}", child.log_tail());
    let text = std::fs::read_to_string(&log).unwrap();
    assert_eq!(text.matches("outage.start").count(), 1, "{text}");
    assert!(text.contains("outage.end"), "{text}");
    child.terminate();
    app.cleanup().await;
}
