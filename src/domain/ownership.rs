//! Holds belong to their client (contract §6.2, "Holds belong to their
//! client"). With `auth.required` a reservation or an order records the name
//! of the client that made it; another client that reads, confirms, cancels
//! or extends it is told it does not exist, and one that sends its id again
//! is told the id is taken. Ids stay global: one `request_id` names one
//! reservation, whoever made it.
//!
//! A hold without a client (made with `auth.required` false, or by a release
//! before owners) belongs to no one: every client may act on it, as before.

/// Longest client name a hold records (`auth.clients[].name`; the MySQL
/// columns `client` are `VARCHAR(64)`, `sql/0010_hold_client.sql`).
pub const CLIENT_NAME_MAX_LEN: usize = 64;

/// Who asks about a hold, as far as ownership goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Requester {
    /// Ownership is not enforced: `auth.required` is false (every caller is
    /// one anonymous client), or a role of stockd itself (the closer, the
    /// reconciler). Records no client.
    Anyone,
    /// A known client of a required-auth API: records its name and may act
    /// only on its own holds and on holds of no one.
    Client(String),
    /// A known client with scope `admin` (operator tools): records its name
    /// and may act on every client's holds.
    Operator(String),
}

impl Requester {
    /// The client name a hold made by this requester records.
    pub fn stamp(&self) -> Option<&str> {
        match self {
            Self::Anyone => None,
            Self::Client(name) | Self::Operator(name) => Some(name),
        }
    }

    /// Whether this requester may see and act on a hold recorded with
    /// `owner` (`None`: a hold of no one).
    pub fn may_act_on(&self, owner: Option<&str>) -> bool {
        match (self, owner) {
            (Self::Client(name), Some(owner)) => name == owner,
            _ => true,
        }
    }

    /// How the admission scripts (`reserve.lua`, `order.lua`,
    /// `order_intent.lua`) take the requester in one argument: empty for
    /// [`Self::Anyone`]; `c<name>` for a client whose ownership is checked;
    /// `a<name>` for an operator (recorded, never refused as another's).
    pub fn script_arg(&self) -> String {
        match self {
            Self::Anyone => String::new(),
            Self::Client(name) => format!("c{name}"),
            Self::Operator(name) => format!("a{name}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Requester::*;

    #[test]
    fn a_client_acts_on_its_own_holds_and_on_holds_of_no_one() {
        let a = Client("a".into());
        assert!(a.may_act_on(Some("a")));
        assert!(a.may_act_on(None));
        assert!(!a.may_act_on(Some("b")));
        assert!(Operator("ops".into()).may_act_on(Some("b")));
        assert!(Anyone.may_act_on(Some("b")));
    }

    #[test]
    fn only_a_known_client_is_recorded_and_the_script_argument_says_how() {
        assert_eq!(Anyone.stamp(), None);
        assert_eq!(Client("a".into()).stamp(), Some("a"));
        assert_eq!(Operator("ops".into()).stamp(), Some("ops"));
        assert_eq!(Anyone.script_arg(), "");
        assert_eq!(Client("a".into()).script_arg(), "ca");
        assert_eq!(Operator("ops".into()).script_arg(), "aops");
    }
}
