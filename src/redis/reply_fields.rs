//! An order script's reply (a list of strings) read field by field: a field
//! missing or misread is a `BadReply` naming the script and the whole reply.
//! The order scripts (`orders.rs`, `order_intents.rs`) answer a replay the
//! same way (`REPLAY`, the record's status, created and expiry time), and
//! read it here.

use super::RedisError;
use crate::domain::ReservationStatus;

/// The reply of the script `what`.
pub(super) struct Fields<'a> {
    what: &'a str,
    reply: &'a [String],
}

impl<'a> Fields<'a> {
    pub(super) fn new(what: &'a str, reply: &'a [String]) -> Self {
        Self { what, reply }
    }

    /// The reply is not one the script gives.
    pub(super) fn bad(&self) -> RedisError {
        RedisError::BadReply(format!("{}: {:?}", self.what, self.reply))
    }

    /// Field `i` as a number.
    pub(super) fn num(&self, i: usize) -> Result<u64, RedisError> {
        (self.reply.get(i))
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| self.bad())
    }

    /// Field `i` as a record's status.
    pub(super) fn status(&self, i: usize) -> Result<ReservationStatus, RedisError> {
        (self.reply.get(i))
            .and_then(|s| ReservationStatus::parse(s))
            .ok_or_else(|| self.bad())
    }
}
