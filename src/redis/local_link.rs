//! One multiplexed Redis connection per single-threaded runtime (each actix
//! HTTP worker is one), so a request and its Redis round trip stay on one
//! thread.
//!
//! Why: redis-rs drives a `MultiplexedConnection` from a task spawned on the
//! runtime that opened it. Shared across the process, that task lives on one
//! thread while the HTTP workers live on others, so every reservation paid
//! two cross-thread wake-ups (worker → driver to send, driver → worker with
//! the reply): a context switch each on two shared cores, the largest item
//! of stockd's profile (docs/benchmarks-history.md, "CPU efficiency"). A worker that owns
//! its connection sends, waits and parses on its own thread, and one
//! `epoll_wait` serves its HTTP and Redis sockets alike.
//!
//! On a multi-threaded runtime (the roles' background tasks, the bench's
//! ceiling) the process-wide shared connection stays in use: its tasks move
//! between threads anyway.
//!
//! A connection outlives nothing: a guard task spawned beside it on the same
//! runtime marks it dead when that runtime shuts down (a test's runtime, a
//! stopped worker), so a thread that starts a new runtime opens a new one
//! (the guard itself ends when its connection is given up);
//! the entries of a dropped store are cleared on their thread's next lookup
//! (or with the thread); and one broken connection retires every thread's,
//! as the one shared connection did: after a Redis restart one request per
//! process fails, not one per worker.

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};

use deadpool_redis::redis::aio::MultiplexedConnection;
use deadpool_redis::redis::{AsyncConnectionConfig, Client};
use tokio::runtime::{Handle, RuntimeFlavor};

use super::RedisError;

/// Tells apart the stores of one process (the bench and the tests run several).
static NEXT_OWNER: AtomicU64 = AtomicU64::new(0);

struct Entry {
    owner: u64,
    conn: MultiplexedConnection,
    /// False once the runtime that drives `conn` has shut down.
    alive: Arc<AtomicBool>,
    /// The store's generation counter: gone once the store is dropped.
    store: Weak<AtomicU64>,
    /// The generation `conn` was opened in.
    generation: u64,
    /// Dropped with the entry: ends the guard task beside `conn`.
    _retired: tokio::sync::oneshot::Sender<()>,
}

impl Entry {
    fn usable(&self) -> bool {
        self.alive.load(Ordering::Acquire)
            && self
                .store
                .upgrade()
                .is_some_and(|current| current.load(Ordering::Acquire) == self.generation)
    }
}

thread_local! {
    static LINKS: RefCell<Vec<Entry>> = const { RefCell::new(Vec::new()) };
}

/// Opens and finds this thread's connection for one store.
pub struct LocalLinks {
    owner: u64,
    /// Moves on when any thread finds its connection broken: a Redis restart
    /// breaks every worker's at once, and each would otherwise find out by
    /// failing a request of its own. Entries of an older generation, or of a
    /// dropped store, are cleared by the next lookup on their thread.
    generation: Arc<AtomicU64>,
    client: Client,
    config: AsyncConnectionConfig,
}

/// Drops with the runtime's tasks and marks the connection beside it dead.
struct RuntimeAlive(Arc<AtomicBool>);

impl Drop for RuntimeAlive {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

impl LocalLinks {
    pub fn new(client: Client, config: AsyncConnectionConfig) -> Self {
        Self {
            owner: NEXT_OWNER.fetch_add(1, Ordering::Relaxed),
            generation: Arc::new(AtomicU64::new(0)),
            client,
            config,
        }
    }

    /// Whether the caller runs on a single-threaded runtime, where a
    /// connection of its own pays off.
    pub fn applies_here() -> bool {
        Handle::try_current().is_ok_and(|h| h.runtime_flavor() == RuntimeFlavor::CurrentThread)
    }

    /// This thread's connection, opened on first use. Call only where
    /// [`Self::applies_here`] holds.
    pub async fn get(&self) -> Result<MultiplexedConnection, RedisError> {
        if let Some(conn) = self.cached() {
            return Ok(conn);
        }
        let generation = self.generation.load(Ordering::Acquire);
        let conn = self
            .client
            .get_multiplexed_async_connection_with_config(&self.config)
            .await?;
        let alive = Arc::new(AtomicBool::new(true));
        let guard = RuntimeAlive(alive.clone());
        let (retired, entry_gone) = tokio::sync::oneshot::channel::<()>();
        // Lives as long as both the runtime and the entry do.
        tokio::spawn(async move {
            let _guard = guard;
            let _ = entry_gone.await;
        });
        Ok(LINKS.with_borrow_mut(|links| {
            // Another request of this thread may have opened one meanwhile:
            // keep the first, this one closes when dropped.
            if let Some(entry) = links.iter().find(|e| e.owner == self.owner) {
                return entry.conn.clone();
            }
            links.push(Entry {
                owner: self.owner,
                conn: conn.clone(),
                alive,
                store: Arc::downgrade(&self.generation),
                generation,
                _retired: retired,
            });
            conn
        }))
    }

    /// This thread's connection, when it has one still usable.
    pub fn cached(&self) -> Option<MultiplexedConnection> {
        LINKS.with_borrow_mut(|links| {
            links.retain(Entry::usable);
            links
                .iter()
                .find(|e| e.owner == self.owner)
                .map(|e| e.conn.clone())
        })
    }

    /// A connection broke: every thread's is given up (the next call on each
    /// opens another), this thread's at once.
    pub fn forget(&self) {
        self.generation.fetch_add(1, Ordering::AcqRel);
        LINKS.with_borrow_mut(|links| links.retain(|e| e.owner != self.owner));
    }
}
