//! An outbox entry's fields, read the same way by the relay and by tests.
//!
//! One entry carries either one deduction (a reservation admitted alone, an
//! order: the fields `request_id`, `sku_id`, `user_id`, `count`,
//! `created_ms`, `expires_ms`, `available`, and `client`, `order` when they
//! apply) or, written by `reserve.lua` for a batch of reservations admitted
//! in one call, each of the batch's deductions in order: `request_id`,
//! `user_id` and `count` are `,`-joined lists (ids and numbers never hold a
//! comma), `sku_id`, `created_ms` and `expires_ms` are the batch's (one SKU,
//! one clock), `available_last` is the SKU's available after the last
//! deduction (each one's follows from the counts after it), and `clients`,
//! when any has a client, is `<bytes>:<name>` per deduction (`0:` for none:
//! a client name may hold a comma). Each deduction read from it knows its
//! place in the entry (domain/outbox_place.rs), so the entry is removed only
//! once all are confirmed.

use std::collections::HashMap;

use super::RedisError;
use crate::domain::{Deduction, OrderLines, OutboxPlace, RequestId, SkuId, UserId};

/// One deduction of an outbox entry: where it is and what it carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutboxEntry {
    /// The entry's id and this deduction's place in it.
    pub place: OutboxPlace,
    pub message: Deduction,
    /// The bucket whose stream holds it (0 unless the SKU is split).
    pub bucket: u16,
    /// The available its `reserved` event told of each SKU (one for a
    /// reservation; each line's, in line order, for an order); empty for an
    /// entry written before the scripts kept it.
    pub told: Vec<(SkuId, i64)>,
}

/// Availables as an outbox entry keeps them: comma-separated, in line order
/// (an unknown one as empty text).
pub fn availables_text(availables: &[Option<i64>]) -> String {
    let texts: Vec<String> = (availables.iter())
        .map(|a| a.map(|a| a.to_string()).unwrap_or_default())
        .collect();
    texts.join(",")
}

/// The fields of one entry, with its id for the errors.
struct Fields<'a> {
    id: &'a str,
    fields: &'a HashMap<String, String>,
}

impl Fields<'_> {
    fn get(&self, name: &str) -> Result<&str, RedisError> {
        (self.fields.get(name).map(String::as_str))
            .ok_or_else(|| RedisError::BadReply(format!("outbox entry {} lacks {name}", self.id)))
    }

    fn bad(&self, name: &str) -> RedisError {
        RedisError::BadReply(format!("outbox entry {}: bad {name}", self.id))
    }

    fn num(&self, name: &str) -> Result<u64, RedisError> {
        self.get(name)?.parse::<u64>().map_err(|_| self.bad(name))
    }
}

/// What differs between the deductions of one entry.
struct Own<'a> {
    request_id: &'a str,
    user_id: &'a str,
    count: &'a str,
    client: Option<String>,
    available: Option<&'a str>,
}

impl OutboxEntry {
    /// The deductions of one entry, from the field/value pairs of `XRANGE`.
    pub fn from_fields(
        id: String,
        fields: &HashMap<String, String>,
    ) -> Result<Vec<Self>, RedisError> {
        let f = Fields { id: &id, fields };
        let ids = f.get("request_id")?;
        if fields.contains_key("order") || !ids.contains(',') {
            let own = Own {
                request_id: ids,
                user_id: f.get("user_id")?,
                count: f.get("count")?,
                client: fields.get("client").cloned(),
                available: fields.get("available").map(String::as_str),
            };
            return Ok(vec![Self::one(&f, own, OutboxPlace::alone(id.clone()))?]);
        }
        let ids: Vec<&str> = ids.split(',').collect();
        let of = u16::try_from(ids.len()).map_err(|_| f.bad("request_id"))?;
        let list = |name: &str| -> Result<Vec<&str>, RedisError> {
            let items: Vec<&str> = f.get(name)?.split(',').collect();
            match items.len() == ids.len() {
                true => Ok(items),
                false => Err(f.bad(name)),
            }
        };
        let (users, counts) = (list("user_id")?, list("count")?);
        let availables = match fields.get("available_last") {
            Some(last) => {
                Some(availables_from_last(last, &counts).ok_or_else(|| f.bad("available_last"))?)
            }
            None => None,
        };
        let clients = match fields.get("clients") {
            Some(text) => split_clients(text, ids.len()).ok_or_else(|| f.bad("clients"))?,
            None => vec![None; ids.len()],
        };
        let mut entries = Vec::with_capacity(ids.len());
        for (i, client) in clients.into_iter().enumerate() {
            let own = Own {
                request_id: ids[i],
                user_id: users[i],
                count: counts[i],
                client,
                available: availables.as_ref().map(|a| a[i].as_str()),
            };
            let place = OutboxPlace {
                entry_id: id.clone(),
                index: i as u16,
                of,
            };
            entries.push(Self::one(&f, own, place)?);
        }
        Ok(entries)
    }

