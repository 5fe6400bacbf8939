//! The one comparison of the two stores: one SKU read across MySQL and Redis
//! under one snapshot discipline, and its verdict. The reconciler (with the
//! warm-up's in-flight check), `stockd audit`'s per-SKU `redis_loaded` and
//! `stores_agree`, and the load generator's "Redis == MySQL after drain"
//! all read it here, so they cannot disagree on what "the stores agree"
//! means. (The chaos suite keeps an oracle of its own on purpose: it judges
//! stockd from its history of answers, not from stockd's reads.)
//!
//! Order of reads (`read.rs`): a MySQL consistent snapshot starts first (t1),
//! then one atomic Redis snapshot (t2), then the ledger statuses of Redis'
//! winning request ids are read inside the t1 snapshot. Deductions reach
//! Redis before MySQL and releases reach MySQL before Redis, so every change
//! that lands between t1 and t2 is seen as a (MySQL status, Redis status)
//! pair and counted as in flight — never as drift (`explain.rs`). When the
//! SKU has too many winners to list, the in-flight figure is an estimate
//! from Redis' `available` read before t1 and at t2.
//!
//! What stays outside: `stockd audit`'s per-record checks (`ledger_in_redis`,
//! `redis_in_ledger`, `redis_buyer_counters`, in `ops/invariants/cross.rs`)
//! ask another question — which rows, records and counters disagree, each by
//! name, over every row of the SKU and not only the winners one script may
//! list — so they walk the ledger in pages and the winners set with `SSCAN`,
//! and take a second look at each suspect instead of one snapshot.
//!
//! - `comparison`: what one comparison holds (the data the verdicts read);
//! - `read`: the reads in their order;
//! - `explain`: what in-flight work explains of the gap;
//! - `verdict`: where Redis stands, net of in flight and as read.

mod comparison;
mod explain;
mod read;
mod verdict;

pub use comparison::{CompareError, Comparison, RedisDecided, Unapplied};
pub use read::compare;
pub use verdict::{Standing, StoreVerdict};
