//! TLS on stockd's own listeners (`http.tls`), proven against a `stockd
//! --role api` child process with real clients (`curl`, `openssl s_client`):
//! the protocol versions, plain HTTP refused, mutual TLS, and a certificate
//! rotated with SIGHUP under an open keep-alive connection. A test whose tools
//! are missing prints `SKIPPED: <why>` and returns.

pub(crate) mod child;

use std::time::{Duration, Instant};

use crate::helpers::TestApp;
use crate::servers::process::TempDir;
use crate::tls::certs::{self, Pki};
use child::{curl_status, first_certificate, s_client, ApiChild, KeptConnection};

/// A SIGHUP reload takes microseconds; a busy machine schedules the child late.
const RELOAD_LIMIT: Duration = Duration::from_secs(20);
/// Between probes for the rotated certificate.
const POLL: Duration = Duration::from_millis(50);

/// Why a test cannot run here, when `curl` or `openssl` is missing.
fn missing_tools() -> Option<String> {
    if let Err(why) = certs::openssl() {
        return Some(why);
    }
    let curl = std::process::Command::new("curl").arg("--version").output();
    match curl {
        Ok(out) if out.status.success() => None,
        _ => Some("the `curl` CLI is not installed".into()),
    }
}

/// `STOCKD__HTTP__TLS__…` for the server certificate of `pki` (and its CA as
/// the client CA when `mutual`).
fn tls_env(pki: &Pki, mutual: bool) -> Vec<(String, String)> {
    let path = |p: &std::path::Path| p.display().to_string();
    let mut env = vec![
        (
            "STOCKD__HTTP__TLS__CERT_FILE".into(),
            path(&pki.server_cert),
        ),
        ("STOCKD__HTTP__TLS__KEY_FILE".into(), path(&pki.server_key)),
    ];
    if mutual {
        env.push(("STOCKD__HTTP__TLS__CLIENT_CA_FILE".into(), path(&pki.ca)));
    }
    env
}

/// Both listeners speak TLS 1.2 and 1.3 to `openssl s_client` and refuse
/// TLS 1.1; `curl` gets answers over HTTPS and none over plain HTTP.
#[tokio::test]
async fn the_listeners_speak_tls_1_2_and_1_3_and_refuse_tls_1_1_and_plain_http() {
    if let Some(why) = missing_tools() {
        return eprintln!("SKIPPED: {why}");
    }
    let dir = TempDir::new("listener");
    let pki = Pki::generate(&dir.path.join("pki"), "stockd listener CA");
    let app = TestApp::spawn().await;
    let api = ApiChild::start(&app, &dir.path, &tls_env(&pki, false), &[]).await;
    for port in [api.port, api.admin_port] {
        let (ok, text) = s_client(port, &pki.ca, &["-tls1_2"]).await;
        assert!(
            ok && text.contains("New, TLSv1.2,"),
            "TLS 1.2 on :{port}:\n{text}"
        );
        let (ok, text) = s_client(port, &pki.ca, &["-tls1_3"]).await;
        assert!(
            ok && text.contains("New, TLSv1.3,"),
            "TLS 1.3 on :{port}:\n{text}"
        );
        // OpenSSL 3 offers TLS 1.1 only at security level 0, so the client sends a
        // TLS 1.1 hello and the refusal is the server's alert.
        let (ok, text) =
            s_client(port, &pki.ca, &["-tls1_1", "-cipher", "DEFAULT@SECLEVEL=0"]).await;
        assert!(
            !ok && text.contains("alert handshake failure") && !text.contains("New, TLSv1.1,"),
            "TLS 1.1 accepted on :{port}:\n{text}"
        );
        let plain = curl_status(&format!("http://127.0.0.1:{port}/livez"), &pki.ca, &[]).await;
        assert_eq!(plain, 0, "plain HTTP answered on the TLS port :{port}");
    }
    let url = format!("https://localhost:{}/livez", api.port);
    let resolve = format!("localhost:{}:127.0.0.1", api.port);
    assert_eq!(
        curl_status(&url, &pki.ca, &["--resolve", &resolve]).await,
        200
    );
    let other = Pki::generate(&dir.path.join("other"), "some other CA");
    assert_eq!(
        curl_status(&url, &other.ca, &["--resolve", &resolve]).await,
        0,
        "curl trusted a server certificate its CA did not sign"
    );
    drop(api);
    app.cleanup().await;
}

