//! Pure types and rules of the business: ids, counts, reservation states, the
//! deduction every store shares, a SKU's sale terms and the outcomes of an
//! admission decision.
//! Nothing here does I/O, so everything here is unit-tested beside the code.

pub mod admission;
pub mod deduction;
pub mod ids;
pub mod order;
pub mod outbox_place;
pub mod outcome;
pub mod ownership;
pub mod reservation;
pub mod sale;
pub mod stock;

pub use deduction::{Deduction, Readmission, COUNT_MAX};
pub use ids::{RequestId, SkuId, UserId};
pub use order::{OrderLine, OrderLines, LINES_MAX};
pub use outbox_place::OutboxPlace;
pub use outcome::ReserveOutcome;
pub use ownership::{Requester, CLIENT_NAME_MAX_LEN};
pub use reservation::{extension_lost, is_due, HoldTerm, Reservation, ReservationStatus};
pub use sale::{GateRefusal, OpenedSale, SaleTerms, TermsChange, Window};
pub use stock::TOTAL_STOCK_MAX;
