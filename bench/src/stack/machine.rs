//! Facts about the machine and the three servers, recorded with every run:
//! numbers from a 2-core box mean little without them.

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::Duration;

use deadpool_redis::redis;
use mysql_async::prelude::Queryable;

use crate::results::Machine;
use crate::stack::namespace::Namespace;

/// `rabbitmqctl` boots an Erlang VM; give it this long, then report "unknown".
const RABBITMQCTL_TIMEOUT: Duration = Duration::from_secs(15);
/// Poll period while waiting for `rabbitmqctl`.
const RABBITMQCTL_POLL: Duration = Duration::from_millis(50);

impl Machine {
    pub async fn detect(ns: &Namespace) -> Self {
        Self {
            cpus: std::thread::available_parallelism().map_or(0, usize::from),
            cpu_model: proc_field("/proc/cpuinfo", "model name").unwrap_or_else(unknown),
            memory_gib: proc_field("/proc/meminfo", "MemTotal")
                .and_then(|v| v.trim_end_matches("kB").trim().parse::<f64>().ok())
                .map_or(0.0, |kib| kib / 1024.0 / 1024.0),
            kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease")
                .map(|s| s.trim().to_string())
                .unwrap_or_else(|_| unknown()),
            load_avg_1m_at_start: std::fs::read_to_string("/proc/loadavg")
                .ok()
                .and_then(|s| s.split_whitespace().next()?.parse().ok())
                .unwrap_or(0.0),
            redis: redis_version(ns).await.unwrap_or_else(unknown),
            mariadb: mysql_version(ns).await.unwrap_or_else(unknown),
            rabbitmq: rabbitmq_version().await.unwrap_or_else(unknown),
        }
    }

    pub fn summary(&self) -> String {
        format!(
            "{} CPUs ({}), {:.1} GiB RAM, Linux {}, load {:.2} at start; Redis {}, MariaDB {}, RabbitMQ {}",
            self.cpus,
            self.cpu_model,
            self.memory_gib,
            self.kernel,
            self.load_avg_1m_at_start,
            self.redis,
            self.mariadb,
            self.rabbitmq
        )
    }
}

fn unknown() -> String {
    "unknown".into()
}

fn proc_field(path: &str, name: &str) -> Option<String> {
    let text = std::fs::read_to_string(path).ok()?;
    text.lines().find_map(|line| {
        let (k, v) = line.split_once(':')?;
        (k.trim() == name).then(|| v.trim().to_string())
    })
}

async fn redis_version(ns: &Namespace) -> Option<String> {
    let store = ns.redis().ok()?;
    let (_, mut conn) = store.primaries().await.ok()?.into_iter().next()?;
    let info: String = redis::cmd("INFO")
        .arg("server")
        .query_async(&mut conn)
        .await
        .ok()?;
    info.lines()
        .find_map(|l| l.strip_prefix("redis_version:"))
        .map(|v| v.trim().to_string())
}

async fn mysql_version(ns: &Namespace) -> Option<String> {
    // Server-level: the bench database may not exist at this point.
    let opts = mysql_async::Opts::from_url(&ns.settings.mysql.url).ok()?;
    let server = mysql_async::OptsBuilder::from_opts(opts).db_name(None::<String>);
    let mut conn = mysql_async::Conn::new(server).await.ok()?;
    let version: Option<String> = conn.query_first("SELECT VERSION()").await.ok()?;
    let _ = conn.disconnect().await;
    version
}

/// AMQP's handshake carries the version, but lapin does not expose it; the CLI does.
async fn rabbitmq_version() -> Option<String> {
    let mut child = Command::new("rabbitmqctl")
        .arg("version")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let deadline = tokio::time::Instant::now() + RABBITMQCTL_TIMEOUT;
    let status = loop {
        if let Some(status) = child.try_wait().ok()? {
            break status;
        }
        if tokio::time::Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        tokio::time::sleep(RABBITMQCTL_POLL).await;
    };
    let mut text = String::new();
    child.stdout.take()?.read_to_string(&mut text).ok()?;
    let text = text.trim().to_string();
    (status.success() && !text.is_empty()).then_some(text)
}

/// The checkout the bench runs in, as `git rev-parse --short=12 HEAD`, with
/// `-dirty` when tracked files differ from it: the report must say which code
/// it measured. `unknown` outside a git checkout or without git.
pub fn checkout_commit() -> String {
    let git = |args: &[&str]| {
        Command::new("git")
            .args(args)
            .stderr(Stdio::null())
            .output()
            .ok()
    };
    let Some(head) = git(&["rev-parse", "--short=12", "HEAD"]).filter(|o| o.status.success())
    else {
        return unknown();
    };
    let head = String::from_utf8_lossy(&head.stdout).trim().to_string();
    let clean = git(&["diff", "--quiet", "HEAD", "--"]).is_some_and(|o| o.status.success());
    if clean {
        head
    } else {
        format!("{head}-dirty")
    }
}
