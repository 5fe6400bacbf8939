//! The nftables rules that cut or thin a link, as text for `nft -f -`.
//! Each host namespace has one table with an input and an output chain
//! (policy accept); a cut adds a pair of `drop` rules matching the peer's
//! address (and the peer's port, when the peer is one server among several
//! on the same address), a flap the same pair with `numgen random`; heal
//! flushes the chains. Rules are stateless: an established connection loses
//! its packets like a new one (no conntrack), and nothing sends a RST.

use std::net::Ipv4Addr;

use super::topology::TABLE;

/// One link seen from `host`: every packet to and from `peer` (only the
/// peer's `peer_port`, when set) is dropped inside `host`'s namespace.
#[derive(Debug, Clone)]
pub struct Link {
    pub host: String,
    pub peer: Ipv4Addr,
    pub peer_port: Option<u16>,
    /// Only what the peer sends is dropped: requests arrive and are
    /// executed, their replies (and the peer's ACKs) are lost.
    pub replies_only: bool,
}

impl Link {
    /// Every packet between `host` and the address `peer`.
    pub fn to_addr(host: &str, peer: Ipv4Addr) -> Self {
        Self {
            host: host.to_string(),
            peer,
            peer_port: None,
            replies_only: false,
        }
    }

    /// Packets between `host` and the server `peer:port` (its TCP port).
    pub fn to_server(host: &str, peer: Ipv4Addr, port: u16) -> Self {
        Self {
            host: host.to_string(),
            peer,
            peer_port: Some(port),
            replies_only: false,
        }
    }

    /// The same link, cut in the peer → host direction only.
    pub fn replies_only(mut self) -> Self {
        self.replies_only = true;
        self
    }
}

/// The table and its two chains, created once per host namespace.
pub fn table_setup() -> String {
    format!(
        "add table inet {TABLE}\n\
         add chain inet {TABLE} input {{ type filter hook input priority 0; policy accept; }}\n\
         add chain inet {TABLE} output {{ type filter hook output priority 0; policy accept; }}\n"
    )
}

/// The two rules of one link (in from the peer, out to it), each with a
/// counter; `loss_percent` makes them drop that share of packets at random.
pub fn drop_rules(link: &Link, loss_percent: Option<u8>) -> String {
    let (dport, sport) = match link.peer_port {
        Some(p) => (format!(" tcp dport {p}"), format!(" tcp sport {p}")),
        None => (String::new(), String::new()),
    };
    let random = match loss_percent {
        Some(p) => {
            assert!(p <= 100, "loss {p} %");
            format!(" numgen random mod 100 < {p}")
        }
        None => String::new(),
    };
    let peer = link.peer;
    let inbound =
        format!("add rule inet {TABLE} input ip saddr {peer}{sport}{random} counter drop\n");
    if link.replies_only {
        return inbound;
    }
    format!("add rule inet {TABLE} output ip daddr {peer}{dport}{random} counter drop\n{inbound}")
}

/// Removes every rule, keeps the chains.
pub fn flush() -> String {
    format!("flush table inet {TABLE}\n")
}

/// Sum of the `counter packets N` of a `list table` output.
pub fn sum_packets(listing: &str) -> u64 {
    listing
        .split("packets ")
        .skip(1)
        .filter_map(|rest| rest.split_whitespace().next()?.parse::<u64>().ok())
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cut_to_a_server_matches_its_port_both_ways() {
        let link = Link::to_server("api", Ipv4Addr::new(10, 231, 1, 11), 6379);
        let rules = drop_rules(&link, None);
        assert!(rules.contains("output ip daddr 10.231.1.11 tcp dport 6379 counter drop"));
        assert!(rules.contains("input ip saddr 10.231.1.11 tcp sport 6379 counter drop"));
    }

    #[test]
    fn a_replies_only_cut_keeps_the_requests_going() {
        let link = Link::to_server("api", Ipv4Addr::new(10, 231, 1, 11), 6379).replies_only();
        let rules = drop_rules(&link, None);
        assert!(!rules.contains("output"));
        assert!(rules.contains("input ip saddr 10.231.1.11 tcp sport 6379 counter drop"));
    }

    #[test]
    fn a_flap_drops_a_random_share() {
        let link = Link::to_addr("api", Ipv4Addr::new(10, 231, 1, 11));
        let rules = drop_rules(&link, Some(30));
        assert!(rules.contains("ip daddr 10.231.1.11 numgen random mod 100 < 30 counter drop"));
    }

    #[test]
    fn counters_are_summed() {
        let listing = "counter packets 3 bytes 180 drop\n counter packets 4 bytes 9 drop";
        assert_eq!(sum_packets(listing), 7);
    }
}
