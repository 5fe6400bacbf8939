//! Everything one run measured, as `bench.json` holds it: the machine, every
//! phase, the memory peaks and the target table. Assembled by `bench::run`,
//! rendered by [`crate::report`].

use serde::Serialize;

use super::{PhaseResult, Ratio};

/// Peak resident memory of one stockd process.
#[derive(Debug, Clone, Serialize)]
pub struct Memory {
    pub process: String,
    pub pid: u32,
    pub peak_rss_mib: f64,
}

/// Everything one run measured.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub generated_at: String,
    /// The checkout the run was started in (`git rev-parse --short=12 HEAD`,
    /// `-dirty` when tracked files differ from it; `unknown` outside git).
    pub commit: String,
    pub command: String,
    pub concurrency: usize,
    pub machine: Machine,
    pub phases: Vec<PhaseResult>,
    pub memory: Vec<Memory>,
    pub ratios: Vec<Ratio>,
    /// Correctness: every phase's invariants held (the run fails otherwise).
    pub correctness: String,
}

/// The machine and the servers the run measured (versions as they answered).
#[derive(Debug, Clone, Serialize)]
pub struct Machine {
    pub cpus: usize,
    pub cpu_model: String,
    pub memory_gib: f64,
    pub kernel: String,
    /// 1-minute load average when the run began: above ~0.5 on this box,
    /// something else was running and the numbers are disturbed.
    pub load_avg_1m_at_start: f64,
    pub redis: String,
    pub mariadb: String,
    pub rabbitmq: String,
}
