//! The client's IP address: the TCP peer, or — when the peer is a trusted
//! proxy (`http.trusted_proxies`) — the rightmost `X-Forwarded-For` address that
//! is not itself a trusted proxy. Anything left of that is what the client
//! wrote and is never believed, so a bot cannot pick its own identity.

use std::net::IpAddr;

use actix_web::HttpRequest;

use crate::config::Cidr;

/// The trusted proxies, parsed once.
#[derive(Debug, Clone, Default)]
pub struct TrustedProxies(Vec<Cidr>);

impl TrustedProxies {
    /// Parses `http.trusted_proxies` (validated at start-up).
    pub fn new(cidrs: &[String]) -> Self {
        Self(cidrs.iter().filter_map(|c| Cidr::parse(c).ok()).collect())
    }

    fn trusts(&self, ip: IpAddr) -> bool {
        self.0.iter().any(|c| c.contains(ip))
    }

    /// The client address of `req` (see the module doc); `None` without a peer.
    /// An IPv4-mapped IPv6 address (`::ffff:10.0.0.1`, a dual-stack socket's
    /// view of an IPv4 peer) is the IPv4 address, so `trusted_proxies` and the
    /// per-IP limit see one address, not two spellings of it.
    pub fn client_ip(&self, req: &HttpRequest) -> Option<IpAddr> {
        let peer = req.peer_addr()?.ip().to_canonical();
        if !self.trusts(peer) {
            return Some(peer);
        }
        let forwarded = req
            .headers()
            .get_all("x-forwarded-for")
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .map(str::trim)
            .collect::<Vec<_>>();
        for hop in forwarded.iter().rev() {
            match hop.parse::<IpAddr>().map(|ip| ip.to_canonical()) {
                Ok(ip) if self.trusts(ip) => continue,
                Ok(ip) => return Some(ip),
                // Garbage from the client side: stop at the last believable hop.
                Err(_) => break,
            }
        }
        Some(peer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use actix_web::test::TestRequest;

    #[test]
    fn forwarded_for_is_believed_only_from_trusted_proxies() {
        let trusted = TrustedProxies::new(&["10.0.0.0/8".into()]);
        let direct = TestRequest::default()
            .peer_addr("203.0.113.9:5000".parse().unwrap())
            .insert_header(("x-forwarded-for", "1.2.3.4"))
            .to_http_request();
        assert_eq!(trusted.client_ip(&direct), "203.0.113.9".parse().ok());
        let proxied = TestRequest::default()
            .peer_addr("10.0.0.5:5000".parse().unwrap())
            .insert_header(("x-forwarded-for", "6.6.6.6, 198.51.100.7, 10.0.0.9"))
            .to_http_request();
        assert_eq!(trusted.client_ip(&proxied), "198.51.100.7".parse().ok());
    }

    #[test]
    fn an_ipv4_mapped_peer_is_its_ipv4_address() {
        let trusted = TrustedProxies::new(&["10.0.0.0/8".into()]);
        let proxied = TestRequest::default()
            .peer_addr("[::ffff:10.0.0.5]:5000".parse().unwrap())
            .insert_header(("x-forwarded-for", "::ffff:198.51.100.7"))
            .to_http_request();
        assert_eq!(trusted.client_ip(&proxied), "198.51.100.7".parse().ok());
        let direct = TestRequest::default()
            .peer_addr("[::ffff:203.0.113.9]:5000".parse().unwrap())
            .to_http_request();
        assert_eq!(trusted.client_ip(&direct), "203.0.113.9".parse().ok());
    }
}
