//! Redis stalls during a phase, from `SLOWLOG`: Redis runs one command at a
//! time, so one slow script stalls every reservation behind it. A phase whose
//! p99 is far above its p50 usually has its cause listed here.
//!
//! Only entries touching the bench's key prefix and inside the phase's time
//! window count (other users share this Redis). The server's own threshold
//! (`slowlog-log-slower-than`) applies; the bench never changes server config.
//! EVALSHA entries are named after the script whose SHA1 they carry
//! (`stockd::redis::scripts`, the texts stockd loads: shared helpers joined in).

use std::collections::HashMap;

use crate::results::Stall;
use deadpool_redis::redis::{self, Value};

use stockd::redis::RedisStore;

/// Entries read back: Redis keeps 128 by default.
const SLOWLOG_READ_MAX: usize = 128;
/// A stockd key's hash tag opens with this (`<p>{<sku>}:...`): the first
/// argument holding one is the key the entry is labelled with.
const HASH_TAG_OPEN: char = '{';

/// Slow commands on keys under `prefix` between `from_s` and `to_s` (Unix
/// seconds), from every primary's SLOWLOG.
pub async fn stalls(store: &RedisStore, prefix: &str, from_s: u64, to_s: u64) -> Vec<Stall> {
    let Ok(primaries) = store.primaries().await else {
        return Vec::new();
    };
    let mut entries = Vec::new();
    for (_, mut conn) in primaries {
        let read: Value = match redis::cmd("SLOWLOG")
            .arg("GET")
            .arg(SLOWLOG_READ_MAX)
            .query_async(&mut conn)
            .await
        {
            Ok(v) => v,
            Err(_) => continue,
        };
        if let Value::Array(read) = read {
            entries.extend(read);
        }
    }
    let names = script_names();
    let mut out: Vec<Stall> = entries
        .iter()
        .filter_map(|entry| parse(entry, &names))
        .filter(|(at, _, args)| {
            (from_s..=to_s).contains(at) && args.iter().any(|a| a.starts_with(prefix))
        })
        .map(|(_, stall, _)| stall)
        .collect();
    out.sort_by(|a, b| b.blocked_ms.total_cmp(&a.blocked_ms));
    out
}

/// `(time, stall, args)` of one SLOWLOG entry: `[id, time, micros, [args...], ...]`.
fn parse(entry: &Value, names: &HashMap<String, String>) -> Option<(u64, Stall, Vec<String>)> {
    let Value::Array(fields) = entry else {
        return None;
    };
    let at = non_negative(fields.get(1)?)?;
    let micros = non_negative(fields.get(2)?)?;
    let Value::Array(raw_args) = fields.get(3)? else {
        return None;
    };
    let args = text_args(raw_args);
    let stall = Stall {
        command: label(&args, names)?,
        blocked_ms: micros as f64 / 1000.0,
    };
    Some((at, stall, args))
}

/// An integer field that is not negative.
fn non_negative(v: &Value) -> Option<u64> {
    match v {
        Value::Int(n) => u64::try_from(*n).ok(),
        _ => None,
    }
}

/// The command and its arguments as text (binary ones lossily).
fn text_args(raw_args: &[Value]) -> Vec<String> {
    raw_args
        .iter()
        .filter_map(|a| match a {
            Value::BulkString(b) => Some(String::from_utf8_lossy(b).into_owned()),
            Value::SimpleString(s) => Some(s.clone()),
            _ => None,
        })
        .collect()
}

/// The command as the report names it: upper case, an EVALSHA by its
/// script's file name, then its first key with a hash tag (`None`: no command).
fn label(args: &[String], names: &HashMap<String, String>) -> Option<String> {
    let mut command = args.first()?.to_ascii_uppercase();
    if command == "EVALSHA" {
        let sha = args.get(1).cloned().unwrap_or_default();
        let name = names.get(&sha).cloned().unwrap_or(sha);
        command = format!("EVALSHA {name}");
    }
    if let Some(key) = args.iter().skip(1).find(|a| a.contains(HASH_TAG_OPEN)) {
        command = format!("{command} {key}");
    }
    Some(command)
}

/// SHA1 → file name of every script stockd loads.
fn script_names() -> HashMap<String, String> {
    stockd::redis::scripts::ALL
        .iter()
        .map(|script| (script.sha().to_string(), format!("{}.lua", script.name)))
        .collect()
}

#[cfg(test)]
mod tests {
    use deadpool_redis::redis::Script;

    use super::*;

    fn bulk(s: &str) -> Value {
        Value::BulkString(s.as_bytes().to_vec())
    }

    #[test]
    fn an_evalsha_entry_is_named_after_its_script_and_first_tagged_key() {
        let reserve = "return 1";
        let sha = Script::new(reserve).get_hash().to_string();
        let names = HashMap::from([(sha.clone(), "reserve.lua".to_string())]);
        let entry = Value::Array(vec![
            Value::Int(7),
            Value::Int(1_700_000_000),
            Value::Int(194_483),
            Value::Array(vec![
                bulk("EVALSHA"),
                bulk(&sha),
                bulk("2"),
                bulk("bench:{103}:sku"),
            ]),
        ]);
        let (at, stall, args) = parse(&entry, &names).unwrap();
        assert_eq!(at, 1_700_000_000);
        assert_eq!(stall.command, "EVALSHA reserve.lua bench:{103}:sku");
        assert!((stall.blocked_ms - 194.483).abs() < 1e-9);
        assert!(args.iter().any(|a| a.starts_with("bench:")));
    }
}
