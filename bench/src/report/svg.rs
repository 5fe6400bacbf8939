//! `bench.svg`: throughput and p99 per phase as horizontal bars, hand-written
//! SVG (no plotting dependency; it renders on GitHub and in any browser).
//!
//! Throughput is on a linear axis, so "ten times faster" looks ten times longer.
//! p99 spans sub-millisecond Redis calls to strawman lock queues of seconds, so
//! it is on a log axis with a line per decade.

use std::fmt::Write as _;

use super::numbers::thousands;
use crate::results::{key, PhaseResult, Report};

const WIDTH: f64 = 980.0;
const LABEL_W: f64 = 190.0;
const BAR_W: f64 = 620.0;
const ROW_H: f64 = 22.0;
const BAR_H: f64 = 15.0;
const PANEL_GAP: f64 = 56.0;
const TOP: f64 = 46.0;
/// Smallest p99 on the log axis (0.1 ms); anything faster is drawn at the floor.
const LOG_FLOOR_MS: f64 = 0.1;

/// Colours: stockd's paths, the baselines they are judged against, the ceiling.
fn colour(k: &str) -> &'static str {
    match k {
        key::CEILING => "#2e7d32",
        key::STRAWMAN | key::STRAWMAN_1000 | key::CONSUMER_PER_MESSAGE => "#9e9e9e",
        _ => "#1565c0",
    }
}

pub fn chart(report: &Report) -> String {
    let rates: Vec<&PhaseResult> = report
        .phases
        .iter()
        .filter(|p| !p.key.starts_with(key::PERSIST_LAG) && p.throughput > 0.0)
        .collect();
    let p99s: Vec<(&PhaseResult, f64)> = report
        .phases
        .iter()
        .filter_map(|p| p.latency.map(|l| (p, l.p99)))
        .collect();
    let panel1_h = rates.len() as f64 * ROW_H;
    let panel2_top = TOP + panel1_h + PANEL_GAP;
    let height = panel2_top + p99s.len() as f64 * ROW_H + 40.0;
    let mut svg = String::new();
    header(&mut svg, report, height);
    let max_rate = rates.iter().map(|p| p.throughput).fold(1.0, f64::max);
    for (i, p) in rates.iter().enumerate() {
        let y = TOP + i as f64 * ROW_H;
        let w = (p.throughput / max_rate * BAR_W).max(1.0);
        let label = format!("{} {}", thousands(p.throughput), p.unit);
        bar(&mut svg, y, p.key, w, colour(p.key), &label);
    }
    let _ = writeln!(
        svg,
        r#"<text x="10" y="{}" font-size="15" font-weight="bold">p99 latency per phase (ms, log scale; persist lag = 201 → row in MySQL)</text>"#,
        panel2_top - 14.0
    );
    let max_ms = p99s.iter().map(|(_, v)| *v).fold(1.0, f64::max);
    let decades = (max_ms / LOG_FLOOR_MS).log10().ceil().max(1.0);
    let x_of = |ms: f64| (ms.max(LOG_FLOOR_MS) / LOG_FLOOR_MS).log10() / decades * BAR_W;
    for d in 0..=decades as i32 {
        let ms = LOG_FLOOR_MS * 10f64.powi(d);
        let x = LABEL_W + x_of(ms);
        let bottom = panel2_top + p99s.len() as f64 * ROW_H;
        let _ = writeln!(
            svg,
            r##"<line x1="{x:.1}" y1="{:.1}" x2="{x:.1}" y2="{bottom:.1}" stroke="#ddd"/><text x="{x:.1}" y="{:.1}" fill="#777" text-anchor="middle">{}</text>"##,
            panel2_top - 4.0,
            bottom + 14.0,
            trim_ms(ms)
        );
    }
    for (i, (p, ms)) in p99s.iter().enumerate() {
        let y = panel2_top + i as f64 * ROW_H;
        let w = x_of(*ms).max(1.0);
        bar(&mut svg, y, p.key, w, colour(p.key), &format!("{ms:.2} ms"));
    }
    svg.push_str("</svg>\n");
    svg
}

/// The `<svg>` element, its background, the first title and the machine line.
fn header(svg: &mut String, report: &Report, height: f64) {
    let _ = writeln!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(
        svg,
        r##"<rect width="100%" height="100%" fill="#ffffff"/>"##
    );
    let _ = writeln!(
        svg,
        r#"<text x="10" y="20" font-size="15" font-weight="bold">stockd-bench — throughput per phase (linear)</text>"#
    );
    let m = &report.machine;
    let _ = writeln!(
        svg,
        r##"<text x="10" y="34" fill="#555" font-size="11">concurrency {}, {} CPUs ({}), {:.1} GiB, load {:.2} at start; Redis {}, MariaDB {}, RabbitMQ {}; {}</text>"##,
        report.concurrency,
        m.cpus,
        esc(&m.cpu_model),
        m.memory_gib,
        m.load_avg_1m_at_start,
        esc(&m.redis),
        esc(&m.mariadb),
        esc(&m.rabbitmq),
        esc(&report.generated_at)
    );
}

fn bar(svg: &mut String, y: f64, label: &str, w: f64, fill: &str, value: &str) {
    let _ = writeln!(
        svg,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="end">{}</text><rect x="{LABEL_W}" y="{y:.1}" width="{w:.1}" height="{BAR_H}" fill="{fill}"/><text x="{:.1}" y="{:.1}">{}</text>"#,
        LABEL_W - 8.0,
        y + BAR_H - 3.0,
        esc(label),
        LABEL_W + w + 6.0,
        y + BAR_H - 3.0,
        esc(value)
    );
}

fn trim_ms(ms: f64) -> String {
    if ms < 1.0 {
        format!("{ms:.1}")
    } else {
        format!("{ms:.0}")
    }
}

fn esc(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}
