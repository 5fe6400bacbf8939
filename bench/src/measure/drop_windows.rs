//! A drop's answers cut into the windows its questions are about, by their
//! times from the opening T ([`Answer`], kept by `drive::crowd`):
//!
//! - answered earlier than `sale.clock_margin_ms` before T (so also decided
//!   then): the api answers from memory (contract §19), each must be
//!   `SALE_NOT_STARTED`;
//! - the rest of those sent before T: within the margin, where Redis's
//!   clock decides (or sent earlier but answered later);
//! - answered in the first second after T: the rush, whose latency the drop
//!   reports;
//! - the last hold's answer: T → sold out.
//!
//! Pure: the phase reads the crowd, this counts.

use std::collections::BTreeMap;

use crate::measure::stats::{micros, Kind, Outcome, Percentiles};

/// µs in the first second after T.
const FIRST_SECOND_US: i64 = 1_000_000;

/// One answer of the crowd: when it was sent and answered, in µs from T
/// (negative before T), and how it is counted.
#[derive(Debug, Clone)]
pub struct Answer {
    pub sent_us: i64,
    pub answered_us: i64,
    pub outcome: Outcome,
}

/// What the windows hold.
#[derive(Debug, Default)]
pub struct Windows {
    /// Answers given earlier than the margin before T, by label.
    pub before_margin: BTreeMap<String, u64>,
    /// The other answers to requests sent before T, by label.
    pub within_margin: BTreeMap<String, u64>,
    /// Holds (201/202).
    pub held: u64,
    /// Holds answered before T (must be none).
    pub held_before_t: u64,
    /// T → the last hold's answer, when `stock` units were held.
    pub sold_out_after_ms: Option<f64>,
    /// Latency of the answers given in the first second after T.
    pub first_second: Option<Percentiles>,
    pub first_second_answers: u64,
    /// Answers to requests sent at or after T, and the last one's time (µs).
    pub after_t_answers: u64,
    pub last_answer_us: i64,
}

/// Cuts `answers` into the windows for a sale of `stock` units whose api
/// answers from memory earlier than `margin_us` before T.
pub fn of_answers<'a>(
    answers: impl Iterator<Item = &'a Answer>,
    margin_us: i64,
    stock: u64,
) -> Windows {
    let mut w = Windows::default();
    let mut first_second = Vec::new();
    let mut last_hold_us = i64::MIN;
    for a in answers {
        let label = a.outcome.label.to_string();
        if a.answered_us < -margin_us {
            *w.before_margin.entry(label).or_default() += 1;
        } else if a.sent_us < 0 {
            *w.within_margin.entry(label).or_default() += 1;
        } else {
            w.after_t_answers += 1;
        }
        if (0..FIRST_SECOND_US).contains(&a.answered_us) {
            let latency = a.answered_us - a.sent_us;
            first_second.push(micros(std::time::Duration::from_micros(latency as u64)));
        }
        if a.outcome.kind == Kind::Done {
            w.held += 1;
            w.held_before_t += u64::from(a.answered_us < 0);
            last_hold_us = last_hold_us.max(a.answered_us);
        }
        w.last_answer_us = w.last_answer_us.max(a.answered_us);
    }
    w.first_second_answers = first_second.len() as u64;
    w.first_second = Percentiles::of_micros(&mut first_second);
    if w.held >= stock && last_hold_us >= 0 {
        w.sold_out_after_ms = Some(last_hold_us as f64 / 1000.0);
    }
    w
}

#[cfg(test)]
mod tests {
    use super::{of_answers, Answer};
    use crate::measure::stats::Outcome;

    fn answer(sent_us: i64, answered_us: i64, outcome: Outcome) -> Answer {
        Answer {
            sent_us,
            answered_us,
            outcome,
        }
    }

    /// Each answer lands in the window of its answer time (one sent before
    /// the margin but answered within it is the margin's); the first second
    /// is by answer time too; sold out is the last hold's answer.
    #[test]
    fn answers_fall_into_the_windows_of_the_drop() {
        let not_started = || Outcome::refused("409 SALE_NOT_STARTED");
        let answers = [
            answer(-1_800_000, -1_799_000, not_started()),
            answer(-1_200_000, -1_199_000, not_started()),
            answer(-500_000, -499_000, not_started()),
            answer(-1_100_000, -900_000, not_started()),
            answer(-100, 2_000, Outcome::done("201")),
            answer(10_000, 14_000, Outcome::done("201")),
            answer(20_000, 21_000, Outcome::refused("409 SOLD_OUT")),
            answer(1_500_000, 1_501_000, Outcome::refused("409 SOLD_OUT")),
        ];
        let w = of_answers(answers.iter(), 1_000_000, 2);
        assert_eq!(w.before_margin["409 SALE_NOT_STARTED"], 2);
        assert_eq!(w.within_margin["409 SALE_NOT_STARTED"], 2);
        assert_eq!(w.within_margin["201"], 1);
        assert_eq!((w.held, w.held_before_t), (2, 0));
        assert_eq!(w.sold_out_after_ms, Some(14.0));
        assert_eq!(w.first_second_answers, 3);
        assert_eq!(w.first_second.unwrap().max_ms, 4.0);
        assert_eq!((w.after_t_answers, w.last_answer_us), (3, 1_501_000));
    }

    /// Fewer holds than units: the sale did not sell out.
    #[test]
    fn a_sale_short_of_its_stock_has_no_sold_out_time() {
        let answers = [answer(0, 1_000, Outcome::done("201"))];
        assert_eq!(
            of_answers(answers.iter(), 1_000_000, 2).sold_out_after_ms,
            None
        );
    }
}
