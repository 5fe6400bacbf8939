//! The bucket scripts shared by several files of this module.

use std::sync::LazyLock;

use deadpool_redis::redis::Script;

pub(super) static DRAIN: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../lua/drain.lua")));
pub(super) static BUCKET_INIT: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../lua/bucket_init.lua")));
pub(super) static RESPLIT: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../lua/resplit.lua")));
