//! A SKU's bucket layout: how many buckets, and the hash tag of each.
//!
//! Kept in the SKU's home hash (`buckets`, `tags`) and cached per process; it
//! never changes while any buyer state of the SKU lives in Redis (see
//! `ops/sku_admin.rs`), and every bucket script re-checks the bucket count it
//! was routed with, so a stale cache is caught (`LAYOUT`) instead of sending a
//! buyer to the wrong bucket.

use super::route::bucket_of;
use crate::domain::{SkuId, UserId};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    sku: SkuId,
    /// `tags[0]` is the SKU id itself (bucket 0 = today's keys).
    tags: Vec<String>,
}

impl Layout {
    /// One bucket: the SKU's keys exactly as without buckets.
    pub fn single(sku: SkuId) -> Self {
        Self {
            sku,
            tags: vec![sku.to_string()],
        }
    }

    /// From bucket 0's tag and the tags of buckets 1.. (`n - 1` of them).
    pub fn new(sku: SkuId, others: Vec<String>) -> Self {
        let mut tags = vec![sku.to_string()];
        tags.extend(others);
        Self { sku, tags }
    }

    /// From the home hash's `buckets` and `tags` fields (both absent: one bucket).
    pub fn from_fields(
        sku: SkuId,
        buckets: Option<&str>,
        tags: Option<&str>,
    ) -> Result<Self, String> {
        let n: u16 = match buckets {
            None => 1,
            Some(v) => v.parse().map_err(|_| format!("buckets field {v:?}"))?,
        };
        if n <= 1 {
            return Ok(Self::single(sku));
        }
        let others: Vec<String> = tags
            .unwrap_or("")
            .split(',')
            .filter(|t| !t.is_empty())
            .map(str::to_string)
            .collect();
        if others.len() + 1 != usize::from(n) {
            return Err(format!("buckets {n} but tags {tags:?}"));
        }
        Ok(Self::new(sku, others))
    }

    pub fn sku(&self) -> SkuId {
        self.sku
    }

    pub fn n(&self) -> u16 {
        self.tags.len() as u16
    }

    pub fn is_split(&self) -> bool {
        self.tags.len() > 1
    }

    pub fn bucket_of(&self, user: UserId) -> u16 {
        bucket_of(user.get(), self.n())
    }

    pub fn tag(&self, bucket: u16) -> &str {
        &self.tags[usize::from(bucket)]
    }

    /// The bucket's tag, `None` for a bucket this layout does not have (a
    /// caller's bucket number from an older layout, or a cursor past the end).
    pub fn checked_tag(&self, bucket: u16) -> Option<&str> {
        self.tags.get(usize::from(bucket)).map(String::as_str)
    }

    pub fn buckets(&self) -> std::ops::Range<u16> {
        0..self.n()
    }

    /// The `tags` field of the home hash: the tags of buckets 1.., comma separated.
    pub fn tags_field(&self) -> String {
        self.tags[1..].join(",")
    }

    /// What the sold-out channel names: `<sku>` for one bucket (as without
    /// buckets), `<sku>.<b>` for a bucket of a split SKU.
    pub fn event_subject(&self, bucket: u16) -> String {
        if self.is_split() {
            format!("{}.{bucket}", self.sku)
        } else {
            self.sku.to_string()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sku() -> SkuId {
        SkuId::new(42).unwrap()
    }

    #[test]
    fn absent_fields_mean_one_bucket_with_todays_keys() {
        let l = Layout::from_fields(sku(), None, None).unwrap();
        assert_eq!(l, Layout::single(sku()));
        assert_eq!(l.n(), 1);
        assert_eq!(l.tag(0), "42");
        assert_eq!(l.event_subject(0), "42");
    }

    #[test]
    fn a_split_layout_round_trips_through_its_fields() {
        let l = Layout::new(sku(), vec!["42.1.7".into(), "42.2.0".into()]);
        let back = Layout::from_fields(sku(), Some("3"), Some(&l.tags_field())).unwrap();
        assert_eq!(back, l);
        assert_eq!(back.tag(2), "42.2.0");
        assert_eq!(back.event_subject(2), "42.2");
    }

    #[test]
    fn a_tag_list_of_the_wrong_length_is_refused() {
        assert!(Layout::from_fields(sku(), Some("3"), Some("42.1.0")).is_err());
        assert!(Layout::from_fields(sku(), Some("x"), None).is_err());
    }
}
