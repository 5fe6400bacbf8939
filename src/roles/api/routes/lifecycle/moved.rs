//! What a move of a hold (confirm, cancel, extend) came to, whichever its
//! family: each family's outcome of `ops::lifecycle` turned into one
//! [`Moved`], and the one answer of it. Only the 404 differs by family.

use actix_web::HttpResponse;

use super::Target;
use crate::db::ledger::LedgerRow;
use crate::db::orders::OrderRow;
use crate::domain::{ReservationStatus, SkuId, UserId};
use crate::ops::lifecycle::{
    ExtendOutcome, OrderExtendOutcome, OrderTransitionOutcome, TransitionOutcome,
};
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

impl Shown {
    fn of_line(row: &LedgerRow) -> Self {
        Self {
            view: HoldView::Reservation(ReservationView::new(&row.to_reservation(), Some(true))),
            user_id: row.user_id,
            skus: vec![row.sku_id],
        }
    }

    fn of_order(order: &OrderRow) -> Self {
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
    pub(super) fn of_line(outcome: TransitionOutcome) -> Self {
        match outcome {
            TransitionOutcome::Done { row, changed } => Self::Done {
                hold: Shown::of_line(&row),
                changed,
            },
            TransitionOutcome::Conflict { row } => Self::Final(row.status),
            TransitionOutcome::NotFound => Self::NotFound,
            TransitionOutcome::OrderLine => Self::OrderLine,
            TransitionOutcome::NotYetExpired => Self::NotYetExpired,
        }
    }

    pub(super) fn of_order(outcome: OrderTransitionOutcome) -> Self {
        match outcome {
            OrderTransitionOutcome::Done { row, changed } => Self::Done {
                hold: Shown::of_order(&row),
                changed,
            },
            OrderTransitionOutcome::Conflict { row } => Self::Final(row.status),
            OrderTransitionOutcome::NotFound => Self::NotFound,
            OrderTransitionOutcome::OrderLine => Self::OrderLine,
            OrderTransitionOutcome::NotYetExpired => Self::NotYetExpired,
        }
    }

    pub(super) fn of_line_extension(outcome: ExtendOutcome, max: u32) -> Self {
        match outcome {
            ExtendOutcome::Extended { row, .. } => Self::extended(Shown::of_line(&row)),
            ExtendOutcome::LimitReached { .. } => Self::LimitReached(max),
            ExtendOutcome::Final { row } => Self::Final(row.status),
            ExtendOutcome::NotFound => Self::NotFound,
            ExtendOutcome::OrderLine => Self::OrderLine,
        }
    }

    pub(super) fn of_order_extension(outcome: OrderExtendOutcome, max: u32) -> Self {
        match outcome {
            OrderExtendOutcome::Extended { row, .. } => Self::extended(Shown::of_order(&row)),
            OrderExtendOutcome::LimitReached { .. } => Self::LimitReached(max),
            OrderExtendOutcome::Final { row } => Self::Final(row.status),
            OrderExtendOutcome::NotFound => Self::NotFound,
            OrderExtendOutcome::OrderLine => Self::OrderLine,
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
