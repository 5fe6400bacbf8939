//! The run's report: a table on stdout, `bench.json` (everything, for tools),
//! `bench.md` (the tables as BENCHMARKS.md shows them) and `bench.svg`. Every
//! file here reads the data types of [`crate::results`] and none of them
//! is read back by a phase.
//!
//! - [`ratios`] (with [`efficiency`], [`fan_in`], [`buckets`] and
//!   [`order_cost`]): the target table's rows; [`order_cost`] also gives the
//!   report's line on what a 3-line order costs; [`storm`] the expiry
//!   storm's rows and its line on the release paths; [`drop_lines`] the
//!   drop's windows.
//! - this module: the phase, CPU and target tables as text and Markdown;
//!   [`redis_servers`]: CPU per redis-server; [`buckets`]: the stock-bucket
//!   table; [`svg`]: the chart; [`numbers`]: `12,346`.

pub mod buckets;
pub mod drop_lines;
pub mod efficiency;
pub mod fan_in;
pub mod numbers;
pub mod order_cost;
pub mod phase_lookup;
pub mod ratios;
pub mod redis_servers;
pub mod storm_targets;
pub mod svg;

use std::fmt::Write as _;
use std::path::Path;

use anyhow::Context;

use crate::results::{PhaseResult, Ratio, Report};
use numbers::thousands;

impl Report {
    /// The phase table and the target table as plain text.
    pub fn text(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "\n{:<24} {:>6} {:>8} {:>13} {:<12} {:>9} {:>9} {:>9}",
            "phase", "conc", "count", "throughput", "unit", "p50 ms", "p99 ms", "p999 ms"
        );
        for p in &self.phases {
            let (p50, p99, p999) = latency_cells(p);
            let _ = writeln!(
                out,
                "{:<24} {:>6} {:>8} {:>13} {:<12} {p50:>9} {p99:>9} {p999:>9}",
                p.key,
                conc_cell(p),
                p.count,
                thousands(p.throughput),
                p.unit
            );
        }
        let _ = writeln!(
            out,
            "\nCPU µs per event, by process (cores busy = CPU time / wall time)"
        );
        let _ = writeln!(out, "{:<24} {}", "phase", cpu_header(|c| format!("{c:>9}")));
        for p in self.phases.iter().filter(|p| !p.cpu_ms.is_empty()) {
            let _ = writeln!(out, "{:<24} {}", p.key, cpu_cells(p, |c| format!("{c:>9}")));
        }
        let _ = write!(out, "{}", self.redis_servers_text());
        let _ = write!(out, "{}", buckets::text(&self.phases));
        let _ = write!(out, "{}", self.stalls_text());
        let _ = write!(out, "{}", order_cost::text(&self.phases));
        let _ = write!(out, "{}", storm_targets::text(&self.phases));
        let _ = write!(out, "{}", drop_lines::text(&self.phases));
        let _ = writeln!(out);
        for m in &self.memory {
            let _ = writeln!(
                out,
                "peak RSS {:<28} {:>7.1} MiB",
                m.process, m.peak_rss_mib
            );
        }
        let _ = writeln!(
            out,
            "\n{:<62} {:>9} {:>8}  result",
            "target", "measured", "goal"
        );
        for r in &self.ratios {
            let _ = writeln!(
                out,
                "{:<62} {:>9} {:>8}  {}",
                r.name,
                r.value.map_or("n/a".into(), |v| format!("{v:.2}")),
                r.goal.text(),
                verdict(r)
            );
        }
        let _ = writeln!(out, "\ncorrectness: {}", self.correctness);
        out
    }

    /// Redis SLOWLOG entries on the bench's keys, per phase that had any.
    pub fn stalls_text(&self) -> String {
        let mut out = String::new();
        for p in self.phases.iter().filter(|p| !p.redis_stalls.is_empty()) {
            let worst = &p.redis_stalls[0];
            let total: f64 = p.redis_stalls.iter().map(|s| s.blocked_ms).sum();
            let _ = writeln!(
                out,
                "redis stalls in {:<24} {:>3} slow commands, {:>7.1} ms blocked; worst {:.1} ms: {}",
                p.key,
                p.redis_stalls.len(),
                total,
                worst.blocked_ms,
                worst.command
            );
        }
        if !out.is_empty() {
            out.insert(0, '\n');
        }
        out
    }

    /// The same tables in Markdown, for BENCHMARKS.md.
    pub fn markdown(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "| phase | what | concurrency | count | throughput | p50 ms | p99 ms | p999 ms |"
        );
        let _ = writeln!(out, "|---|---|--:|--:|--:|--:|--:|--:|");
        for p in &self.phases {
            let (p50, p99, p999) = latency_cells(p);
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} {} | {p50} | {p99} | {p999} |",
                p.key,
                p.title,
                conc_cell(p),
                p.count,
                thousands(p.throughput),
                p.unit
            );
        }
        let _ = writeln!(out, "\nCPU µs per event, by process:\n");
        let _ = writeln!(
            out,
            "| phase | {} |",
            cpu_header(|c| c.to_string())
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" | ")
        );
        let _ = writeln!(out, "|---|{}", "--:|".repeat(CPU_COLUMNS.len() + 2));
        for p in self.phases.iter().filter(|p| !p.cpu_ms.is_empty()) {
            let cells: Vec<String> = cpu_cells(p, |c| c.to_string())
                .split_whitespace()
                .map(str::to_string)
                .collect();
            let _ = writeln!(out, "| {} | {} |", p.key, cells.join(" | "));
        }
        out.push_str(&self.redis_servers_markdown());
        out.push_str(&buckets::markdown(&self.phases));
        out.push_str(&self.batches_markdown());
        out.push_str(&order_cost::text(&self.phases));
        out.push_str(&storm_targets::text(&self.phases));
        out.push_str(&drop_lines::text(&self.phases));
        let stalls = self.stalls_text();
        if !stalls.is_empty() {
            let _ = writeln!(
                out,
                "\nRedis SLOWLOG during the phases (bench keys only):\n\n```text{stalls}```"
            );
        }
        let _ = writeln!(out, "\n| target | measured | goal | result | data |");
        let _ = writeln!(out, "|---|--:|--:|---|---|");
        for r in &self.ratios {
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} |",
                r.name,
                r.value.map_or("n/a".into(), |v| format!("{v:.2}")),
                r.goal.text(),
                verdict(r),
                r.data
            );
        }
        out
    }

    /// Writes `bench.json`, `bench.md` and `bench.svg` into `dir`.
    pub fn write(&self, dir: &Path) -> anyhow::Result<()> {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let json = serde_json::to_string_pretty(self)?;
        std::fs::write(dir.join("bench.json"), json + "\n")?;
        std::fs::write(dir.join("bench.md"), self.markdown())?;
        std::fs::write(dir.join("bench.svg"), svg::chart(self))?;
        Ok(())
    }
}

