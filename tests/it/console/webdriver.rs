//! A tiny WebDriver (W3C) client over plain HTTP: starts a WebDriver server
//! (Debian's chromedriver, or geckodriver built from crates.io) on a free port
//! and drives one headless browser session (Chromium or Firefox ESR). Just what
//! the console test needs: navigate, find, type, click, run a script, resize,
//! screenshot.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

/// W3C's key of an element reference in JSON.
const ELEMENT_KEY: &str = "element-6066-11e4-a52e-4f735466cecf";
/// A driver and its browser start within a few seconds even on a busy 2-core box.
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
/// geckodriver's profile already turns off updates, telemetry and most other
/// background traffic; these are the rest an offline machine would wait on, and
/// the one that lets FIREFOX_CHROME_CSS apply.
const FIREFOX_PREFS: &[(&str, bool)] = &[
    ("toolkit.legacyUserProfileCustomizations.stylesheets", true),
    ("network.captive-portal-service.enabled", false),
    ("network.connectivity-service.enabled", false),
    ("browser.safebrowsing.malware.enabled", false),
    ("browser.safebrowsing.phishing.enabled", false),
    ("extensions.getAddons.cache.enabled", false),
];
/// Firefox's own window frame keeps the window at least 500 px wide (the
/// toolbars' minimum, even headless); a phone's 390 px needs it lifted. Only the
/// browser's frame is styled by this file, never the page.
const FIREFOX_CHROME_CSS: &str = ":root { min-width: 0 !important; }\n";

/// The browsers the console test runs in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Engine {
    Chromium,
    Firefox,
}

impl Engine {
    /// The name scripts/browser-tools.sh takes and prints.
    pub fn name(self) -> &'static str {
        match self {
            Engine::Chromium => "chromium",
            Engine::Firefox => "firefox",
        }
    }
}

/// Where a browser and its WebDriver server are installed.
#[derive(Clone, Debug)]
pub struct Tools {
    pub engine: Engine,
    pub browser: PathBuf,
    pub driver: PathBuf,
}

/// Installs the browser and its driver when absent (scripts/browser-tools.sh:
/// apt for chromium, chromedriver and firefox-esr; `cargo install` for
/// geckodriver, minutes on first use) and says where they are. The script's
/// progress goes to this process's stderr as it comes (not captured by the test
/// harness, so a long build shows); a failure panics with its whole output.
pub fn ensure_installed(engine: Engine) -> Tools {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/browser-tools.sh");
    let mut child = Command::new("bash")
        .arg(script)
        .arg(engine.name())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("running scripts/browser-tools.sh");
    let stderr = child.stderr.take().unwrap();
    let progress = std::thread::spawn(move || {
        let mut seen = String::new();
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = writeln!(std::io::stderr().lock(), "{line}");
            seen.push_str(&line);
            seen.push('\n');
        }
        seen
    });
    let mut stdout = String::new();
    std::io::Read::read_to_string(child.stdout.as_mut().unwrap(), &mut stdout).unwrap();
    let status = child.wait().unwrap();
    let stderr = progress.join().unwrap();
    assert!(
        status.success(),
        "browser-tools.sh {} failed ({status}): {stdout}{stderr}",
        engine.name()
    );
    let line = stdout
        .lines()
        .find(|l| l.starts_with(&format!("{}\t", engine.name())))
        .unwrap_or_else(|| panic!("browser-tools.sh printed no paths: {stdout}{stderr}"));
    let fields: Vec<&str> = line.split('\t').collect();
    assert_eq!(fields.len(), 3, "browser-tools.sh: {line:?}");
    Tools {
        engine,
        browser: fields[1].into(),
        driver: fields[2].into(),
    }
}

/// A WebDriver server plus one browser session; both end on drop.
pub struct Browser {
    driver: Child,
    base: String,
    session: String,
    http: reqwest::Client,
    profile: PathBuf,
}

impl Browser {
    /// A headless browser with a fresh profile and a viewport of
    /// `width`×`height` CSS pixels. The driver's log goes to `driver_log`.
    pub async fn start(tools: &Tools, width: u32, height: u32, driver_log: &Path) -> Self {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let log = std::fs::File::create(driver_log).expect("creating the driver log");
        let mut command = Command::new(&tools.driver);
        match tools.engine {
            Engine::Chromium => command.arg(format!("--port={port}")),
            // Marionette's port is left to the system (geckodriver's default), so
            // several Firefoxes may run at once.
            Engine::Firefox => command.args(["--host", "127.0.0.1", "--port", &port.to_string()]),
        };
        let driver = command
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("starting {}: {e}", tools.driver.display()));
        let profile = std::env::temp_dir().join(format!(
            "stockd-{}-{}",
            tools.engine.name(),
            uuid::Uuid::new_v4()
        ));
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
        let caps = match tools.engine {
            Engine::Chromium => {
                let mut args: Vec<String> = CHROMIUM_FLAGS.iter().map(|s| s.to_string()).collect();
                args.push(format!("--user-data-dir={}", browser.profile.display()));
                json!({"browserName": "chrome",
                    "goog:chromeOptions": {"binary": tools.browser, "args": args}})
            }
            Engine::Firefox => {
                let chrome = browser.profile.join("chrome");
                std::fs::create_dir_all(&chrome).unwrap();
                std::fs::write(chrome.join("userChrome.css"), FIREFOX_CHROME_CSS).unwrap();
                let prefs: serde_json::Map<String, Value> = FIREFOX_PREFS
                    .iter()
                    .map(|(k, v)| (k.to_string(), json!(v)))
                    .collect();
                json!({"browserName": "firefox",
                "moz:firefoxOptions": {
                    "binary": tools.browser,
                    "args": ["-headless", "-profile", browser.profile],
                    "prefs": prefs,
                }})
            }
        };
        let created = browser
            .send(
                "POST",
                "/session",
                json!({"capabilities": {"alwaysMatch": caps}}),
            )
            .await;
        browser.session = created["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no session: {created}"))
            .to_string();
        browser.resize(width, height).await;
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
            assert!(
                Instant::now() < deadline,
                "the WebDriver server did not start"
            );
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
        let resp = req.send().await.expect("the WebDriver server answers");
        let status = resp.status();
        let v: Value = resp
            .json()
            .await
            .expect("the WebDriver server answers JSON");
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

    /// Makes the viewport (`window.innerWidth` × `innerHeight`) `width`×`height`
    /// CSS pixels: sets the window rect, then adds what the browser's own frame
    /// takes, if anything. Panics when the browser will not go that small.
    pub async fn resize(&self, width: u32, height: u32) {
        let viewport = "return [window.innerWidth, window.innerHeight];";
        let (mut outer_w, mut outer_h) = (i64::from(width), i64::from(height));
        let mut inner = Value::Null;
        for _ in 0..2 {
            self.send(
                "POST",
                &self.at("/window/rect"),
                json!({"width": outer_w, "height": outer_h}),
            )
            .await;
            inner = self.script(viewport, json!([])).await;
            let (w, h) = (inner[0].as_i64().unwrap(), inner[1].as_i64().unwrap());
            if (w, h) == (i64::from(width), i64::from(height)) {
                return;
            }
            outer_w += i64::from(width) - w;
            outer_h += i64::from(height) - h;
        }
        panic!("asked for a {width}x{height} viewport, got {inner}");
    }

    /// A PNG of the viewport.
    pub async fn screenshot(&self) -> Vec<u8> {
        let v = self.send("GET", &self.at("/screenshot"), Value::Null).await;
        decode_base64(v.as_str().expect("a base64 screenshot"))
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        // Ends the browser with the session, then the driver we started.
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
