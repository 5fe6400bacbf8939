//! The one registry of the Lua scripts in `src/redis/lua/`: each is declared
//! here once, with its name and the shared helpers it uses, and every caller
//! takes it from here.
//!
//! Why one place: `RedisStore::load_scripts` (start-up) and
//! `RedisStore::scripts_loaded` (`/readyz`) must cover every script, and a
//! list kept beside scattered declarations drifts (it once covered 3 of 13).
//! [`ALL`] is that list; a unit test below fails when a `.lua` file in the
//! folder is missing from it, or when a name does not match its source.
//!
//! Shared helpers: Lua in Redis cannot `require`, so a rule that several
//! scripts apply (the sold-out marker, the buyer's limit and quota, a held
//! line's fit and record) lives once in `lua/lib/` and is joined ahead of
//! each script that names it, when the script is first used: the text Redis
//! runs is [`LuaScript::text`] (the script's `#!lua` line, the helpers, then
//! the rest of the script). Why a join and not Redis Functions:
//! docs/architecture.md, "Where each rule lives".

use std::ops::Deref;
use std::sync::OnceLock;

use deadpool_redis::redis::Script;

/// The shared helpers of `lua/lib/`, each a set of `local function`s.
mod lib {
    /// The sold-out marker: set, clear, tell (`lua/lib/soldout.lua`).
    pub const SOLDOUT: &str = include_str!("lua/lib/soldout.lua");
    /// The buyer's limit and quota give-back (`lua/lib/buyer.lua`).
    pub const BUYER: &str = include_str!("lua/lib/buyer.lua");
    /// A held line: its fit, its record, a batch's writes of one SKU
    /// (`lua/lib/hold.lua`); calls the two above, so joined after them.
    pub const HOLD: &str = include_str!("lua/lib/hold.lua");
    /// A pass buys once: who has it, and keeping it (`lua/lib/pass.lua`).
    pub const PASS: &str = include_str!("lua/lib/pass.lua");
    /// Every helper, in the order a script joins them (a helper calls only
    /// those before it).
    #[cfg(test)]
    pub const ALL: [&str; 4] = [SOLDOUT, BUYER, HOLD, PASS];
}

/// One Lua script: its name (the file stem in `src/redis/lua/`), its source
/// and helpers (compiled in), the joined text and the [`Script`] (its SHA1),
/// built once on first use.
pub struct LuaScript {
    /// The file stem, e.g. `reserve` for `lua/reserve.lua`.
    pub name: &'static str,
    /// The script's own file, as `include_str!` read it at build time.
    source: &'static str,
    /// The `lua/lib/` helpers joined ahead of it, in this order.
    helpers: &'static [&'static str],
    /// What Redis runs: built on first use (joining is not `const`).
    text: OnceLock<String>,
    /// Built on first use: hashing the text is not `const`.
    script: OnceLock<Script>,
}

impl LuaScript {
    const fn new(name: &'static str, source: &'static str) -> Self {
        Self::with(name, source, &[])
    }

    const fn with(
        name: &'static str,
        source: &'static str,
        helpers: &'static [&'static str],
    ) -> Self {
        Self {
            name,
            source,
            helpers,
            text: OnceLock::new(),
            script: OnceLock::new(),
        }
    }

    /// The script's SHA1, as `EVALSHA` and `SCRIPT EXISTS` name it.
    pub fn sha(&self) -> &str {
        self.get_hash()
    }

    /// The text Redis runs: the source with its helpers joined in.
    pub fn text(&self) -> &str {
        self.text.get_or_init(|| join(self.source, self.helpers))
    }
}

/// The source's shebang line (`#!lua`, which must stay first: it makes Redis
/// refuse the whole script when out of memory), then each helper, then the
/// rest of the source. A script without helpers is its source unchanged.
fn join(source: &str, helpers: &[&str]) -> String {
    if helpers.is_empty() {
        return source.to_string();
    }
    let (shebang, rest) = if source.starts_with("#!") {
        source.split_at(source.find('\n').map_or(source.len(), |i| i + 1))
    } else {
        ("", source)
    };
    let mut text =
        String::with_capacity(source.len() + helpers.iter().map(|h| h.len() + 1).sum::<usize>());
    text.push_str(shebang);
    for helper in helpers {
        text.push_str(helper);
        text.push('\n');
    }
    text.push_str(rest);
    text
}

/// The registered script of that name (the file stem), if any.
pub fn named(name: &str) -> Option<&'static LuaScript> {
    ALL.iter().copied().find(|script| script.name == name)
}

impl Deref for LuaScript {
    type Target = Script;

    fn deref(&self) -> &Script {
        self.script.get_or_init(|| Script::new(self.text()))
    }
}

