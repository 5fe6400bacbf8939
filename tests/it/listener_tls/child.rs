//! A `stockd --role api` child process on this test's own stores (a
//! [`TestApp`]'s database, key prefix and queues) with extra `STOCKD__…`
//! variables, and the real TLS clients the listener tests talk to it with:
//! `curl`, `openssl s_client` and a rustls client that keeps one connection.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};

use crate::helpers::TestApp;
use crate::owned::OwnedProcess;

/// A debug stockd connects to MySQL, Redis and RabbitMQ and loads its scripts
/// in well under a second; a busy 2-core CI machine gets far more.
const START_LIMIT: Duration = Duration::from_secs(60);
/// Starts on fresh ports when the ones picked were taken before the child
/// bound them (`free_port` releases its probe socket; another test's process
/// can take the port in between: seen once on a clean clone).
const PORT_TRIES: usize = 3;
/// Between readiness probes of the child.
const POLL: Duration = Duration::from_millis(100);
/// A curl or openssl run against loopback finishes in milliseconds.
const CLIENT_TIMEOUT_SECS: &str = "5";

/// A running `stockd --role api`; killed when dropped.
pub struct ApiChild {
    pub process: OwnedProcess,
    pub port: u16,
    pub admin_port: u16,
}

impl ApiChild {
    /// Starts the api role of `app`'s stores on a free port (and a free admin
    /// port) with `extra` variables added to (or, for a `STOCKD__…` name
    /// listed in `drop`, instead of) [`TestApp::cli_env`]. Waits until the
    /// port accepts TCP connections.
    pub async fn start(
        app: &TestApp,
        log_dir: &Path,
        extra: &[(String, String)],
        drop: &[&str],
    ) -> Self {
        for _ in 1..PORT_TRIES {
            if let Some(child) = Self::try_start(app, log_dir, extra, drop).await {
                return child;
            }
        }
        Self::try_start(app, log_dir, extra, drop)
            .await
            .expect("a free port taken before the child bound it, every try")
    }

    /// One start on two fresh free ports; `None` when another process took
    /// one of them between `free_port` and the child's bind (the child exits
    /// "Address already in use"). Any other early exit fails the test.
    async fn try_start(
        app: &TestApp,
        log_dir: &Path,
        extra: &[(String, String)],
        drop: &[&str],
    ) -> Option<Self> {
        let port = crate::ports::free_port();
        let admin_port = crate::ports::free_port();
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_stockd"));
        cmd.args(["--role", "api"])
            .current_dir(env!("CARGO_MANIFEST_DIR"));
        for (k, v) in app.cli_env() {
            if !drop.contains(&k.as_str()) {
                cmd.env(k, v);
            }
        }
        cmd.env("STOCKD__HTTP__BIND", format!("127.0.0.1:{port}"))
            .env("STOCKD__ADMIN__BIND", format!("127.0.0.1:{admin_port}"));
        for (k, v) in extra {
            cmd.env(k, v);
        }
        let log = log_dir.join(format!("stockd-api-{port}.log"));
        let mut process = OwnedProcess::spawn(&format!("stockd api :{port}"), cmd, &log);
        let start = Instant::now();
        while TcpStream::connect(("127.0.0.1", port)).is_err()
            || TcpStream::connect(("127.0.0.1", admin_port)).is_err()
        {
            if let Some(status) = process.exited() {
                let tail = process.log_tail();
                if tail.contains("Address already in use") {
                    return None;
                }
                panic!("stockd exited ({status}):\n{tail}");
            }
            assert!(
                start.elapsed() < START_LIMIT,
                "stockd not listening after {START_LIMIT:?}:\n{}",
                process.log_tail()
            );
            // Poll period of the start-up wait above (bounded by START_LIMIT).
            tokio::time::sleep(POLL).await;
        }
        Some(Self {
            process,
            port,
            admin_port,
        })
    }

    /// Sends SIGHUP to the child (by its pid: a process this test started).
    pub fn hangup(&self) {
        let pid = i32::try_from(self.process.pid()).unwrap();
        // SAFETY: kill(2) on the pid of our own child; no memory is shared.
        let rc = unsafe { libc::kill(pid, libc::SIGHUP) };
        assert_eq!(rc, 0, "kill -HUP {pid}");
    }
}

