//! The reservation record and its state machine (contract §5).
//!
//! `RESERVED` is the only state with exits; `CONFIRMED`, `RELEASED` and `REJECTED`
//! are final. Transitions are decided by conditional updates in MySQL; this module
//! only states which ones are legal so every store applies the same rule.

use serde::{Deserialize, Serialize};

use super::{RequestId, SkuId, UserId};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ReservationStatus {
    Reserved,
    Confirmed,
    Released,
    Rejected,
}

impl ReservationStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Reserved => "RESERVED",
            Self::Confirmed => "CONFIRMED",
            Self::Released => "RELEASED",
            Self::Rejected => "REJECTED",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "RESERVED" => Some(Self::Reserved),
            "CONFIRMED" => Some(Self::Confirmed),
            "RELEASED" => Some(Self::Released),
            "REJECTED" => Some(Self::Rejected),
            _ => None,
        }
    }

    /// Live units count against stock and the per-user limit.
    pub fn is_live(self) -> bool {
        matches!(self, Self::Reserved | Self::Confirmed)
    }

    /// Whether `self -> next` is a legal transition (repeats are not transitions).
    pub fn can_become(self, next: Self) -> bool {
        self == Self::Reserved && next != Self::Reserved
    }
}

/// Whether a hold whose time to pay ends at `expires_at_ms` is due for
/// release at `now_ms` (both milliseconds since the Unix epoch): from that
/// millisecond on (contract §5). The one Rust statement of the rule; SQL
/// states it once too, as `db::due::DUE` (docs/architecture.md, "Where each
/// rule lives").
pub fn is_due(expires_at_ms: u64, now_ms: u64) -> bool {
    expires_at_ms <= now_ms
}

/// A hold's time to pay as one store keeps it: its status, when it was
/// admitted and when it expires (the MySQL row, or its Redis mirror).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HoldTerm {
    pub status: ReservationStatus,
    pub admitted_ms: u64,
    pub expires_ms: u64,
}

impl HoldTerm {
    pub fn new(status: ReservationStatus, admitted_ms: u64, expires_ms: u64) -> Self {
        Self {
            status,
            admitted_ms,
            expires_ms,
        }
    }
}

/// Whether the Redis `mirror` of a hold shows an extension its MySQL `row`
/// lost (a failover dropped the commit): both still reserved, the same
/// admission (a readmitted record has another creation time, and its later
/// time is no extension), and the mirror's time later.
pub fn extension_lost(row: HoldTerm, mirror: HoldTerm) -> bool {
    row.status == ReservationStatus::Reserved
        && mirror.status == ReservationStatus::Reserved
        && mirror.admitted_ms == row.admitted_ms
        && mirror.expires_ms > row.expires_ms
}

/// One reservation as the API shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reservation {
    pub request_id: RequestId,
    pub sku_id: SkuId,
    pub user_id: UserId,
    pub count: u32,
    pub status: ReservationStatus,
    /// Milliseconds since the Unix epoch, from Redis `TIME`.
    pub created_at_ms: u64,
    /// Milliseconds since the Unix epoch after which an unpaid reservation is released.
    pub expires_at_ms: u64,
    /// The client that made it (`auth.required`, contract §6.2); none: a
    /// hold of no one. Never shown to a caller.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::ReservationStatus::*;

    #[test]
    fn only_reserved_has_exits() {
        assert!(Reserved.can_become(Confirmed));
        assert!(Reserved.can_become(Released));
        assert!(Reserved.can_become(Rejected));
        for from in [Confirmed, Released, Rejected] {
            for to in [Reserved, Confirmed, Released, Rejected] {
                assert!(!from.can_become(to), "{from:?} -> {to:?}");
            }
        }
    }

    #[test]
    fn status_names_round_trip() {
        for s in [Reserved, Confirmed, Released, Rejected] {
            assert_eq!(super::ReservationStatus::parse(s.as_str()), Some(s));
        }
        assert_eq!(super::ReservationStatus::parse("reserved"), None);
    }

    #[test]
    fn only_a_later_time_of_the_same_reserved_admission_proves_a_lost_extension() {
        use super::{extension_lost, HoldTerm};
        let row = HoldTerm {
            status: Reserved,
            admitted_ms: 1_000,
            expires_ms: 901_000,
        };
        let later = HoldTerm {
            expires_ms: 1_801_000,
            ..row
        };
        assert!(extension_lost(row, later));
        assert!(!extension_lost(row, row), "the same time is no extension");
        let readmitted = HoldTerm {
            admitted_ms: 2_000,
            ..later
        };
        assert!(!extension_lost(row, readmitted), "another admission");
        for settled in [Confirmed, Released, Rejected] {
            let mirror = HoldTerm {
                status: settled,
                ..later
            };
            assert!(!extension_lost(row, mirror), "mirror {settled:?}");
            let decided = HoldTerm {
                status: settled,
                ..row
            };
            assert!(!extension_lost(decided, later), "row {settled:?}");
        }
    }

    #[test]
    fn live_means_reserved_or_confirmed() {
        assert!(Reserved.is_live() && Confirmed.is_live());
        assert!(!Released.is_live() && !Rejected.is_live());
    }
}
