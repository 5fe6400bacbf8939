//! Turns the reserve script's reply (a list of strings) into a typed outcome.
//! Kept apart from the I/O so the mapping is unit-tested.

use crate::domain::{
    GateRefusal, OutboxPlace, RequestId, Reservation, ReservationStatus, ReserveOutcome, SkuId,
    UserId,
};

use super::RedisError;

/// What the caller asked for; needed to rebuild the reservation from a short reply.
pub struct ReserveRequest<'a> {
    pub sku_id: SkuId,
    pub request_id: &'a RequestId,
    pub user_id: UserId,
    pub count: u32,
    pub bucket: u16,
    /// The client the record names when this request made it.
    pub client: Option<&'a str>,
}

pub fn parse_reserve_reply(
    req: &ReserveRequest<'_>,
    reply: &[String],
) -> Result<ReserveOutcome, RedisError> {
    let bad = || RedisError::BadReply(format!("{reply:?}"));
    let num = |i: usize| -> Result<u64, RedisError> {
        reply
            .get(i)
            .and_then(|s| s.parse::<u64>().ok())
            .ok_or_else(bad)
    };
    let reservation = |status: ReservationStatus, created: u64, expires: u64| Reservation {
        request_id: req.request_id.clone(),
        sku_id: req.sku_id,
        user_id: req.user_id,
        count: req.count,
        status,
        created_at_ms: created,
        expires_at_ms: expires,
        client: req.client.map(str::to_string),
    };
    let tag = reply.first().map(String::as_str).ok_or_else(bad)?;
    Ok(match tag {
        "OK" => ReserveOutcome::Reserved {
            available_after: reply
                .get(1)
                .and_then(|s| s.parse::<i64>().ok())
                .map(|v| v.max(0) as u64)
                .ok_or_else(bad)?,
            reservation: reservation(ReservationStatus::Reserved, num(2)?, num(3)?),
            // the call's entry; when several share it, this one's index and how many
            outbox: {
                let entry_id = reply.get(4).cloned().ok_or_else(bad)?;
                match reply.len() {
                    5 => OutboxPlace::alone(entry_id),
                    _ => OutboxPlace {
                        entry_id,
                        index: u16::try_from(num(5)?).map_err(|_| bad())?,
                        of: u16::try_from(num(6)?).map_err(|_| bad())?,
                    },
                }
            },
            bucket: req.bucket,
        },
        "REPLAY" => {
            let status = reply
                .get(1)
                .and_then(|s| ReservationStatus::parse(s))
                .ok_or_else(bad)?;
            ReserveOutcome::Replayed {
                reservation: reservation(status, num(2)?, num(3)?),
            }
        }
        "MISMATCH" => ReserveOutcome::Mismatch,
        "TAKEN" => ReserveOutcome::Taken,
        "RATE_LIMITED" => ReserveOutcome::RateLimited {
            retry_after_ms: num(1)?,
        },
        "NOT_LOADED" => ReserveOutcome::NotLoaded,
        "LAPSED" => ReserveOutcome::LapseLimit {
            lapsed: num(1)?,
            max: num(2)?,
        },
        "LIMIT" => ReserveOutcome::LimitExceeded {
            bought: num(1)?,
            limit: num(2)?,
        },
        "SOLD_OUT" => ReserveOutcome::SoldOut,
        "PASS_USED" => ReserveOutcome::PassUsed,
        "SALE_NOT_STARTED" | "SALE_ENDED" | "PASS_REQUIRED" => ReserveOutcome::Gated(
            GateRefusal::from_script(tag, reply.get(1).map(String::as_str)).ok_or_else(bad)?,
        ),
        "INSUFFICIENT" => ReserveOutcome::Insufficient { available: num(1)? },
        "BACKPRESSURE" => ReserveOutcome::Backpressure,
        "ERROR" => {
            return Err(RedisError::Script(
                reply.get(1).cloned().unwrap_or_default(),
            ))
        }
        _ => return Err(bad()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(rid: &RequestId) -> ReserveRequest<'_> {
        ReserveRequest {
            sku_id: SkuId::new(1).unwrap(),
            request_id: rid,
            user_id: UserId::new(2).unwrap(),
            count: 3,
            bucket: 0,
            client: None,
        }
    }

    fn parse(reply: &[&str]) -> Result<ReserveOutcome, RedisError> {
        let rid = RequestId::parse("r1").unwrap();
        let owned: Vec<String> = reply.iter().map(|s| s.to_string()).collect();
        parse_reserve_reply(&req(&rid), &owned)
    }

    #[test]
    fn a_reserved_reply_carries_times_and_the_outbox_place() {
        let out = parse(&["OK", "7", "1000", "2000", "1-0", "2", "16"]).unwrap();
        let ReserveOutcome::Reserved {
            reservation,
            available_after,
            outbox,
            ..
        } = out
        else {
            panic!("{out:?}")
        };
        assert_eq!(available_after, 7);
        let place = OutboxPlace {
            entry_id: "1-0".into(),
            index: 2,
            of: 16,
        };
        assert_eq!(outbox, place);
        // an entry of its own: no place given
        let Ok(ReserveOutcome::Reserved { outbox, .. }) =
            parse(&["OK", "7", "1000", "2000", "1-0"])
        else {
            panic!("an admission")
        };
        assert_eq!(outbox, OutboxPlace::alone("1-0".into()));
        // a place half given is not an admission
        assert!(parse(&["OK", "7", "1000", "2000", "1-0", "2"]).is_err());
        assert_eq!(reservation.count, 3);
        assert_eq!(reservation.status, ReservationStatus::Reserved);
        assert_eq!(
            (reservation.created_at_ms, reservation.expires_at_ms),
            (1000, 2000)
        );
    }

    #[test]
    fn refusals_map_to_their_outcomes() {
        assert_eq!(parse(&["SOLD_OUT"]).unwrap(), ReserveOutcome::SoldOut);
        assert_eq!(parse(&["NOT_LOADED"]).unwrap(), ReserveOutcome::NotLoaded);
        assert_eq!(parse(&["MISMATCH"]).unwrap(), ReserveOutcome::Mismatch);
        assert_eq!(parse(&["TAKEN"]).unwrap(), ReserveOutcome::Taken);
        assert_eq!(
            parse(&["INSUFFICIENT", "2"]).unwrap(),
            ReserveOutcome::Insufficient { available: 2 }
        );
        assert_eq!(
            parse(&["LIMIT", "1", "1"]).unwrap(),
            ReserveOutcome::LimitExceeded {
                bought: 1,
                limit: 1
            }
        );
        assert_eq!(
            parse(&["LAPSED", "3", "2"]).unwrap(),
            ReserveOutcome::LapseLimit { lapsed: 3, max: 2 }
        );
        assert_eq!(
            parse(&["BACKPRESSURE"]).unwrap(),
            ReserveOutcome::Backpressure
        );
    }

    #[test]
    fn a_replay_keeps_the_stored_status() {
        let out = parse(&["REPLAY", "CONFIRMED", "5", "6"]).unwrap();
        let ReserveOutcome::Replayed { reservation } = out else {
            panic!()
        };
        assert_eq!(reservation.status, ReservationStatus::Confirmed);
    }

    #[test]
    fn garbage_is_an_error_not_an_outcome() {
        assert!(parse(&[]).is_err());
        assert!(parse(&["WHAT"]).is_err());
        assert!(parse(&["OK", "x"]).is_err());
        assert!(parse(&["REPLAY", "NOPE", "1", "2"]).is_err());
    }

    #[test]
    fn a_command_error_of_one_request_is_an_error_of_that_request() {
        let err = parse(&["ERROR", "WRONGTYPE"]).unwrap_err();
        assert!(
            matches!(err, RedisError::Script(ref text) if text == "WRONGTYPE"),
            "{err}"
        );
    }
}
