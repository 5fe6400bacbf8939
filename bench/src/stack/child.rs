//! The stockd under test, as a child process: the `stockd` binary (beside
//! `stockd-bench`, or `--stockd`) with `--role all`, pointed at the bench
//! namespace through `STOCKD__*` variables.
//! A separate process so its memory and CPU are its own (peak RSS is read from
//! `/proc/<pid>/status`) and it runs exactly what ships.

use std::fs::File;
use std::net::{SocketAddr, TcpListener};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::Context;

use crate::drive::http_client::HttpConn;
use crate::stack::check::wait_until;
use crate::stack::namespace::Namespace;
use stockd::config::Durability;

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
        let exe = built(&ns.stockd_exe)?;
        let mut env = ns.child_env(&addr.to_string(), durability);
        env.extend(
            extra_env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string())),
        );
        let migrate = Command::new(exe)
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
        let child = Command::new(exe)
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

/// `exe` when it is a file; otherwise an error naming it and how to build one
/// (`stockd-bench` alone was built, or `--stockd` points nowhere).
fn built(exe: &Path) -> anyhow::Result<&Path> {
    anyhow::ensure!(
        exe.is_file(),
        "no stockd binary at {} (build both: cargo build --release --workspace; or pass \
         --stockd PATH)",
        exe.display()
    );
    Ok(exe)
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    /// A missing `stockd` is named, with the build command that makes it.
    #[test]
    fn a_missing_stockd_binary_is_named_with_how_to_build_it() {
        let err = super::built(Path::new("/nonexistent/stockd")).unwrap_err();
        let text = format!("{err:#}");
        assert!(text.contains("/nonexistent/stockd"), "{text}");
        assert!(text.contains("cargo build --release --workspace"), "{text}");
    }

    /// An existing file is taken as it is.
    #[test]
    fn an_existing_binary_is_taken() {
        let me = std::env::current_exe().unwrap();
        assert_eq!(super::built(&me).unwrap(), me);
    }
}