    fn one(f: &Fields<'_>, own: Own<'_>, place: OutboxPlace) -> Result<Self, RedisError> {
        let num = |text: &str, name: &str| text.parse::<u64>().map_err(|_| f.bad(name));
        let message = Deduction {
            request_id: RequestId::parse(own.request_id).map_err(|_| f.bad("request_id"))?,
            sku_id: SkuId::new(f.num("sku_id")?).map_err(|_| f.bad("sku_id"))?,
            user_id: UserId::new(num(own.user_id, "user_id")?).map_err(|_| f.bad("user_id"))?,
            count: u32::try_from(num(own.count, "count")?).map_err(|_| f.bad("count"))?,
            created_ms: f.num("created_ms")?,
            expires_ms: f.num("expires_ms")?,
            // A line of an order (`order.lua`) carries the whole line list, so
            // a republished entry still names every line of its order.
            order: match f.fields.get("order") {
                Some(text) => Some(OrderLines::decode(text).map_err(|_| f.bad("order"))?),
                None => None,
            },
            client: own.client,
        };
        let skus: Vec<SkuId> = match &message.order {
            Some(lines) => lines.lines().iter().map(|l| l.sku_id).collect(),
            None => vec![message.sku_id],
        };
        let told = match own.available {
            Some(text) => (skus.into_iter())
                .zip(text.split(','))
                .filter_map(|(sku, a)| a.parse::<i64>().ok().map(|a| (sku, a)))
                .collect(),
            None => Vec::new(),
        };
        Ok(Self {
            place,
            message,
            bucket: 0,
            told,
        })
    }

    /// The entry's id.
    pub fn id(&self) -> &str {
        &self.place.entry_id
    }

    /// When the entry was written, by the Redis clock that wrote it (a
    /// stream id is Redis `TIME` in ms, then a sequence).
    pub fn written_ms(&self) -> Option<u64> {
        self.place.entry_id.split('-').next()?.parse().ok()
    }
}

/// The available after each deduction of a batch's entry, from the one
/// after its last and the counts: each is the next one's plus the next
/// one's count. `None` when a number does not parse.
fn availables_from_last(last: &str, counts: &[&str]) -> Option<Vec<String>> {
    let mut available: i64 = last.parse().ok()?;
    let mut each = vec![String::new(); counts.len()];
    for i in (0..counts.len()).rev() {
        each[i] = available.to_string();
        available = available.checked_add(counts[i].parse().ok()?)?;
    }
    Some(each)
}