/// With `http.tls.client_ca_file` the handshake needs a client certificate
/// that CA signed: none, or one from another CA, fails before any HTTP; the
/// certificate's CN names the client of `auth.clients[].cert_subject`.
#[tokio::test]
async fn mutual_tls_admits_only_clients_with_a_certificate_of_the_client_ca() {
    if let Some(why) = missing_tools() {
        return eprintln!("SKIPPED: {why}");
    }
    let dir = TempDir::new("mutual");
    let pki = Pki::generate(&dir.path.join("pki"), "stockd listener CA");
    let other = Pki::generate(&dir.path.join("other"), "some other CA");
    let app = TestApp::spawn().await;
    // The certificate's CN (`stockd`) names a client with the `read` scope only.
    let mut env = tls_env(&pki, true);
    env.push(("STOCKD__AUTH__REQUIRED".into(), "true".into()));
    env.push((
        "STOCKD__AUTH__CLIENTS".into(),
        "[{name: by-cert, cert_subject: stockd, scopes: [read]}]".into(),
    ));
    let api = ApiChild::start(&app, &dir.path, &env, &[]).await;
    let resolve = format!("localhost:{}:127.0.0.1", api.port);
    let url = format!("https://localhost:{}/livez", api.port);
    let with_cert = |pki: &Pki| {
        let (cert, key) = (pki.client_cert.clone(), pki.client_key.clone());
        vec![
            "--cert".to_string(),
            cert.display().to_string(),
            "--key".into(),
            key.display().to_string(),
        ]
    };
    let status = |extra: Vec<String>| {
        let (url, ca, resolve) = (url.clone(), pki.ca.clone(), resolve.clone());
        async move {
            let mut args: Vec<&str> = vec!["--resolve", &resolve];
            args.extend(extra.iter().map(String::as_str));
            curl_status(&url, &ca, &args).await
        }
    };
    assert_eq!(
        status(vec![]).await,
        0,
        "a client without certificate got in"
    );
    assert_eq!(
        status(with_cert(&other)).await,
        0,
        "a certificate of another CA got in"
    );
    assert_eq!(
        status(with_cert(&pki)).await,
        200,
        "the client CA's certificate was refused"
    );
    // Named by its certificate, without a token: a read passes the auth check
    // (404: no such SKU), a reservation is outside its scopes (403).
    let sku_url = format!("https://localhost:{}/v1/skus/987654321", api.port);
    let mut args = vec!["--resolve".to_string(), resolve.clone()];
    args.extend(with_cert(&pki));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    assert_eq!(curl_status(&sku_url, &pki.ca, &args).await, 404);
    let reserve_url = format!("{sku_url}/reservations");
    let post = [
        &args[..],
        &[
            "-X",
            "POST",
            "-H",
            "content-type: application/json",
            "-d",
            "{}",
        ],
    ]
    .concat();
    assert_eq!(curl_status(&reserve_url, &pki.ca, &post).await, 403);
    let cn = stockd::roles::api::tls::subject_common_name(&first_certificate(&pki.client_cert));
    assert_eq!(
        cn.as_deref(),
        Some("stockd"),
        "the name a client certificate gives its client"
    );
    drop(api);
    app.cleanup().await;
}

