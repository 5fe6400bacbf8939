//! "stockd nodes seen": every process writes a heartbeat into one Redis hash
//! (field `host:pid`, value Redis' clock in ms) from its gauge loop and
//! whenever it gathers an overview; the console lists the fields heard from
//! recently and removes older ones, so the hash stays small. The commands and
//! the key live in the adapter (`redis/nodes.rs`, `redis/keys.rs`); this file
//! keeps the view: who counts as gone, the order, the cap.

use std::collections::HashMap;

use serde::Serialize;

use crate::redis::{RedisError, RedisStore};

/// A node not heard from for this long is forgotten (three gauge refreshes at
/// the default `metrics.refresh_secs` of 5, plus slack).
pub const FORGET_AFTER_MS: u64 = 20_000;
/// Nodes listed at most (the hash is trimmed by age, not by count).
pub const NODES_MAX: usize = 64;

/// A process that wrote a heartbeat recently.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NodeSeen {
    /// `host:pid`.
    pub name: String,
    /// Milliseconds since its last heartbeat (Redis' clock).
    pub age_ms: u64,
}

/// This process' name among the nodes: `host:pid`.
pub fn this_node() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "localhost".into());
    format!("{host}:{}", std::process::id())
}

/// Records that this process is alive. The hash expires when every node went
/// quiet; single members are dropped by [`seen`].
pub async fn heartbeat(redis: &RedisStore) -> Result<(), RedisError> {
    redis.nodes().beat(&this_node(), FORGET_AFTER_MS).await
}

/// The nodes heard from within [`FORGET_AFTER_MS`], most recent first; older
/// members are removed.
pub async fn seen(redis: &RedisStore) -> Result<Vec<NodeSeen>, RedisError> {
    let (now_ms, all) = redis.nodes().all().await?;
    let (live, gone) = split_by_age(all, now_ms);
    redis.nodes().forget(&gone).await?;
    Ok(live)
}

/// `(heard from recently, most recent first and at most NODES_MAX; forgotten)`.
fn split_by_age(all: HashMap<String, u64>, now_ms: u64) -> (Vec<NodeSeen>, Vec<String>) {
    let mut live = Vec::new();
    let mut gone = Vec::new();
    for (name, at_ms) in all {
        let age_ms = now_ms.saturating_sub(at_ms);
        if age_ms > FORGET_AFTER_MS {
            gone.push(name);
        } else {
            live.push(NodeSeen { name, age_ms });
        }
    }
    live.sort_by(|a, b| a.age_ms.cmp(&b.age_ms).then_with(|| a.name.cmp(&b.name)));
    live.truncate(NODES_MAX);
    (live, gone)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quiet_nodes_are_forgotten_and_the_rest_listed_freshest_first() {
        let now = 100_000;
        let all = HashMap::from([
            ("a:1".to_string(), now - 3_000),
            ("b:2".to_string(), now - 10),
            ("c:3".to_string(), now - FORGET_AFTER_MS - 1),
        ]);
        let (live, gone) = split_by_age(all, now);
        let names: Vec<&str> = live.iter().map(|n| n.name.as_str()).collect();
        assert_eq!(names, ["b:2", "a:1"]);
        assert_eq!(live[1].age_ms, 3_000);
        assert_eq!(gone, ["c:3"]);
    }
}
