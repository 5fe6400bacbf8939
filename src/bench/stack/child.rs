//! The stockd under test, as a child process: this very binary with
//! `--role all`, pointed at the bench namespace through `STOCKD__*` variables.
//! A separate process so its memory and CPU are its own (peak RSS is read from
//! `/proc/<pid>/status`) and it runs exactly what ships.

use std::fs::File;
use std::net::{SocketAddr, TcpListener};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::Context;

use crate::bench::drive::http_client::HttpConn;
use crate::bench::stack::check::wait_until;
use crate::bench::stack::namespace::Namespace;
use crate::config::Durability;

/// Time the child gets to become ready (connect, declare topology, bind).
const READY_TIMEOUT: Duration = Duration::from_secs(30);
/// Readiness poll period.
const READY_POLL: Duration = Duration::from_millis(100);
/// Time the child gets to drain after SIGTERM: the shutdown grace (10 s) plus margin.
const STOP_TIMEOUT: Duration = Duration::from_secs(15);

pub struct StockdChild {
    child: Child,
    pub addr: SocketAddr,
    pub label: String,
}

impl StockdChild {
    /// Runs `stockd migrate` for the namespace, then starts `stockd --role all`
    /// and waits for `/readyz`. The child's logs go to `<out_dir>/<label>.log`.
    pub async fn start(
        ns: &Namespace,
        durability: Durability,
        label: &str,
        out_dir: &Path,
    ) -> anyhow::Result<Self> {
        Self::start_with(ns, durability, label, out_dir, &[]).await
    }

    /// [`StockdChild::start`] with extra `STOCKD__…` settings (e.g. rate limits).
    pub async fn start_with(
        ns: &Namespace,
        durability: Durability,
        label: &str,
        out_dir: &Path,
        extra_env: &[(&str, &str)],
    ) -> anyhow::Result<Self> {
        let addr = free_loopback_port()?;
        Self::start_at(ns, durability, label, out_dir, extra_env, addr).await
    }

    /// [`StockdChild::start_with`] on `addr` (from [`free_loopback_port`]),
    /// for a caller that must know the address before the child is ready
    /// (the secured child's TLS is registered by address).
    pub async fn start_at(
        ns: &Namespace,
        durability: Durability,
        label: &str,
        out_dir: &Path,
        extra_env: &[(&str, &str)],
        addr: SocketAddr,
    ) -> anyhow::Result<Self> {
        let exe = std::env::current_exe().context("locating the stockd binary")?;
        let mut env = ns.child_env(&addr.to_string(), durability);
        env.extend(
            extra_env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string())),
        );
        let migrate = Command::new(&exe)
            .arg("migrate")
            .envs(env.iter().cloned())
            .output()
            .context("running stockd migrate")?;
        anyhow::ensure!(
            migrate.status.success(),
            "stockd migrate failed: {}",
            String::from_utf8_lossy(&migrate.stderr)
        );
        let log_path = out_dir.join(format!("{label}.log"));
        let log =
            File::create(&log_path).with_context(|| format!("creating {}", log_path.display()))?;
        let child = Command::new(&exe)
            .args(["--role", "all"])
            .envs(env)
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .context("starting stockd --role all")?;
        let mut me = Self {
            child,
            addr,
            label: label.to_string(),
        };
        me.wait_ready()
            .await
            .with_context(|| format!("child {label} not ready; see {}", log_path.display()))?;
        Ok(me)
    }

    async fn wait_ready(&mut self) -> anyhow::Result<()> {
        let mut conn = HttpConn::new(self.addr);
        let deadline = tokio::time::Instant::now() + READY_TIMEOUT;
        while tokio::time::Instant::now() < deadline {
            if let Some(status) = self.child.try_wait()? {
                anyhow::bail!("the child exited during start-up ({status})");
            }
            if let Ok(resp) = conn.request("GET", "/readyz", "", b"").await {
                if resp.status == 200 {
                    return Ok(());
                }
            }
            tokio::time::sleep(READY_POLL).await;
        }
        anyhow::bail!("/readyz was not 200 within {READY_TIMEOUT:?}")
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Peak resident set size so far, in MiB (`VmHWM`).
    pub fn peak_rss_mib(&self) -> anyhow::Result<f64> {
        peak_rss_mib(self.pid())
    }

    /// Stops the child gracefully (SIGTERM: readiness off, HTTP drains, the
    /// consumer finishes its batch), killing it if it does not exit in time.
    pub async fn stop(mut self) -> anyhow::Result<()> {
        let pid = self.pid().to_string();
        // std cannot send SIGTERM; `kill` is in every POSIX base system.
        let sent = Command::new("kill").args(["-TERM", &pid]).status();
        if !matches!(sent, Ok(s) if s.success()) {
            self.child.kill()?;
        }
        let child = &mut self.child;
        let exited = wait_until(STOP_TIMEOUT, READY_POLL, || {
            let done = matches!(child.try_wait(), Ok(Some(_)));
            async move { done }
        })
        .await;
        if !exited {
            self.child.kill()?;
            anyhow::bail!("child {} did not stop within {STOP_TIMEOUT:?}", self.label);
        }
        Ok(())
    }
}

impl Drop for StockdChild {
    fn drop(&mut self) {
        // A bench that bails out half-way must not leave a stockd running.
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Peak resident set size of process `pid`, in MiB.
pub fn peak_rss_mib(pid: u32) -> anyhow::Result<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .with_context(|| format!("reading /proc/{pid}/status"))?;
    let kib: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .context("no VmHWM in /proc/<pid>/status")?;
    Ok(kib / 1024.0)
}

/// A loopback port nobody listens on right now (bind to 0, read, release).
pub fn free_loopback_port() -> anyhow::Result<SocketAddr> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    Ok(listener.local_addr()?)
}
