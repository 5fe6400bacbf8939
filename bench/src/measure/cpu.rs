//! Where the CPU goes during a phase: user+system time of every process on the
//! path (the bench itself, the child stockd, Redis, RabbitMQ, MariaDB), read
//! from `/proc/<pid>/stat` before and after. On a 2-core machine every process
//! competes for the same cores, so "CPU per request, by process" says what
//! bounds a phase better than any single server's own statistics.

use std::collections::BTreeMap;
use std::sync::OnceLock;

/// Units of `utime`/`stime` in `/proc/<pid>/stat`: USER_HZ, 100 on Linux.
const TICKS_PER_SEC: f64 = 100.0;

/// Process names (`/proc/<pid>/comm`) of the servers, and the label shown.
const SERVERS: &[(&str, &str)] = &[
    ("redis-server", "redis"),
    ("beam.smp", "rabbitmq"),
    ("mariadbd", "mariadb"),
    ("mysqld", "mariadb"),
];

/// The `--target` stockd's pid (`--target-pid`), counted as "stockd": it is
/// not our child, so it cannot be recognised by its parent.
static TARGET_PID: OnceLock<u32> = OnceLock::new();

/// Counts process `pid` as "stockd" from now on (`--target-pid`).
pub fn watch_target(pid: u32) {
    let _ = TARGET_PID.set(pid);
}

/// CPU ticks per labelled process group at one instant.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    ticks: BTreeMap<&'static str, u64>,
    /// Each redis-server on its own, by the address in its process title
    /// (`127.0.0.1:7001`): the nodes of a cluster are told apart.
    redis_servers: BTreeMap<String, u64>,
}

/// Reads every relevant process's CPU time now. Processes that vanish between
/// listing and reading are skipped (their time is lost, not invented).
pub fn snapshot() -> Snapshot {
    let me = std::process::id();
    let mut ticks: BTreeMap<&'static str, u64> = BTreeMap::new();
    let mut redis_servers: BTreeMap<String, u64> = BTreeMap::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Snapshot::default();
    };
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        let Some((comm, ppid, used)) = read_stat(pid) else {
            continue;
        };
        let label = if pid == me {
            Some("bench")
        } else if (ppid == me && comm == "stockd") || TARGET_PID.get() == Some(&pid) {
            Some("stockd")
        } else {
            SERVERS.iter().find(|(c, _)| *c == comm).map(|(_, l)| *l)
        };
        if let Some(label) = label {
            *ticks.entry(label).or_default() += used;
        }
        if comm == "redis-server" {
            if let Some(addr) = redis_address(pid) {
                *redis_servers.entry(addr).or_default() += used;
            }
        }
    }
    Snapshot {
        ticks,
        redis_servers,
    }
}

/// The listening address redis-server shows in its process title
/// (`redis-server 127.0.0.1:7001 [cluster]`).
fn redis_address(pid: u32) -> Option<String> {
    let raw = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    let title = String::from_utf8_lossy(&raw).replace('\0', " ");
    title
        .split_whitespace()
        .find(|word| word.contains(':'))
        .map(str::to_string)
}

/// CPU milliseconds spent between a [`Snapshot`] and now, from one reading.
#[derive(Debug, Clone, Default)]
pub struct Elapsed {
    /// Per process group (`bench`, `stockd`, `redis`, ...).
    pub by_label: BTreeMap<String, f64>,
    /// Per redis-server, by the address in its process title.
    pub by_redis_server: BTreeMap<String, f64>,
}

impl Snapshot {
    /// CPU milliseconds spent since `self`, both views from one `/proc` read.
    pub fn elapsed(&self) -> Elapsed {
        let now = snapshot();
        Elapsed {
            by_label: ms_since(&self.ticks, &now.ticks),
            by_redis_server: ms_since(&self.redis_servers, &now.redis_servers),
        }
    }
}

/// Milliseconds per key between two tick counts.
fn ms_since<K: Ord + ToString>(
    before: &BTreeMap<K, u64>,
    now: &BTreeMap<K, u64>,
) -> BTreeMap<String, f64> {
    now.iter()
        .map(|(key, t)| {
            let then = before.get(key).copied().unwrap_or(0);
            let ms = t.saturating_sub(then) as f64 / TICKS_PER_SEC * 1000.0;
            (key.to_string(), ms)
        })
        .collect()
}

/// `(comm, ppid, utime + stime)` of one process.
fn read_stat(pid: u32) -> Option<(String, u32, u64)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // comm is in parentheses and may hold spaces: split at the last ')'.
    let open = stat.find('(')?;
    let close = stat.rfind(')')?;
    let comm = stat[open + 1..close].to_string();
    let fields: Vec<&str> = stat[close + 2..].split(' ').collect();
    // After comm: state(0) ppid(1) ... utime(11) stime(12).
    let ppid = fields.get(1)?.parse().ok()?;
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some((comm, ppid, utime + stime))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_seen_as_the_bench() {
        let (comm, _, _) = read_stat(std::process::id()).expect("own stat");
        assert!(!comm.is_empty());
        assert!(snapshot().ticks.contains_key("bench"));
    }
}
