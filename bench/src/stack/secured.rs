//! The secured listener of `reserve_redis_secured`: a child stockd whose
//! listener speaks TLS (`http.tls.cert_file`/`key_file`) and that requires a
//! client token (`auth.required`, one client in `auth.clients`), so the bench
//! measures what both cost on the hot path next to `reserve_redis`.
//!
//! The PKI is made at run time with the `openssl` CLI (P-256 keys: quick to
//! make and the handshake production would use); the token is random and the
//! child gets only its SHA-256, as in production. Without `openssl` the phase
//! is skipped with a note, not failed: the rest of the run does not need it.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::Context;

/// Days the generated certificates are valid: one run.
const VALID_DAYS: &str = "2";
/// The name the bench's client checks the certificate against (the child
/// listens on 127.0.0.1).
pub const SERVER_NAME: &str = "127.0.0.1";
/// The one client of the secured child, with the scopes the phases use.
const CLIENT_NAME: &str = "bench";

/// What the secured child is started with and the bench's side of it.
pub struct SecuredListener {
    /// CA that signed the child's certificate: what the bench trusts.
    pub ca_file: PathBuf,
    /// The client token the bench presents (`Authorization: Bearer`).
    pub token: String,
    /// `STOCKD__…` settings of the child.
    pub env: Vec<(String, String)>,
}

impl SecuredListener {
    /// Makes the PKI and token under `dir`; `Err(reason)` inside `Ok` when the
    /// `openssl` CLI is missing.
    pub fn generate(dir: &Path) -> anyhow::Result<Result<Self, String>> {
        if !openssl_present() {
            return Ok(Err("the `openssl` CLI is not installed".into()));
        }
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let file = |name: &str| dir.join(name);
        let (ca_key, ca_file) = (file("ca.key"), file("ca.pem"));
        let (key_file, csr, cert_file) =
            (file("server.key"), file("server.csr"), file("server.pem"));
        let ext = file("server.ext");
        std::fs::write(
            &ext,
            format!("subjectAltName=IP:{SERVER_NAME}\nextendedKeyUsage=serverAuth\n"),
        )?;
        openssl(&[
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
            "-keyout",
            path(&ca_key),
            "-out",
            path(&ca_file),
            "-days",
            VALID_DAYS,
            "-subj",
            "/CN=stockd bench CA",
        ])?;
        openssl(&[
            "req",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
            "-keyout",
            path(&key_file),
            "-out",
            path(&csr),
            "-subj",
            "/CN=stockd bench",
        ])?;
        openssl(&[
            "x509",
            "-req",
            "-in",
            path(&csr),
            "-CA",
            path(&ca_file),
            "-CAkey",
            path(&ca_key),
            "-CAcreateserial",
            "-out",
            path(&cert_file),
            "-days",
            VALID_DAYS,
            "-extfile",
            path(&ext),
        ])?;
        let token = random_token();
        let clients = format!(
            "[{{name: {CLIENT_NAME}, token_sha256: \"{}\", scopes: [reserve, read, lifecycle]}}]",
            stockd::roles::api::auth::sha256_hex(token.as_bytes())
        );
        let env = vec![
            (
                "STOCKD__HTTP__TLS__CERT_FILE".into(),
                path(&cert_file).into(),
            ),
            ("STOCKD__HTTP__TLS__KEY_FILE".into(), path(&key_file).into()),
            ("STOCKD__AUTH__REQUIRED".into(), "true".into()),
            ("STOCKD__AUTH__CLIENTS".into(), clients),
        ];
        Ok(Ok(Self {
            ca_file,
            token,
            env,
        }))
    }
}

fn openssl_present() -> bool {
    matches!(Command::new("openssl").arg("version").output(), Ok(out) if out.status.success())
}

fn openssl(args: &[&str]) -> anyhow::Result<()> {
    let out = Command::new("openssl")
        .args(args)
        .output()
        .context("running openssl")?;
    anyhow::ensure!(
        out.status.success(),
        "openssl {}: {}",
        args[0],
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(())
}

fn path(p: &Path) -> &str {
    p.to_str().expect("the bench's --out-dir is UTF-8")
}

/// 244 random bits as 64 hex digits (two v4 UUIDs, whose generator is
/// seeded from the OS).
fn random_token() -> String {
    let part = || uuid::Uuid::new_v4().simple().to_string();
    format!("{}{}", part(), part())
}
