//! The `[fleet]` section: the studio's own game servers, run by Muster as rooms
//! (`crate::rooms::fleet`, docs/fleet.md). With no `[fleet.servers.*]` there is no fleet.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FleetConfig {
    /// Ports handed to game server processes, `first-last` (inclusive), one per process.
    pub port_range: String,
    /// The game servers, by the handler name rooms are created with.
    pub servers: BTreeMap<String, ServerConfig>,
    /// Game servers allocated from Agones fleets, by the handler name rooms are created with.
    pub agones: BTreeMap<String, AgonesConfig>,
    /// The `muster` executable whose hidden `fleet-exec` command starts every game server (the
    /// wrapper that ties it to Muster's life); empty: this process's own executable. Set it
    /// only when Muster runs embedded in another program.
    pub launcher: String,
}

/// One kind of game server allocated from an Agones fleet through Agones' allocator service.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AgonesConfig {
    /// The allocator service, `https://host:port` (gRPC over mutual TLS).
    pub allocator: String,
    /// The Kubernetes namespace of the fleet.
    pub namespace: String,
    /// Labels the allocated GameServer must carry, e.g. `agones.dev/fleet = "my-fleet"`.
    pub match_labels: BTreeMap<String, String>,
    /// PEM files: the client certificate and key Muster presents, and the CA the allocator's
    /// certificate must be signed by.
    pub client_cert: String,
    pub client_key: String,
    pub ca_cert: String,
    /// The allocator's name in its certificate; empty: the host of `allocator`.
    pub tls_server_name: String,
    /// How long a connection and an allocation may take, in ms.
    pub timeout_ms: u64,
    /// Which of the GameServer's ports players use, by name; empty: the first.
    pub port_name: String,
    /// How long Muster remembers an allocated room (Agones, not Muster, ends it), in s.
    pub room_ttl_s: u64,
}

impl Default for AgonesConfig {
    fn default() -> Self {
        AgonesConfig {
            allocator: String::new(),
            namespace: "default".into(),
            match_labels: BTreeMap::new(),
            client_cert: String::new(),
            client_key: String::new(),
            ca_cert: String::new(),
            tls_server_name: String::new(),
            timeout_ms: 5_000,
            port_name: String::new(),
            room_ttl_s: 3_600,
        }
    }
}

/// One kind of game server.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServerConfig {
    /// The executable (a path, or a name looked up in `PATH`).
    pub command: String,
    /// Its arguments. `{port}` (the game port), `{sdk_port}` (the SDK's HTTP port) and
    /// `{server_id}` are replaced in each; with no warm pool (`buffer` and `min` 0) a process is
    /// started for one room, and `{room_id}`, `{capacity}` and `{param.NAME}` are replaced too.
    pub args: Vec<String>,
    /// Environment variables set for it, templated like `args`. Muster's own `MUSTER_*`
    /// variables are never passed on.
    pub env: BTreeMap<String, String>,
    /// Its working directory; empty: Muster's.
    pub working_dir: String,
    /// Warm pool: processes kept ready and unallocated, so a room create takes one at once.
    pub buffer: usize,
    /// Fewest processes running (ready or allocated).
    pub min: usize,
    /// Most processes running at once; past it a room create waits in the queue.
    pub max: usize,
    /// Most processes starting (not ready yet) at once: a burst that starts them all together
    /// starves every one of CPU.
    pub max_starting: usize,
    /// A process that has not called the SDK's Ready within this is stopped, in ms.
    pub ready_timeout_ms: u64,
    /// A ready process that sends no Health within this is unhealthy: its room ends, in ms;
    /// 0: health is not checked.
    pub health_timeout_ms: u64,
    /// How long a room create waits for a process when the fleet is at `max`, in ms.
    pub queue_timeout_ms: u64,
    /// Most room creates waiting at once; past it a create is refused.
    pub max_queue: usize,
    /// Bytes of each process's standard output and error kept (the most recent).
    pub log_bytes: usize,
    /// Between SIGTERM and SIGKILL when a process is stopped, in ms.
    pub shutdown_grace_ms: u64,
}

impl Default for FleetConfig {
    fn default() -> Self {
        FleetConfig {
            port_range: "7600-7999".into(),
            servers: BTreeMap::new(),
            agones: BTreeMap::new(),
            launcher: String::new(),
        }
    }
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            command: String::new(),
            args: Vec::new(),
            env: BTreeMap::new(),
            working_dir: String::new(),
            buffer: 1,
            min: 0,
            max: 16,
            max_starting: 8,
            ready_timeout_ms: 15_000,
            health_timeout_ms: 15_000,
            queue_timeout_ms: 10_000,
            max_queue: 256,
            log_bytes: 65_536,
            shutdown_grace_ms: 5_000,
        }
    }
}

