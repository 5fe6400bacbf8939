//! A role's Prometheus counters, as the scenarios read them (publish
//! outcomes, relay republishes, consumer duplicates): scraped from
//! `/metrics` on the role's port, at its address (its namespace's, in a
//! partition scenario).

use std::collections::BTreeMap;

use super::Scenario;

/// The Prometheus text of role process `key` (empty when it does not answer).
pub async fn scrape(sc: &Scenario, key: &str) -> String {
    let Some(port) = sc.stack.role_port(key) else {
        return String::new();
    };
    let url = format!("http://{}:{port}/metrics", sc.stack.place_of(key).ip);
    match sc.stack.http.get(&url).send().await {
        Ok(resp) => resp.text().await.unwrap_or_default(),
        Err(_) => String::new(),
    }
}

/// Sum of the samples of `name` whose labels contain `label`.
pub fn sum(text: &str, name: &str, label: &str) -> u64 {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let (series, value) = l.rsplit_once(' ')?;
            let bare = series.split('{').next()?;
            (bare == name && series.contains(label)).then(|| value.parse::<f64>().ok())?
        })
        .sum::<f64>() as u64
}

/// The consumer's messages by outcome (`applied`, `duplicate`: the ledger
/// had the request id already, `rejected`).
pub async fn consumer_outcomes(sc: &Scenario) -> BTreeMap<String, u64> {
    let text = scrape(sc, "consumer").await;
    ["applied", "duplicate", "rejected"]
        .iter()
        .map(|o| {
            let label = format!("outcome=\"{o}\"");
            let n = sum(&text, "stockd_consumer_messages_total", &label);
            (o.to_string(), n)
        })
        .collect()
}

/// The api's publish outcomes (`ack`, `nack`, `timeout`, `error`,
/// `returned`) and the relay's republishes.
pub async fn publish_counts(sc: &Scenario) -> (BTreeMap<String, u64>, u64) {
    let api = scrape(sc, "api").await;
    let publishes = ["ack", "nack", "timeout", "error", "returned"]
        .iter()
        .map(|o| {
            let label = format!("outcome=\"{o}\"");
            (o.to_string(), sum(&api, "stockd_publish_total", &label))
        })
        .collect();
    let republished = sum(&api, "stockd_relay_republished_total", "");
    (publishes, republished)
}