impl Report {
    /// Group-commit batch sizes per HTTP phase (empty when none was read).
    fn batches_markdown(&self) -> String {
        let rows: Vec<String> = self
            .phases
            .iter()
            .filter_map(|p| p.batches.map(|b| (p.key, b)))
            .map(|(key, b)| {
                let mean = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:.1}"));
                format!(
                    "| {key} | {} | {} | {} | {} |",
                    mean(b.per_reserve_call),
                    thousands(b.messages as f64),
                    mean(b.per_message),
                    mean(b.per_transaction)
                )
            })
            .collect();
        if rows.is_empty() {
            return String::new();
        }
        format!(
            "\nBatches during the measured run (means, from the child's `/metrics`):\n\n\
             | phase | reservations per reserve call | broker messages | deductions per message | deductions per consumer transaction |\n\
             |---|--:|--:|--:|--:|\n{}\n",
            rows.join("\n")
        )
    }
}

/// Process groups of the CPU table, in pipeline order.
const CPU_COLUMNS: &[&str] = &["bench", "stockd", "redis", "rabbitmq", "mariadb"];

fn cpu_header(cell: impl Fn(&str) -> String) -> String {
    let mut cols: Vec<String> = CPU_COLUMNS.iter().map(|c| cell(c)).collect();
    cols.push(cell("total"));
    cols.push(cell("cores"));
    cols.join(" ")
}

fn cpu_cells(p: &PhaseResult, cell: impl Fn(&str) -> String) -> String {
    let per = p.cpu_us_per_event();
    let mut cols: Vec<String> = CPU_COLUMNS
        .iter()
        .map(|c| cell(&per.get(*c).map_or("-".into(), |v| format!("{v:.0}"))))
        .collect();
    let total: f64 = per.values().sum();
    let cores = p.cpu_ms.values().sum::<f64>() / p.elapsed_ms.max(1.0);
    cols.push(cell(&format!("{total:.0}")));
    cols.push(cell(&format!("{cores:.2}")));
    cols.join(" ")
}

fn verdict(r: &Ratio) -> &'static str {
    match r.met {
        Some(true) => "met",
        Some(false) => "MISSED",
        None => "n/a",
    }
}

fn conc_cell(p: &PhaseResult) -> String {
    if p.concurrency == 0 {
        "-".into()
    } else {
        p.concurrency.to_string()
    }
}

fn latency_cells(p: &PhaseResult) -> (String, String, String) {
    match p.latency {
        Some(l) => (
            format!("{:.2}", l.p50),
            format!("{:.2}", l.p99),
            format!("{:.2}", l.p999),
        ),
        None => ("-".into(), "-".into(), "-".into()),
    }
}
