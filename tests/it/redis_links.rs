//! Which Redis connection a call uses: each single-threaded runtime (an HTTP
//! worker) its own, opened once and given up with its runtime; a
//! multi-threaded runtime the process's shared one. Counted on a private
//! redis-server, whose `connected_clients` only this test moves.

use std::sync::Arc;
use std::time::Duration;

use deadpool_redis::redis;

use crate::helpers::private_redis::info;
use crate::helpers::{test_settings, PrivateRedis, TestOptions};

/// Client connections of the server at `url`, not counting the one that asks.
async fn connected_clients(url: &str) -> u64 {
    let count = info(url, "clients")
        .await
        .lines()
        .find_map(|l| l.strip_prefix("connected_clients:"))
        .and_then(|v| v.trim().parse::<u64>().ok())
        .expect("INFO clients has connected_clients");
    count - 1
}

/// `connected_clients` once it settles on `want` (a closed socket takes Redis
/// a moment to notice), or the last value seen.
async fn settles_on(url: &str, want: u64) -> u64 {
    let mut seen = connected_clients(url).await;
    for _ in 0..50 {
        if seen == want {
            break;
        }
        // Poll period of the wait above, not a fixed wait.
        tokio::time::sleep(Duration::from_millis(20)).await;
        seen = connected_clients(url).await;
    }
    seen
}

/// A store of its own on the private server `redis`.
fn store_on(redis: &PrivateRedis, id: &str) -> Arc<stockd::redis::RedisStore> {
    let settings = test_settings(
        id,
        &TestOptions {
            redis_url: Some(redis.url.clone()),
            ..TestOptions::default()
        },
    );
    Arc::new(stockd::redis::RedisStore::new(&settings.redis, 60).unwrap())
}

/// Runs `f` on a new current-thread runtime on this thread.
fn on_current_thread<T>(f: impl std::future::Future<Output = T>) -> T {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(f)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_single_threaded_runtime_has_its_own_connection_and_gives_it_up_with_the_runtime() {
    let redis = PrivateRedis::start().await;
    let url = redis.url.clone();
    let store = store_on(&redis, "links");
    assert_eq!(connected_clients(&url).await, 0);

    // The multi-threaded runtime: the shared connection, opened once.
    store.ping().await.unwrap();
    store.ping().await.unwrap();
    assert_eq!(settles_on(&url, 1).await, 1, "one shared connection");

    // A thread with a single-threaded runtime (an HTTP worker) opens its own
    // and keeps using it; a second such thread opens another.
    let worker = {
        let store = store.clone();
        std::thread::spawn(move || {
            on_current_thread(async {
                store.ping().await.unwrap();
                store.ping().await.unwrap();
            });
            // The runtime is gone and its connection with it; a new runtime
            // on the same thread must open a new one, not reuse a connection
            // whose driver died with the old runtime.
            on_current_thread(async { store.ping().await }).expect("a new runtime opens anew");
        })
    };
    worker.join().unwrap();
    let other = {
        let store = store.clone();
        let url = url.clone();
        std::thread::spawn(move || {
            on_current_thread(async {
                store.ping().await.unwrap();
                settles_on(&url, 2).await
            })
        })
    };
    assert_eq!(
        other.join().unwrap(),
        2,
        "the shared connection and this worker's own (the first worker's closed with its thread)"
    );
    assert_eq!(
        settles_on(&url, 1).await,
        1,
        "only the shared connection is left"
    );
}

/// A Redis restart breaks every worker's connection at once. The first worker
/// to find its own broken retires the others', so each of them opens a new
/// one on its next call instead of failing a request of its own first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_worker_finding_its_connection_broken_retires_every_workers() {
    use std::sync::mpsc;

    let redis = PrivateRedis::start().await;
    let store = store_on(&redis, "links_broken");
    // A worker: opens its connection, says so, then pings once more when told.
    let worker = |store: Arc<stockd::redis::RedisStore>| {
        let (ready_tx, ready_rx) = mpsc::channel::<()>();
        let (go_tx, go_rx) = mpsc::channel::<()>();
        let handle = std::thread::spawn(move || {
            on_current_thread(async {
                store.ping().await.expect("first ping");
                ready_tx.send(()).unwrap();
                go_rx.recv().unwrap();
                store.ping().await.is_ok()
            })
        });
        ready_rx.recv().unwrap();
        (go_tx, handle)
    };
    let (go_first, first) = worker(store.clone());
    let (go_second, second) = worker(store.clone());

    // Every client connection goes at once, as in a restart.
    let client = redis::Client::open(redis.url.as_str()).unwrap();
    let mut admin = client.get_multiplexed_async_connection().await.unwrap();
    let killed: i64 = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("TYPE")
        .arg("normal")
        .arg("SKIPME")
        .arg("yes")
        .query_async(&mut admin)
        .await
        .unwrap();
    assert_eq!(killed, 2, "both workers' connections were open");

    go_first.send(()).unwrap();
    assert!(
        !first.join().unwrap(),
        "the first worker's call finds its connection broken"
    );
    go_second.send(()).unwrap();
    assert!(
        second.join().unwrap(),
        "the second worker opened a new connection instead of failing too"
    );
}

/// Reconnecting leaves nothing behind on the worker's runtime: the retired
/// connection's driver and its guard task both end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retired_connection_leaves_no_task_behind() {
    let redis = PrivateRedis::start().await;
    let store = store_on(&redis, "links_tasks");
    let url = redis.url.clone();
    let (after_open, after_reconnects) = std::thread::spawn(move || {
        on_current_thread(async {
            store.ping().await.unwrap();
            let tasks = || {
                tokio::runtime::Handle::current()
                    .metrics()
                    .num_alive_tasks()
            };
            let after_open = tasks();
            // A blocking connection of its own: it adds no task to this runtime.
            let mut admin = redis::Client::open(url.as_str())
                .unwrap()
                .get_connection()
                .unwrap();
            for _ in 0..3 {
                let _: i64 = redis::cmd("CLIENT")
                    .arg("KILL")
                    .arg("TYPE")
                    .arg("normal")
                    .arg("SKIPME")
                    .arg("yes")
                    .query(&mut admin)
                    .unwrap();
                assert!(
                    store.ping().await.is_err(),
                    "the killed connection fails once"
                );
                store.ping().await.expect("a new connection");
            }
            // Retired tasks end on their next poll.
            for _ in 0..50 {
                if tasks() == after_open {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            (after_open, tasks())
        })
    })
    .join()
    .unwrap();
    assert_eq!(
        after_reconnects, after_open,
        "tasks left behind by reconnects"
    );
}
