//! The drop's lines in the run's report (`phases::drop`): what the crowd was
//! told before T, what that cost Redis, how fast the stock went after T.
//! Nothing when the run has no drop.

use std::fmt::Write as _;

use super::numbers::thousands;
use crate::results::{key, PhaseResult};

/// The lines, or an empty string without a drop.
pub fn text(phases: &[PhaseResult]) -> String {
    let Some(d) = (phases.iter())
        .find(|p| p.key == key::DROP)
        .and_then(|p| p.drop.as_ref())
    else {
        return String::new();
    };
    let mut out = String::from("\n");
    let sold = d
        .sold_out_after_ms
        .map_or("did not sell out".to_string(), |ms| {
            format!("sold out {ms:.0} ms after T")
        });
    let first = d
        .first_second
        .map_or("-".to_string(), |l| format!("{:.1}", l.p99));
    let _ = writeln!(
        out,
        "drop: {} units to {} buyers on {} connections: {sold} ({} holds/s); first second: {} \
         answers, p99 {first} ms",
        d.stock,
        d.buyers,
        d.connections,
        thousands(d.holds_per_sec),
        d.first_second_answers
    );
    let _ = writeln!(
        out,
        "drop: before T − {} ms (from memory): {:?}, Redis: {} calls, {} scripts in {:.0} ms \
         (quiet second before: {} calls); within the margin: {:?}, Redis: {} calls, {} scripts",
        d.clock_margin_ms,
        d.before_margin,
        d.redis_before_margin.calls,
        d.redis_before_margin.script_calls,
        d.redis_before_margin.ms,
        d.redis_quiet.calls,
        d.within_margin,
        d.redis_within_margin.calls,
        d.redis_within_margin.script_calls
    );
    let _ = writeln!(
        out,
        "drop: {} forged passes refused, Redis: {} calls, {} scripts",
        d.refused_passes, d.redis_refused_passes.calls, d.redis_refused_passes.script_calls
    );
    out
}
