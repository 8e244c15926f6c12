//! Which address a request is counted against: what every per-IP limit keys on.
//!
//! - Behind a load balancer every peer address is the balancer's, so the client's own address
//!   comes from `X-Forwarded-For` — but only when the peer is one of `limits.trusted_proxies`:
//!   anyone else could write any address there and get a fresh bucket per request. The client
//!   is the right-most address of the header that is not itself a trusted proxy (each proxy
//!   appends the address it saw; the ones left of the first untrusted hop are the client's own
//!   word).
//! - An IPv6 client holds a whole /64 (often far more), so IPv6 addresses count per /64:
//!   otherwise one client gets 2^64 buckets. An IPv4 address written as IPv6
//!   (`::ffff:a.b.c.d`) counts as the IPv4 address.

use std::net::{IpAddr, Ipv6Addr};

use ipnet::IpNet;

/// The proxies whose `X-Forwarded-For` is believed.
#[derive(Debug, Clone, Default)]
pub struct TrustedProxies(Vec<IpNet>);

impl TrustedProxies {
    /// Parses addresses and networks (`10.0.0.0/8`, `192.168.1.7`, `fd00::/8`); the error names
    /// the bad entry.
    pub fn parse(entries: &[String]) -> Result<TrustedProxies, String> {
        entries
            .iter()
            .map(|entry| {
                entry
                    .parse::<IpNet>()
                    .or_else(|_| entry.parse::<IpAddr>().map(IpNet::from))
                    .map_err(|_| format!("{entry:?} is not an address or a network (a.b.c.d/n)"))
            })
            .collect::<Result<_, _>>()
            .map(TrustedProxies)
    }

    fn trusts(&self, ip: IpAddr) -> bool {
        let ip = canonical(ip);
        self.0.iter().any(|net| net.contains(&ip))
    }

    /// The client of a request from `peer` carrying `forwarded_for` (the `X-Forwarded-For`
    /// values, in order), keyed for limits ([`limit_key`]).
    pub fn client<'a>(
        &self,
        peer: IpAddr,
        forwarded_for: impl DoubleEndedIterator<Item = &'a str>,
    ) -> IpAddr {
        if self.0.is_empty() || !self.trusts(peer) {
            return limit_key(peer);
        }
        let hops: Vec<&str> = forwarded_for.flat_map(|v| v.split(',')).collect();
        let mut client = peer;
        for hop in hops.iter().rev() {
            match hop.trim().parse::<IpAddr>() {
                Ok(ip) => {
                    client = ip;
                    if !self.trusts(ip) {
                        break;
                    }
                }
                // A hop that is not an address: trust nothing left of it.
                Err(_) => break,
            }
        }
        limit_key(client)
    }
}

/// `ip` as limits count it: IPv4 as is, IPv6 by its /64 network.
pub fn limit_key(ip: IpAddr) -> IpAddr {
    match canonical(ip) {
        IpAddr::V6(v6) => {
            let bits = u128::from(v6) & !((1u128 << 64) - 1);
            IpAddr::V6(Ipv6Addr::from(bits))
        }
        v4 => v4,
    }
}

/// An IPv4-mapped IPv6 address as the IPv4 address it is.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> IpAddr {
        text.parse().expect("address")
    }

    #[test]
    fn forwarded_for_is_believed_only_from_a_trusted_proxy() {
        let proxies =
            TrustedProxies::parse(&["10.0.0.0/8".into(), "192.168.1.7".into()]).expect("parses");
        let header = ["203.0.113.9, 10.1.2.3"];
        // From the balancer: the right-most hop that is not a proxy.
        assert_eq!(
            proxies.client(ip("10.0.0.1"), header.into_iter()),
            ip("203.0.113.9")
        );
        // From anyone else, the header is the client's own word: ignored.
        assert_eq!(
            proxies.client(ip("198.51.100.4"), header.into_iter()),
            ip("198.51.100.4")
        );
        // A client forging hops left of the real one gains nothing.
        let forged = ["1.1.1.1, 2.2.2.2, 203.0.113.9"];
        assert_eq!(
            proxies.client(ip("192.168.1.7"), forged.into_iter()),
            ip("203.0.113.9")
        );
        // Several headers count as one list; garbage stops the walk at the last good hop.
        let several = ["5.5.5.5", "junk, 203.0.113.10"];
        assert_eq!(
            proxies.client(ip("10.9.9.9"), several.into_iter()),
            ip("203.0.113.10")
        );
        assert_eq!(
            proxies.client(ip("10.9.9.9"), ["nonsense"].into_iter()),
            ip("10.9.9.9")
        );
        // No proxies configured: the peer, whatever the header says.
        let none = TrustedProxies::default();
        assert_eq!(
            none.client(ip("10.0.0.1"), header.into_iter()),
            ip("10.0.0.1")
        );
        assert!(TrustedProxies::parse(&["10.0.0.0/33".into()]).is_err());
        assert!(TrustedProxies::parse(&["proxy.local".into()]).is_err());
    }

    #[test]
    fn ipv6_counts_per_64_and_mapped_ipv4_as_ipv4() {
        assert_eq!(limit_key(ip("2001:db8:1:2:aaaa::1")), ip("2001:db8:1:2::"));
        assert_eq!(
            limit_key(ip("2001:db8:1:2:ffff:1:2:3")),
            ip("2001:db8:1:2::")
        );
        assert_ne!(limit_key(ip("2001:db8:1:3::1")), ip("2001:db8:1:2::"));
        assert_eq!(limit_key(ip("::ffff:198.51.100.4")), ip("198.51.100.4"));
        assert_eq!(limit_key(ip("198.51.100.4")), ip("198.51.100.4"));
    }
}
