//! Which events are published at all (`events.enabled`, `events.types`) and
//! the `source` they carry. The patterns read like AMQP topic bindings
//! (`*` one word, `#` zero or more), so the filter and a subscriber's binding
//! key speak the same language.

use super::EventType;
use crate::config::EventSettings;

/// The events this process emits. Cheap to clone (a few strings).
#[derive(Debug, Clone, Default)]
pub struct EventPolicy {
    enabled: bool,
    patterns: Vec<String>,
    source: String,
}

impl EventPolicy {
    pub fn from_settings(settings: &EventSettings) -> Self {
        Self {
            enabled: settings.enabled,
            patterns: settings.types.clone(),
            source: settings.source.clone(),
        }
    }

    /// Publishes nothing (`events.enabled: false`).
    pub fn off() -> Self {
        Self::default()
    }

    /// Every type, source `/stockd` (unit tests of the collector).
    #[cfg(test)]
    pub fn everything() -> Self {
        Self {
            enabled: true,
            patterns: vec!["#".into()],
            source: "/stockd".into(),
        }
    }

    pub fn is_on(&self) -> bool {
        self.enabled
    }

    /// Whether events of `kind` are emitted.
    pub fn wants(&self, kind: EventType) -> bool {
        self.enabled && (self.patterns.iter()).any(|p| topic_matches(p, kind.as_str()))
    }

    /// The CloudEvents `source` attribute (`events.source`).
    pub fn source(&self) -> &str {
        &self.source
    }
}

/// AMQP topic matching: words split on `.`, `*` matches one word, `#` zero or more.
pub fn topic_matches(pattern: &str, key: &str) -> bool {
    let pattern: Vec<&str> = pattern.split('.').collect();
    let key: Vec<&str> = key.split('.').collect();
    matches_words(&pattern, &key)
}

fn matches_words(pattern: &[&str], key: &[&str]) -> bool {
    match pattern.split_first() {
        None => key.is_empty(),
        Some((&"#", rest)) => (0..=key.len()).any(|skip| matches_words(rest, &key[skip..])),
        Some((&word, rest)) => match key.split_first() {
            Some((&first, key_rest)) if word == "*" || word == first => {
                matches_words(rest, key_rest)
            }
            _ => false,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_match_like_amqp_topic_bindings() {
        assert!(topic_matches("stockd.#", "stockd.reservation.reserved"));
        assert!(topic_matches("#", "stockd.sku.sold_out"));
        assert!(topic_matches(
            "stockd.reservation.*",
            "stockd.reservation.released"
        ));
        assert!(!topic_matches(
            "stockd.reservation.*",
            "stockd.sku.sold_out"
        ));
        assert!(!topic_matches("stockd.*", "stockd.sku.sold_out"));
        assert!(topic_matches("stockd.#.sold_out", "stockd.sku.sold_out"));
        assert!(topic_matches("stockd.sku.sold_out", "stockd.sku.sold_out"));
        assert!(!topic_matches("stockd.sku", "stockd.sku.sold_out"));
    }

    #[test]
    fn a_policy_wants_only_what_its_patterns_name_and_nothing_when_off() {
        let on = EventPolicy {
            enabled: true,
            patterns: vec!["stockd.reservation.#".into()],
            source: "/stockd".into(),
        };
        assert!(on.wants(EventType::Persisted));
        assert!(!on.wants(EventType::SoldOut));
        let off = EventPolicy {
            enabled: false,
            ..on
        };
        assert!(!off.wants(EventType::Persisted));
    }
}
