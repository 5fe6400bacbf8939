//! The OpenAPI description of the bodies other modules define and the
//! routes serialize as they are: the console's overview (`ops::overview`,
//! `db::console`), the dead-letter listing (`ops::dlq`) and the stock
//! movements (`db::movements`).
//!
//! The OpenAPI derives live in the api alone (`tests/it/driver_fence.rs`):
//! `ops` and `db` describe their values in Rust, and each type here mirrors
//! one of them field by field — same name (the schema's), same doc comments
//! (its descriptions), same serde attributes. A unit test beside each mirror
//! serializes the real value and checks its keys against the mirror's
//! properties, so a field added to one and not the other fails there.

mod console;
mod dlq;
mod movement;

pub use console::Overview;
pub use dlq::{DlqKind, DlqListing};
pub use movement::Movement;

/// The property names of `T`'s schema and the keys of `shown` (a real value
/// serialized), for the mirror tests.
#[cfg(test)]
fn keys_of<T: utoipa::PartialSchema>(
    shown: &serde_json::Value,
) -> (
    std::collections::BTreeSet<String>,
    std::collections::BTreeSet<String>,
) {
    let schema = serde_json::to_value(T::schema()).expect("a schema serializes");
    let names = |v: &serde_json::Value| v.as_object().expect("an object").keys().cloned().collect();
    (names(&schema["properties"]), names(shown))
}
