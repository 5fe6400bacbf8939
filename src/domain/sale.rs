//! A SKU's sale terms — when it sells (the window) and whether a hold of it
//! needs a verified pass — and the api node's early answer from them
//! (docs/contract.md §19).
//!
//! Two clocks judge a window, on purpose: the api node's board answers
//! "not started" from memory only while its own clock is further than a
//! margin before the opening, so a node whose clock runs ahead can never
//! open a sale early; within the margin, and for the opening itself, the
//! admission script decides by Redis's `TIME` (`lib/hold.lua`, `hold_gate`),
//! the one clock every node shares.

/// When a SKU sells and who may hold it. The default: always on sale, no
/// pass needed (a SKU with no terms set).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SaleTerms {
    /// The first millisecond (since the epoch) a hold is admitted; None: from
    /// the start.
    pub opens_at_ms: Option<i64>,
    /// The first millisecond no hold is admitted any more; None: never.
    pub closes_at_ms: Option<i64>,
    /// A hold of this SKU must carry a verified pass.
    pub requires_pass: bool,
}

/// Why a hold is refused by its SKU's terms, before any stock is looked at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GateRefusal {
    /// 409 `SALE_NOT_STARTED`: the sale opens at `opens_at_ms`.
    NotStarted { opens_at_ms: i64 },
    /// 409 `SALE_ENDED`.
    Ended,
    /// 403 `PASS_REQUIRED`: the SKU requires a pass and the hold carries none.
    PassRequired,
}

impl GateRefusal {
    /// Label of the `result` dimension of the hold metrics.
    pub fn label(&self) -> &'static str {
        match self {
            Self::NotStarted { .. } => "sale_not_started",
            Self::Ended => "sale_ended",
            Self::PassRequired => "pass_required",
        }
    }

    /// Reads the admission scripts' words for a refusal (`lib/hold.lua`):
    /// `SALE_NOT_STARTED <opens ms>`, `SALE_ENDED`, `PASS_REQUIRED`. None for
    /// any other word (or a missing opening).
    pub fn from_script(word: &str, arg: Option<&str>) -> Option<Self> {
        match word {
            "SALE_NOT_STARTED" => Some(Self::NotStarted {
                opens_at_ms: arg?.parse().ok()?,
            }),
            "SALE_ENDED" => Some(Self::Ended),
            "PASS_REQUIRED" => Some(Self::PassRequired),
            _ => None,
        }
    }
}

/// A sale window as the SKU admin sets it: an opening, and a close after
/// it or none (the API checks `opens < closes`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    pub opens_at_ms: i64,
    pub closes_at_ms: Option<i64>,
}

/// What a SKU admin `PUT` asks of the terms; `None` keeps what the SKU has.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TermsChange {
    /// `Some(None)`: remove the window (`"sale": null`).
    pub window: Option<Option<Window>>,
    pub requires_pass: Option<bool>,
}

/// A change refused because the sale opened at `opened_at_ms` (409
/// `SALE_OPEN`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpenedSale {
    /// `"sale": null` of an opened sale.
    WindowRemoved { opened_at_ms: i64 },
    /// Another `opens_at` for an opened sale.
    OpeningMoved { opened_at_ms: i64 },
}

impl SaleTerms {
    /// The terms after `change` at `now_ms`: an opening that has passed
    /// cannot move, nor its window be removed (409 `SALE_OPEN`); the close
    /// may move, and a sale not yet open may change whole.
    pub fn changed(&self, change: &TermsChange, now_ms: i64) -> Result<SaleTerms, OpenedSale> {
        let mut next = *self;
        if let Some(window) = change.window {
            let opened = self.opens_at_ms.filter(|_| self.has_opened(now_ms));
            match (opened, window) {
                (Some(opened_at_ms), None) => {
                    return Err(OpenedSale::WindowRemoved { opened_at_ms })
                }
                (Some(opened_at_ms), Some(w)) if w.opens_at_ms != opened_at_ms => {
                    return Err(OpenedSale::OpeningMoved { opened_at_ms })
                }
                _ => {}
            }
            next.opens_at_ms = window.map(|w| w.opens_at_ms);
            next.closes_at_ms = window.and_then(|w| w.closes_at_ms);
        }
        if let Some(requires_pass) = change.requires_pass {
            next.requires_pass = requires_pass;
        }
        Ok(next)
    }

    /// The api node's early answer for a hold at `now_ms` (its own clock,
    /// offset included): `NotStarted` only while `now_ms` is more than
    /// `margin_ms` before the opening (within the margin Redis decides);
    /// `Ended` from the close on; then `PassRequired` when the hold carries
    /// no pass. None: ask Redis.
    pub fn early_refusal(
        &self,
        now_ms: i64,
        margin_ms: i64,
        carries_pass: bool,
    ) -> Option<GateRefusal> {
        if let Some(refusal) = self.window_refusal(now_ms, margin_ms) {
            return Some(refusal);
        }
        (self.requires_pass && !carries_pass).then_some(GateRefusal::PassRequired)
    }