/// `clients` of a batch's entry: `<bytes>:<name>` per deduction, `0:` for
/// none; `None` unless it holds exactly `n`.
fn split_clients(mut text: &str, n: usize) -> Option<Vec<Option<String>>> {
    let mut clients = Vec::with_capacity(n);
    while !text.is_empty() {
        let (len, rest) = text.split_once(':')?;
        let len: usize = len.parse().ok()?;
        let name = rest.get(..len)?;
        clients.push((len > 0).then(|| name.to_string()));
        text = &rest[len..];
    }
    (clients.len() == n).then_some(clients)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        (pairs.iter())
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn entry(extra: &[(&str, &str)]) -> OutboxEntry {
        let base = [
            ("request_id", "r1"),
            ("sku_id", "7"),
            ("user_id", "3"),
            ("count", "1"),
            ("created_ms", "10"),
            ("expires_ms", "20"),
        ];
        let all: Vec<(&str, &str)> = base.iter().chain(extra).copied().collect();
        let mut entries = OutboxEntry::from_fields("1-0".into(), &fields(&all)).unwrap();
        assert_eq!(entries.len(), 1);
        entries.remove(0)
    }

    /// The available a `reserved` event told is read back from the entry,
    /// per line for an order; an entry of an older script has none.
    #[test]
    fn an_entry_keeps_the_availables_its_reserved_event_told() {
        let sku = |n| SkuId::new(n).unwrap();
        assert_eq!(entry(&[("available", "4")]).told, vec![(sku(7), 4)]);
        let order = entry(&[("order", "7:1,9:2"), ("available", "4,0")]);
        assert_eq!(order.told, vec![(sku(7), 4), (sku(9), 0)]);
        assert_eq!(order.place, OutboxPlace::alone("1-0".into()));
        assert!(entry(&[]).told.is_empty());
        assert_eq!(entry(&[]).written_ms(), Some(1));
        assert_eq!(
            availables_text(&[Some(4), None, Some(0)]),
            "4,,0".to_string()
        );
    }

    /// A batch's entry is each of its deductions, in order, each with its
    /// place, its own buyer, count, available and client (a name with a
    /// comma and a colon included).
    #[test]
    fn a_batch_entry_is_each_of_its_deductions_in_order() {
        let f = fields(&[
            ("request_id", "a,b,c"),
            ("sku_id", "7"),
            ("user_id", "1,2,3"),
            ("count", "1,2,1"),
            ("created_ms", "10"),
            ("expires_ms", "20"),
            ("available_last", "6"),
            ("clients", "4:shop0:5:x,y:z"),
        ]);
        let entries = OutboxEntry::from_fields("5-1".into(), &f).unwrap();
        let sku = SkuId::new(7).unwrap();
        let seen: Vec<String> = (entries.iter())
            .map(|e| {
                format!(
                    "{} user {} count {} client {:?} place {}/{} told {:?}",
                    e.message.request_id,
                    e.message.user_id,
                    e.message.count,
                    e.message.client,
                    e.place.index,
                    e.place.of,
                    e.told
                )
            })
            .collect();
        let told = |a: i64| vec![(sku, a)];
        assert_eq!(
            seen,
            vec![
                format!(
                    "a user 1 count 1 client Some(\"shop\") place 0/3 told {:?}",
                    told(9)
                ),
                format!("b user 2 count 2 client None place 1/3 told {:?}", told(7)),
                format!(
                    "c user 3 count 1 client Some(\"x,y:z\") place 2/3 told {:?}",
                    told(6)
                ),
            ]
        );
        assert!(entries.iter().all(|e| e.id() == "5-1"
            && e.message.created_ms == 10
            && e.message.expires_ms == 20
            && e.message.order.is_none()));
    }

    /// A batch's lists that do not line up are refused, not guessed at.
    #[test]
    fn a_batch_entry_whose_lists_differ_in_length_is_refused() {
        let good = [
            ("request_id", "a,b"),
            ("sku_id", "7"),
            ("user_id", "1,2"),
            ("count", "1,1"),
            ("created_ms", "10"),
            ("expires_ms", "20"),
        ];
        assert_eq!(
            OutboxEntry::from_fields("1-0".into(), &fields(&good))
                .unwrap()
                .len(),
            2
        );
        for (name, value) in [
            ("user_id", "1"),
            ("count", "1,1,1"),
            ("available_last", "3,2"),
            ("clients", "1:a"),
            ("clients", "1:a0:0:"),
            ("clients", "9:a0:"),
        ] {
            let mut f = fields(&good);
            f.insert(name.to_string(), value.to_string());
            assert!(
                OutboxEntry::from_fields("1-0".into(), &f).is_err(),
                "{name}={value}"
            );
        }
    }
}
