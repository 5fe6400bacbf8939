//! The one registry of the Lua scripts in `src/redis/lua/`: each is declared
//! here once, with its name, and every caller takes it from here.
//!
//! Why one place: `RedisStore::load_scripts` (start-up) and
//! `RedisStore::scripts_loaded` (`/readyz`) must cover every script, and a
//! list kept beside scattered declarations drifts (it once covered 3 of 13).
//! [`ALL`] is that list; a unit test below fails when a `.lua` file in the
//! folder is missing from it, or when a name does not match its source.

use std::ops::Deref;
use std::sync::OnceLock;

use deadpool_redis::redis::Script;

/// One Lua script: its name (the file stem in `src/redis/lua/`), its source
/// (compiled in) and the [`Script`] (its SHA1), built once on first use.
pub struct LuaScript {
    /// The file stem, e.g. `reserve` for `lua/reserve.lua`.
    pub name: &'static str,
    /// The script text, as `include_str!` read it at build time.
    source: &'static str,
    /// Built on first use: hashing the source is not `const`.
    script: OnceLock<Script>,
}

impl LuaScript {
    const fn new(name: &'static str, source: &'static str) -> Self {
        Self {
            name,
            source,
            script: OnceLock::new(),
        }
    }

    /// The script's SHA1, as `EVALSHA` and `SCRIPT EXISTS` name it.
    pub fn sha(&self) -> &str {
        self.get_hash()
    }
}

impl Deref for LuaScript {
    type Target = Script;

    fn deref(&self) -> &Script {
        self.script.get_or_init(|| Script::new(self.source))
    }
}

/// Admission: one atomic reservation (`reservation.rs`).
pub static RESERVE: LuaScript = LuaScript::new("reserve", include_str!("lua/reserve.lua"));
/// Admission of a whole order on a standalone Redis (`orders.rs`).
pub static ORDER: LuaScript = LuaScript::new("order", include_str!("lua/order.lua"));
/// An order's final status onto its record (`orders.rs`).
pub static ORDER_MARK: LuaScript = LuaScript::new("order_mark", include_str!("lua/order_mark.lua"));
/// An order's extension onto its record (`orders.rs`).
pub static ORDER_EXTEND: LuaScript =
    LuaScript::new("order_extend", include_str!("lua/order_extend.lua"));
/// An order held line by line: the intent (`order_intents.rs`).
pub static ORDER_INTENT: LuaScript =
    LuaScript::new("order_intent", include_str!("lua/order_intent.lua"));
/// An order held line by line: one line's hold (`order_holds.rs`).
pub static ORDER_HOLD: LuaScript = LuaScript::new("order_hold", include_str!("lua/order_hold.lua"));
/// An order held line by line: the commit (`order_intents.rs`).
pub static ORDER_COMMIT: LuaScript =
    LuaScript::new("order_commit", include_str!("lua/order_commit.lua"));
/// An order held line by line: the abort of an attempt (`order_intents.rs`).
pub static ORDER_ABORT: LuaScript =
    LuaScript::new("order_abort", include_str!("lua/order_abort.lua"));
/// An order held line by line: one line's undo (`order_holds.rs`).
pub static ORDER_RELEASE: LuaScript =
    LuaScript::new("order_release", include_str!("lua/order_release.lua"));
/// An order held line by line: a committed line settled (`order_holds.rs`).
pub static ORDER_SETTLE: LuaScript =
    LuaScript::new("order_settle", include_str!("lua/order_settle.lua"));
/// An order held line by line: the sweeper's re-commit of an intent MySQL
/// holds as an order (`order_recommit.rs`).
pub static ORDER_RECOMMIT: LuaScript =
    LuaScript::new("order_recommit", include_str!("lua/order_recommit.lua"));
