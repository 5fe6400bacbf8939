//! What a move of a hold (confirm, cancel, extend) came to, whichever its
//! family: the lifecycle's one outcome, over either family's row, turned
//! into one [`Moved`], and the one answer of it. Only the 404 differs by family.

use actix_web::HttpResponse;

use super::Target;
use crate::db::ledger::LedgerRow;
use crate::db::orders::OrderRow;
use crate::domain::{ReservationStatus, SkuId, UserId};
use crate::ops::lifecycle::{ExtendOutcome, HoldRow, TransitionOutcome};
use crate::roles::api::hold_views::{HoldView, OrderView, ReservationView};
use crate::roles::api::problem::ApiError;

/// What a move of a hold came to, whichever its family.
pub(super) enum Moved {
    /// The hold as MySQL stores it now; `changed` is false on a repeat.
    Done {
        hold: Shown,
        changed: bool,
    },
    /// The hold is final in this state: the move is refused.
    Final(ReservationStatus),
    /// `reservation.max_extensions` (the number) extensions used up.
    LimitReached(u32),
    NotFound,
    /// A single route named a line of an order.
    OrderLine,
    NotYetExpired,
}

/// A hold as MySQL decided it: the body answered and whose SKUs it held.
pub(super) struct Shown {
    view: HoldView,
    pub(super) user_id: UserId,
    pub(super) skus: Vec<SkuId>,
}

impl From<&LedgerRow> for Shown {
    fn from(row: &LedgerRow) -> Self {
        Self {
            view: HoldView::Reservation(ReservationView::new(&row.to_reservation(), Some(true))),
            user_id: row.user_id,
            skus: vec![row.sku_id],
        }
    }
}

impl From<&OrderRow> for Shown {
    fn from(order: &OrderRow) -> Self {
        Self {
            view: HoldView::Order(OrderView {
                persisted: Some(true),
                ..OrderView::of_row(order)
            }),
            user_id: order.user_id,
            skus: order.lines.lines().iter().map(|l| l.sku_id).collect(),
        }
    }
}

impl Moved {
    /// What a confirm or cancel of a hold (its deciding row `R`) came to.
    pub(super) fn of<R: HoldRow>(outcome: TransitionOutcome<R>) -> Self
    where
        for<'a> Shown: From<&'a R>,
    {
        match outcome {
            TransitionOutcome::Done { row, changed } => Self::Done {
                hold: Shown::from(&row),
                changed,
            },
            TransitionOutcome::Conflict { row } => Self::Final(row.status()),
            TransitionOutcome::NotFound => Self::NotFound,
            TransitionOutcome::OrderLine => Self::OrderLine,
            TransitionOutcome::NotYetExpired => Self::NotYetExpired,
        }
    }

    /// What an extension came to (`max`: `reservation.max_extensions`).
    pub(super) fn of_extension<R: HoldRow>(outcome: ExtendOutcome<R>, max: u32) -> Self
    where
        for<'a> Shown: From<&'a R>,
    {
        match outcome {
            ExtendOutcome::Extended { row, .. } => Self::extended(Shown::from(&row)),
            ExtendOutcome::LimitReached { .. } => Self::LimitReached(max),
            ExtendOutcome::Final { row } => Self::Final(row.status()),
            ExtendOutcome::NotFound => Self::NotFound,
            ExtendOutcome::OrderLine => Self::OrderLine,
        }
    }

    fn extended(hold: Shown) -> Self {
        Self::Done {
            hold,
            changed: true,
        }
    }

    /// The span's `stockd.outcome`, as `traces::transition_outcome` names it.
    pub(super) fn label(&self) -> &'static str {
        match self {
            Self::Done { changed: true, .. } => "changed",
            Self::Done { changed: false, .. } => "repeat",
            Self::Final(_) | Self::LimitReached(_) => "conflict",
            Self::NotYetExpired => "not_yet_expired",
            Self::OrderLine => "order_line",
            Self::NotFound => "not_found",
        }
    }
}

/// The answer of a move, the same for both families but for the 404.
pub(super) fn answer(target: &Target, moved: Moved) -> Result<HttpResponse, ApiError> {
    match moved {
        Moved::Done { hold, .. } => Ok(HttpResponse::Ok().json(hold.view)),
        Moved::Final(status) => Err(match status {
            ReservationStatus::Confirmed => ApiError::ReservationConfirmed,
            ReservationStatus::Released => ApiError::ReservationReleased,
            _ => ApiError::ReservationRejected,
        }),
        Moved::NotFound => Err(target.not_found()),
        Moved::OrderLine => Err(ApiError::OrderLine),
        Moved::LimitReached(max) => Err(ApiError::ExtensionLimit(max)),
        Moved::NotYetExpired => unreachable!("only the closer expires"),
    }
}