/// Admission: one atomic reservation (`reservation.rs`).
pub static RESERVE: LuaScript = LuaScript::with(
    "reserve",
    include_str!("lua/reserve.lua"),
    &[lib::SOLDOUT, lib::BUYER, lib::HOLD, lib::PASS],
);
/// Admission of a whole order on a standalone Redis (`orders.rs`).
pub static ORDER: LuaScript = LuaScript::with(
    "order",
    include_str!("lua/order.lua"),
    &[lib::SOLDOUT, lib::BUYER, lib::HOLD],
);
/// An order's final status onto its record (`orders.rs`).
pub static ORDER_MARK: LuaScript = LuaScript::new("order_mark", include_str!("lua/order_mark.lua"));
/// An order's extension onto its record (`orders.rs`).
pub static ORDER_EXTEND: LuaScript =
    LuaScript::new("order_extend", include_str!("lua/order_extend.lua"));
/// An order held line by line: the intent (`order_intents.rs`).
pub static ORDER_INTENT: LuaScript =
    LuaScript::new("order_intent", include_str!("lua/order_intent.lua"));
/// An order held line by line: one line's hold (`order_holds.rs`).
pub static ORDER_HOLD: LuaScript = LuaScript::with(
    "order_hold",
    include_str!("lua/order_hold.lua"),
    &[lib::SOLDOUT, lib::BUYER, lib::HOLD],
);
/// An order held line by line: the commit (`order_intents.rs`).
pub static ORDER_COMMIT: LuaScript =
    LuaScript::new("order_commit", include_str!("lua/order_commit.lua"));
/// An order held line by line: the abort of an attempt (`order_intents.rs`).
pub static ORDER_ABORT: LuaScript =
    LuaScript::new("order_abort", include_str!("lua/order_abort.lua"));
/// An order held line by line: one line's undo (`order_holds.rs`).
pub static ORDER_RELEASE: LuaScript = LuaScript::with(
    "order_release",
    include_str!("lua/order_release.lua"),
    &[lib::SOLDOUT, lib::BUYER],
);
/// An order held line by line: a committed line settled (`order_holds.rs`).
pub static ORDER_SETTLE: LuaScript = LuaScript::with(
    "order_settle",
    include_str!("lua/order_settle.lua"),
    &[lib::SOLDOUT],
);
/// An order held line by line: the sweeper's re-commit of an intent MySQL
/// holds as an order (`order_recommit.rs`).
pub static ORDER_RECOMMIT: LuaScript =
    LuaScript::new("order_recommit", include_str!("lua/order_recommit.lua"));
/// Loading or restocking a SKU (`sku.rs`).
pub static LOAD_SKU: LuaScript = LuaScript::with(
    "load_sku",
    include_str!("lua/load_sku.lua"),
    &[lib::SOLDOUT],
);
/// Keeping or giving back a cut taken before its commit (`sku.rs`).
pub static CUT_SETTLE: LuaScript = LuaScript::with(
    "cut_settle",
    include_str!("lua/cut_settle.lua"),
    &[lib::SOLDOUT],
);
/// Confirm, cancel or expire a reservation (`reservation.rs`).
pub static FINISH: LuaScript = LuaScript::with(
    "finish",
    include_str!("lua/finish.lua"),
    &[lib::SOLDOUT, lib::BUYER],
);
/// The Redis mirror of an extension of the time to pay (`reservation.rs`).
pub static EXTEND: LuaScript = LuaScript::new("extend", include_str!("lua/extend.lua"));
/// The reconciler's atomic read of a SKU (`drift/mod.rs`).
pub static SNAPSHOT: LuaScript = LuaScript::new("snapshot", include_str!("lua/snapshot.lua"));
/// The reconciler's compare-and-set repair (`drift/mod.rs`).
pub static ADJUST: LuaScript =
    LuaScript::with("adjust", include_str!("lua/adjust.lua"), &[lib::SOLDOUT]);
/// The warm-up write (`drift/mod.rs`).
pub static WARMUP: LuaScript =
    LuaScript::with("warmup", include_str!("lua/warmup.lua"), &[lib::SOLDOUT]);
/// A request id admitted twice (`readmit.rs`).
pub static READMIT: LuaScript =
    LuaScript::with("readmit", include_str!("lua/readmit.lua"), &[lib::SOLDOUT]);
/// The buyer side of a SKU rebuilt from MySQL (`drift/rebuild.rs`).
pub static REBUILD: LuaScript = LuaScript::with(
    "rebuild",
    include_str!("lua/rebuild.lua"),
    &[lib::SOLDOUT, lib::BUYER],
);
/// Emptying a dry bucket (`buckets/refill.rs`).
pub static DRAIN: LuaScript =
    LuaScript::with("drain", include_str!("lua/drain.lua"), &[lib::SOLDOUT]);
/// Creating a bucket (`buckets/setup.rs`).
pub static BUCKET_INIT: LuaScript =
    LuaScript::new("bucket_init", include_str!("lua/bucket_init.lua"));
/// The home slot taking a new layout (`buckets/resplit.rs`).
pub static RESPLIT: LuaScript =
    LuaScript::with("resplit", include_str!("lua/resplit.lua"), &[lib::SOLDOUT]);
/// One slot's read for the double read of a refill (`buckets/quiet.rs`).
pub static STOCK_PROBE: LuaScript =
    LuaScript::new("stock_probe", include_str!("lua/stock_probe.lua"));
