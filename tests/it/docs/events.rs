//! docs/operations.md's event table ("Events") lists exactly the event types
//! stockd publishes (`events::EventType::ALL`): a subscriber binds routing
//! keys from it. `stockd.sku.sold_out` / `.back_in_stock` is one row of two.

use std::collections::BTreeSet;

use stockd::events::EventType;

use super::{at, code_spans, read, tables};

const RUNBOOK: &str = "docs/operations.md";

#[test]
fn the_event_table_lists_every_event_type() {
    let published: BTreeSet<String> = EventType::ALL
        .iter()
        .map(|t| t.as_str().to_string())
        .collect();
    let text = read(RUNBOOK);
    let table = tables(&text)
        .into_iter()
        .find(|t| t.first_header_is("type"))
        .expect("operations.md has an event table headed `type`");
    let mut documented = BTreeSet::new();
    let mut bad = Vec::new();
    for (line, row) in &table.rows {
        let mut last = String::new();
        for span in code_spans(&row[0]) {
            // `.back_in_stock` after `stockd.sku.sold_out`: same prefix.
            let name = match span.strip_prefix('.') {
                Some(tail) => format!("{}.{tail}", &last[..last.rfind('.').unwrap()]),
                None => span,
            };
            if !published.contains(&name) {
                bad.push(format!("{}: `{name}` is no event type", at(RUNBOOK, *line)));
            }
            documented.insert(name.clone());
            last = name;
        }
    }
    for t in published.difference(&documented) {
        bad.push(format!("{RUNBOOK}:{}: no row for `{t}`", table.line));
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}