/// Placeholders known only once a process's room is.
pub const ROOM_PLACEHOLDERS: [&str; 3] = ["{room_id}", "{capacity}", "{param."];

impl FleetConfig {
    /// The port range as (first, last).
    pub fn ports(&self) -> Result<(u16, u16), String> {
        let bad = || {
            format!(
                "fleet.port_range {:?} must be \"first-last\", two ports with first <= last",
                self.port_range
            )
        };
        let (first, last) = self.port_range.split_once('-').ok_or_else(bad)?;
        let first: u16 = first.trim().parse().map_err(|_| bad())?;
        let last: u16 = last.trim().parse().map_err(|_| bad())?;
        if first == 0 || first > last {
            return Err(bad());
        }
        Ok((first, last))
    }

    pub fn validate(&self) -> Result<(), String> {
        self.ports()?;
        for (name, agones) in &self.agones {
            let at = |what: &str| format!("fleet.agones.{name}: {what}");
            if !crate::base::names::is_name(name) {
                return Err(at("a name may hold only letters, digits, '-' and '_'"));
            }
            if self.servers.contains_key(name) {
                return Err(at("also a fleet.servers name: a handler names one kind"));
            }
            if !agones.allocator.starts_with("https://") {
                return Err(at("allocator must be an https:// URL (mutual TLS)"));
            }
            if agones.client_cert.is_empty()
                || agones.client_key.is_empty()
                || agones.ca_cert.is_empty()
            {
                return Err(at(
                    "client_cert, client_key and ca_cert are required (mutual TLS)",
                ));
            }
            if agones.timeout_ms == 0 || agones.room_ttl_s == 0 {
                return Err(at("timeout_ms and room_ttl_s must be > 0"));
            }
        }
        for (name, server) in &self.servers {
            let at = |what: &str| format!("fleet.servers.{name}: {what}");
            if !crate::base::names::is_name(name) {
                return Err(format!(
                    "fleet.servers.{name}: a server's name may hold only letters, digits, '-' and '_'"
                ));
            }
            if server.command.trim().is_empty() {
                return Err(at("command is empty"));
            }
            if server.max == 0 || server.min > server.max || server.buffer > server.max {
                return Err(at("max must be at least 1, and at least min and buffer"));
            }
            if server.max_starting == 0 {
                return Err(at("max_starting must be at least 1"));
            }
            if server.ready_timeout_ms == 0 || server.shutdown_grace_ms == 0 {
                return Err(at("ready_timeout_ms and shutdown_grace_ms must be > 0"));
            }
            if server.env.keys().any(|k| k.starts_with("MUSTER_")) {
                return Err(at("env may not set MUSTER_* variables"));
            }
            let warm = server.buffer > 0 || server.min > 0;
            let templated = server.args.iter().chain(server.env.values());
            let names_room = templated
                .clone()
                .any(|t| ROOM_PLACEHOLDERS.iter().any(|p| t.contains(p)));
            if warm && names_room {
                return Err(at(
                    "a warm process (buffer or min > 0) starts before its room: read the room \
                     from the SDK's GameServer annotations, not {room_id}/{capacity}/{param.*}",
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(server: ServerConfig) -> FleetConfig {
        FleetConfig {
            servers: [("relay".to_string(), server)].into(),
            ..Default::default()
        }
    }

    #[test]
    fn bad_settings_are_named() {
        let ok = ServerConfig {
            command: "python3".into(),
            ..Default::default()
        };
        assert_eq!(with(ok.clone()).validate(), Ok(()));
        assert_eq!(FleetConfig::default().ports(), Ok((7600, 7999)));
        for (range, _) in [("7600", 0), ("9-1", 0), ("0-10", 0), ("a-b", 0)] {
            let config = FleetConfig {
                port_range: range.into(),
                ..Default::default()
            };
            assert!(
                config.validate().unwrap_err().contains("port_range"),
                "{range}"
            );
        }
        let bad = |change: fn(&mut ServerConfig)| {
            let mut server = ok.clone();
            change(&mut server);
            with(server).validate().unwrap_err()
        };
        assert!(bad(|s| s.command = " ".into()).contains("command"));
        assert!(bad(|s| s.max = 0).contains("max"));
        assert!(bad(|s| s.buffer = 20).contains("max"));
        assert!(bad(|s| {
            s.env.insert("MUSTER_SERVER_KEY".into(), "x".into());
        })
        .contains("MUSTER_"));
        assert!(bad(|s| s.args = vec!["--room={room_id}".into()]).contains("warm"));
        let cold = ServerConfig {
            buffer: 0,
            args: vec!["--room={room_id}".into(), "--size={capacity}".into()],
            ..ok
        };
        assert_eq!(with(cold).validate(), Ok(()));
    }
}
