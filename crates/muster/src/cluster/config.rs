//! The `[cluster]` section: this node's place among several (`crate::cluster`). With no
//! `nats_url` the node is alone and behaves exactly as a single node always has.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ClusterConfig {
    /// NATS server(s) the nodes talk over, e.g. `nats://10.0.0.5:4222` (comma-separated for
    /// several); empty: a single node, no cluster.
    pub nats_url: String,
    /// This node's name among the others, unique in the cluster; empty: the machine's host name
    /// (a Kubernetes pod's name).
    pub node_name: String,
    /// The address other nodes and players reach this node at (`host` or `host:port`), named
    /// in room connection info; empty: the address it listens on.
    pub advertise: String,
    /// Prefix of every NATS subject the cluster uses, so that several clusters can share one
    /// NATS server.
    pub subject_prefix: String,
    /// How often this node tells the others it is alive, in ms.
    pub heartbeat_ms: u64,
    /// A node not heard from for this long is taken for dead: its presences are removed
    /// everywhere, in ms.
    pub failure_timeout_ms: u64,
}

impl Default for ClusterConfig {
    fn default() -> Self {
        ClusterConfig {
            nats_url: String::new(),
            node_name: String::new(),
            advertise: String::new(),
            subject_prefix: "muster".into(),
            heartbeat_ms: 500,
            failure_timeout_ms: 2_500,
        }
    }
}

impl ClusterConfig {
    /// The host part of `cluster.advertise` when this node is part of a cluster.
    pub fn advertised_host(&self) -> Option<String> {
        if !self.enabled() || self.advertise.is_empty() {
            return None;
        }
        Some(split_advertise(&self.advertise).0)
    }

    pub fn validate(&self) -> Result<(), String> {
        for url in self.nats_url.split(',').filter(|u| !u.trim().is_empty()) {
            let url = url.trim();
            let scheme_ok = ["nats://", "tls://", "ws://", "wss://"]
                .iter()
                .any(|s| url.starts_with(s));
            if !scheme_ok {
                return Err(format!(
                    "cluster.nats_url: {url:?} must start with nats://, tls://, ws:// or wss://"
                ));
            }
        }
        if !self.node_name.is_empty() && !crate::base::names::is_name(&self.node_name) {
            return Err(format!(
                "cluster.node_name {:?} may hold only letters, digits, '-' and '_'",
                self.node_name
            ));
        }
        if !crate::base::names::is_name(&self.subject_prefix) {
            return Err(format!(
                "cluster.subject_prefix {:?} must be letters, digits, '-' or '_'",
                self.subject_prefix
            ));
        }
        if self.heartbeat_ms == 0 || self.failure_timeout_ms < 2 * self.heartbeat_ms {
            return Err(
                "cluster.failure_timeout_ms must be at least twice cluster.heartbeat_ms (> 0)"
                    .into(),
            );
        }
        Ok(())
    }

    /// Whether this node is part of a cluster.
    pub fn enabled(&self) -> bool {
        !self.nats_url.trim().is_empty()
    }
}

/// `host`, `host:port`, `ip:port` or `[v6]:port`, a bare IPv6 address included → (host, port).
pub fn split_advertise(advertise: &str) -> (String, Option<u16>) {
    if let Ok(addr) = advertise.parse::<std::net::SocketAddr>() {
        return (addr.ip().to_string(), Some(addr.port()));
    }
    match advertise.rsplit_once(':') {
        // host:port, unless it is a bare IPv6 address
        Some((host, port)) if !host.contains(':') => match port.parse::<u16>() {
            Ok(port) => (host.to_string(), Some(port)),
            Err(_) => (advertise.to_string(), None),
        },
        _ => (advertise.to_string(), None),
    }
}
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_a_single_node_and_valid() {
        let c = ClusterConfig::default();
        assert!(!c.enabled());
        assert_eq!(c.validate(), Ok(()));
    }

    #[test]
    fn bad_settings_are_named() {
        let bad = |f: fn(&mut ClusterConfig)| {
            let mut c = ClusterConfig::default();
            f(&mut c);
            c.validate().unwrap_err()
        };
        assert!(bad(|c| c.nats_url = "http://x:4222".into()).contains("nats_url"));
        assert!(bad(|c| c.node_name = "a.b".into()).contains("node_name"));
        assert!(bad(|c| c.node_name = "a b".into()).contains("node_name"));
        assert!(bad(|c| c.subject_prefix = String::new()).contains("subject_prefix"));
        assert!(bad(|c| c.failure_timeout_ms = 600).contains("failure_timeout_ms"));
        let mut ok = ClusterConfig {
            nats_url: "nats://127.0.0.1:4222, nats://127.0.0.1:4223".into(),
            node_name: "muster-0".into(),
            ..Default::default()
        };
        assert_eq!(ok.validate(), Ok(()));
        assert!(ok.enabled());
        ok.nats_url = " ".into();
        assert!(!ok.enabled());
    }

    #[test]
    fn the_advertised_host_is_the_host_part_and_only_in_a_cluster() {
        let with = |advertise: &str| {
            (ClusterConfig {
                nats_url: "nats://127.0.0.1:4222".into(),
                advertise: advertise.into(),
                ..Default::default()
            })
            .advertised_host()
        };
        assert_eq!(with("10.1.2.3:7350").as_deref(), Some("10.1.2.3"));
        assert_eq!(with("10.1.2.3").as_deref(), Some("10.1.2.3"));
        assert_eq!(with("node-0.muster:7350").as_deref(), Some("node-0.muster"));
        assert_eq!(with("[::1]:7350").as_deref(), Some("::1"));
        assert_eq!(with("fd00::5").as_deref(), Some("fd00::5"));
        assert_eq!(with(""), None, "no advertised address: the request's host");
        let alone = ClusterConfig {
            advertise: "10.1.2.3".into(),
            ..Default::default()
        };
        assert_eq!(alone.advertised_host(), None, "a single node");
    }
}