/// Loading or restocking a SKU (`sku.rs`).
pub static LOAD_SKU: LuaScript = LuaScript::new("load_sku", include_str!("lua/load_sku.lua"));
/// Keeping or giving back a cut taken before its commit (`sku.rs`).
pub static CUT_SETTLE: LuaScript = LuaScript::new("cut_settle", include_str!("lua/cut_settle.lua"));
/// Confirm, cancel or expire a reservation (`reservation.rs`).
pub static FINISH: LuaScript = LuaScript::new("finish", include_str!("lua/finish.lua"));
/// The Redis mirror of an extension of the time to pay (`reservation.rs`).
pub static EXTEND: LuaScript = LuaScript::new("extend", include_str!("lua/extend.lua"));
/// The reconciler's atomic read of a SKU (`drift/mod.rs`).
pub static SNAPSHOT: LuaScript = LuaScript::new("snapshot", include_str!("lua/snapshot.lua"));
/// The reconciler's compare-and-set repair (`drift/mod.rs`).
pub static ADJUST: LuaScript = LuaScript::new("adjust", include_str!("lua/adjust.lua"));
/// The warm-up write (`drift/mod.rs`).
pub static WARMUP: LuaScript = LuaScript::new("warmup", include_str!("lua/warmup.lua"));
/// A request id admitted twice (`readmit.rs`).
pub static READMIT: LuaScript = LuaScript::new("readmit", include_str!("lua/readmit.lua"));
/// The buyer side of a SKU rebuilt from MySQL (`drift/rebuild.rs`).
pub static REBUILD: LuaScript = LuaScript::new("rebuild", include_str!("lua/rebuild.lua"));
/// Emptying a dry bucket (`buckets/refill.rs`).
pub static DRAIN: LuaScript = LuaScript::new("drain", include_str!("lua/drain.lua"));
/// Creating a bucket (`buckets/setup.rs`).
pub static BUCKET_INIT: LuaScript =
    LuaScript::new("bucket_init", include_str!("lua/bucket_init.lua"));
/// The home slot taking a new layout (`buckets/resplit.rs`).
pub static RESPLIT: LuaScript = LuaScript::new("resplit", include_str!("lua/resplit.lua"));
/// One slot's read for the double read of a refill (`buckets/quiet.rs`).
pub static STOCK_PROBE: LuaScript =
    LuaScript::new("stock_probe", include_str!("lua/stock_probe.lua"));
/// A transfer's debit step (`buckets/transfer.rs`).
pub static TRANSFER_DEBIT: LuaScript =
    LuaScript::new("transfer_debit", include_str!("lua/transfer_debit.lua"));
/// A transfer's credit step (`buckets/transfer.rs`).
pub static TRANSFER_CREDIT: LuaScript =
    LuaScript::new("transfer_credit", include_str!("lua/transfer_credit.lua"));

/// Every script: what `load_scripts` loads and `scripts_loaded` checks.
pub static ALL: [&LuaScript; 26] = [
    &CUT_SETTLE,
    &RESERVE,
    &ORDER,
    &ORDER_INTENT,
    &ORDER_HOLD,
    &ORDER_COMMIT,
    &ORDER_ABORT,
    &ORDER_RELEASE,
    &ORDER_SETTLE,
    &ORDER_RECOMMIT,
    &ORDER_MARK,
    &ORDER_EXTEND,
    &LOAD_SKU,
    &FINISH,
    &EXTEND,
    &SNAPSHOT,
    &ADJUST,
    &WARMUP,
    &READMIT,
    &REBUILD,
    &DRAIN,
    &BUCKET_INIT,
    &RESPLIT,
    &STOCK_PROBE,
    &TRANSFER_DEBIT,
    &TRANSFER_CREDIT,
];

/// The SHA1 of every script, in [`ALL`]'s order.
pub fn all_shas() -> Vec<String> {
    ALL.iter().map(|s| s.sha().to_string()).collect()
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;
    use std::path::Path;

    use super::*;

    /// The folder the scripts are compiled from, read at test time.
    fn lua_dir() -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("src/redis/lua")
    }

    /// A script added to `src/redis/lua/` but not to [`ALL`] (or a name left
    /// in [`ALL`] whose file is gone) fails here.
    #[test]
    fn the_registry_names_every_lua_file_in_the_folder_and_no_other() {
        let on_disk: BTreeSet<String> = std::fs::read_dir(lua_dir())
            .expect("src/redis/lua is readable")
            .map(|entry| entry.unwrap().path())
            .filter(|path| path.extension().is_some_and(|ext| ext == "lua"))
            .map(|path| path.file_stem().unwrap().to_string_lossy().into_owned())
            .collect();
        let registered: BTreeSet<String> = ALL.iter().map(|s| s.name.to_string()).collect();
        assert_eq!(registered.len(), ALL.len(), "a script is listed twice");
        assert_eq!(
            registered, on_disk,
            "left: scripts::ALL, right: src/redis/lua/*.lua; declare the new script here"
        );
    }

    /// Each name is the file its source came from: a copy-paste slip between
    /// name and `include_str!` path fails here.
    #[test]
    fn every_registered_script_is_the_source_of_the_file_it_is_named_after() {
        for script in ALL {
            let path = lua_dir().join(format!("{}.lua", script.name));
            let on_disk = std::fs::read_to_string(&path).expect("registered file exists");
            assert_eq!(script.source, on_disk, "{} differs", path.display());
        }
    }

    /// Distinct sources give distinct SHAs, so `SCRIPT EXISTS` checks each.
    #[test]
    fn every_script_has_its_own_sha() {
        let shas: BTreeSet<String> = all_shas().into_iter().collect();
        assert_eq!(shas.len(), ALL.len());
    }
}
