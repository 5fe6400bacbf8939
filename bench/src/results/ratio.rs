//! One row of the target table: a named ratio, the goal it must meet and the
//! numbers behind it. Built by [`row`] in the report's row makers
//! ([`crate::report::ratios`], `efficiency`, `buckets`), shown by its renderers.

use serde::Serialize;

/// Which way a target points.
#[derive(Debug, Clone, Copy, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Goal {
    AtLeast(f64),
    AtMost(f64),
}

impl Goal {
    fn met(self, value: f64) -> bool {
        match self {
            Goal::AtLeast(t) => value >= t,
            Goal::AtMost(t) => value <= t,
        }
    }

    pub fn text(self) -> String {
        match self {
            Goal::AtLeast(t) => format!("≥ {t}"),
            Goal::AtMost(t) => format!("≤ {t}"),
        }
    }
}

/// One row of the target table.
#[derive(Debug, Clone, Serialize)]
pub struct Ratio {
    pub name: &'static str,
    pub goal: Goal,
    /// `None` when a phase it needs did not run (e.g. `--target`).
    pub value: Option<f64>,
    pub met: Option<bool>,
    /// The numbers behind the value, for a reader checking it.
    pub data: String,
}

pub fn row(name: &'static str, goal: Goal, value: Option<(f64, String)>) -> Ratio {
    match value {
        Some((v, data)) => Ratio {
            name,
            goal,
            value: Some(v),
            met: Some(goal.met(v)),
            data,
        },
        None => Ratio {
            name,
            goal,
            value: None,
            met: None,
            data: "not measured in this run".into(),
        },
    }
}
