//! Redis CPU per server: on a Redis Cluster the "redis" column of the CPU
//! table sums every node, which hides whether one primary (the hot SKU's)
//! is the bound. This table splits it by the address in each redis-server's
//! process title, for the phases that drove load. Shown only when more than
//! one redis-server worked (a cluster, or a cluster next to the standalone).

use std::collections::BTreeSet;
use std::fmt::Write as _;

use crate::results::{PhaseResult, Report};

/// A server whose CPU over every phase stays under this is left out (idle
/// replicas, the unused standalone server): milliseconds.
const BUSY_MS: f64 = 20.0;

impl Report {
    /// The per-server table as text (empty when at most one server worked).
    pub fn redis_servers_text(&self) -> String {
        let servers = busy_servers(&self.phases);
        if servers.len() < 2 {
            return String::new();
        }
        let mut out = String::from("\nRedis CPU µs per event, by redis-server\n");
        let header: Vec<String> = servers.iter().map(|s| format!("{s:>16}")).collect();
        let _ = writeln!(out, "{:<24} {}", "phase", header.join(" "));
        for p in phases_with_servers(&self.phases) {
            let cells: Vec<String> = servers
                .iter()
                .map(|s| format!("{:>16}", cell(p, s)))
                .collect();
            let _ = writeln!(out, "{:<24} {}", p.key, cells.join(" "));
        }
        out
    }

    /// The same table in Markdown (empty when at most one server worked).
    pub fn redis_servers_markdown(&self) -> String {
        let servers = busy_servers(&self.phases);
        if servers.len() < 2 {
            return String::new();
        }
        let mut out = String::from("\nRedis CPU µs per event, by redis-server:\n\n| phase |");
        for s in &servers {
            let _ = write!(out, " {s} |");
        }
        let _ = writeln!(out, "\n|---|{}", "--:|".repeat(servers.len()));
        for p in phases_with_servers(&self.phases) {
            let cells: Vec<String> = servers.iter().map(|s| cell(p, s)).collect();
            let _ = writeln!(out, "| {} | {} |", p.key, cells.join(" | "));
        }
        out
    }
}

fn phases_with_servers(phases: &[PhaseResult]) -> impl Iterator<Item = &PhaseResult> {
    phases.iter().filter(|p| !p.redis_servers_ms.is_empty())
}

/// Servers busy in at least one phase, by address.
fn busy_servers(phases: &[PhaseResult]) -> Vec<String> {
    let mut busy = BTreeSet::new();
    for p in phases {
        for (addr, ms) in &p.redis_servers_ms {
            if *ms >= BUSY_MS {
                busy.insert(addr.clone());
            }
        }
    }
    busy.into_iter().collect()
}

fn cell(p: &PhaseResult, server: &str) -> String {
    let n = p.count.max(1) as f64;
    p.redis_servers_ms
        .get(server)
        .map_or("-".into(), |ms| format!("{:.1}", ms * 1000.0 / n))
}