    /// The window's part of [`Self::early_refusal`].
    pub fn window_refusal(&self, now_ms: i64, margin_ms: i64) -> Option<GateRefusal> {
        if let Some(opens_at_ms) = self.opens_at_ms {
            if now_ms.saturating_add(margin_ms) < opens_at_ms {
                return Some(GateRefusal::NotStarted { opens_at_ms });
            }
        }
        match self.closes_at_ms {
            Some(closes) if now_ms >= closes => Some(GateRefusal::Ended),
            _ => None,
        }
    }

    /// The sale has opened at `now_ms`: it has a window whose opening is
    /// past (a SKU with no window is not "a sale that opened").
    pub fn has_opened(&self, now_ms: i64) -> bool {
        self.opens_at_ms.is_some_and(|opens| now_ms >= opens)
    }

    /// Whether a SKU with these terms can need anything of a hold at all
    /// (the handlers skip the board's work for most SKUs).
    pub fn is_open_to_all(&self) -> bool {
        *self == Self::default()
    }
}

/// Seconds to wait until `opens_at_ms` from `now_ms`, rounded up, at least 1
/// (the `Retry-After` of `SALE_NOT_STARTED`).
pub fn retry_after_secs(opens_at_ms: i64, now_ms: i64) -> u64 {
    let wait_ms = opens_at_ms.saturating_sub(now_ms).max(1) as u64;
    wait_ms.div_ceil(1000)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn window(opens: Option<i64>, closes: Option<i64>, pass: bool) -> SaleTerms {
        SaleTerms {
            opens_at_ms: opens,
            closes_at_ms: closes,
            requires_pass: pass,
        }
    }

    #[test]
    fn the_node_says_not_started_only_beyond_the_margin() {
        let terms = window(Some(10_000), None, false);
        assert_eq!(
            terms.early_refusal(8_999, 1_000, false),
            Some(GateRefusal::NotStarted {
                opens_at_ms: 10_000
            })
        );
        assert_eq!(terms.early_refusal(9_000, 1_000, false), None);
        assert_eq!(terms.early_refusal(10_000, 1_000, false), None);
    }

    #[test]
    fn the_close_ends_the_sale_at_its_millisecond() {
        let terms = window(None, Some(5_000), false);
        assert_eq!(terms.early_refusal(4_999, 1_000, false), None);
        assert_eq!(
            terms.early_refusal(5_000, 1_000, false),
            Some(GateRefusal::Ended)
        );
    }

    #[test]
    fn the_window_is_judged_before_the_pass() {
        let terms = window(Some(10_000), None, true);
        assert!(matches!(
            terms.early_refusal(0, 1_000, false),
            Some(GateRefusal::NotStarted { .. })
        ));
        assert_eq!(
            terms.early_refusal(10_000, 1_000, false),
            Some(GateRefusal::PassRequired)
        );
        assert_eq!(terms.early_refusal(10_000, 1_000, true), None);
    }

    #[test]
    fn an_opened_sale_keeps_its_opening_but_may_move_its_close() {
        let open = window(Some(1_000), Some(9_000), false);
        let moved = |opens, closes| TermsChange {
            window: Some(Some(Window {
                opens_at_ms: opens,
                closes_at_ms: closes,
            })),
            requires_pass: None,
        };
        assert!(open.changed(&moved(2_000, Some(9_000)), 1_000).is_err());
        let removed = TermsChange {
            window: Some(None),
            requires_pass: None,
        };
        assert!(open.changed(&removed, 5_000).is_err());
        let later = open.changed(&moved(1_000, Some(20_000)), 5_000).unwrap();
        assert_eq!(later.closes_at_ms, Some(20_000));
        // before the opening everything may change
        assert_eq!(open.changed(&removed, 999).unwrap(), SaleTerms::default());
        let kept = open.changed(&TermsChange::default(), 5_000).unwrap();
        assert_eq!(kept, open);
    }

    #[test]
    fn retry_after_rounds_up_to_whole_seconds() {
        assert_eq!(retry_after_secs(10_000, 8_999), 2);
        assert_eq!(retry_after_secs(10_000, 9_000), 1);
        assert_eq!(retry_after_secs(10_000, 10_500), 1);
    }

    #[test]
    fn the_scripts_words_read_back() {
        assert_eq!(
            GateRefusal::from_script("SALE_NOT_STARTED", Some("12")),
            Some(GateRefusal::NotStarted { opens_at_ms: 12 })
        );
        assert_eq!(
            GateRefusal::from_script("SALE_ENDED", None),
            Some(GateRefusal::Ended)
        );
        assert_eq!(GateRefusal::from_script("SOLD_OUT", None), None);
    }
}
