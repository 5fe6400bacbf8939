//! How stockd behaves while a dependency is down: the circuit breaker that
//! pauses the workers, and the outage log that reports an outage once instead
//! of once per failed request.

pub mod breaker;
pub mod outage;

pub use breaker::Breaker;