/// Runs a blocking client command off the runtime's thread: (exit ok, stdout + stderr).
pub async fn run(mut cmd: Command) -> (bool, String) {
    let out = tokio::task::spawn_blocking(move || cmd.output().unwrap())
        .await
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

/// `curl` of `url` trusting `ca`, with extra `args`; the HTTP status, or 0
/// when no HTTP answer came (handshake refused, connection closed).
pub async fn curl_status(url: &str, ca: &Path, args: &[&str]) -> u16 {
    let mut cmd = Command::new("curl");
    cmd.args(["-s", "-o", "/dev/null", "-w", "%{http_code}"])
        .args(["--max-time", CLIENT_TIMEOUT_SECS, "--cacert"])
        .arg(ca)
        .args(args)
        .arg(url);
    let (_, text) = run(cmd).await;
    text.trim().parse().unwrap_or(0)
}

/// `openssl s_client` to `port` with `args` (`-tls1_2`, …), trusting `ca`;
/// (handshake completed and verified, transcript).
pub async fn s_client(port: u16, ca: &Path, args: &[&str]) -> (bool, String) {
    let mut cmd = Command::new("openssl");
    cmd.args(["s_client", "-connect", &format!("127.0.0.1:{port}")])
        .args([
            "-servername",
            "localhost",
            "-verify_return_error",
            "-CAfile",
        ])
        .arg(ca)
        .args(args)
        .stdin(std::process::Stdio::null());
    let (ok, text) = run(cmd).await;
    (ok && text.contains("Verify return code: 0 (ok)"), text)
}

/// One TLS connection held open across requests (HTTP/1.1 keep-alive),
/// through rustls with `ca` as the only root.
pub struct KeptConnection {
    stream: rustls::StreamOwned<rustls::ClientConnection, TcpStream>,
}

impl KeptConnection {
    /// Connects to `port` and completes the handshake; `Err` when it fails.
    pub fn open(port: u16, ca: &Path) -> Result<Self, String> {
        stockd::tls::install_crypto_provider();
        let mut roots = rustls::RootCertStore::empty();
        for cert in CertificateDer::pem_file_iter(ca).unwrap() {
            roots.add(cert.unwrap()).unwrap();
        }
        let config = rustls::ClientConfig::builder()
            .with_root_certificates(roots)
            .with_no_client_auth();
        let name = ServerName::try_from("localhost").unwrap();
        let conn = rustls::ClientConnection::new(Arc::new(config), name).unwrap();
        let tcp = TcpStream::connect(("127.0.0.1", port)).map_err(|e| e.to_string())?;
        tcp.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut stream = rustls::StreamOwned::new(conn, tcp);
        while stream.conn.is_handshaking() {
            stream
                .conn
                .complete_io(&mut stream.sock)
                .map_err(|e| e.to_string())?;
        }
        Ok(Self { stream })
    }

    /// The leaf certificate the server presented.
    pub fn server_certificate(&self) -> Vec<u8> {
        let chain = self.stream.conn.peer_certificates().unwrap();
        chain[0].as_ref().to_vec()
    }

    /// `GET /livez` on this connection; the status line.
    pub fn livez(&mut self) -> String {
        let request = b"GET /livez HTTP/1.1\r\nHost: localhost\r\n\r\n";
        self.stream.write_all(request).unwrap();
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            let n = self
                .stream
                .read(&mut byte)
                .expect("the connection stays open");
            assert_eq!(n, 1, "the server closed the kept connection");
            head.push(byte[0]);
        }
        let head = String::from_utf8_lossy(&head).into_owned();
        let length: usize = head
            .lines()
            .find_map(|l| {
                l.to_ascii_lowercase()
                    .strip_prefix("content-length:")
                    .map(|v| v.trim().parse().unwrap())
            })
            .unwrap_or(0);
        let mut body = vec![0u8; length];
        self.stream.read_exact(&mut body).unwrap();
        head.lines().next().unwrap_or_default().to_string()
    }
}

/// The DER of the first certificate in the PEM file `path`.
pub fn first_certificate(path: &Path) -> Vec<u8> {
    let cert = CertificateDer::pem_file_iter(path).unwrap().next().unwrap();
    cert.unwrap().as_ref().to_vec()
}
