//! A redis-server of the bench's own, for a phase that must count the Redis
//! calls its stockd makes: `INFO commandstats` is server-wide, and the shared
//! Redis also serves the tests and builds running beside the bench, so only a
//! server nobody else talks to can show that a window cost zero calls.
//!
//! Started without persistence on a free loopback port, stopped by its pid
//! when dropped (also when the phase bails out half-way).

use std::collections::BTreeMap;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::Context;
use deadpool_redis::redis;

use crate::stack::check::wait_until;
use crate::stack::child::free_loopback_port;

/// A fresh redis-server answers PING well within this.
const START_TIMEOUT: Duration = Duration::from_secs(10);
/// PING period while it starts.
const START_POLL: Duration = Duration::from_millis(50);

/// The private server: its URL and its process.
pub struct PrivateRedis {
    pub url: String,
    process: Child,
}

impl PrivateRedis {
    /// Starts `redis-server` (no RDB, no AOF) and waits until it answers.
    pub async fn start() -> anyhow::Result<Self> {
        let addr = free_loopback_port()?;
        let process = Command::new("redis-server")
            .args(["--port", &addr.port().to_string()])
            .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .context("starting redis-server (is it installed? scripts/services.sh installs it)")?;
        let me = Self {
            url: format!("redis://127.0.0.1:{}", addr.port()),
            process,
        };
        let up = wait_until(START_TIMEOUT, START_POLL, || async {
            me.command_calls().await.is_ok()
        })
        .await;
        anyhow::ensure!(
            up,
            "the private redis-server did not answer within {START_TIMEOUT:?}"
        );
        Ok(me)
    }

    /// Calls per command so far ([`command_calls`]).
    pub async fn command_calls(&self) -> anyhow::Result<CommandCalls> {
        command_calls(&self.url).await
    }
}

/// Calls per command so far of the server at `url` (`INFO commandstats`),
/// by lower-case name, over a connection of its own.
pub async fn command_calls(url: &str) -> anyhow::Result<CommandCalls> {
    let client = redis::Client::open(url)?;
    let mut conn = client.get_multiplexed_async_connection().await?;
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(&mut conn)
        .await?;
    Ok(CommandCalls::parse(&info))
}

impl Drop for PrivateRedis {
    fn drop(&mut self) {
        let _ = self.process.kill();
        let _ = self.process.wait();
    }
}

/// `INFO commandstats` read as calls per command.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CommandCalls(pub BTreeMap<String, u64>);

/// The commands that run a Lua script: every admission, pass claim and
/// hold-budget claim of stockd is one (`src/redis/scripts.rs`).
const SCRIPT_COMMANDS: [&str; 4] = ["evalsha", "eval", "evalsha_ro", "eval_ro"];
/// What reading the counters itself adds between two readings: the `INFO`
/// of the later one and its connection's handshake — not stockd's.
const READING_COMMANDS: [&str; 3] = ["info", "hello", "client|setinfo"];

impl CommandCalls {
    fn parse(info: &str) -> Self {
        let calls = info
            .lines()
            .filter_map(|line| {
                let (name, rest) = line.strip_prefix("cmdstat_")?.split_once(':')?;
                let calls = rest.split("calls=").nth(1)?.split(',').next()?;
                Some((name.to_ascii_lowercase(), calls.parse().ok()?))
            })
            .collect();
        Self(calls)
    }

    /// Calls per command made since `before` (commands with none left out),
    /// without the readings' own `INFO`.
    pub fn since(&self, before: &CommandCalls) -> CommandCalls {
        let delta = (self.0.iter())
            .filter(|(name, _)| !READING_COMMANDS.contains(&name.as_str()))
            .map(|(name, n)| (name.clone(), n - before.0.get(name).copied().unwrap_or(0)))
            .filter(|(_, n)| *n > 0)
            .collect();
        CommandCalls(delta)
    }

    /// Every call counted.
    pub fn total(&self) -> u64 {
        self.0.values().sum()
    }

    /// Calls that ran a script (an admission, a claim).
    pub fn scripts(&self) -> u64 {
        (self.0.iter())
            .filter(|(name, _)| SCRIPT_COMMANDS.contains(&name.as_str()))
            .map(|(_, n)| n)
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::CommandCalls;

    const BEFORE: &str = "# Commandstats\r\n\
        cmdstat_evalsha:calls=10,usec=50,usec_per_call=5.00,rejected_calls=0,failed_calls=0\r\n\
        cmdstat_info:calls=3,usec=30,usec_per_call=10.00,rejected_calls=0,failed_calls=0\r\n";
    const AFTER: &str = "# Commandstats\r\n\
        cmdstat_evalsha:calls=14,usec=70,usec_per_call=5.00,rejected_calls=0,failed_calls=0\r\n\
        cmdstat_xrange:calls=2,usec=4,usec_per_call=2.00,rejected_calls=0,failed_calls=0\r\n\
        cmdstat_info:calls=4,usec=40,usec_per_call=10.00,rejected_calls=0,failed_calls=0\r\n";

    /// The delta counts each command's new calls, scripts apart, and leaves
    /// out the `INFO` that read the counters.
    #[test]
    fn the_delta_counts_new_calls_and_not_the_reading_itself() {
        let delta = CommandCalls::parse(AFTER).since(&CommandCalls::parse(BEFORE));
        assert_eq!(delta.scripts(), 4);
        assert_eq!(delta.total(), 6);
        assert!(!delta.0.contains_key("info"), "{delta:?}");
    }
}
