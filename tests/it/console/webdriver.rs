//! A tiny WebDriver (W3C) client over plain HTTP: starts Debian's chromedriver
//! on a free port and drives one headless Chromium session. Just what the
//! console test needs: navigate, find, type, click, run a script, screenshot.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

pub const CHROMIUM: &str = "/usr/bin/chromium";
pub const CHROMEDRIVER: &str = "/usr/bin/chromedriver";
/// W3C's key of an element reference in JSON.
const ELEMENT_KEY: &str = "element-6066-11e4-a52e-4f735466cecf";
/// chromedriver and Chromium start within a few seconds even on a busy 2-core box.
const START_TIMEOUT: Duration = Duration::from_secs(60);
/// Chromium's own background connections fail on this offline machine, and a
/// sandbox needs privileges a test runner (root in a container) lacks.
const CHROMIUM_FLAGS: &[&str] = &[
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
];

/// Installs chromium and chromedriver when absent (scripts/browser-tools.sh).
pub fn ensure_installed() {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/browser-tools.sh");
    let out = Command::new("bash")
        .arg(script)
        .output()
        .expect("running scripts/browser-tools.sh");
    assert!(
        out.status.success(),
        "browser-tools.sh failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// chromedriver plus one browser session; both end on drop.
pub struct Browser {
    driver: Child,
    base: String,
    session: String,
    http: reqwest::Client,
    profile: PathBuf,
}

impl Browser {
    /// A headless Chromium of `width`×`height` CSS pixels with a fresh profile.
    pub async fn start(width: u32, height: u32) -> Self {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let driver = Command::new(CHROMEDRIVER)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("starting chromedriver");
        let profile =
            std::env::temp_dir().join(format!("stockd-chromium-{}", uuid::Uuid::new_v4()));
        let http = reqwest::Client::builder()
            .timeout(START_TIMEOUT)
            .build()
            .unwrap();
        let base = format!("http://127.0.0.1:{port}");
        let mut browser = Self {
            driver,
            base,
            session: String::new(),
            http,
            profile,
        };
        browser.wait_ready().await;
        let mut args: Vec<String> = CHROMIUM_FLAGS.iter().map(|s| s.to_string()).collect();
        args.push(format!("--user-data-dir={}", browser.profile.display()));
        args.push(format!("--window-size={width},{height}"));
        let caps = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {"binary": CHROMIUM, "args": args},
        }}});
        let created = browser.send("POST", "/session", caps).await;
        browser.session = created["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no session: {created}"))
            .to_string();
        browser
    }

    async fn wait_ready(&self) {
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            let ready = self
                .http
                .get(format!("{}/status", self.base))
                .send()
                .await
                .ok();
            if let Some(resp) = ready {
                if let Ok(v) = resp.json::<Value>().await {
                    if v["value"]["ready"] == true {
                        return;
                    }
                }
            }
            assert!(Instant::now() < deadline, "chromedriver did not start");
            // Poll period of the wait for `ready` above, not a fixed wait.
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// One WebDriver command; returns its `value`, panicking on an error.
    async fn send(&self, method: &str, path: &str, body: Value) -> Value {
        let url = format!("{}{path}", self.base);
        let req = match method {
            "GET" => self.http.get(url),
            "DELETE" => self.http.delete(url),
            _ => self.http.post(url).json(&body),
        };
        let resp = req.send().await.expect("chromedriver answers");
        let status = resp.status();
        let v: Value = resp.json().await.expect("chromedriver answers JSON");
        if let Some(value) = v.get("value").filter(|_| status.is_success()) {
            return value.clone();
        }
        panic!("webdriver {method} {path}: {status} {v}");
    }

    fn at(&self, path: &str) -> String {
        format!("/session/{}{path}", self.session)
    }

    pub async fn goto(&self, url: &str) {
        self.send("POST", &self.at("/url"), json!({"url": url}))
            .await;
    }

    async fn element(&self, css: &str) -> String {
        let v = self
            .send(
                "POST",
                &self.at("/element"),
                json!({"using": "css selector", "value": css}),
            )
            .await;
        v[ELEMENT_KEY]
            .as_str()
            .unwrap_or_else(|| panic!("no element {css}: {v}"))
            .to_string()
    }

    /// Types `text` into the element `css` (keyboard events, like a user).
    pub async fn type_into(&self, css: &str, text: &str) {
        let id = self.element(css).await;
        self.send("POST", &self.at(&format!("/element/{id}/clear")), json!({}))
            .await;
        self.send(
            "POST",
            &self.at(&format!("/element/{id}/value")),
            json!({"text": text}),
        )
        .await;
    }

    pub async fn click(&self, css: &str) {
        let id = self.element(css).await;
        self.send("POST", &self.at(&format!("/element/{id}/click")), json!({}))
            .await;
    }

    /// Runs `script` in the page (`arguments` = `args`) and returns its result.
    pub async fn script(&self, script: &str, args: Value) -> Value {
        self.send(
            "POST",
            &self.at("/execute/sync"),
            json!({"script": script, "args": args}),
        )
        .await
    }

    /// The text of the first element matching `css`, `None` when absent.
    pub async fn text(&self, css: &str) -> Option<String> {
        let v = self
            .script(
                "const e = document.querySelector(arguments[0]); return e ? e.textContent : null;",
                json!([css]),
            )
            .await;
        v.as_str().map(str::to_string)
    }

    /// Waits until the text of `css` satisfies `ok`; returns it.
    pub async fn wait_text(
        &self,
        css: &str,
        timeout: Duration,
        ok: impl Fn(&str) -> bool,
    ) -> String {
        let deadline = Instant::now() + timeout;
        loop {
            let text = self.text(css).await;
            if let Some(t) = text.as_deref().filter(|t| ok(t)) {
                return t.to_string();
            }
            assert!(
                Instant::now() < deadline,
                "{css} never matched; last text {text:?}"
            );
            // Poll period of the wait for the text above, not a fixed wait.
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Resizes the browser window (CSS pixels).
    pub async fn resize(&self, width: u32, height: u32) {
        self.send(
            "POST",
            &self.at("/window/rect"),
            json!({"width": width, "height": height}),
        )
        .await;
    }

    /// A PNG of the viewport.
    pub async fn screenshot(&self) -> Vec<u8> {
        let v = self.send("GET", &self.at("/screenshot"), Value::Null).await;
        decode_base64(v.as_str().expect("a base64 screenshot"))
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        // Ends Chromium with the session, then the driver we started.
        if !self.session.is_empty() {
            let url = format!("{}/session/{}", self.base, self.session);
            let _ = std::thread::spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .unwrap();
                rt.block_on(async { reqwest::Client::new().delete(url).send().await.ok() });
            })
            .join();
        }
        let _ = self.driver.kill();
        let _ = self.driver.wait();
        let _ = std::fs::remove_dir_all(&self.profile);
    }
}

