//! stockd as the operator runs it: the real binary, one process per role,
//! configured only through `STOCKD_*` environment variables, each with its own
//! log file; one-shot subcommands (`migrate`, `warmup`, `reconcile`, `audit`).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::net::Place;
use crate::servers::process::{log_tail, OwnedProcess};

/// Admin token of every chaos stack.
pub const ADMIN_TOKEN: &str = "chaos-admin-token";
/// A role that exits at start-up is started again after this pause (what
/// systemd's Restart=on-failure does); one whose dependency is down waits
/// instead (roles::startup), answering `/livez` with `"starting"`.
const RESTART_PAUSE: Duration = Duration::from_millis(500);

/// The stockd binary Cargo built for this test run (debug profile).
pub fn binary() -> &'static str {
    env!("CARGO_BIN_EXE_stockd")
}

/// Environment of every stockd process of one stack.
#[derive(Debug, Clone, Default)]
pub struct StockdEnv {
    pub vars: Vec<(String, String)>,
    /// Another stockd binary than this build's (the previous release of
    /// the rolling-upgrade scenario); None: [`binary`].
    pub program: Option<PathBuf>,
}

impl StockdEnv {
    pub fn set(&mut self, key: &str, value: impl ToString) {
        self.vars.retain(|(k, _)| k != key);
        self.vars.push((key.to_string(), value.to_string()));
    }

    /// A command for the binary ([`Self::program`], else this build's) with
    /// exactly this environment (inherited
    /// `STOCKD*` and `RUST_LOG` variables removed, so the caller's shell
    /// cannot point a chaos process at the shared services).
    pub fn command(&self) -> Command {
        let mut cmd = match &self.program {
            Some(program) => Command::new(program),
            None => Command::new(binary()),
        };
        for (key, _) in std::env::vars() {
            if key.starts_with("STOCKD") || key == "RUST_LOG" {
                cmd.env_remove(key);
            }
        }
        cmd.current_dir(env!("CARGO_MANIFEST_DIR"));
        for (k, v) in &self.vars {
            cmd.env(k, v);
        }
        cmd
    }
}

/// One running role process.
pub struct RoleProcess {
    /// Port of its `/livez`: http.bind for the api, metrics.bind otherwise.
    pub port: u16,
    /// The address it binds (its namespace's, or loopback).
    pub ip: std::net::Ipv4Addr,
    pub process: OwnedProcess,
}

impl RoleProcess {
    /// Spawns `stockd --role <role>` in `place`; `port` is its http.bind
    /// (api) or metrics.bind (other roles), on the place's address.
    pub fn spawn(env: &StockdEnv, role: &str, place: &Place, port: u16, log: &Path) -> Self {
        let mut cmd = env.command();
        place.enter(&mut cmd);
        cmd.args(["--role", role]);
        let bind = format!("{}:{port}", place.ip);
        if role == "api" {
            cmd.env("STOCKD__HTTP__BIND", &bind);
        } else {
            cmd.env("STOCKD__METRICS__BIND", &bind);
        }
        let name = format!("stockd --role {role} {}:{port}", place.ns_name());
        Self {
            port,
            ip: place.ip,
            process: OwnedProcess::spawn(&name, cmd, log),
        }
    }

    /// Waits until `/livez` answers 200 (the process connected to every
    /// dependency). Err with the reason when it exited or `limit` passed.
    pub async fn wait_live(&mut self, limit: Duration) -> Result<(), String> {
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(1))
            .build()
            .unwrap();
        let url = format!("http://{}:{}/livez", self.ip, self.port);
        let start = Instant::now();
        while start.elapsed() < limit {
            if let Some(status) = self.process.exited() {
                return Err(format!("exited with {status}"));
            }
            if let Ok(resp) = client.get(&url).send().await {
                // 200 `"starting"`: listening, still waiting for its stores
                // (roles::startup); live means connected, as before.
                let ok = resp.status().is_success();
                if ok && !resp.text().await.unwrap_or_default().contains("starting") {
                    return Ok(());
                }
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Err(format!("not live after {limit:?}"))
    }
}

/// Starts `role` until it is live: a start-up that fails because a dependency
/// is down is retried after [`RESTART_PAUSE`] until `limit`.
pub async fn start_role(
    env: &StockdEnv,
    role: &str,
    place: &Place,
    port: u16,
    logs: &Path,
    attempt_no: &mut u32,
    limit: Duration,
) -> RoleProcess {
    let start = Instant::now();
    loop {
        *attempt_no += 1;
        let log = logs.join(format!("{role}-{}.log", *attempt_no));
        let mut proc = RoleProcess::spawn(env, role, place, port, &log);
        let left = limit.saturating_sub(start.elapsed());
        match proc.wait_live(left).await {
            Ok(()) => return proc,
            Err(why) if start.elapsed() < limit => {
                println!("  {role}: start-up failed ({why}); retrying");
                proc.process.kill9();
                tokio::time::sleep(RESTART_PAUSE).await;
            }
            Err(why) => panic!(
                "stockd --role {role} did not become live within {limit:?}: {why}\n{}",
                proc.process.log_tail()
            ),
        }
    }
}

/// What a one-shot subcommand printed and how it exited.
#[derive(Debug)]
pub struct CliOutput {
    /// None when it was killed at the deadline.
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl CliOutput {
    pub fn text(&self) -> String {
        format!("{}{}", self.stdout, self.stderr)
    }
}

/// Runs `stockd <args>` to completion, killed after `limit`. Output goes through
/// files (no pipe can fill up), named after the first argument in `dir`.
pub async fn run_cli(env: &StockdEnv, args: &[&str], dir: &Path, limit: Duration) -> CliOutput {
    let env = env.clone();
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    let dir: PathBuf = dir.to_path_buf();
    tokio::task::spawn_blocking(move || run_cli_blocking(&env, &args, &dir, limit))
        .await
        .unwrap()
}

fn run_cli_blocking(env: &StockdEnv, args: &[String], dir: &Path, limit: Duration) -> CliOutput {
    std::fs::create_dir_all(dir).unwrap();
    static RUNS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let run = RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let tag = format!("{}-{run}", args.first().map_or("cli", |a| a.as_str()));
    let out_path = dir.join(format!("{tag}.out"));
    let err_path = dir.join(format!("{tag}.err"));
    let mut cmd = env.command();
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out_path).unwrap())
        .stderr(std::fs::File::create(&err_path).unwrap());
    let mut child = cmd.spawn().expect("spawning stockd");
    let start = Instant::now();
    let code = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status.code();
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let read =
        |p: &Path| String::from_utf8_lossy(&std::fs::read(p).unwrap_or_default()).into_owned();
    let output = CliOutput {
        code,
        stdout: read(&out_path),
        stderr: read(&err_path),
    };
    if code.is_none() {
        eprintln!(
            "stockd {args:?} killed after {limit:?}\n{}",
            log_tail(&err_path, 20)
        );
    }
    output
}
