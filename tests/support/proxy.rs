//! `FaultProxy`: a TCP proxy in front of a server (a shared MariaDB, Redis or
//! RabbitMQ in the `it` binary, a private MariaDB pair in the `chaos` binary)
//! that a test can take down, freeze or re-point, so a dependency outage or a
//! failover is tested without touching the shared servers other tests use.
//!
//! - `Pass`: bytes flow both ways.
//! - `Down`: every open connection is cut and new ones are closed at once —
//!   what a client sees when the server was killed (connection refused/reset).
//! - `Frozen`: connections stay open but no byte moves — a SIGSTOPped server
//!   or a partition without RST. New connections are accepted and hang too.
//! - [`FaultProxy::retarget`]: new connections go to another upstream and the
//!   open ones are cut, as an operator's VIP move (or ProxySQL's switch to a
//!   promoted replica) does: no client keeps talking to the old server.
//!
//! Shared by both test binaries (`#[path]`), each of which uses a part.

#![allow(dead_code)]

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Pass = 0,
    Down = 1,
    Frozen = 2,
}

pub struct FaultProxy {
    pub port: u16,
    mode: Arc<AtomicU8>,
    /// Where new connections go ("127.0.0.1:3306"); read once per connection.
    upstream: Arc<Mutex<String>>,
    /// Cancelled to cut every open connection (going `Down`).
    generation: Arc<Mutex<CancellationToken>>,
    stop: CancellationToken,
}

/// Pause of a frozen pump between looks at the mode.
const FROZEN_POLL: Duration = Duration::from_millis(20);

impl FaultProxy {
    /// Listens on a free loopback port and forwards to `target` ("127.0.0.1:3306").
    pub async fn start(target: &str) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let proxy = Self {
            port,
            mode: Arc::new(AtomicU8::new(Mode::Pass as u8)),
            upstream: Arc::new(Mutex::new(target.to_string())),
            generation: Arc::new(Mutex::new(CancellationToken::new())),
            stop: CancellationToken::new(),
        };
        tokio::spawn(proxy.accept_loop(listener));
        proxy
    }

    /// Accepts clients until the proxy is dropped; each gets its own pair of
    /// pumps to the upstream of the moment.
    fn accept_loop(&self, listener: TcpListener) -> impl std::future::Future<Output = ()> {
        let (mode, upstream) = (self.mode.clone(), self.upstream.clone());
        let (generation, stop) = (self.generation.clone(), self.stop.clone());
        async move {
            loop {
                let accepted = tokio::select! {
                    a = listener.accept() => a,
                    _ = stop.cancelled() => return,
                };
                let Ok((client, _)) = accepted else { continue };
                if mode.load(Ordering::SeqCst) == Mode::Down as u8 {
                    drop(client);
                    continue;
                }
                let cut = generation.lock().unwrap().clone();
                let target = upstream.lock().unwrap().clone();
                tokio::spawn(forward(client, target, mode.clone(), cut));
            }
        }
    }

    pub fn set(&self, mode: Mode) {
        self.mode.store(mode as u8, Ordering::SeqCst);
        if mode == Mode::Down {
            self.cut_open_connections();
        }
    }

    /// Sends new connections to `target` and cuts every open one (they were
    /// talking to the old upstream).
    pub fn retarget(&self, target: &str) {
        *self.upstream.lock().unwrap() = target.to_string();
        self.cut_open_connections();
    }

    /// The upstream new connections go to.
    pub fn upstream(&self) -> String {
        self.upstream.lock().unwrap().clone()
    }

    fn cut_open_connections(&self) {
        let mut generation = self.generation.lock().unwrap();
        generation.cancel();
        *generation = CancellationToken::new();
    }

    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.stop.cancel();
        self.generation.lock().unwrap().cancel();
    }
}

/// One proxied connection: both directions pumped until either side closes
/// or `cut` fires. An upstream that refuses closes the client at once.
async fn forward(client: TcpStream, target: String, mode: Arc<AtomicU8>, cut: CancellationToken) {
    let Ok(server) = TcpStream::connect(&target).await else {
        return;
    };
    let (cr, cw) = client.into_split();
    let (sr, sw) = server.into_split();
    tokio::select! {
        _ = pump(cr, sw, mode.clone()) => {}
        _ = pump(sr, cw, mode) => {}
        _ = cut.cancelled() => {}
    }
}

async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    mode: Arc<AtomicU8>,
) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        // The fault itself (a frozen link), not a test's wait: poll the mode.
        while mode.load(Ordering::SeqCst) == Mode::Frozen as u8 {
            tokio::time::sleep(FROZEN_POLL).await;
        }
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        // Frozen after the read: hold the bytes (the fault, as above).
        while mode.load(Ordering::SeqCst) == Mode::Frozen as u8 {
            tokio::time::sleep(FROZEN_POLL).await;
        }
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}
