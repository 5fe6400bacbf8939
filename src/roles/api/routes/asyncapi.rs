//! `GET /asyncapi.json`: the AsyncAPI 3.0 description of the events stockd
//! publishes on `<prefix>events` (docs/asyncapi.json, compiled in). The
//! integration tests validate every message they capture against it
//! (`tests/events_check.py`), so the document and the wire cannot drift apart.

use actix_web::HttpResponse;

/// The document, as checked in.
pub const DOCUMENT: &str = include_str!("../../../../docs/asyncapi.json");

/// `GET /asyncapi.json`
#[utoipa::path(
    get,
    path = "/asyncapi.json",
    tag = "operations",
    operation_id = "asyncapi",
    responses(
        (status = 200, description = "The AsyncAPI 3.0 document of the events exchange",
         content_type = "application/json", body = Object),
    )
)]
pub async fn serve() -> HttpResponse {
    HttpResponse::Ok()
        .content_type("application/json")
        .body(DOCUMENT)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::EventType;

    #[test]
    fn the_document_is_asyncapi_3_and_names_every_event_type() {
        let doc: serde_json::Value = serde_json::from_str(DOCUMENT).unwrap();
        assert_eq!(doc["asyncapi"], "3.0.0");
        let messages = doc["components"]["messages"].as_object().unwrap();
        let names: Vec<&str> = messages
            .values()
            .filter_map(|m| m["name"].as_str())
            .collect();
        for kind in EventType::ALL {
            assert!(
                names.contains(&kind.as_str()),
                "{} is not documented",
                kind.as_str()
            );
        }
        assert_eq!(
            names.len(),
            EventType::ALL.len(),
            "a documented type stockd never sends"
        );
    }
}
