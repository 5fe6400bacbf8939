//! Ports for private servers the tests start (redis-server, mariadbd,
//! RabbitMQ), shared by the `it` and `chaos` test binaries.
//!
//! Why not `bind(127.0.0.1:0)` and release: that hands out a port from the
//! kernel's ephemeral range, the same range every outbound connection of every
//! test takes its local port from. Between the release and the server's own
//! bind (seconds, for RabbitMQ) a client connection elsewhere in the suite
//! could take the port, and the test then talks to the wrong peer (seen once:
//! a TLS handshake answered by a plain-text server). Below the ephemeral range
//! only explicit binds compete, and a random pick checked by a bind makes two
//! tests choosing at once unlikely to collide. A port is handed out at most
//! once per test process: a server that has its port but has not bound it yet
//! (RabbitMQ binds its distribution port seconds after its start; a server in
//! a network namespace binds where this check cannot see) is never given
//! the same port again (seen once: chaos s20's RabbitMQ found its
//! distribution port taken, `dist_port_already_used … not_erlang`).

use std::collections::HashSet;
use std::net::TcpListener;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// Every port this process handed out.
static GIVEN: Mutex<Option<HashSet<u16>>> = Mutex::new(None);

/// Lowest port handed out (above the well-known and most registered ports).
const LOW: u16 = 20_000;

/// Start of the kernel's ephemeral range (32768 when it cannot be read).
fn ephemeral_start() -> u16 {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(32_768)
}

/// A pseudo-random number: clock, pid and a counter through SipHash.
fn pick() -> u64 {
    use std::hash::{Hash, Hasher};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut h = std::collections::hash_map::DefaultHasher::new();
    std::time::SystemTime::now().hash(&mut h);
    std::process::id().hash(&mut h);
    COUNTER.fetch_add(1, Ordering::Relaxed).hash(&mut h);
    h.finish()
}

/// A loopback TCP port that is free now and outside the ephemeral range.
pub fn free_port() -> u16 {
    let high = ephemeral_start().max(LOW + 1_000);
    let span = u64::from(high - LOW);
    for _ in 0..1_000 {
        let port = LOW + (pick() % span) as u16;
        let mut given = GIVEN.lock().unwrap_or_else(|e| e.into_inner());
        let given = given.get_or_insert_with(HashSet::new);
        if !given.contains(&port) && TcpListener::bind(("127.0.0.1", port)).is_ok() {
            given.insert(port);
            return port;
        }
    }
    panic!("no free loopback port in {LOW}..{high} after 1,000 tries");
}
