//! The outage log (`health::outage`) keys an outage by the dependency's name:
//! `failed(name)` starts it, `answered(name)` ends it, and the name is the
//! `dependency` label of `stockd_dependency_failures_total`. A name no probe
//! ever answers for starts an outage that never ends (no `outage.end`, and
//! every later failure an `outage.ongoing`) and a label no alert or dashboard
//! knows. Read from the sources: every literal name given to `failed` or to
//! `ApiError::unavailable` must be one the probes answer for.

use crate::helpers::sources::{code_of, sources, src_dir};

/// The dependencies whose outages end: `stockd_dependency_up`'s probes
/// (`roles/gauges.rs`: redis, mysql, amqp) and the trace exporter's
/// (`otel/export.rs`: the collector).
const ANSWERED: [&str; 4] = ["redis", "mysql", "amqp", "otlp_collector"];

/// The literal first arguments of every call `call` in `text`.
fn names_given(text: &str, call: &str) -> Vec<String> {
    text.match_indices(call)
        .filter_map(|(at, _)| {
            let rest = text[at + call.len()..].trim_start();
            let quoted = rest.strip_prefix('"')?;
            Some(quoted[..quoted.find('"')?].to_string())
        })
        .collect()
}

#[test]
fn every_outage_started_is_one_a_probe_can_end() {
    let mut files = Vec::new();
    sources(&src_dir(""), &mut files);
    let mut wrong = Vec::new();
    for file in files {
        let text = code_of(&std::fs::read_to_string(&file).unwrap());
        for call in ["unavailable(", "outage::failed("] {
            for name in names_given(&text, call) {
                if !ANSWERED.contains(&name.as_str()) {
                    wrong.push(format!("{}: {call}\"{name}\"", file.display()));
                }
            }
        }
    }
    assert!(wrong.is_empty(), "outages no probe ends: {wrong:#?}");
}
