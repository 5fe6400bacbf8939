//! A throw-away PKI made at test time with the `openssl` CLI: a CA, a server
//! certificate for `localhost` / `127.0.0.1` and a client certificate, all
//! P-256 keys (quick to make), valid for a day.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Days the generated certificates are valid: one test run.
const VALID_DAYS: &str = "1";

/// PEM files of one generated PKI.
pub struct Pki {
    pub ca: PathBuf,
    pub server_cert: PathBuf,
    pub server_key: PathBuf,
    pub client_cert: PathBuf,
    pub client_key: PathBuf,
}

/// Where `openssl` is, or why these tests cannot run.
pub fn openssl() -> Result<&'static str, String> {
    const OPENSSL: &str = "openssl";
    match Command::new(OPENSSL).arg("version").output() {
        Ok(out) if out.status.success() => Ok(OPENSSL),
        _ => Err("the `openssl` CLI (Debian package openssl) is not installed".into()),
    }
}

impl Pki {
    /// Makes a CA named `ca_name` and certificates it signs under `dir`.
    pub fn generate(dir: &Path, ca_name: &str) -> Self {
        std::fs::create_dir_all(dir).unwrap();
        let pki = Self {
            ca: dir.join("ca.pem"),
            server_cert: dir.join("server.pem"),
            server_key: dir.join("server.key"),
            client_cert: dir.join("client.pem"),
            client_key: dir.join("client.key"),
        };
        let ca_key = dir.join("ca.key");
        new_key_request(
            &["-x509"],
            &ca_key,
            &[
                "-out",
                path(&pki.ca),
                "-days",
                VALID_DAYS,
                "-subj",
                &format!("/CN={ca_name}"),
                "-addext",
                "basicConstraints=critical,CA:TRUE",
                "-addext",
                "keyUsage=critical,keyCertSign,cRLSign",
            ],
        );
        let server_ext = "subjectAltName=DNS:localhost,IP:127.0.0.1\n\
                          basicConstraints=CA:FALSE\n\
                          keyUsage=critical,digitalSignature\n\
                          extendedKeyUsage=serverAuth\n";
        sign(dir, &pki, "server", "localhost", server_ext, &ca_key);
        let client_ext = "basicConstraints=CA:FALSE\n\
                          keyUsage=critical,digitalSignature\n\
                          extendedKeyUsage=clientAuth\n";
        sign(dir, &pki, "client", "stockd", client_ext, &ca_key);
        pki
    }
}

/// `<name>.key` + `<name>.pem` signed by the CA, with extensions `ext`.
fn sign(dir: &Path, pki: &Pki, name: &str, cn: &str, ext: &str, ca_key: &Path) {
    let key = dir.join(format!("{name}.key"));
    let csr = dir.join(format!("{name}.csr"));
    let cert = dir.join(format!("{name}.pem"));
    let ext_file = dir.join(format!("{name}.ext"));
    std::fs::write(&ext_file, ext).unwrap();
    new_key_request(
        &[],
        &key,
        &["-out", path(&csr), "-subj", &format!("/CN={cn}")],
    );
    run(&[
        "x509",
        "-req",
        "-in",
        path(&csr),
        "-CA",
        path(&pki.ca),
        "-CAkey",
        path(ca_key),
        "-CAcreateserial",
        "-out",
        path(&cert),
        "-days",
        VALID_DAYS,
        "-extfile",
        path(&ext_file),
    ]);
}

fn path(p: &Path) -> &str {
    p.to_str().expect("temp paths are UTF-8")
}

/// `openssl req <lead> …` with a new unencrypted P-256 key written to
/// `key`, then `rest` (output, subject, extensions).
fn new_key_request(lead: &[&str], key: &Path, rest: &[&str]) {
    let mut args = vec!["req"];
    args.extend_from_slice(lead);
    args.extend_from_slice(&["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"]);
    args.extend_from_slice(&["-nodes", "-keyout", path(key)]);
    args.extend_from_slice(rest);
    run(&args);
}

fn run(args: &[&str]) {
    let out = Command::new("openssl")
        .args(args)
        .output()
        .expect("openssl runs");
    assert!(
        out.status.success(),
        "openssl {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}
