//! `scripts_loaded` (the `/readyz` check) against a private redis-server,
//! whose script cache only this test flushes and fills: it holds only when
//! every script of the registry is cached, and `load_scripts` restores it.

use deadpool_redis::redis;
use stockd::redis::scripts::{self, LuaScript};
use stockd::redis::RedisStore;

use crate::helpers::{test_settings, PrivateRedis, TestOptions};

/// A store of its own on the private server `redis`.
fn store_on(redis: &PrivateRedis) -> RedisStore {
    let settings = test_settings(
        "scripts",
        &TestOptions {
            redis_url: Some(redis.url.clone()),
            ..TestOptions::default()
        },
    );
    RedisStore::new(&settings.redis, 60).unwrap()
}

/// A plain connection to the private server, beside the store's.
async fn admin(redis: &PrivateRedis) -> redis::aio::MultiplexedConnection {
    let client = redis::Client::open(redis.url.as_str()).unwrap();
    client.get_multiplexed_async_connection().await.unwrap()
}

async fn script_flush(conn: &mut redis::aio::MultiplexedConnection) {
    let _: () = redis::cmd("SCRIPT")
        .arg("FLUSH")
        .query_async(conn)
        .await
        .unwrap();
}

/// `SCRIPT LOAD` of every registered script but `left_out`.
async fn load_all_but(conn: &mut redis::aio::MultiplexedConnection, left_out: &LuaScript) {
    for script in scripts::ALL.iter().filter(|s| s.name != left_out.name) {
        let sha = script.prepare_invoke().load_async(conn).await.unwrap();
        assert_eq!(sha, script.sha());
    }
}

/// Loaded at start-up, `scripts_loaded` holds; a `SCRIPT FLUSH` makes it
/// false; missing any single script keeps it false; `load_scripts` makes it
/// true again.
#[tokio::test]
async fn scripts_loaded_holds_only_while_redis_caches_every_registered_script() {
    let redis = PrivateRedis::start().await;
    let store = store_on(&redis);
    let mut conn = admin(&redis).await;
    assert!(!store.scripts_loaded().await.unwrap(), "a fresh server");

    store.load_scripts().await.unwrap();
    assert!(store.scripts_loaded().await.unwrap(), "after load_scripts");

    script_flush(&mut conn).await;
    assert!(!store.scripts_loaded().await.unwrap(), "after SCRIPT FLUSH");

    for left_out in scripts::ALL {
        script_flush(&mut conn).await;
        load_all_but(&mut conn, left_out).await;
        assert!(
            !store.scripts_loaded().await.unwrap(),
            "{} is not cached, yet scripts_loaded holds",
            left_out.name
        );
    }

    store.load_scripts().await.unwrap();
    assert!(store.scripts_loaded().await.unwrap(), "loaded again");
}
