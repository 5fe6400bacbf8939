//! Choosing bucket tags that land on distinct primaries.
//!
//! A key's slot is CRC16 (XMODEM) of its hash tag mod 16384. Plain tags
//! `{sku.b}` often collide (three primaries, three buckets: all distinct only
//! 6 times in 27), so each bucket's tag carries a salt, tried from 0 up until
//! its slot belongs to a primary no other bucket of the SKU uses yet. With
//! fewer primaries than buckets the primaries are reused round-robin; on a
//! standalone server every salt is 0.

use crate::domain::SkuId;

/// Hash slots of a Redis Cluster.
pub const SLOTS: u16 = 16384;

/// Most salts tried per bucket before a primary is reused anyway.
const SALT_TRIES: u32 = 4096;

/// CRC16/XMODEM, the checksum Redis Cluster hashes keys with.
pub fn crc16(bytes: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for &byte in bytes {
        crc ^= u16::from(byte) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc
}

/// The slot of a hash tag.
pub fn slot_of(tag: &str) -> u16 {
    crc16(tag.as_bytes()) % SLOTS
}

/// Tags of buckets 1..n. `owner(slot)` names the primary serving a slot
/// (any constant on a standalone server).
pub fn choose_tags(sku: SkuId, n: u16, owner: impl Fn(u16) -> String) -> Vec<String> {
    let mut used = vec![owner(slot_of(&sku.to_string()))];
    let mut tags = Vec::new();
    for bucket in 1..n {
        let mut chosen = None;
        for salt in 0..SALT_TRIES {
            let tag = format!("{sku}.{bucket}.{salt}");
            let node = owner(slot_of(&tag));
            if !used.contains(&node) {
                used.push(node);
                chosen = Some(tag);
                break;
            }
        }
        // Every primary already holds a bucket: start another round.
        let tag = chosen.unwrap_or_else(|| {
            let tag = format!("{sku}.{bucket}.0");
            used = vec![owner(slot_of(&tag))];
            tag
        });
        tags.push(tag);
    }
    tags
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc16_matches_the_redis_cluster_reference_values() {
        // Redis Cluster spec: CRC16("123456789") = 0x31C3; CLUSTER KEYSLOT foo = 12182.
        assert_eq!(crc16(b"123456789"), 0x31c3);
        assert_eq!(slot_of("foo"), 12182);
    }

    fn three_primaries(slot: u16) -> String {
        match slot {
            0..=5460 => "a".into(),
            5461..=10922 => "b".into(),
            _ => "c".into(),
        }
    }

    #[test]
    fn three_buckets_land_on_three_primaries() {
        for id in 1..200 {
            let sku = SkuId::new(id).unwrap();
            let tags = choose_tags(sku, 3, three_primaries);
            let mut nodes = vec![three_primaries(slot_of(&sku.to_string()))];
            nodes.extend(tags.iter().map(|t| three_primaries(slot_of(t))));
            nodes.sort();
            nodes.dedup();
            assert_eq!(nodes.len(), 3, "sku {id}: {tags:?}");
        }
    }

    #[test]
    fn more_buckets_than_primaries_reuse_them() {
        let sku = SkuId::new(7).unwrap();
        let tags = choose_tags(sku, 5, three_primaries);
        assert_eq!(tags.len(), 4);
        let mut distinct = tags.clone();
        distinct.sort();
        distinct.dedup();
        assert_eq!(distinct.len(), 4);
    }

    #[test]
    fn a_standalone_server_gets_salt_zero() {
        let sku = SkuId::new(9).unwrap();
        assert_eq!(
            choose_tags(sku, 3, |_| "standalone".into()),
            vec!["9.1.0", "9.2.0"]
        );
    }
}
