//! Validated identifiers. An id becomes part of a Redis key or a SQL row only
//! after it passed through one of these constructors, so `{`, `}`, `*`, spaces
//! and other key-breaking characters can never reach a key (contract §2, §6).

use std::fmt;

use serde::{Deserialize, Serialize};

/// Longest request id accepted (contract §6).
pub const REQUEST_ID_MAX_LEN: usize = 64;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdError {
    #[error("{field} must be a positive 64-bit integer")]
    NotPositiveInteger { field: &'static str },
    #[error("request_id must be 1-64 characters of [A-Za-z0-9_.:-]")]
    BadRequestId,
}

/// Largest id accepted: ids are positive *signed* 64-bit integers so they fit a
/// Java `long` and MySQL `BIGINT` on every client of the order service.
const ID_MAX: u64 = i64::MAX as u64;

macro_rules! positive_id {
    ($name:ident, $field:literal) => {
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
        #[serde(transparent)]
        pub struct $name(u64);

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(de: D) -> Result<Self, D::Error> {
                let raw = u64::deserialize(de)?;
                $name::new(raw).map_err(serde::de::Error::custom)
            }
        }

        impl $name {
            pub fn new(raw: u64) -> Result<Self, IdError> {
                if raw == 0 || raw > ID_MAX {
                    return Err(IdError::NotPositiveInteger { field: $field });
                }
                Ok(Self(raw))
            }

            /// Parses the canonical decimal form used in URL paths (contract §6):
            /// digits only, no sign, no leading zero — `0980001` and `+1` are
            /// not SKU 980001 and 1, so two spellings never name one SKU.
            pub fn parse(text: &str) -> Result<Self, IdError> {
                if text.is_empty()
                    || !text.bytes().all(|b| b.is_ascii_digit())
                    || (text.len() > 1 && text.starts_with('0'))
                {
                    return Err(IdError::NotPositiveInteger { field: $field });
                }
                let raw: u64 = text
                    .parse()
                    .map_err(|_| IdError::NotPositiveInteger { field: $field })?;
                Self::new(raw)
            }

            pub fn get(self) -> u64 {
                self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Display::fmt(&self.0, f)
            }
        }
    };
}

positive_id!(SkuId, "sku_id");
positive_id!(UserId, "user_id");

/// The client's idempotency key for one reservation, unique per SKU.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(transparent)]
pub struct RequestId(String);

impl RequestId {
    pub fn parse(text: &str) -> Result<Self, IdError> {
        let ok_len = (1..=REQUEST_ID_MAX_LEN).contains(&text.len());
        let ok_chars = text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b':' | b'-'));
        if ok_len && ok_chars {
            Ok(Self(text.to_string()))
        } else {
            Err(IdError::BadRequestId)
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for RequestId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for RequestId {
    fn deserialize<D: serde::Deserializer<'de>>(de: D) -> Result<Self, D::Error> {
        let text = String::deserialize(de)?;
        RequestId::parse(&text).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positive_ids_in_range_are_accepted() {
        assert_eq!(SkuId::parse("1").unwrap().get(), 1);
        assert_eq!(UserId::new(i64::MAX as u64).unwrap().get(), i64::MAX as u64);
    }

    #[test]
    fn zero_negative_signed_and_oversized_ids_are_refused() {
        for bad in [
            "0",
            "-1",
            "+1",
            "",
            " 1",
            "1.0",
            "9223372036854775808",
            "abc",
            "1e3",
            "0980001",
            "01",
            "00",
        ] {
            assert!(SkuId::parse(bad).is_err(), "{bad:?} accepted");
        }
        assert!(UserId::new(0).is_err());
        assert!(UserId::new(u64::MAX).is_err());
    }

    #[test]
    fn request_ids_allow_only_the_key_safe_alphabet() {
        for good in ["a", "order-1:2.3_x", &"x".repeat(64)] {
            assert!(RequestId::parse(good).is_ok(), "{good:?} refused");
        }
        for bad in [
            "",
            "a b",
            "{1}",
            "a*b",
            "a}",
            "é",
            "a/b",
            &"x".repeat(65),
            "a\n",
        ] {
            assert!(RequestId::parse(bad).is_err(), "{bad:?} accepted");
        }
    }
}