/// A transfer's debit step (`buckets/transfer.rs`).
pub static TRANSFER_DEBIT: LuaScript = LuaScript::with(
    "transfer_debit",
    include_str!("lua/transfer_debit.lua"),
    &[lib::SOLDOUT],
);
/// A transfer's credit step (`buckets/transfer.rs`).
pub static TRANSFER_CREDIT: LuaScript = LuaScript::with(
    "transfer_credit",
    include_str!("lua/transfer_credit.lua"),
    &[lib::SOLDOUT],
);
/// An admission pass claimed for a hold (`pass_claims.rs`).
pub static PASS_CLAIM: LuaScript = LuaScript::with(
    "pass_claim",
    include_str!("lua/pass_claim.lua"),
    &[lib::PASS],
);
/// A refused hold's pass given back (`pass_claims.rs`).
pub static PASS_RELEASE: LuaScript =
    LuaScript::new("pass_release", include_str!("lua/pass_release.lua"));

/// A hold's claim on its buyer's hold budget (`budget.rs`).
pub static BUDGET_CLAIM: LuaScript =
    LuaScript::new("budget_claim", include_str!("lua/budget_claim.lua"));
/// The give-back of a hold budget's claims (`budget.rs`).
pub static BUDGET_GIVE_BACK: LuaScript =
    LuaScript::new("budget_give_back", include_str!("lua/budget_give_back.lua"));

/// A SKU's sale terms onto one of its hashes (`sku_terms.rs`).
pub static SALE_TERMS: LuaScript = LuaScript::new("sale_terms", include_str!("lua/sale_terms.lua"));

/// Every script: what `load_scripts` loads and `scripts_loaded` checks.
pub static ALL: [&LuaScript; 31] = [
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
    &BUDGET_CLAIM,
    &BUDGET_GIVE_BACK,
    &SALE_TERMS,
    &PASS_CLAIM,
    &PASS_RELEASE,
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

    /// The `local function` names a helper defines.
    fn functions_of(helper: &str) -> Vec<&str> {
        helper
            .lines()
            .filter_map(|line| line.strip_prefix("local function "))
            .filter_map(|rest| rest.split('(').next())
            .collect()
    }

    /// Whether `code` calls one of `helper`'s functions.
    fn calls(code: &str, helper: &str) -> bool {
        functions_of(helper)
            .iter()
            .any(|f| code.contains(&format!("{f}(")))
    }

    /// A script that calls a helper's function, itself or through another
    /// helper it joins, joins that helper, and one that joins a helper calls
    /// it: a missing helper would fail in Redis only when the call is reached
    /// ("attempt to call a nil value"). A helper's own helpers come before
    /// it in the join (a `local function` sees only the locals above it).
    #[test]
    fn every_script_joins_exactly_the_helpers_it_calls() {
        for script in ALL {
            for (at, helper) in lib::ALL.iter().enumerate() {
                let first = helper.lines().next().unwrap_or_default();
                let by_helper = script
                    .helpers
                    .iter()
                    .any(|h| h != helper && calls(h, helper));
                let called = calls(script.source, helper) || by_helper;
                let joined = script.helpers.contains(helper);
                assert_eq!(
                    called, joined,
                    "{}.lua and the helper `{first}`",
                    script.name
                );
                for later in &lib::ALL[at + 1..] {
                    assert!(
                        !calls(helper, later),
                        "`{first}` calls a helper joined after it"
                    );
                }
            }
            let order: Vec<usize> = script
                .helpers
                .iter()
                .map(|h| lib::ALL.iter().position(|l| l == h).unwrap())
                .collect();
            assert!(
                order.windows(2).all(|w| w[0] < w[1]),
                "{}.lua joins its helpers out of lib::ALL's order",
                script.name
            );
        }
    }

    /// The `#!lua` line stays first (Redis reads flags only there), the
    /// helpers come before the script's own code, and the text parses as one
    /// chunk of locals: no helper defines a name twice.
    #[test]
    fn a_joined_script_keeps_its_shebang_first_and_its_helpers_before_its_code() {
        let text = RESERVE.text();
        assert!(text.starts_with("#!lua\n"), "{}", &text[..40]);
        let helper_at = text.find("local function soldout_set(").unwrap();
        let code_at = text.find("local sku_key, outbox_key").unwrap();
        assert!(helper_at < code_at);
        assert_eq!(text.lines().filter(|l| l.starts_with("#!")).count(), 1);
        let mut names: Vec<&str> = lib::ALL.iter().flat_map(|h| functions_of(h)).collect();
        let all = names.len();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), all, "a helper function is defined twice");
        assert_eq!(join("local x = 1\n", &[]), "local x = 1\n");
        assert_eq!(
            join("#!lua\nlocal x = 1\n", &["local y = 2"]),
            "#!lua\nlocal y = 2\nlocal x = 1\n"
        );
    }

    /// Distinct sources give distinct SHAs, so `SCRIPT EXISTS` checks each.
    #[test]
    fn every_script_has_its_own_sha() {
        let shas: BTreeSet<String> = all_shas().into_iter().collect();
        assert_eq!(shas.len(), ALL.len());
    }
}