/// SIGHUP re-reads the certificate: a connection opened before keeps
/// answering on its session, new handshakes present the new certificate, and
/// a reload from a broken file keeps the certificate in use.
#[tokio::test]
async fn sighup_rotates_the_certificate_while_a_kept_alive_connection_goes_on() {
    if let Some(why) = missing_tools() {
        return eprintln!("SKIPPED: {why}");
    }
    let dir = TempDir::new("rotate");
    let old = Pki::generate(&dir.path.join("old"), "stockd CA 2025");
    let new = Pki::generate(&dir.path.join("new"), "stockd CA 2026");
    let live = Pki::generate(&dir.path.join("live"), "placeholder CA");
    std::fs::copy(&old.server_cert, &live.server_cert).unwrap();
    std::fs::copy(&old.server_key, &live.server_key).unwrap();
    let app = TestApp::spawn().await;
    let api = ApiChild::start(&app, &dir.path, &tls_env(&live, false), &[]).await;
    let mut kept = KeptConnection::open(api.port, &old.ca).expect("handshake with the old CA");
    assert_eq!(
        kept.server_certificate(),
        first_certificate(&old.server_cert)
    );
    assert!(kept.livez().contains("200"));

    std::fs::write(&live.server_cert, b"not a certificate").unwrap();
    api.hangup();
    wait_for_log(&api, "http.tls.cert_file").await;
    assert!(
        kept.livez().contains("200"),
        "a failed reload broke the kept connection"
    );
    let still =
        KeptConnection::open(api.port, &old.ca).expect("a failed reload keeps the old certificate");
    assert_eq!(
        still.server_certificate(),
        first_certificate(&old.server_cert)
    );

    std::fs::copy(&new.server_cert, &live.server_cert).unwrap();
    std::fs::copy(&new.server_key, &live.server_key).unwrap();
    api.hangup();
    let start = Instant::now();
    let rotated = loop {
        // The old connection answers throughout (and stays inside keep-alive).
        assert!(kept.livez().contains("200"), "the kept connection broke");
        if let Ok(conn) = KeptConnection::open(api.port, &new.ca) {
            break conn;
        }
        assert!(
            start.elapsed() < RELOAD_LIMIT,
            "no new certificate after SIGHUP:\n{}",
            api.process.log_tail()
        );
        // Poll period of the wait for the reload (bounded by RELOAD_LIMIT).
        tokio::time::sleep(POLL).await;
    };
    assert_eq!(
        rotated.server_certificate(),
        first_certificate(&new.server_cert)
    );
    assert!(
        KeptConnection::open(api.port, &old.ca).is_err(),
        "the old certificate is still served"
    );
    assert!(
        kept.livez().contains("200"),
        "the kept connection broke after the rotation"
    );
    drop(api);
    app.cleanup().await;
}

/// Waits until the child's log has an ERROR line that contains `text`.
async fn wait_for_log(api: &ApiChild, text: &str) {
    let start = Instant::now();
    loop {
        let log = std::fs::read_to_string(&api.process.log).unwrap_or_default();
        if log.lines().any(|l| l.contains("ERROR") && l.contains(text)) {
            return;
        }
        assert!(
            start.elapsed() < RELOAD_LIMIT,
            "no ERROR naming {text} in the log:\n{log}"
        );
        // Poll period of the wait for the log line (bounded by RELOAD_LIMIT).
        tokio::time::sleep(POLL).await;
    }
}

/// The bench's own HTTP/1.1 client drives an `https://` target
/// (`stockd-bench --target https://… --ca-file`): two requests on one kept
/// TLS connection, trusting only the registered CA.
#[tokio::test]
async fn the_bench_client_drives_a_tls_listener() {
    use stockd_bench::drive::{http_client::HttpConn, tls_target};
    if let Some(why) = missing_tools() {
        return eprintln!("SKIPPED: {why}");
    }
    let dir = TempDir::new("bench");
    let pki = Pki::generate(&dir.path.join("pki"), "stockd bench CA");
    let app = TestApp::spawn().await;
    let api = ApiChild::start(&app, &dir.path, &tls_env(&pki, false), &[]).await;
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], api.port));
    let mut plain = HttpConn::new(addr);
    assert!(
        plain.request("GET", "/livez", "", b"").await.is_err(),
        "plain HTTP got an answer"
    );
    tls_target::register(addr, "localhost", &pki.ca).unwrap();
    let mut conn = HttpConn::new(addr);
    for _ in 0..2 {
        let answer = conn.request("GET", "/livez", "", b"").await.unwrap();
        assert_eq!(answer.status, 200);
    }
    drop(api);
    app.cleanup().await;
}