/// Standard base64 (RFC 4648) without line breaks, as WebDriver sends it.
fn decode_base64(text: &str) -> Vec<u8> {
    let value = |c: u8| -> u32 {
        match c {
            b'A'..=b'Z' => u32::from(c - b'A'),
            b'a'..=b'z' => u32::from(c - b'a') + 26,
            b'0'..=b'9' => u32::from(c - b'0') + 52,
            b'+' => 62,
            b'/' => 63,
            _ => panic!("not base64: {c}"),
        }
    };
    let bytes: Vec<u8> = text
        .bytes()
        .filter(|&c| c != b'=' && !c.is_ascii_whitespace())
        .collect();
    let mut out = Vec::with_capacity(bytes.len() * 3 / 4);
    for chunk in bytes.chunks(4) {
        let mut acc = 0u32;
        for (i, &c) in chunk.iter().enumerate() {
            acc |= value(c) << (18 - 6 * i);
        }
        let n = chunk.len() * 6 / 8;
        for i in 0..n {
            out.push((acc >> (16 - 8 * i)) as u8);
        }
    }
    out
}

#[test]
fn base64_decodes_like_rfc_4648() {
    assert_eq!(decode_base64("aGVsbG8="), b"hello");
    assert_eq!(decode_base64("aGk="), b"hi");
    assert_eq!(decode_base64("YWJj"), b"abc");
}
