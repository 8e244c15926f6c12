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
        if !self.node_name.is_empty() && !super::is_name(&self.node_name) {
            return Err(format!(
                "cluster.node_name {:?} may hold only letters, digits, '-' and '_'",
                self.node_name
            ));
        }
        if !super::is_name(&self.subject_prefix) {
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
}
