//! An address block of `http.trusted_proxies` (`10.0.0.0/8`, `::1/128`, or a
//! plain address), parsed at start-up so a typo is refused by name.

use std::net::IpAddr;

/// An address block (`10.0.0.0/8`, `::1/128`, or a plain address).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr {
    network: IpAddr,
    prefix_len: u8,
}

impl Cidr {
    pub fn parse(text: &str) -> Result<Self, String> {
        let (addr, len) = match text.split_once('/') {
            Some((a, l)) => (a, Some(l)),
            None => (text, None),
        };
        let network: IpAddr = addr.trim().parse().map_err(|e| format!("{text}: {e}"))?;
        let max = if network.is_ipv4() { 32 } else { 128 };
        let prefix_len = match len {
            None => max,
            Some(l) => l
                .trim()
                .parse::<u8>()
                .ok()
                .filter(|l| *l <= max)
                .ok_or_else(|| format!("{text}: prefix length must be 0..={max}"))?,
        };
        Ok(Self {
            network,
            prefix_len,
        })
    }

    pub fn contains(&self, ip: IpAddr) -> bool {
        match (self.network, ip) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => {
                prefix_eq(&net.octets(), &ip.octets(), self.prefix_len)
            }
            (IpAddr::V6(net), IpAddr::V6(ip)) => {
                prefix_eq(&net.octets(), &ip.octets(), self.prefix_len)
            }
            _ => false,
        }
    }
}

fn prefix_eq(a: &[u8], b: &[u8], bits: u8) -> bool {
    let full = usize::from(bits / 8);
    if a[..full] != b[..full] {
        return false;
    }
    let rest = bits % 8;
    if rest == 0 {
        return true;
    }
    let mask = 0xffu8 << (8 - rest);
    a[full] & mask == b[full] & mask
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cidrs_match_their_block_only() {
        let net = Cidr::parse("10.0.0.0/8").unwrap();
        assert!(net.contains("10.200.1.2".parse().unwrap()));
        assert!(!net.contains("11.0.0.1".parse().unwrap()));
        assert!(!net.contains("::1".parse().unwrap()));
        let odd = Cidr::parse("192.168.1.128/25").unwrap();
        assert!(odd.contains("192.168.1.200".parse().unwrap()));
        assert!(!odd.contains("192.168.1.100".parse().unwrap()));
        assert!(Cidr::parse("::1").unwrap().contains("::1".parse().unwrap()));
        for bad in ["10.0.0.0/33", "nope", "10.0.0.0/x", "::/129"] {
            assert!(Cidr::parse(bad).is_err(), "{bad}");
        }
    }
}
