//! A counter series whose labels are fixed at compile time, bound once and
//! kept. `metrics::counter!` builds the series' key and looks it up in the
//! recorder's registry on every call (~900 instructions: a tenth of what a
//! reservation's pass check costs beside its SHA-256); a kept handle is one
//! atomic add.
//!
//! As `roles/api/request_series.rs` does for the request series, a handle is
//! kept only once the process's recorder is installed
//! ([`super::recorder_installed`]): one taken before would count nowhere for
//! good. Until then each call binds anew, which is what the macro does.

use std::sync::OnceLock;

use metrics::Counter;

/// One series, bound by `bind` (a `metrics::counter!` with its name and
/// labels) on first use.
pub struct KeptCounter {
    handle: OnceLock<Counter>,
    bind: fn() -> Counter,
}

impl KeptCounter {
    /// The series `bind` names, not yet bound.
    pub const fn new(bind: fn() -> Counter) -> Self {
        Self {
            handle: OnceLock::new(),
            bind,
        }
    }

    /// Counts one.
    pub fn increment(&self) {
        if !super::recorder_installed() {
            return (self.bind)().increment(1);
        }
        self.handle.get_or_init(self.bind).increment(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    static EXAMPLE: KeptCounter = KeptCounter::new(|| metrics::counter!("kept_counter_test_total"));

    #[test]
    fn a_kept_counter_counts_in_the_recorder_once_installed() {
        let handle = super::super::metrics_handle();
        EXAMPLE.increment();
        EXAMPLE.increment();
        let text = handle.render();
        assert!(
            text.lines().any(|l| l == "kept_counter_test_total 2"),
            "{text}"
        );
    }
}
