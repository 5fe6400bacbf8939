//! The tally of outbox entries several deductions share. A batch of
//! reservations admitted by one script call writes one outbox entry for all
//! of them (domain/outbox_place.rs); each is published and confirmed on its
//! own, maybe in different broker messages, so the entry may be removed only
//! once every one of its deductions is confirmed. This counts, per entry,
//! which places were confirmed (a place confirmed twice, by the api and then
//! by a relay's republish, counts once) and says when the last one was.
//!
//! An entry whose tally never completes (a publish failed: the relay
//! republishes the entry, and its confirms complete the tally; or another
//! node's relay removed it) is forgotten after [`TALLY_MAX_AGE`], and the
//! tally holds at most [`TALLY_MAX_ENTRIES`]: forgetting one never loses a
//! deduction, it only leaves the entry for the relay to republish (the
//! consumer skips what it applied) and remove.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use crate::domain::OutboxPlace;
use crate::redis::outbox::OutboxStream;

/// How long a partly confirmed entry is remembered.
pub const TALLY_MAX_AGE: Duration = Duration::from_secs(300);
/// The most partly confirmed entries remembered at once.
pub const TALLY_MAX_ENTRIES: usize = 65_536;

struct Tally {
    confirmed: Vec<bool>,
    left: u16,
    since: Instant,
}

/// Partly confirmed shared entries, by stream and entry id.
#[derive(Default)]
pub struct SharedEntries {
    tallies: HashMap<(OutboxStream, String), Tally>,
}

impl SharedEntries {
    /// Notes one deduction's confirm; returns the entry's id when it was the
    /// last of the entry's deductions to be confirmed (or the only one).
    pub fn confirmed(
        &mut self,
        stream: OutboxStream,
        place: OutboxPlace,
        now: Instant,
    ) -> Option<String> {
        if place.is_alone() {
            return Some(place.entry_id);
        }
        let of = usize::from(place.of);
        let index = usize::from(place.index);
        if index >= of {
            // not a place of this entry: never removes it
            return None;
        }
        let key = (stream, place.entry_id);
        let tally = self.tallies.entry(key.clone()).or_insert_with(|| Tally {
            confirmed: vec![false; of],
            left: place.of,
            since: now,
        });
        if tally.confirmed.len() != of || tally.confirmed[index] {
            return None;
        }
        tally.confirmed[index] = true;
        tally.left -= 1;
        if tally.left > 0 {
            return None;
        }
        self.tallies.remove(&key);
        Some(key.1)
    }

    /// Forgets entries older than [`TALLY_MAX_AGE`], and the oldest beyond
    /// [`TALLY_MAX_ENTRIES`].
    pub fn forget_stale(&mut self, now: Instant) {
        self.tallies
            .retain(|_, t| now.saturating_duration_since(t.since) < TALLY_MAX_AGE);
        if self.tallies.len() > TALLY_MAX_ENTRIES {
            let mut ages: Vec<Instant> = self.tallies.values().map(|t| t.since).collect();
            ages.sort_unstable();
            let keep_from = ages[self.tallies.len() - TALLY_MAX_ENTRIES];
            self.tallies.retain(|_, t| t.since >= keep_from);
        }
    }

    /// Entries partly confirmed.
    pub fn len(&self) -> usize {
        self.tallies.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tallies.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::SkuId;

    fn place(id: &str, index: u16, of: u16) -> OutboxPlace {
        OutboxPlace {
            entry_id: id.into(),
            index,
            of,
        }
    }

    fn stream() -> OutboxStream {
        OutboxStream::of_sku(SkuId::new(7).unwrap())
    }

    #[test]
    fn an_entry_alone_goes_on_its_confirm() {
        let mut tally = SharedEntries::default();
        let now = Instant::now();
        assert_eq!(
            tally.confirmed(stream(), OutboxPlace::alone("1-0".into()), now),
            Some("1-0".into())
        );
        assert!(tally.is_empty());
    }

    #[test]
    fn a_shared_entry_goes_only_when_each_place_was_confirmed_once() {
        let mut tally = SharedEntries::default();
        let now = Instant::now();
        assert_eq!(tally.confirmed(stream(), place("1-0", 2, 3), now), None);
        // the same place again (a relay's republish) does not count twice
        assert_eq!(tally.confirmed(stream(), place("1-0", 2, 3), now), None);
        assert_eq!(tally.confirmed(stream(), place("1-0", 0, 3), now), None);
        // another entry, and the same id in another stream, are their own
        let other = OutboxStream::of_sku(SkuId::new(8).unwrap());
        assert_eq!(tally.confirmed(other, place("1-0", 1, 3), now), None);
        assert_eq!(tally.confirmed(stream(), place("2-0", 1, 3), now), None);
        assert_eq!(
            tally.confirmed(stream(), place("1-0", 1, 3), now),
            Some("1-0".into())
        );
        assert_eq!(tally.len(), 2);
        // a place outside the entry never removes it
        assert_eq!(tally.confirmed(stream(), place("3-0", 5, 2), now), None);
    }

    #[test]
    fn a_tally_that_never_completes_is_forgotten() {
        let mut tally = SharedEntries::default();
        let then = Instant::now();
        assert_eq!(tally.confirmed(stream(), place("1-0", 0, 2), then), None);
        tally.forget_stale(then + Duration::from_secs(1));
        assert_eq!(tally.len(), 1);
        tally.forget_stale(then + TALLY_MAX_AGE);
        assert!(tally.is_empty());
        // forgotten: the rest alone does not remove the entry (the relay does)
        let later = then + TALLY_MAX_AGE;
        assert_eq!(tally.confirmed(stream(), place("1-0", 1, 2), later), None);
    }
}
