//! The connection caps every listener shares: connections held per client IP and in total,
//! counted at accept, before anything is read (HTTP, the WebSocket's upgrade, native TCP).

use std::net::IpAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use dashmap::DashMap;

use crate::base::metrics::Metrics;

/// Which connection cap turned a connection away.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    /// `limits.max_connections_per_ip`.
    PerIp,
    /// `limits.max_connections` (or the open-file limit less `limits.connection_headroom`).
    Total,
}

impl Limit {
    /// The `muster_connections_refused_total{limit}` label.
    pub fn label(self) -> &'static str {
        match self {
            Limit::PerIp => "per_ip",
            Limit::Total => "total",
        }
    }
}

/// Connections held per client IP and in total, counted at accept, before anything is read,
/// so that one client cannot take every file descriptor the node has. Counts are kept as
/// counters; an IP's entry leaves the map with its last connection.
pub struct ConnectionCounter {
    per_ip: DashMap<IpAddr, usize>,
    open: AtomicUsize,
    max_per_ip: usize,
    max_total: usize,
    /// Where refusals are counted (`muster_connections_refused_total{limit}`).
    metrics: Arc<Metrics>,
}

/// One connection's place; given back when dropped.
pub struct Held {
    counter: Arc<ConnectionCounter>,
    ip: IpAddr,
}

impl ConnectionCounter {
    /// `max_per_ip` 0: no per-IP cap; `max_total` 0: the open-file limit less `headroom`.
    pub fn new(
        max_per_ip: usize,
        max_total: usize,
        headroom: usize,
        metrics: Arc<Metrics>,
    ) -> ConnectionCounter {
        let max_total = if max_total > 0 {
            max_total
        } else {
            let (soft, _) =
                rlimit::getrlimit(rlimit::Resource::NOFILE).unwrap_or((u64::MAX, u64::MAX));
            usize::try_from(soft)
                .unwrap_or(usize::MAX)
                .saturating_sub(headroom)
                .max(1)
        };
        ConnectionCounter {
            per_ip: DashMap::new(),
            open: AtomicUsize::new(0),
            max_per_ip,
            max_total,
            metrics,
        }
    }

    /// Takes a place for a connection from `ip`, or says (and counts) which cap it would break;
    /// the caller then closes the connection.
    pub fn admit(self: &Arc<Self>, ip: IpAddr) -> Result<Held, Limit> {
        // An IPv6 client counts per /64, an IPv4 one per address.
        let ip = crate::base::client_ip::limit_key(ip);
        self.take(ip).inspect_err(|limit| {
            self.metrics
                .connections_refused
                .with_label_values(&[limit.label()])
                .inc();
        })
    }

    fn take(self: &Arc<Self>, ip: IpAddr) -> Result<Held, Limit> {
        self.open
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < self.max_total).then_some(n + 1)
            })
            .map_err(|_| Limit::Total)?;
        let mut count = self.per_ip.entry(ip).or_insert(0);
        if self.max_per_ip > 0 && *count >= self.max_per_ip {
            drop(count);
            self.open.fetch_sub(1, Ordering::AcqRel);
            return Err(Limit::PerIp);
        }
        *count += 1;
        Ok(Held {
            counter: self.clone(),
            ip,
        })
    }

    /// Connections held now.
    pub fn open(&self) -> usize {
        self.open.load(Ordering::Acquire)
    }

    /// The total cap in force.
    pub fn max_total(&self) -> usize {
        self.max_total
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        let counter = &self.counter;
        counter.per_ip.remove_if_mut(&self.ip, |_, n| {
            *n -= 1;
            *n == 0
        });
        counter.open.fetch_sub(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caps_per_ip_and_in_total_and_gives_places_back() {
        let metrics = Arc::new(Metrics::new());
        let counter = Arc::new(ConnectionCounter::new(2, 3, 0, metrics.clone()));
        let a: IpAddr = "10.0.0.1".parse().expect("address");
        let b: IpAddr = "10.0.0.2".parse().expect("address");
        let first = counter.admit(a).expect("room");
        let second = counter.admit(a).expect("room");
        assert_eq!(counter.admit(a).err(), Some(Limit::PerIp));
        let third = counter.admit(b).expect("another IP still gets in");
        assert_eq!(counter.admit(b).err(), Some(Limit::Total));
        assert_eq!(counter.open(), 3);
        let refused = |limit| {
            metrics
                .connections_refused
                .with_label_values(&[limit])
                .get()
        };
        assert_eq!((refused("per_ip"), refused("total")), (1, 1));
        drop(first);
        assert!(
            counter.admit(a).is_ok(),
            "a place given back is taken again"
        );
        drop((second, third));
        assert_eq!(counter.open(), 0);
        assert!(
            counter.per_ip.is_empty(),
            "no entry outlives its connections"
        );
    }

    #[test]
    fn the_total_cap_defaults_to_the_file_limit_less_headroom() {
        let (soft, _) = rlimit::getrlimit(rlimit::Resource::NOFILE).expect("getrlimit");
        let counter = ConnectionCounter::new(0, 0, 100, Arc::new(Metrics::new()));
        assert_eq!(counter.max_total() as u64, soft.saturating_sub(100).max(1));
    }
}
